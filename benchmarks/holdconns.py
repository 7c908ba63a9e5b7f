"""Established connections held through a VIP (run on a client host, the project's Python).

    python3 -m benchmarks.holdconns --target 10.0.0.100:8002 --connections 100 --seconds 10

Opens --connections persistent HTTP/1.1 connections, then on each sends GET /health every
--interval seconds for --seconds. Every answer names the instance that served it
(X-Served-By). A connection breaks when a request fails (reset, timeout, closed) or another
instance answers on it. Prints a JSON line {"ready": ...} once every connection is open,
then one JSON line: per connection the first instance, the number of answers, and when and
how it broke. Whoever runs it changes the pools meanwhile (removes
an instance) and compares: the connections that break should be those of that instance only.
"""
from __future__ import annotations

import argparse
import json
import socket
import threading
import time

REQUEST = b"GET /health HTTP/1.1\r\nHost: vip\r\n\r\n"


def _read_answer(sock: socket.socket, buf: bytearray) -> str | None:
    """One HTTP answer; the X-Served-By value ('' when absent), None on a closed stream."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        buf += chunk
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    length, who = 0, ""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        elif name.strip().lower() == b"x-served-by":
            who = value.strip().decode()
    while len(rest) < length:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        rest += chunk
    buf[:] = rest[length:]
    return who


def hold(host: str, port: int, seconds: float, interval: float, timeout: float,
         out: dict, start_barrier: threading.Barrier, delay: float = 0.0) -> None:
    buf = bytearray()
    time.sleep(delay)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        out.update(error=f"connect: {exc}", broke_at=time.time())
        start_barrier.wait()
        return
    start_barrier.wait()
    stop = time.monotonic() + seconds
    try:
        while time.monotonic() < stop:
            sock.sendall(REQUEST)
            who = _read_answer(sock, buf)
            if who is None:
                out.update(error="closed", broke_at=time.time())
                return
            if out["instance"] is None:
                out["instance"] = who
            elif who != out["instance"]:
                out.update(error=f"answered by {who}", broke_at=time.time())
                return
            out["answers"] += 1
            time.sleep(interval)
    except OSError as exc:
        out.update(error=type(exc).__name__, broke_at=time.time())
    finally:
        sock.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True, help="host:port")
    p.add_argument("--connections", type=int, default=100)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--interval", type=float, default=0.2)
    p.add_argument("--timeout", type=float, default=5)
    p.add_argument("--ramp", type=float, default=0.0,
                   help="spread the connection set-ups over this many seconds")
    args = p.parse_args(argv)
    host, port = args.target.rsplit(":", 1)
    conns = [{"instance": None, "answers": 0, "error": None, "broke_at": None}
             for _ in range(args.connections)]
    barrier = threading.Barrier(args.connections + 1)
    threads = [threading.Thread(target=hold, daemon=True,
                                args=(host, int(port), args.seconds, args.interval,
                                      args.timeout, c, barrier,
                                      k * args.ramp / args.connections))
               for k, c in enumerate(conns)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.time()
    # the caller waits for this line before it changes the pools
    print(json.dumps({"ready": started, "connected": sum(c["error"] is None for c in conns)}),
          flush=True)
    for t in threads:
        t.join(args.seconds + 4 * args.timeout + 5)
    print(json.dumps({"started": started, "connections": conns}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
