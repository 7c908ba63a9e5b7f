"""Every HTTP server of the project against N simultaneous clients (target: 200 within 2 s).

    sudo .venv/bin/python -m benchmarks.concurrency [--clients 200] [--rounds 3]

Starts the real processes on unusual ports (so a running stack is not disturbed): the
controller (ryu-manager with malb.py, no switch needed for REST), the profiler and one host
agent, as a user starts them. Then, per server and round, N threads each open their own
connection and send one GET at the same instant (a barrier); it records how many got an
answer, their status codes and the latency of the slowest. Results: results/bench/
concurrency.json and .md; the figures in docs/reliability.md come from here.
"""
from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import threading
import time

import yaml

from common import lab
from common.cli import ArgumentParser, bounded, positive_int
from common.markdown import table
from common.paths import WORK, shipped
from common.procs import controller_service, git_commit, python_service

REST, OFP, PROFILER, AGENT = 18280, 16753, 19280, 19281
TARGETS = {"controller REST": (REST, "/malb/status"), "profiler": (PROFILER, "/health"),
           "agent": (AGENT, "/health")}


def config_file(directory: str) -> str:
    with open(shipped("configs", "paper.yaml")) as fh:
        data = yaml.safe_load(fh)
    data.setdefault("controller", {}).update(rest_port=REST, ofp_port=OFP)
    data.setdefault("testbed", {})["controller"] = f"127.0.0.1:{OFP}"
    data.setdefault("profiler", {}).update(listen_port=PROFILER,
                                           history_path=os.path.join(directory, "h.sqlite"))
    data.setdefault("agents", {})["base_port"] = AGENT
    path = os.path.join(directory, "config.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(data, fh)
    return path


def services(directory: str) -> list:
    """The controller, the profiler and one host agent on this module's ports, configured in
    `directory`, as a user starts them (each with .start() and .stop())."""
    cfg = config_file(directory)
    env = {"MALB_CONFIG": cfg}
    return [
        controller_service(cfg, log_path=os.path.join(directory, "controller.log"),
                           rest_port=REST, name="bench-controller"),
        python_service("bench-profiler", ["profiler"], f"http://127.0.0.1:{PROFILER}/health",
                       os.path.join(directory, "profiler.log"), env),
        python_service("bench-agent", ["agents", "--server", "srv1"],
                       f"http://127.0.0.1:{AGENT}/health", os.path.join(directory, "agent.log"),
                       env),
    ]


def burst(port: int, path: str, clients: int, timeout_s: float) -> dict:
    """N connections, one GET each, all sent at once: answered, statuses, slowest."""
    barrier = threading.Barrier(clients)
    results: list[tuple[int | None, float]] = [(None, 0.0)] * clients

    def one(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        try:
            barrier.wait(timeout=30)
            t = time.monotonic()
            conn.request("GET", path)
            r = conn.getresponse()
            r.read()
            results[k] = (r.status, time.monotonic() - t)
        except (OSError, http.client.HTTPException, threading.BrokenBarrierError):
            results[k] = (None, 0.0)
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ok = [lat for status, lat in results if status == 200]
    return {"clients": clients, "answered": sum(1 for s, _ in results if s is not None),
            "ok": len(ok), "statuses": sorted({s for s, _ in results if s is not None}),
            "p50_s": statistics.median(ok) if ok else None,
            "max_s": max(ok) if ok else None}


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m benchmarks.concurrency", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=positive_int, default=200)
    p.add_argument("--rounds", type=positive_int, default=3)
    p.add_argument("--timeout", type=bounded(float, 0, lo_open=True), default=20.0,
                   help="seconds a client waits for its answer (default 20)")
    p.add_argument("--out", default=os.path.join(WORK, "results", "bench"))
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        started = []
        try:
            for s in services(tmp):
                started.append(s.start())
            for name, (port, path) in TARGETS.items():
                for rnd in range(1, args.rounds + 1):
                    r = {"server": name, "round": rnd, **burst(port, path, args.clients,
                                                                args.timeout)}
                    rows.append(r)
                    print(f"[concurrency] {name} round {rnd}: {r['ok']}/{r['clients']} answered "
                          f"200, slowest {r['max_s'] or 0:.3f} s", flush=True)
        finally:
            for s in reversed(started):
                s.stop()
    commit = git_commit()
    md = table(["server", "round", "clients", "answered 200", "other answers", "p50 (s)",
                "slowest (s)"],
               [[r["server"], r["round"], r["clients"], r["ok"], r["answered"] - r["ok"],
                 f"{r['p50_s'] or 0:.3f}", f"{r['max_s'] or 0:.3f}"] for r in rows],
               "lrrrrrr", compact=True)
    command = lab.invocation("benchmarks.concurrency",
                             ["--clients", str(args.clients), "--rounds", str(args.rounds)])
    text = (f"# {args.clients} simultaneous clients per server\n\nCommand: `{command}`  \n"
            f"Commit: {commit}\n\n" + md)
    lab.write_results(args.out, "concurrency",
                      {"commit": commit, "clients": args.clients, "rows": rows}, text,
                      default=None)
    within = all(r["ok"] == r["clients"] and (r["max_s"] or 99) <= 2.0 for r in rows)
    print(f"[concurrency] every server answered all {args.clients} within 2 s: "
          f"{'yes' if within else 'NO'}")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
