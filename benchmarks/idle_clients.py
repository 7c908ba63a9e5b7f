"""Every HTTP server of the project beside connections that idle or trickle (target: the
controller's GET /malb/status answered within 100 ms beside 2,000 of them).

    sudo .venv/bin/python -m benchmarks.idle_clients [--held 2000] [--sources 40] \
        [--rounds 3] [--requests 50]

Starts the controller, the profiler and one host agent as benchmarks.concurrency does. Per
server and round, in both orders alternately: --requests GETs one after another, each on a
new connection, with nothing else open (alone), and the same beside --held connections
from --sources loopback addresses (127.0.2.x; under the per-address limit, so the server
keeps them all unless it is full), half of them idle after connecting and half with a
request line and part of its headers sent, never finished. The held connections are given
2 s to be accepted before the requests. Per server: each state's p50, p99 and slowest
request, the ratio of the medians (beside / alone) per round, and how many held connections
the server had closed by the round's end (a server at its connection limit closes its
oldest idle ones for new clients). Results: results/bench/idle_clients.json and .md.
"""
from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time
from socket import socket

from benchmarks.concurrency import TARGETS, services
from common import lab
from common.cli import ArgumentParser, bounded, positive_int
from common.httpjson import room_for_connections
from common.markdown import table
from common.paths import WORK
from common.procs import git_commit

TARGET_S = 0.100            # the controller's status route beside the held connections
SETTLE_S = 2.0              # for the held connections to be accepted
HALF_SENT = b"GET /malb/status HTTP/1.1\r\nHost: bench\r\nX-Never: "


def timed_gets(port: int, path: str, n: int, timeout_s: float) -> list[float | None]:
    """n GETs one after another, each on its own connection: seconds to the whole answer
    (None: failed or not 200)."""
    times: list[float | None] = []
    for _ in range(n):
        t = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            r.read()
            times.append(time.monotonic() - t if r.status == 200 else None)
        except (OSError, http.client.HTTPException):
            times.append(None)
        finally:
            conn.close()
    return times


def hold(port: int, n: int, sources: int) -> list[socket]:
    """n connections from `sources` loopback addresses, every second one half-sent."""
    held = []
    for k in range(n):
        s = socket()
        s.settimeout(10)
        s.bind((f"127.0.2.{1 + k % sources}", 0))
        try:
            s.connect(("127.0.0.1", port))
            if k % 2:
                s.sendall(HALF_SENT)
        except OSError:
            s.close()
            continue
        held.append(s)
    return held


def closed_by_server(held: list[socket]) -> int:
    """How many of the held connections the server has closed (a read returns at once)."""
    n = 0
    for s in held:
        s.setblocking(False)
        try:
            n += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


def pct(values: list[float], q: float) -> float | None:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] \
        if len(values) >= 2 else (values[0] if values else None)


def state_row(times: list[float | None]) -> dict:
    ok = [t for t in times if t is not None]
    return {"requests": len(times), "failed": len(times) - len(ok),
            "p50_s": statistics.median(ok) if ok else None, "p99_s": pct(ok, 99),
            "max_s": max(ok) if ok else None}


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m benchmarks.idle_clients", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--held", type=positive_int, default=2000,
                   help="connections held open beside the requests (default 2000)")
    p.add_argument("--sources", type=bounded(int, 1, 250), default=40,
                   help="loopback addresses they come from (default 40: 50 each)")
    p.add_argument("--rounds", type=positive_int, default=3)
    p.add_argument("--requests", type=positive_int, default=50,
                   help="GETs per server, round and state (default 50)")
    p.add_argument("--timeout", type=bounded(float, 0, lo_open=True), default=10.0,
                   help="seconds a request waits for its answer (default 10)")
    p.add_argument("--out", default=os.path.join(WORK, "results", "bench"))
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    room_for_connections(args.held + 100)          # the client's ends
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        started = []
        try:
            for s in services(tmp):
                started.append(s.start())
            for rnd in range(1, args.rounds + 1):
                for name, (port, path) in TARGETS.items():
                    row: dict = {"server": name, "round": rnd}
                    for state in (("alone", "beside") if rnd % 2 else ("beside", "alone")):
                        held = hold(port, args.held, args.sources) if state == "beside" else []
                        time.sleep(SETTLE_S if held else 0)
                        row[state] = timed_gets(port, path, args.requests, args.timeout)
                        if held:
                            row["held"], row["closed_by_server"] = \
                                len(held), closed_by_server(held)
                        for s in held:
                            s.close()
                    rounds.append(row)
                    a, b = state_row(row["alone"]), state_row(row["beside"])
                    print(f"[idle] round {rnd} {name}: p50 {a['p50_s'] or 0:.4f} s alone, "
                          f"{b['p50_s'] or 0:.4f} s beside {row['held']} held "
                          f"({row['closed_by_server']} closed by the server); failed "
                          f"{a['failed']} + {b['failed']}", flush=True)
        finally:
            for s in reversed(started):
                s.stop()
    commit = git_commit()
    summary = []
    for name in TARGETS:
        mine = [r for r in rounds if r["server"] == name]
        alone = state_row([t for r in mine for t in r["alone"]])
        beside = state_row([t for r in mine for t in r["beside"]])
        ratios = [statistics.median(b) / statistics.median(a) for r in mine
                  if (a := [t for t in r["alone"] if t is not None])
                  and (b := [t for t in r["beside"] if t is not None])]
        summary.append({"server": name, "alone": alone, "beside": beside,
                        "median_ratio_per_round": ratios,
                        "closed_by_server": [r["closed_by_server"] for r in mine]})

    def ms(v):
        return "-" if v is None else f"{v * 1000:.1f}"
    md = table(["server", "state", "requests", "failed", "p50 (ms)", "p99 (ms)",
                "slowest (ms)", "median beside / alone, per round", "held closed by the server"],
               [[s["server"], state, s[state]["requests"], s[state]["failed"],
                 ms(s[state]["p50_s"]), ms(s[state]["p99_s"]), ms(s[state]["max_s"]),
                 ", ".join(f"{x:.2f}" for x in s["median_ratio_per_round"])
                 if state == "beside" else "",
                 ", ".join(map(str, s["closed_by_server"])) if state == "beside" else ""]
                for s in summary for state in ("alone", "beside")],
               "llrrrrrll", compact=True)
    command = lab.invocation("benchmarks.idle_clients", [
        "--held", str(args.held), "--sources", str(args.sources), "--rounds", str(args.rounds),
        "--requests", str(args.requests)])
    controller = next(s for s in summary if s["server"] == "controller REST")["beside"]
    met = controller["failed"] == 0 and controller["max_s"] is not None and \
        controller["max_s"] <= TARGET_S
    text = (f"# The servers beside {args.held} idle or half-sent connections\n\n"
            f"Command: `{command}`  \nCommit: {commit}\n\n{md}\n"
            f"Target: the controller's GET /malb/status within {TARGET_S * 1000:.0f} ms beside "
            f"them, every request: {'met' if met else 'NOT met'} (slowest "
            f"{ms(controller['max_s'])} ms, {controller['failed']} failed).\n")
    lab.write_results(args.out, "idle_clients",
                      {"commit": commit, "held": args.held, "sources": args.sources,
                       "rounds": rounds, "summary": summary, "target_s": TARGET_S,
                       "met": met}, text, default=None)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
