"""TCP connection setups from a client host (the project's virtualenv Python), closed loop or
paced.

    python3 benchmarks/connect.py --target 10.0.0.100:8002 --workers 8 --seconds 5
    python3 benchmarks/connect.py --target 10.0.1.2:8002,10.0.2.2:8002 ...   # in turn
    python3 benchmarks/connect.py --target 10.0.0.100:8002 --rate 500 --seconds 10

Closed loop (--workers): each worker opens a connection, records the time connect() took
(SYN to established: for a VIP this includes the controller's decision and rule set-up), and
resets it; the rate is what the path sustains, and the latency includes the queueing that
rate causes. Paced (--rate): a new connection every 1/rate seconds whatever the earlier ones
do (open loop, non-blocking sockets on one selector), so the latency is that of a path
offered a fixed load, as a service's clients offer it; a connection that is not established
within --timeout counts as failed. Prints one JSON line.
"""
import argparse
import errno
import json
import selectors
import socket
import struct
import threading
import time

from common.stats import quantile

LINGER_RESET = struct.pack("ii", 1, 0)     # close() sends a RST: no TIME_WAIT pile-up


def closed_loop(targets, workers: int, seconds: float, timeout: float):
    lat, fails = [], [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def work(first):
        mine, bad = [], 0
        k = first
        while time.perf_counter() < stop:
            target = targets[k % len(targets)]
            k += 1
            s = socket.socket()
            s.settimeout(timeout)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            t0 = time.perf_counter()
            try:
                s.connect(target)
                mine.append(time.perf_counter() - t0)
            except OSError:
                bad += 1
            finally:
                s.close()
        with lock:
            lat.extend(mine)
            fails[0] += bad

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, fails[0], 0


def paced(targets, rate: float, seconds: float, timeout: float):
    """Open loop: connection k starts at k / rate; returns (latencies, failures, late
    starts: connections that began more than a millisecond after their time)."""
    sel = selectors.DefaultSelector()
    lat, fails, late = [], 0, 0
    start = time.perf_counter()
    total = int(rate * seconds)
    k = 0
    pending: dict = {}           # socket -> started at

    def settle(now: float, wait: float) -> int:
        bad = 0
        for key, _ in sel.select(max(0.0, wait)):
            s = key.fileobj
            t0 = pending.pop(s)
            sel.unregister(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                lat.append(time.perf_counter() - t0)
            else:
                bad += 1
            s.close()
        for s, t0 in list(pending.items()):
            if now - t0 > timeout:
                pending.pop(s)
                sel.unregister(s)
                s.close()
                bad += 1
        return bad

    while k < total or pending:
        now = time.perf_counter()
        due = start + k / rate
        if k < total and now >= due:
            if now - due > 0.001:
                late += 1
            s = socket.socket()
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            t0 = time.perf_counter()
            code = s.connect_ex(targets[k % len(targets)])
            k += 1
            if code not in (0, errno.EINPROGRESS):
                s.close()
                fails += 1
                continue
            pending[s] = t0
            sel.register(s, selectors.EVENT_WRITE)
            continue
        wait = (due - now) if k < total else 0.05
        if not pending:
            time.sleep(max(0.0, wait))
            continue
        fails += settle(now, wait)
    sel.close()
    return lat, fails, late


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--rate", type=float, default=None,
                   help="paced: new connections per second (open loop) instead of --workers")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--timeout", type=float, default=3)
    args = p.parse_args(argv)
    targets = [(h, int(p)) for h, p in (t.rsplit(":", 1) for t in args.target.split(","))]
    started = time.perf_counter()
    if args.rate:
        lat, failures, late = paced(targets, args.rate, args.seconds, args.timeout)
    else:
        lat, failures, late = closed_loop(targets, args.workers, args.seconds, args.timeout)
    elapsed = time.perf_counter() - started
    lat.sort()
    print(json.dumps({"connections": len(lat), "failures": failures, "seconds": elapsed,
                      "per_s": len(lat) / elapsed, "offered_per_s": args.rate,
                      "late_starts": late,
                      "p50_s": quantile(lat, 0.5, is_sorted=True),
                      "p90_s": quantile(lat, 0.9, is_sorted=True),
                      "p99_s": quantile(lat, 0.99, is_sorted=True)}))


if __name__ == "__main__":
    main()
