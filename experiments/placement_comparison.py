"""Placement comparison (Ahmed et al., PLOS ONE): spread, random, a greedy network-aware score
and ours, in the same run on the multi-switch testbed, under the same open-loop load.

    sudo .venv/bin/python -m experiments.placement_comparison                 # Bookinfo-like
    sudo .venv/bin/python -m experiments.placement_comparison --rate 30 --phase 90
    sudo .venv/bin/python -m experiments.placement_comparison --config configs/callgraph30.yaml

One run: the stack comes up with the application spread over the servers (its
configuration's layout); a warm-up under load lets the profiler build the communication
graph; from that one graph every method makes its plan. Then, for each method in turn, its
moves are carried out live (placement/apply.py) while the load goes on (requests that fail
during the moves are counted), the layout settles, and the load is measured:

- end-to-end response time (p50, p95, p99) at the clients, and failed requests;
- per service, the response time of the requests it served (from its own histogram);
- bytes over the trunks (the switches' port counters);
- CPU per server (the agents, through the profiler's history);
- the plan's predicted cost and traffic over trunks, and the moves it took.

There is no netem on this platform: trunks are limited in bandwidth (`testbed.trunk_bw_mbit`),
so what a placement relieves is trunk congestion, not added delay. Results: summary.md
(tables, the paper's figures beside), summary.json, per-method CSVs and plots.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import subprocess
import sys
import time

from common import lab
from common.cli import ArgumentParser, bounded, choice_list, fail, positive_float, \
    require_testbed
from common.config import ConfigError, check_testbed_builds, config_path, load_config_data, \
    parse_config_file_data
from common.markdown import number, table
from common.procs import ROOT
from common.stats import histogram_quantile, quantile
from experiments.stack import Stack
from placement.apply import ControllerClient, InProcessTestbed, apply_moves
from placement.partitioner import PlacementError, greedy_network_aware, plan, random_placement, \
    spread
from placement.problem import MAX_UTILIZATION, build_problem, current_assignment, layout_of, \
    moves_between
from profiler.store import HistoryStore

METHODS = ("spread", "random", "greedy", "ours")
DEFAULT_CONFIG = os.path.join(ROOT, "configs", "bookinfo.yaml")
REQUEST_METRIC = "callgraph_request_duration_seconds"
# the paper (000, section 4.1): response time 10-15 % below the default in normal network
# conditions, 15 % with added latency
PAPER_RT_GAIN = "10-15 % lower response time than the default placement (Ahmed et al., PLOS ONE)"


def entry_service(cfg) -> str:
    """The microservice no other one calls: where the clients send their requests."""
    called = {c.service for m in cfg.microservices for c in m.calls}
    return next(m.name for m in cfg.microservices if m.name not in called)


def plans(cfg, graph: dict, layout: dict, seed: int,
          max_utilization: float = MAX_UTILIZATION) -> dict[str, dict]:
    problem = build_problem(cfg, graph, layout, max_utilization=max_utilization)
    near = cfg.testbed.clients[0].switch
    made = {"spread": spread(problem), "random": random_placement(problem, seed),
            "greedy": greedy_network_aware(problem), "ours": plan(problem, near=near)}
    return {m: {"layout": layout_of(p.assignment, problem), "cost": p.cost,
                "trunk_traffic": p.trunk_traffic, "servers_used": p.hosts_used,
                "method": p.method, "optimal": p.optimal} for m, p in made.items()} | \
        {"_current": {"cost": problem.cost(current_assignment(problem, layout))}}


def trunk_bytes(cfg) -> int:
    """Bytes both ways over every trunk so far (each trunk counted at its first switch)."""
    total = 0
    for t in cfg.testbed.trunks:
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", t.a,
                              str(t.a_port)], capture_output=True, text=True).stdout
        # "rx pkts=.., bytes=N, ..." and "tx pkts=.., bytes=M, ...": both directions
        total += sum(int(w.split("=")[1]) for w in out.replace(",", " ").split()
                     if w.startswith("bytes="))
    return total


def scrape_services(stack, ms_names) -> dict[str, list[tuple[float, float]]]:
    """Per microservice, its instances' request-latency histogram summed: (le, count)."""
    from prometheus_client.parser import text_string_to_metric_families
    out: dict[str, dict[float, float]] = {}
    for inst in stack.testbed.running_instances():
        if inst.microservice not in ms_names:
            continue
        port = stack.cfg.microservice(inst.microservice).port
        text = stack.testbed.node(inst.name).cmd(
            f"curl -s -m 3 http://127.0.0.1:{port}/metrics")
        acc = out.setdefault(inst.microservice, {})
        try:
            families = list(text_string_to_metric_families(text))
        except ValueError:
            continue
        for f in families:
            if f.name != REQUEST_METRIC:
                continue
            for s in f.samples:
                if s.name.endswith("_bucket"):
                    le = float(s.labels["le"])
                    acc[le] = acc.get(le, 0.0) + float(s.value)
    return {ms: sorted(b.items()) for ms, b in out.items()}


def histogram_delta(before, after) -> list[tuple[float, float]]:
    was = dict(before or [])
    return [(le, max(0.0, c - was.get(le, 0.0))) for le, c in after]


def run_load(stack, tag: str, seconds: float, rate: float, entry: str) -> None:
    ms = stack.cfg.microservice(entry)
    spec = {"seed": 1, "arrivals": "poisson",
            "phases": [{"name": tag, "seconds": seconds, "from": rate, "to": rate}],
            "classes": [{"name": "request", "weight": 1, "host": ms.vip, "port": ms.port,
                         "path": "/call"}]}
    path = os.path.join(stack.run_dir, f"spec-{tag}.json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    stack.start_loadgen(path, time.time() + 1, tag=tag, timeout_s=30)


def collect_load(stack, tag: str, timeout_s: float) -> list[dict]:
    stack.wait_for(lambda: len(stack.loadgen_summaries(tag)) == len(stack.cfg.testbed.clients),
                   timeout_s, f"load {tag}", interval_s=1.0)
    rows = []
    for f in glob.glob(os.path.join(stack.run_dir, f"requests-{tag}-*.csv")):
        with open(f) as fh:
            rows += list(csv.DictReader(fh))
    return rows


def rt_stats(rows: list[dict]) -> dict:
    ok = sorted(float(r["latency_s"]) * 1000 for r in rows if not r["error"])
    return {"requests": len(rows), "failed": sum(1 for r in rows if r["error"]),
            "p50_ms": quantile(ok, 0.5, is_sorted=True),
            "p95_ms": quantile(ok, 0.95, is_sorted=True),
            "p99_ms": quantile(ok, 0.99, is_sorted=True),
            "mean_ms": sum(ok) / len(ok) if ok else None}


def server_cpu(history: str, t0: float, t1: float) -> dict[str, float | None]:
    with HistoryStore.open_read_only(history) as store:
        rows = store.rows("server_samples", ("server", "cpu", "stale"), t0, t1)
    per: dict[str, list[float]] = {}
    for _t, server, cpu, stale in rows:
        if not stale and cpu is not None:
            per.setdefault(server, []).append(cpu)
    return {s: sum(v) / len(v) for s, v in sorted(per.items())}


def run(opts, data: dict, out_dir: str, log=print) -> dict:
    results: dict[str, dict] = {}
    with Stack(data, os.path.join(out_dir, "run"), policy="malb") as st:
        st.wait_monitoring(60)
        cfg = st.cfg
        entry = entry_service(cfg)
        controller = ControllerClient(st.controller_url(""), token=cfg.security.token)
        log(f"[placement] warm-up: {opts.warmup:g} s at {opts.rate:g} requests/s on "
            f"{entry}, spread layout")
        run_load(st, "warmup", opts.warmup, opts.rate, entry)
        # the graph is taken while the load still runs: its vertices' use is the use under
        # load (the window's average), not the idle tail after the load stops
        time.sleep(opts.warmup - 1)
        graph = st.profiler_get("/graph")
        collect_load(st, "warmup", opts.warmup + 120)
        start_layout = controller.layout()
        made = plans(cfg, graph, start_layout, opts.seed, opts.max_utilization)
        with open(os.path.join(out_dir, "graph.json"), "w") as fh:
            json.dump(graph, fh, indent=1)
        with open(os.path.join(out_dir, "plans.json"), "w") as fh:
            json.dump(made, fh, indent=1)
        for method in opts.methods:
            target = made[method]["layout"]
            moves = moves_between(controller.layout(), target)
            log(f"[placement] {method}: {len(moves)} move(s), predicted cost "
                f"{made[method]['cost']:,.0f}, over trunks "
                f"{made[method]['trunk_traffic']:,.0f} B/s")
            move_s = max(opts.settle, 20 * len(moves) + opts.settle)
            run_load(st, f"move-{method}", move_s, opts.rate, entry)
            time.sleep(2)
            done = apply_moves(cfg, moves, controller, InProcessTestbed(st.testbed),
                               drain_timeout_s=opts.drain_timeout, log=log)
            moved = collect_load(st, f"move-{method}", move_s + 180)
            names = [m.name for m in cfg.microservices]
            hist0, bytes0, t0 = scrape_services(st, names), trunk_bytes(cfg), time.time()
            run_load(st, method, opts.phase, opts.rate, entry)
            rows = collect_load(st, method, opts.phase + 180)
            t1 = time.time()
            hist1, bytes1 = scrape_services(st, names), trunk_bytes(cfg)
            services = {}
            for ms in names:
                d = histogram_delta(hist0.get(ms), hist1.get(ms, []))
                services[ms] = {q: (None if (v := histogram_quantile(x, d)) is None
                                    else round(1000 * v, 2))
                                for q, x in (("p50_ms", 0.5), ("p95_ms", 0.95),
                                             ("p99_ms", 0.99))}
            results[method] = {
                "layout": target, "plan": {k: made[method][k] for k in
                                           ("cost", "trunk_traffic", "servers_used", "method")},
                "moves": [r.as_dict() for r in done],
                "failed_during_moves": sum(1 for r in moved if r["error"]),
                "requests_during_moves": len(moved),
                "end_to_end": rt_stats(rows), "services": services,
                "trunk_bytes": bytes1 - bytes0,
                "trunk_mbit_s": round(8 * (bytes1 - bytes0) / (t1 - t0) / 1e6, 3),
                "cpu_per_server": server_cpu(cfg.profiler.history_path, t0, t1),
                "seconds": round(t1 - t0, 1)}
            e = results[method]["end_to_end"]
            log(f"[placement] {method}: p95 {number(e['p95_ms'], 0)} ms, "
                f"{e['failed']} failed, trunks {results[method]['trunk_mbit_s']} Mbit/s, "
                f"{results[method]['failed_during_moves']} failed during moves")
        backend = {"backend": st.testbed.backend, "datapath": st.testbed.datapath}
    return {"results": results, "plans": made, "testbed": backend}


def summary_markdown(doc: dict, opts, command: str) -> str:
    res = doc["results"]
    base = res.get("spread", {}).get("end_to_end", {})

    def gain(m, key):
        b, v = base.get(key), res[m]["end_to_end"].get(key)
        return None if not b or v is None else 100 * (1 - v / b)
    lines = [
        "# Placement comparison", "",
        f"Command: `{command}`  ", f"Commit: {doc['commit']}; {doc['when']}  ",
        f"Testbed: {doc['testbed']['backend']}, {doc['testbed']['datapath']} datapath; "
        f"configuration {doc['config']}; {opts.rate:g} requests/s open loop (Poisson); "
        f"warm-up {opts.warmup:g} s, each placement measured {opts.phase:g} s after its "
        f"moves; trunks {doc['trunk_bw_mbit']} Mbit/s (no netem here: congestion, not added "
        f"delay); every plan fills at most {100 * opts.max_utilization:g} % of a server's "
        f"CPU.", "",
        "## End to end and trunks", ""]
    rows = []
    for m, r in res.items():
        e = r["end_to_end"]
        g = gain(m, "p95_ms")
        rows.append([m, r["plan"]["servers_used"], len(r["moves"]),
                     f"{r['failed_during_moves']} of {r['requests_during_moves']}",
                     e["requests"], e["failed"], number(e["p50_ms"], 0),
                     number(e["p95_ms"], 0), number(e["p99_ms"], 0),
                     "–" if g is None else f"{g:+.0f} %", r["trunk_mbit_s"],
                     number(r["plan"]["trunk_traffic"], 0)])
    lines.append(table(["placement", "servers", "moves", "failed during moves", "requests",
                        "failed", "p50 ms", "p95 ms", "p99 ms", "p95 below spread",
                        "trunk Mbit/s", "predicted trunk B/s"], rows, "l".ljust(12, "r"),
                       compact=True))
    lines += ["Failed during moves: every request that failed while that placement's "
              "moves ran, whatever the cause (requests time out after 10 s on a congested "
              "trunk).", "", f"Paper: {PAPER_RT_GAIN}.", "", "## Per service (p50 / p95 / p99 ms of "
              "the requests each served)", "",
              table(["service", *res],
                    [[ms] + [" / ".join(number(res[m]["services"][ms][k], 0)
                                        for k in ("p50_ms", "p95_ms", "p99_ms")) for m in res]
                     for ms in next(iter(res.values()))["services"]],
                    "l".ljust(len(res) + 1, "r"), compact=True)]
    servers = sorted({s for r in res.values() for s in r["cpu_per_server"]})
    lines += ["## CPU per server (% of its share, mean over the phase)", "",
              table(["placement", *servers],
                    [[m] + [number(r["cpu_per_server"].get(s), 0) for s in servers]
                     for m, r in res.items()], "l".ljust(len(servers) + 1, "r"), compact=True),
              "Layouts:", ""] + [f"- {m}: " + ", ".join(
        f"{ms} on {','.join(v)}" for ms, v in sorted(r["layout"].items())) for m, r in res.items()]
    return "\n".join(lines) + "\n"


def plot(doc: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    res = doc["results"]
    methods = list(res)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for k, (key, label) in enumerate((("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99"))):
        axes[0].bar([x + 0.25 * k for x in range(len(methods))],
                    [res[m]["end_to_end"][key] or 0 for m in methods], width=0.25, label=label)
    axes[0].set_xticks([x + 0.25 for x in range(len(methods))], methods)
    axes[0].set_ylabel("end-to-end response time (ms)")
    axes[0].legend()
    axes[1].bar(methods, [res[m]["trunk_mbit_s"] for m in methods], color="tab:gray")
    axes[1].set_ylabel("traffic over trunks (Mbit/s)")
    fig.suptitle("Placement comparison")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m experiments.placement_comparison", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="application and testbed (default configs/bookinfo.yaml)")
    p.add_argument("--methods", type=choice_list(METHODS), default=list(METHODS))
    p.add_argument("--rate", type=positive_float, default=20.0,
                   help="requests per second to the entry service (default 20)")
    p.add_argument("--warmup", type=bounded(float, 10), default=90.0,
                   help="seconds of load before planning (default 90: three time constants "
                        "of the profiler's 30 s graph window, so its averages reach 95 %% of "
                        "the load)")
    p.add_argument("--phase", type=positive_float, default=60.0,
                   help="seconds measured per placement (default 60)")
    p.add_argument("--settle", type=positive_float, default=10.0,
                   help="seconds of load after the moves before measuring (default 10)")
    p.add_argument("--drain-timeout", type=positive_float, default=30.0)
    p.add_argument("--trunk-bw", type=positive_float, help="Mbit/s of the trunks (default: "
                                                            "the configuration's)")
    p.add_argument("--max-utilization", type=bounded(float, 0.05, 1.0),
                   default=MAX_UTILIZATION, help="share of each server's CPU a plan may "
                   f"fill, for every method (default {MAX_UTILIZATION:g})")
    p.add_argument("--seed", type=int, default=1, help="for the random placement")
    p.add_argument("--out", help="results directory (default results/placement-<time>)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        data = load_config_data(args.config)
        if args.trunk_bw:
            data.setdefault("testbed", {})["trunk_bw_mbit"] = args.trunk_bw
        cfg = parse_config_file_data(data, config_path(args.config))
        check_testbed_builds(cfg)
        if len(cfg.testbed.switches) < 2:
            raise ConfigError("testbed.switches: placement needs 2 to 4 switches (trunks)")
        if not any(m.kind == "callgraph" for m in cfg.microservices):
            raise ConfigError("microservices: no call-graph microservice to place")
        entry_service(cfg)
    except (ConfigError, StopIteration) as exc:
        fail(f"configuration: {exc or 'every microservice is called by another one'}",
             code=2)
    require_testbed("the placement comparison")
    out_dir = lab.results_dir(args.out, "placement-")
    command = lab.invocation("experiments.placement_comparison", argv).strip()
    stamp = lab.stamp(command)          # the code and time the run starts with
    try:
        measured = run(args, data, out_dir, log=lambda m: print(m, flush=True))
    except PlacementError as exc:
        fail(f"placement: {exc}", code=1)
    doc = {**measured, **stamp,
           "config": os.path.relpath(config_path(args.config), ROOT),
           "trunk_bw_mbit": cfg.testbed.trunk_bw_mbit, "options": vars(args)}
    text = lab.write_results(out_dir, "summary", doc,
                             lambda: summary_markdown(doc, args, command), echo=False)
    plot(doc, os.path.join(out_dir, "placement.png"))
    print(text)
    print(f"[placement] results in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
