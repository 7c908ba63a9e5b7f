"""Placement comparison (Ahmed et al., PLOS ONE): spread, random, a greedy network-aware score,
ours (traffic x distance, the paper's objective), latency (ours under the latency
objective: that plus the priced queueing at each server), latency-near (the same plan, its
calls balanced by `malb-near`, which keeps a caller's flows on its switch while load allows:
the joint rule) and the exact program alone, in the same run on the multi-switch testbed,
under the same open-loop load, repeated with the methods' order rotated. Every method but
latency-near is balanced by `malb`.

    sudo .venv/bin/python -m experiments.placement_comparison                 # Bookinfo-like
    sudo .venv/bin/python -m experiments.placement_comparison --rate 30 --phase 90
    sudo .venv/bin/python -m experiments.placement_comparison \
        --config configs/socialnetwork.yaml --runs 5

The clients send their requests to the application's entry services (those no other one
calls), in the shares of the configuration's `# benchmark-mix:` line, else equally. One
run: the stack comes up with the application spread over the servers (its
configuration's layout); a warm-up under load lets the profiler build the communication
graph; from that one graph every method makes its plan (`exact`: HiGHS alone for
--exact-time-limit seconds, marked when it proves the optimum; a plan the same as ours is
not measured twice: its figures in that run are ours'). Then, for each method in turn
(run k starts k places further along the list), its moves are carried out live
(placement/apply.py) while the load goes on (requests that fail during the moves are
counted), the layout settles, and the load is measured:

- end-to-end response time (p50, p95, p99) at the clients, and failed requests;
- per service, the response time of the requests it served (from its own histogram);
- per call (caller > callee), what the caller waited for it (the caller's histogram), and
  of that what lies beyond the callee's handler (set-up, network, queues, waits for a
  core);
- bytes over the trunks (the switches' port counters);
- the CPU of the controller, Open vSwitch, the profiler, the agents, the servers and the
  whole machine over the phase (experiments/cpu_meters.py);
- CPU per server (the agents, through the profiler's history);
- the plan's predicted cost and traffic over trunks, and the moves it took.

`--short-flows` says how the switches carry the clients' and the services' connections
(controller.dataplane.short_flows: a rule pair per connection from the controller, the
default; the connection tracker; or the data plane alone).

There is no netem on this platform: trunks are limited in bandwidth (`testbed.trunk_bw_mbit`),
so what a placement relieves is trunk congestion, not added delay. Results: summary.md
(per method the mean and 95 % interval over the runs, the candidate (--candidate, default
ours) against each other method paired by run), summary.json, placement.png, and run<k>/
with each run's own tables, graph and plans (its summary.json written as it ends:
`--resume --out DIR`, the same options, goes on with a comparison cut off at its first
run without one).
"""
from __future__ import annotations

import argparse
import csv
import functools
import glob
import json
import os
import subprocess
import sys
import time

from experiments.cpu_meters import CpuMeters, used
from common import lab
from common.cli import ArgumentParser, add_short_flows, bounded, choice_list, fail, \
    positive_float, require_testbed, with_short_flows
from common.config import ConfigError, check_testbed_builds, config_path, load_config_data, \
    parse_config_file_data
from common.markdown import number, table
from common.paths import shipped
from common.procs import ROOT
from common.stats import histogram_quantile, quantile
from experiments import protocol, significance
from experiments.stack import Stack
from placement.apply import ApplyError, ControllerClient, InProcessTestbed, apply_moves
from placement.apps import entry_mix
from placement.model import PlacementError
from placement.partitioner import exact, greedy_network_aware, plan, random_placement, spread
from placement.problem import MAX_UTILIZATION, build_problem, current_assignment, layout_of, \
    moves_between, queue_price
from profiler.store import HistoryStore

METHODS = ("spread", "random", "greedy", "ours", "latency", "latency-near", "exact")
# the controller's policy while a method is measured: malb, unless named here
BALANCING = {"latency-near": "malb-near"}
CANDIDATE = "ours"        # the method the others are compared with, unless --candidate
EXACT_TIME_LIMIT_S = 60.0
# the figures compared across runs: (key, label); lower is better for each
FIGURES = (("trunk_mbit_s", "trunk Mbit/s"), ("p50_ms", "p50 ms"), ("p95_ms", "p95 ms"),
           ("p99_ms", "p99 ms"), ("failed", "failed requests"))
DEFAULT_CONFIG = shipped("configs", "bookinfo.yaml")
REQUEST_METRIC = "callgraph_request_duration_seconds"
# a call as its caller saw it: labels service (the caller) and callee (services/callgraph.py)
CALL_METRIC = "callgraph_call_duration_seconds"
# the paper (000, section 4.1): response time 10-15 % below the default in normal network
# conditions, 15 % with added latency
PAPER_RT_GAIN = "10-15 % lower response time than the default placement (Ahmed et al., PLOS ONE)"


def entry_shares(cfg, path: str) -> dict[str, float]:
    """The services no other one calls, where the clients send their requests, each with
    its share of them (the configuration's `# benchmark-mix:` line, else equal), summing
    to 1. ValueError when there is none, or the mix names another service."""
    called = {c.service for m in cfg.microservices for c in m.calls}
    entries = [m.name for m in cfg.microservices if m.name not in called]
    if not entries:
        raise ValueError("every microservice is called by another one: no entry service")
    mix = {e: w for e, w in entry_mix(path, entries).items() if w > 0}
    total = sum(mix.values())
    if not total:
        raise ValueError("benchmark-mix: no entry service with a share above 0")
    return {e: w / total for e, w in mix.items()}


def plans(cfg, graph: dict, layout: dict, seed: int,
          max_utilization: float = MAX_UTILIZATION, methods=METHODS,
          exact_time_limit_s: float = EXACT_TIME_LIMIT_S) -> dict[str, dict]:
    """Each method's plan from one graph; `exact` when it cannot plan (too large, nothing
    found in time), or plans ours' layout, has `skipped` saying so."""
    problem = build_problem(cfg, graph, layout, max_utilization=max_utilization)
    priced = build_problem(cfg, graph, layout, max_utilization=max_utilization,
                           queue_price=queue_price("latency"))
    near = cfg.testbed.clients[0].switch
    latency = functools.cache(lambda: plan(priced, near=near))     # latency-near's too
    makers = {"spread": lambda: spread(problem),
              "random": lambda: random_placement(problem, seed),
              "greedy": lambda: greedy_network_aware(problem),
              "ours": lambda: plan(problem, near=near),
              "latency": latency, "latency-near": latency,
              "exact": lambda: exact(problem, exact_time_limit_s)}
    made = {}
    for m in methods:
        try:
            p = makers[m]()
        except PlacementError as exc:
            if m != "exact":
                raise
            made[m] = {"layout": None, "skipped": str(exc)}
            continue
        # every plan's traffic cost and modelled queueing, whatever its objective
        made[m] = {"layout": layout_of(p.assignment, problem), "cost": p.cost,
                   "traffic_cost": problem.traffic_cost(p.assignment),
                   "queueing": priced.queueing(p.assignment),
                   "trunk_traffic": p.trunk_traffic, "servers_used": p.hosts_used,
                   "method": p.method, "optimal": p.optimal, "bound": p.bound}
    if made.get("exact", {}).get("layout") is not None and "ours" in made and \
            made["exact"]["layout"] == made["ours"]["layout"]:
        made["exact"] |= {"skipped": "the same layout as ours (measured once, as ours)",
                          "same_as": "ours"}
    return made | {"_current": {"cost": problem.cost(current_assignment(problem, layout))}}


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
    """Latency histograms summed over the instances (add_histograms), each as (le, count)."""
    out: dict[str, dict[float, float]] = {}
    for inst in stack.testbed.running_instances():
        if inst.microservice not in ms_names:
            continue
        port = stack.cfg.microservice(inst.microservice).port
        add_histograms(out, inst.microservice, stack.testbed.node(inst.name).cmd(
            f"curl -s -m 3 http://127.0.0.1:{port}/metrics"))
    return {key: sorted(b.items()) for key, b in out.items()}


def add_histograms(into: dict[str, dict[float, float]], service: str, text: str) -> None:
    """Add one instance's latency histograms (its /metrics text; unreadable: nothing) to
    `into`, by key: the requests it served (its service's name, and "service<caller" by
    the caller it names) and the calls it made as it waited for them ("service>callee")."""
    from prometheus_client.parser import text_string_to_metric_families
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return
    for f in families:
        if f.name not in (REQUEST_METRIC, CALL_METRIC):
            continue
        for s in f.samples:
            if not s.name.endswith("_bucket"):
                continue
            keys = [f"{service}>{s.labels['callee']}"] if f.name == CALL_METRIC else \
                [service, f"{service}<{s.labels['caller']}"]
            for key in keys:
                acc = into.setdefault(key, {})
                le = float(s.labels["le"])
                acc[le] = acc.get(le, 0.0) + float(s.value)


def percentiles(before, after) -> dict[str, float | None]:
    """p50, p95 and p99 in ms of what a histogram counted between two scrapes, and how
    many it counted (n)."""
    d = histogram_delta(before, after)
    return {**{q: None if (v := histogram_quantile(x, d)) is None else round(1000 * v, 2)
               for q, x in (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99))},
            "n": max((c for _le, c in d), default=0)}


def call_figures(hist0: dict, hist1: dict) -> dict[str, dict]:
    """Per call (caller>callee) between two scrapes: what the caller waited (percentiles)
    and the callee's own p50 over the requests of that caller (callee_p50_ms)."""
    out = {}
    for edge in sorted(k for k in hist1 if ">" in k):
        caller, callee = edge.split(">", 1)
        served = percentiles(hist0.get(f"{callee}<{caller}"), hist1.get(f"{callee}<{caller}",
                                                                          []))
        out[edge] = {**percentiles(hist0.get(edge), hist1[edge]),
                     "callee_p50_ms": served["p50_ms"]}
    return out


def histogram_delta(before, after) -> list[tuple[float, float]]:
    was = dict(before or [])
    return [(le, max(0.0, c - was.get(le, 0.0))) for le, c in after]


def run_load(stack, tag: str, seconds: float, rate: float, shares: dict[str, float],
             seed: int = 1) -> None:
    classes = []
    for entry, share in shares.items():
        ms = stack.cfg.microservice(entry)
        classes.append({"name": entry, "weight": share, "host": ms.vip, "port": ms.port,
                        "path": "/call"})
    spec = {"seed": seed, "arrivals": "poisson",
            "phases": [{"name": tag, "seconds": seconds, "from": rate, "to": rate}],
            "classes": classes}
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


def run(opts, data: dict, out_dir: str, shares: dict[str, float], log=print) -> dict:
    """Every run in turn (in protocol.run_order, random placement seeded seed + k for
    the k-th run from 0); each run's results under run<k>/."""
    runs = []
    for k in range(opts.runs):
        order = protocol.run_order(opts.methods, k + 1)
        run_dir = os.path.join(out_dir, f"run{k + 1}")
        done = finished_run(run_dir) if opts.resume else None
        log(f"[placement] run {k + 1} of {opts.runs}: {', '.join(order)}"
            + ("; finished before, read back" if done else ""))
        if done is not None:
            runs.append(done)
            continue
        runs.append(run_once(opts, data, run_dir, shares, order, opts.seed + k, log))
        # written as each run ends: a suite cut off keeps the runs it finished
        lab.write_results(run_dir, "summary", runs[-1],
                          lambda: run_markdown(runs[-1], opts), echo=False)
    return {"runs": runs, "testbed": runs[-1]["testbed"]}


def finished_run(run_dir: str) -> dict | None:
    """With --resume: a run that finished (its summary.json, written as it ended), or None
    for one to play; the directory of a run cut off half-way is set aside first."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as fh:
            return json.load(fh)
    except FileNotFoundError:
        if os.path.isdir(run_dir):
            lab.set_aside(run_dir)
        return None


def run_once(opts, data: dict, out_dir: str, shares: dict[str, float], order: list[str],
             seed: int, log=print) -> dict:
    results: dict[str, dict] = {}
    os.makedirs(out_dir, exist_ok=True)
    with Stack(data, os.path.join(out_dir, "run"), policy="malb") as st:
        st.wait_monitoring(60)
        cfg = st.cfg
        meters = CpuMeters(st)
        controller = ControllerClient(st.controller_url(""), token=cfg.security.token)
        mix = ", ".join(f"{e} {100 * w:.0f} %" for e, w in shares.items())
        log(f"[placement] warm-up: {opts.warmup:g} s at {opts.rate:g} requests/s ({mix}), "
            f"spread layout")
        run_load(st, "warmup", opts.warmup, opts.rate, shares, seed)
        # the graph is taken while the load still runs: its vertices' use is the use under
        # load (the window's average), not the idle tail after the load stops
        time.sleep(opts.warmup - 1)
        graph = st.profiler_get("/graph")
        collect_load(st, "warmup", opts.warmup + 120)
        start_layout = controller.layout()
        made = plans(cfg, graph, start_layout, seed, opts.max_utilization, order,
                     opts.exact_time_limit)
        with open(os.path.join(out_dir, "graph.json"), "w") as fh:
            json.dump(graph, fh, indent=1)
        with open(os.path.join(out_dir, "plans.json"), "w") as fh:
            json.dump(made, fh, indent=1)
        for method in order:
            if made[method].get("skipped"):
                log(f"[placement] {method}: not measured: {made[method]['skipped']}")
                continue
            target = made[method]["layout"]
            policy = BALANCING.get(method, "malb")
            controller.set_policy(policy)
            moves = moves_between(controller.layout(), target)
            log(f"[placement] {method}: {len(moves)} move(s), predicted cost "
                f"{made[method]['cost']:,.0f}, over trunks "
                f"{made[method]['trunk_traffic']:,.0f} B/s")
            # the load goes on while the moves are made: about 20 s a batch (its health and
            # drain waits) and 5 s for each further instance a batch starts
            batches = -(-len(moves) // opts.move_batch)
            move_s = opts.settle + 20 * batches + 5 * (len(moves) - batches)
            run_load(st, f"move-{method}", move_s, opts.rate, shares, seed)
            time.sleep(2)
            began = time.monotonic()
            try:
                done = apply_moves(cfg, moves, controller, InProcessTestbed(st.testbed),
                                   drain_timeout_s=opts.drain_timeout, log=log,
                                   batch=opts.move_batch)
            except ApplyError as exc:
                if not exc.clean:       # something left behind: no method is measured on it
                    raise
                # the failed batch undone, the earlier ones kept: the plan's layout was not
                # reached, so it is not measured; the next method moves from where this left
                moved = collect_load(st, f"move-{method}", move_s + 180)
                made[method] |= {"skipped": f"its moves failed: {exc}",
                                 "failed_during_moves": sum(1 for r in moved if r["error"]),
                                 "requests_during_moves": len(moved)}
                if made.get("exact", {}).get("same_as") == method:
                    made["exact"]["skipped"] = f"the same layout as {method}, whose moves failed"
                log(f"[placement] {method}: not measured: {made[method]['skipped']}")
                continue
            moves_s = 2 + time.monotonic() - began
            if moves_s > move_s:
                log(f"[placement] {method}: the moves took {moves_s:.0f} s, longer than the "
                    f"{move_s} s of load meant to cover them: the last ones were made without "
                    f"load (the failures during moves count only those under load)")
            moved = collect_load(st, f"move-{method}", move_s + 180)
            names = [m.name for m in cfg.microservices]
            hist0, bytes0, t0 = scrape_services(st, names), trunk_bytes(cfg), time.time()
            cpu0 = meters.read()
            run_load(st, method, opts.phase, opts.rate, shares, seed)
            rows = collect_load(st, method, opts.phase + 180)
            t1 = time.time()
            cpu1 = meters.read()
            hist1, bytes1 = scrape_services(st, names), trunk_bytes(cfg)
            services = {ms: percentiles(hist0.get(ms), hist1.get(ms, [])) for ms in names}
            results[method] = {
                "layout": target, "policy": policy, "plan": {k: made[method][k] for k in
                                           ("cost", "trunk_traffic", "servers_used", "method",
                                            "optimal", "bound")},
                "moves": [r.as_dict() for r in done],
                "moves_s": round(moves_s, 1), "load_during_moves_s": move_s,
                "failed_during_moves": sum(1 for r in moved if r["error"]),
                "requests_during_moves": len(moved),
                "end_to_end": rt_stats(rows), "services": services,
                "calls": call_figures(hist0, hist1),
                "trunk_bytes": bytes1 - bytes0,
                "trunk_mbit_s": round(8 * (bytes1 - bytes0) / (t1 - t0) / 1e6, 3),
                "cpu_per_server": server_cpu(cfg.profiler.history_path, t0, t1),
                # what the balancing parts and the rest cost: cores over the phase
                "cpu": used(cpu0, cpu1, t1 - t0),
                "seconds": round(t1 - t0, 1)}
            e = results[method]["end_to_end"]
            log(f"[placement] {method}: p95 {number(e['p95_ms'], 0)} ms, "
                f"{e['failed']} failed, trunks {results[method]['trunk_mbit_s']} Mbit/s, "
                f"{results[method]['failed_during_moves']} failed during moves")
        if "ours" in results and made.get("exact", {}).get("same_as") == "ours":
            # the same placement: its figures are ours', so that every run pairs
            results["exact"] = {**results["ours"], "same_as": "ours"}
        backend = st.testbed.describe()
    with open(os.path.join(out_dir, "plans.json"), "w") as fh:    # with what was not measured
        json.dump(made, fh, indent=1)
    return {"results": results, "plans": made, "testbed": backend, "order": order,
            "seed": seed}


def figure(result: dict, key: str) -> float | None:
    """One method's figure in one run (FIGURES' keys)."""
    return result["trunk_mbit_s"] if key == "trunk_mbit_s" else result["end_to_end"].get(key)


def statistics(runs: list[dict], methods: list[str], candidate: str = CANDIDATE) -> dict:
    """Per figure and method, the mean and 95 % interval over the runs that measured it,
    and the candidate against each other method, paired by run (runs where both were
    measured)."""
    out = {}
    for key, label in FIGURES:
        per = {m: {k: figure(r["results"][m], key) for k, r in enumerate(runs)
                   if m in r["results"] and figure(r["results"][m], key) is not None}
               for m in methods}
        entry = {"label": label, "methods": {}, "vs": {}}
        for m, by_run in per.items():
            entry["methods"][m] = significance.mean_ci(list(by_run.values())) \
                if by_run else {"mean": None, "ci": None}
        ours = per.get(candidate, {})
        for m, by_run in per.items():
            both = sorted(set(ours) & set(by_run))
            if m != candidate and both:
                entry["vs"][m] = significance.paired([ours[k] for k in both],
                                                     [by_run[k] for k in both])
        out[key] = entry
    return out


def summary_markdown(doc: dict, opts, command: str) -> str:
    """The comparison over every run: per method the mean ± 95 % interval, ours against
    each, paired by run; what was not measured and why."""
    methods = list(opts.methods)
    stats = doc["statistics"]
    lines = [
        "# Placement comparison", "",
        f"Command: `{command}`  ", f"Commit: {doc['commit']}; {doc['when']}  ",
        f"Testbed: {doc['testbed']['backend']}, {doc['testbed']['datapath']} datapath, "
        f"short flows: {opts.short_flows}; "
        f"configuration {doc['config']}; {opts.rate:g} requests/s open loop (Poisson) to "
        + ", ".join(f"{e} ({100 * w:.1f} %)" for e, w in doc["entry_shares"].items())
        + f"; {len(doc['runs'])} run(s), the methods' order rotated by one place per run; "
        f"warm-up {opts.warmup:g} s, each placement measured {opts.phase:g} s after its "
        f"moves ({opts.move_batch} at a time, under load); trunks "
        f"{doc['trunk_bw_mbit']} Mbit/s (no netem here: congestion, not added delay); every "
        f"plan fills at most {100 * opts.max_utilization:g} % of a server's CPU.", "",
        "## Per method, mean ± 95 % interval over the runs", "",
        table(["figure", *methods],
              [[e["label"], *(significance.mean_ci_text(e["methods"].get(m)) for m in methods)]
               for e in stats.values()], "l".ljust(len(methods) + 1, "r"), compact=True),
        f"## {getattr(opts, 'candidate', CANDIDATE)} against each, paired by run", "",
        table(["figure", "against", "difference", "ratio", "95 % interval", "p", "verdict"],
              [[e["label"], m, number(v["diff"]),
                "–" if v["ratio"] is None else f"{100 * v['ratio']:+.1f} %",
                "–" if v["ci"] is None else f"± {number(v['ci'])}", number(v["p"], 3),
                f"{v['verdict']} (n = {v['n']})"]
               for e in stats.values() for m, v in e["vs"].items()],
              "llrrrrl", compact=True)]
    skipped = [f"- run {k + 1}, {m}: {p['skipped']}" for k, r in enumerate(doc["runs"])
               for m, p in r["plans"].items() if isinstance(p, dict) and p.get("skipped")]
    if skipped:
        lines += ["Not measured:", "", *skipped, ""]
    lines += [f"Paper: {PAPER_RT_GAIN}.", "",
              "Each run's tables, layouts, graph and plans: run<k>/summary.md."]
    return "\n".join(lines) + "\n"


def run_markdown(doc: dict, opts) -> str:
    """One run's tables: end to end and trunks, per service, CPU per server, layouts."""
    res = doc["results"]
    base = res.get("spread", {}).get("end_to_end", {})

    def gain(m, key):
        b, v = base.get(key), res[m]["end_to_end"].get(key)
        return None if not b or v is None else 100 * (1 - v / b)
    lines = [
        f"# Placement comparison, one run (seed {doc['seed']}; order "
        f"{', '.join(doc['order'])})", "",
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
              "trunk).", "", "## Per service (p50 / p95 / p99 ms of "
              "the requests each served)", "",
              table(["service", *res],
                    [[ms] + [" / ".join(number(res[m]["services"][ms][k], 0)
                                        for k in ("p50_ms", "p95_ms", "p99_ms")) for m in res]
                     for ms in next(iter(res.values()), {}).get("services", {})],
                    "l".ljust(len(res) + 1, "r"), compact=True)]
    edges = sorted({e for r in res.values() for e in r.get("calls", {})})
    if edges:
        lines += ["## Calls (p50 ms: what the caller waited / of it, beyond the callee's own "
                  "time)", "",
                  table(["caller > callee", *res],
                        [[edge.replace(">", " > ")] + [_call_cell(r, edge) for r in res.values()]
                         for edge in edges], "l".ljust(len(res) + 1, "r"), compact=True),
                  "Beyond the callee's own time: the connection's set-up, the network both "
                  "ways, the callee's queue before its handler starts and the threads' "
                  "waits for a core.", ""]
    parts = ("controller", "ovs", "profiler", "agents", "servers", "machine")
    if any(r.get("cpu") for r in res.values()):
        lines += ["## CPU of the parts (cores, mean over the phase)", "",
                  table(["placement", "controller", "Open vSwitch", "profiler", "agents",
                         "servers", "machine"],
                        [[m] + [number((r.get("cpu") or {}).get(f"{k}_cores"), 2)
                                for k in parts] for m, r in res.items()],
                        "lrrrrrr", compact=True),
                  "Open vSwitch: ovs-vswitchd, which forwards every packet on the userspace "
                  "datapath and translates its flows again at each change of its tables; "
                  "machine: every busy core (of its 2).", ""]
    servers = sorted({s for r in res.values() for s in r["cpu_per_server"]})
    lines += ["## CPU per server (% of its share, mean over the phase)", "",
              table(["placement", *servers],
                    [[m] + [number(r["cpu_per_server"].get(s), 0) for s in servers]
                     for m, r in res.items()], "l".ljust(len(servers) + 1, "r"), compact=True),
              "Layouts:", ""] + [f"- {m}: " + ", ".join(
        f"{ms} on {','.join(v)}" for ms, v in sorted(r["layout"].items())) for m, r in res.items()]
    return "\n".join(lines) + "\n"


def beyond_callee(result: dict, edge: str) -> float | None:
    """The p50 of a call as its caller waited for it less the callee's own p50 over that
    caller's requests (what its handler took; over all its requests where a run has no
    figure by caller): the call's cost outside the callee's handler, in ms."""
    call = result.get("calls", {}).get(edge) or {}
    own = call.get("callee_p50_ms")
    if own is None:
        own = (result["services"].get(edge.split(">", 1)[1]) or {}).get("p50_ms")
    waited = call.get("p50_ms")
    return None if waited is None or own is None else waited - own


def _call_cell(result: dict, edge: str) -> str:
    waited = (result.get("calls", {}).get(edge) or {}).get("p50_ms")
    return f"{number(waited, 0)} / {number(beyond_callee(result, edge), 0)}"


def plot(doc: dict, path: str) -> None:
    """Means with 95 % intervals over the runs: response times and trunk traffic."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    stats = doc["statistics"]
    methods = [m for m in stats["p95_ms"]["methods"]
               if stats["p95_ms"]["methods"][m]["mean"] is not None]

    def bars(key):
        e = stats[key]["methods"]
        return [e[m]["mean"] for m in methods], [e[m]["ci"] or 0 for m in methods]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for k, (key, label) in enumerate((("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99"))):
        mean, ci = bars(key)
        axes[0].bar([x + 0.25 * k for x in range(len(methods))], mean, yerr=ci, width=0.25,
                    label=label, capsize=2)
    axes[0].set_xticks([x + 0.25 for x in range(len(methods))], methods)
    axes[0].set_ylabel("end-to-end response time (ms)")
    axes[0].legend()
    mean, ci = bars("trunk_mbit_s")
    axes[1].bar(methods, mean, yerr=ci, color="tab:gray", capsize=3)
    axes[1].set_ylabel("traffic over trunks (Mbit/s)")
    fig.suptitle(f"Placement comparison ({len(doc['runs'])} runs, mean ± 95 %)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m experiments.placement_comparison", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="application and testbed (default configs/bookinfo.yaml)")
    p.add_argument("--methods", type=choice_list(METHODS), default=list(METHODS))
    p.add_argument("--candidate", choices=METHODS, default=CANDIDATE,
                   help=f"the method compared with each other one (default {CANDIDATE}; "
                        "latency: ours under the latency objective)")
    add_short_flows(p, "the clients' and the services' calls")
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
    p.add_argument("--move-batch", type=bounded(int, 1, 100), default=1, metavar="N",
                   help="moves carried out together (their health and drain waits overlap; "
                        "default 1: one after the other)")
    p.add_argument("--trunk-bw", type=positive_float, help="Mbit/s of the trunks (default: "
                                                            "the configuration's)")
    p.add_argument("--max-utilization", type=bounded(float, 0.05, 1.0),
                   default=MAX_UTILIZATION, help="share of each server's CPU a plan may "
                   f"fill, for every method (default {MAX_UTILIZATION:g})")
    p.add_argument("--runs", type=bounded(int, 1, 50), default=1,
                   help="runs, each on a fresh stack with the methods' order rotated by one "
                        "place (default 1; 5 or more for intervals)")
    p.add_argument("--exact-time-limit", type=positive_float, default=EXACT_TIME_LIMIT_S,
                   help="seconds HiGHS may take for the `exact` method (default %(default)g)")
    p.add_argument("--seed", type=int, default=1,
                   help="run k's load and random placement play seed + k (default 1)")
    p.add_argument("--out", help="results directory (default results/placement-<time>)")
    p.add_argument("--resume", action="store_true", help=(
        "go on with the comparison in --out, cut off before its end, with the same options: "
        "the runs that finished there are read back, the others played"))
    return p


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.candidate not in args.methods:
        ap.error(f"--candidate: {args.candidate} is not among --methods")
    if args.resume and lab.resume_problem(args.out):
        fail(lab.resume_problem(args.out), code=2)
    try:
        data = with_short_flows(load_config_data(args.config), args.short_flows)
        if args.trunk_bw:
            data.setdefault("testbed", {})["trunk_bw_mbit"] = args.trunk_bw
        cfg = parse_config_file_data(data, config_path(args.config))
        args.short_flows = cfg.controller.dataplane.short_flows    # what runs, recorded
        check_testbed_builds(cfg)
        if len(cfg.testbed.switches) < 2:
            raise ConfigError("testbed.switches: placement needs 2 to 4 switches (trunks)")
        if not any(m.kind == "callgraph" for m in cfg.microservices):
            raise ConfigError("microservices: no call-graph microservice to place")
        shares = entry_shares(cfg, config_path(args.config))
    except (ConfigError, ValueError) as exc:
        fail(f"configuration: {exc}", code=2)
    require_testbed("the placement comparison")
    out_dir = lab.results_dir(args.out, "placement-")
    command = lab.invocation("experiments.placement_comparison", argv).strip()
    try:                            # the code and time the comparison started with
        stamp = lab.resumable_stamp(out_dir, command, vars(args), args.resume,
                                    {k: ap.get_default(k) for k in vars(args)})
    except ValueError as exc:
        fail(f"--resume: {exc}", code=2)
    lab.terminate_unwinds()         # between stacks too: a SIGTERM ends it as ^C does
    try:
        measured = run(args, data, out_dir, shares, log=lambda m: print(m, flush=True))
    except PlacementError as exc:
        fail(f"placement: {exc}", code=1)
    except (RuntimeError, OSError) as exc:     # the testbed's: a service, a load generator
        fail(f"the comparison stopped: {exc}; the runs that finished are in {out_dir}: the "
             "same command with --resume goes on from there", code=1)
    except KeyboardInterrupt:       # ^C or SIGTERM: the stack came down on its way out
        print(f"\n[placement] interrupted; the runs that finished are in {out_dir}: the same "
              "command with --resume goes on from there", file=sys.stderr, flush=True)
        return 130
    doc = {**measured, **stamp,
           "statistics": statistics(measured["runs"], args.methods, args.candidate),
           "entry_shares": shares, "config": os.path.relpath(config_path(args.config), ROOT),
           "trunk_bw_mbit": cfg.testbed.trunk_bw_mbit, "options": vars(args)}
    text = lab.write_results(out_dir, "summary", doc,
                             lambda: summary_markdown(doc, args, command), echo=False)
    plot(doc, os.path.join(out_dir, "placement.png"))
    print(text)
    print(f"[placement] results in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
