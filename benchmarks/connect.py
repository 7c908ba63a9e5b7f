"""Closed-loop TCP connection setups from a client host (the project's virtualenv Python).

    python3 benchmarks/connect.py --target 10.0.0.100:8002 --workers 8 --seconds 5
    python3 benchmarks/connect.py --target 10.0.1.2:8002,10.0.2.2:8002 ...   # in turn

Each worker opens a connection, records the time connect() took (SYN to established:
for a VIP this includes the controller's decision and rule set-up), and resets it.
Prints one JSON line.
"""
import argparse
import json
import socket
import struct
import threading
import time

from common.stats import quantile


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--timeout", type=float, default=3)
    args = p.parse_args(argv)
    targets = [(h, int(p)) for h, p in (t.rsplit(":", 1) for t in args.target.split(","))]
    lat, fails = [], [0]
    lock = threading.Lock()
    stop = time.perf_counter() + args.seconds

    def work(first):
        mine, bad = [], 0
        k = first
        while time.perf_counter() < stop:
            target = targets[k % len(targets)]
            k += 1
            s = socket.socket()
            s.settimeout(args.timeout)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
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

    started = time.perf_counter()
    threads = [threading.Thread(target=work, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    lat.sort()
    print(json.dumps({"connections": len(lat), "failures": fails[0], "seconds": elapsed,
                      "per_s": len(lat) / elapsed,
                      "p50_s": quantile(lat, 0.5, is_sorted=True),
                      "p99_s": quantile(lat, 0.99, is_sorted=True)}))


if __name__ == "__main__":
    main()
