"""Benchmark: what HAProxy as the outside balancer costs beside the OpenFlow path, for the
same burst of HTTP objects through each (experiments/haproxy.py, docs/haproxy.md).

    sudo .venv/bin/python -m benchmarks.haproxy [--objects 200] [--parallel 8]
        [--size 1000000] [--rounds 2] [--policy srr] [--out results/bench]

The paper testbed (configs/paper.yaml) with its proxy host prx1, the controller under
--policy, the host agents (agent mode reads them), no profiler. Per round, in turn: a
burst to the ui VIP, then one through HAProxy in each mode (started before its burst,
stopped after it). A burst: every client fetches --objects ui objects of --size bytes,
--parallel at a time (curl through xargs), all clients at once. Per burst: requests
answered 200, seconds, MB/s, and the CPU seconds (and cores) over the burst of HAProxy
(its process), ryu-manager, ovs-vswitchd and the servers' containers (their cgroups, with
our Docker node; None on Containernet); HAProxy's cores while idle for 3 s before its
burst. CPU seconds per burst are the steadier figure: on a busy machine a burst takes
longer and its cores fall.
Results: haproxy.json and haproxy.md in --out.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

from common import lab
from common.cli import ArgumentParser, bounded, positive_int, require_testbed
from common.config import POLICIES, load_config_data
from common.markdown import table
from common.procs import git_commit
from experiments.cpu_meters import CpuMeters, used
from experiments.haproxy import MODES, OutsideBalancer
from experiments.stack import Stack
from topologies.clean import clean_testbed

DEFAULT_OUT = os.path.join("results", "bench")
IDLE_S = 3.0


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m benchmarks.haproxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=positive_int, default=200, help="per client and burst")
    p.add_argument("--parallel", type=bounded(int, 1, 64), default=8,
                   help="requests each client keeps open")
    p.add_argument("--size", type=bounded(int, 1, 100_000_000), default=1_000_000,
                   help="bytes per object")
    p.add_argument("--rounds", type=positive_int, default=2)
    p.add_argument("--policy", choices=POLICIES, default="srr",
                   help="the controller's policy (the VIP path)")
    p.add_argument("--out", default=DEFAULT_OUT)
    return p


def burst(stack, host: str, port: int, args) -> tuple[dict, float, float]:
    clients = [stack.testbed.node(c.name) for c in stack.cfg.testbed.clients]
    url = f"http://{host}:{port}/object?size={args.size}"
    for c in clients:
        c.cmd(f"rm -f /tmp/malb-bench-{c.name}")
    t0 = time.time()
    for c in clients:
        c.cmd(f"seq {args.objects} | xargs -P {args.parallel} -I{{}} curl -s -o /dev/null "
              f"--max-time 120 -w '%{{http_code}}\\n' '{url}' > /tmp/malb-bench-{c.name} &")
    pending = list(clients)
    while pending:
        time.sleep(0.1)
        pending = [c for c in pending if c.cmd(f"wc -l < /tmp/malb-bench-{c.name}").strip()
                   != str(args.objects)]
    t1 = time.time()
    ok = sum(int(c.cmd(f"grep -c '^200$' /tmp/malb-bench-{c.name}").strip() or 0)
             for c in clients)
    for c in clients:
        c.cmd(f"rm -f /tmp/malb-bench-{c.name}")
    return {"requests": args.objects * len(clients), "ok": ok, "seconds": round(t1 - t0, 3),
            "mb_per_s": round(ok * args.size / 1e6 / (t1 - t0), 2)}, t0, t1


def run(args) -> list[dict]:
    data = load_config_data()
    data.setdefault("testbed", {}).update(proxy=True, clients=2)
    rows = []
    clean_testbed(quiet=True)
    run_dir = os.path.join(os.path.abspath(args.out), "haproxy-run")
    with Stack(data, run_dir, policy=args.policy, profiler=False) as st:
        meters = CpuMeters(st)
        vip = st.cfg.microservice("ui")
        time.sleep(IDLE_S)
        for rnd in range(args.rounds):
            before = meters.read()
            r, t0, t1 = burst(st, vip.vip, vip.port, args)
            rows.append({"round": rnd, "path": f"VIP ({args.policy})", **r,
                         "haproxy_cpu_s": None, "haproxy_cores": None,
                         "haproxy_idle_cores": None,
                         **used(before, meters.read(), t1 - t0)})
            print(f"[haproxy] round {rnd}: {rows[-1]}", flush=True)
            for mode in MODES:
                with OutsideBalancer(st, mode) as lb:
                    time.sleep(IDLE_S)
                    idle = lb.cpu_report()["mean_cores"]
                    before = meters.read()
                    r, t0, t1 = burst(st, *lb.address("ui"), args)
                    after = meters.read()
                    cores = lb.cpu_report(at=[t1], period_s=t1 - t0)["samples"][0]["cores"]
                rows.append({"round": rnd, "path": f"HAProxy {mode}", **r,
                             "haproxy_cpu_s": None if cores is None else
                             round(cores * (t1 - t0), 3), "haproxy_cores": cores,
                             "haproxy_idle_cores": idle, **used(before, after, t1 - t0)})
                print(f"[haproxy] round {rnd}: {rows[-1]}", flush=True)
    return rows


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.fmean(values), 4) if values else None


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for path in dict.fromkeys(r["path"] for r in rows):
        mine = [r for r in rows if r["path"] == path]
        out.append({"path": path, "bursts": len(mine),
                    "ok": f"{sum(r['ok'] for r in mine)}/{sum(r['requests'] for r in mine)}",
                    **{k: _mean(r[k] for r in mine) for k in (
                        "seconds", "mb_per_s", "haproxy_cpu_s", "controller_cpu_s", "ovs_cpu_s",
                        "servers_cpu_s", "haproxy_cores", "haproxy_idle_cores")}})
        h, srv = out[-1]["haproxy_cpu_s"], out[-1]["servers_cpu_s"]
        out[-1]["haproxy_vs_servers"] = round(h / srv, 3) if h is not None and srv else None
    return out


def markdown(doc: dict) -> str:
    s = doc["settings"]
    cols = ("path", "ok", "seconds", "mb_per_s", "haproxy_cpu_s", "controller_cpu_s", "ovs_cpu_s",
            "servers_cpu_s", "haproxy_vs_servers", "haproxy_cores", "haproxy_idle_cores")
    lines = [f"# HAProxy beside the OpenFlow path: one burst of {s['objects']} x "
             f"{s['size']} B ui objects per client, {s['parallel']} at a time",
             "", f"Command: `{doc['command']}`  ", f"Commit: {doc['commit']}; means over "
             f"{s['rounds']} rounds. cpu_s: CPU seconds over one burst; cores: cpu_s / the "
             f"burst's seconds; haproxy_vs_servers: HAProxy's CPU seconds / the servers'; idle: "
             f"HAProxy's cores in the {IDLE_S:g} s before its burst", ""]
    return "\n".join(lines) + "\n" + table(
        cols, [["-" if r[c] is None else r[c] for c in cols] for r in doc["summary"]])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    require_testbed("the benchmark")
    rows = run(args)
    doc = {"benchmark": "haproxy", "commit": git_commit(),
           "command": lab.invocation("benchmarks.haproxy", argv),
           "settings": {k: v for k, v in vars(args).items() if k != "out"},
           "rows": rows, "summary": summary(rows)}
    os.makedirs(args.out, exist_ok=True)
    lab.write_results(args.out, "haproxy", doc, lambda: markdown(doc), default=None)
    return 0 if all(r["ok"] == r["requests"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
