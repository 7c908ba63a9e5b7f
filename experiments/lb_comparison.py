"""Scenario 2 of the MALB paper (section IV.B), and workloads beyond it: the balancing
policies on the same workload.

    sudo .venv/bin/python -m experiments.lb_comparison            # short default, ~10 min
    sudo .venv/bin/python -m experiments.lb_comparison --paper    # 3 x 10 min phases, 10 runs
    sudo .venv/bin/python -m experiments.lb_comparison --policies malb,srr --runs 3 --seed 7
    sudo .venv/bin/python -m experiments.lb_comparison --scenario heavy-tail   # or antagonist,
                                                             # unequal, callgraph

For every run and policy: the testbed comes up with the controller (that policy), the host
agents and the profiler; the clients play an open-loop workload of the scenario's request
classes (experiments/scenarios.py; the paper's by default) through three phases (linear
increase, stable, linear decrease), and the antagonist scenario's busy threads start and
stop on their schedule (experiments/antagonist.py); then everything is collected and torn
down. Results go to results/<timestamp>/: raw data per policy and run (configuration,
workload spec, requests, profiler history with the server samples, controller decisions,
antagonists' actual times, logs), Table II, Fig. 3 and Table III as Markdown and CSV, PNG
plots and summary.md (the paper's figures beside ours in the paper scenario). See
docs/experiments.md.

Holds the run of one policy (run_one, evaluate_run, write_result), the summary (summarise
and its tables: balancing_cost_markdown, antagonists_markdown, antagonised_share_markdown,
long_flows_to), resuming an interrupted
comparison (start_record, finished_run, read_back_run, experiment_options, options_differ,
recorded, require_same_options), re-evaluation and pooling of finished comparisons
(resummarise, pool) and main. The workload, the servers and the flags are
experiments/workload.py's.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import os
import signal
import sys
import time

from common import lab
from common.cli import fail, flag_config_error, require_testbed
from common.markdown import number, table
from common.config import ConfigError, check_testbed_builds, config_path, load_config, \
    load_config_data, parse_config_file_data
from common.procs import git_commit
from common.state import ovs_vswitchd_pid, process_start_ticks
from experiments import antagonist, evaluation, haproxy, loadgen, nginx, protocol, report, \
    scenarios, significance, workload
from experiments.evaluation import BALANCING_PARTS, balancing_cpu_per_1000, part_cores
from experiments.stack import Stack
from experiments.workload import (DEFAULT_PHASE_S, FLAG_OF_FIELD, OUTSIDE_BALANCERS,
                                  config_data, heterogeneous, request_classes, server_specs,
                                  workload_spec)
from profiler.store import HistoryStore

def read_server_samples(history: str, t0: float, t1: float) -> dict[float, dict[str, dict]]:
    """{t: {server: {cpu, mem, net}}} from the profiler's history, fresh samples only."""
    with HistoryStore.open_read_only(history) as store:
        rows = store.rows("server_samples", ("server", "cpu", "mem", "net", "stale"), t0, t1)
    samples: dict[float, dict[str, dict]] = {}
    for t, server, cpu, mem, net, stale in rows:
        if not stale:
            samples.setdefault(t, {})[server] = {"cpu": cpu, "mem": mem, "net": net}
    return samples


def _count_rows(path: str) -> int:
    try:
        with open(path) as fh:
            return max(0, sum(1 for _ in fh) - 1)
    except OSError:
        return 0


def write_result(path: str, result: dict) -> None:
    """A run's result.json, whole or not at all: --resume takes a run whose result.json is
    there for finished, so an interruption must not leave half of one."""
    with open(path + ".part", "w") as fh:
        json.dump(result, fh, indent=1)
    os.replace(path + ".part", path)


# the outside balancers' classes by proxy (OUTSIDE_BALANCERS names the proxy and its mode)
OUTSIDE_PROXIES = {"haproxy": haproxy.OutsideBalancer, "nginx": nginx.NginxBalancer}


def run_one(policy: str, run: int, opts, out_dir: str, position: int = 0) -> dict:
    run_dir = os.path.join(out_dir, policy, f"run{run}")
    tag = f"[{policy} run {run}]"
    data = config_data(opts, policy)
    started = time.time()
    outside = OUTSIDE_BALANCERS.get(policy)
    with Stack(data, run_dir, policy="srr" if outside else policy) as st, \
            contextlib.ExitStack() as balancers:
        st.wait_monitoring(30)
        spec = workload_spec(st.cfg, opts, opts.seed + run)
        # what balancing costs: the controller's CPU, and the proxy's where one balances
        meters = {}
        for name, pid in (("controller", st.controller.proc.pid),
                          ("profiler", st.profiler.proc.pid), ("switch", ovs_vswitchd_pid())):
            if pid is not None:
                meters[name] = haproxy.CpuMeter(pid, process_start_ticks(pid)).start()
                balancers.callback(meters[name].stop)
        if outside:
            proxy, mode = outside
            lb = balancers.enter_context(OUTSIDE_PROXIES[proxy](st, mode))
            meters[lb.name] = lb.meter
            spec = lb.retarget(spec)
        spec_path = os.path.join(run_dir, "workload.json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh, indent=1)
        clients = st.cfg.testbed.clients
        longest = scenarios.longest_request_s(opts)
        # a request fails after this long without data: a job answers only at its end, and
        # the heavy tail's longest may run twice its length on a busy server
        timeout = max(longest + 60, 2 * longest)
        t0 = time.time() + 2
        total = 3 * opts.phase_seconds
        deadline = t0 + total + timeout + 30
        summaries: list[dict] = []
        last_print = 0.0
        with antagonist.Schedule(spec.get("antagonists", []), t0, run_dir,
                                 st.testbed.backend,
                                 log=lambda line: print(f"{tag} {line}", flush=True)) as busy:
            st.start_loadgen(spec_path, t0, timeout_s=timeout)
            while time.time() < deadline:
                busy.tick()
                summaries = st.loadgen_summaries()
                if len(summaries) == len(clients):
                    break
                if time.time() - last_print >= opts.progress:
                    done = sum(_count_rows(f"{run_dir}/requests-{k}.csv")
                               for k in range(len(clients)))
                    elapsed = max(0.0, time.time() - t0)
                    phase = ("starting" if elapsed <= 0 else "draining" if elapsed > total
                             else spec["phases"][min(2, int(elapsed // opts.phase_seconds))][
                                 "name"])
                    print(f"{tag} {elapsed:4.0f}/{total:.0f} s ({phase}): {done} requests "
                          f"done", flush=True)
                    last_print = time.time()
                time.sleep(1)
            busy.stop_all()
        t_end = time.time()
        if len(summaries) < len(clients):
            raise RuntimeError(f"{tag} the workload did not finish by its deadline; see "
                               f"{run_dir}/loadgen-*.log")
        # the meters cover the load phases whole: the last request may have been answered
        # a moment before the last phase's end (a run whose readings stopped 0.4 s short
        # of it had no balancing CPU: evaluation 4, social-dataplane, malb run 1)
        time.sleep(max(0.0, t0 + total - time.time()) + 0.05)
        for m in meters.values():
            m.read()                   # up to now: the load may have ended a moment ago
        balancer_cpu = {name: haproxy.cores_over(m.snapshot(), t0, t0 + total)
                        for name, m in meters.items()}
        if outside:
            with open(os.path.join(run_dir, f"{lb.name}-servers.json"), "w") as fh:
                json.dump(lb.servers(), fh, indent=1)
        with open(os.path.join(run_dir, "decisions.json"), "w") as fh:
            json.dump(st.controller_get("/malb/decisions?limit=100000"), fh)
        with open(os.path.join(run_dir, "controller-status.json"), "w") as fh:
            json.dump(st.controller_get("/malb/status"), fh, indent=1)
        with open(os.path.join(run_dir, "profiles.json"), "w") as fh:
            json.dump(st.profiler_get("/profiles"), fh, indent=1)
        history = st.cfg.profiler.history_path
        period = st.cfg.profiler.period_s
        server_names = [s.name for s in st.cfg.servers]
        backend = st.testbed.describe()
    load_end = t0 + total
    evaluated = evaluate_run(run_dir, history, (t0, load_end, t_end), period,
                             max(period, opts.metric_period), server_names, len(clients), tag)
    result = {"policy": policy, "run": run, "seed": opts.seed + run, "position": position,
              "t0": t0,
              "load_end": load_end, "t_end": t_end, **backend,
              "wall_s": round(time.time() - started, 1),
              "requests_planned": sum(s["planned"] for s in summaries),
              **({"antagonists": busy.records()} if busy.entries else {}),
              # cores each balancing process used over the load phases
              "balancer_cores": {k: None if v is None else round(v, 4)
                                 for k, v in balancer_cpu.items()},
              **evaluated["figures"]}
    write_result(os.path.join(run_dir, "result.json"), result)
    print(f"{tag} done in {result['wall_s']:.0f} s: {result['requests_recorded']} of "
          f"{result['requests_planned']} requests recorded, {result['requests_failed']} failed, "
          f"{result['server_samples']} server samples", flush=True)
    return {"result": result, "requests": evaluated["requests"],
            "timeline": evaluated["timeline"]}


def evaluate_run(run_dir: str, history: str, times: tuple[float, float, float], period: float,
                 metric_period: float, server_names: list[str], clients: int,
                 tag: str) -> dict:
    """One run's figures from what it left in `run_dir` (request records) and its profiler
    `history`. `times` = (start, end of the load phases, end of the run): Table II, Fig. 3
    and energy cover the load phases, where the policies place the arriving requests, as
    the paper's 10-minute phases are read; `table2_with_drain` runs on to the end, while
    the last jobs and streams finish and nothing new arrives (with 30 s phases, 14-27 %
    of the run)."""
    t0, load_end, t_end = times
    requests = []
    for k in range(clients):
        with open(f"{run_dir}/requests-{k}.csv") as fh:
            requests += list(csv.DictReader(fh))
    every = read_server_samples(history, t0, t_end)
    # the figures are read over the paper's 3 s periods whatever the monitoring period
    samples = evaluation.in_periods({t: s for t, s in every.items() if t <= load_end},
                                    period, metric_period)
    seen = {name: sum(1 for servers in samples.values() if name in servers)
            for name in server_names}
    if not all(seen.values()):
        # A table of the servers' balance without their samples would be a table of nothing
        raise RuntimeError(f"{tag} monitoring: no complete sample during the run of "
                           f"{', '.join(n for n, k in seen.items() if not k)}; see "
                           f"{run_dir}/agent-*.log and profiler.log")
    whole = evaluation.in_periods(every, period, metric_period)
    figures = {
        "requests_recorded": len(requests),
        "requests_failed": sum(1 for r in requests if r["error"]),
        "table2": evaluation.table2(samples, servers=server_names),
        "table2_with_drain": evaluation.table2(whole, servers=server_names),
        "fig3": evaluation.fig3(samples),
        "table3": evaluation.table3(requests),
        "end_to_end": evaluation.end_to_end(requests),
        "energy": evaluation.energy_per_server(samples, metric_period),
        "server_samples": len(samples),
    }
    timeline = {}
    for t, servers in sorted(whole.items()):
        for name, s in servers.items():
            timeline.setdefault(name, []).append((t - t0, s["cpu"]))
    return {"figures": figures, "requests": requests, "timeline": timeline}


def summarise(out_dir: str, opts, per_policy: dict[str, list[dict]], command: str,
              commit: str, evaluated_at: str | None = None,
              sources: list[dict] | None = None) -> dict:
    results = {}
    for p, runs in per_policy.items():
        merged = evaluation.mean_of_runs([r["result"] for r in runs])
        merged["fig3"] = evaluation.mean_fig3([r["result"]["fig3"] for r in runs])
        results[p] = merged
    report.write_csvs(results, out_dir)
    report.plot_fig3(results, os.path.join(out_dir, "fig3.png"))
    # pooled runs taken as recorded have no raw data to plot: the first run that has
    report.plot_timelines({p: next((r["timeline"] for r in runs if r["timeline"]), {})
                           for p, runs in per_policy.items()},
                          os.path.join(out_dir, "cpu_timeline.png"))
    report.plot_response_times({p: [r for run in runs for r in run["requests"]]
                                for p, runs in per_policy.items()},
                               os.path.join(out_dir, "response_times.png"))
    sc = scenarios.scenario_of(opts)
    t2, t3, f3 = (report.table2_markdown(results, with_paper=sc.paper_figures),
                  report.table3_markdown(results, with_paper=sc.paper_figures),
                  report.fig3_markdown(results))
    per_server = report.per_server_markdown(
        results, "means over the runs, runs without this figure recorded left out")
    accounted = all(r["result"]["requests_planned"] == r["result"]["requests_recorded"]
                    for runs in per_policy.values() for r in runs)
    testbeds = sorted({f"{r['result']['backend']}, {r['result']['datapath']} datapath"
                       for runs in per_policy.values() for r in runs})
    stats = significance.compare({p: [r["result"] for r in runs]
                                  for p, runs in per_policy.items()})
    stats_md = significance.markdown(stats, names=report.POLICY_NAMES)
    tails, tails_md = pooled_tails(per_policy)
    ours = report.POLICY_NAMES.get(significance.CANDIDATE, significance.CANDIDATE)
    tests = sum(len(e["vs"]) for e in stats.values())
    if opts.runs < 2:
        separable = ("One run per policy: no confidence interval and no test. A single short "
                     "run cannot tell a difference from the run-to-run noise (CPU STDEV moved "
                     "by 10-25 % between runs of one policy in docs/experiments.md); read the "
                     "figures as a smoke test and use --runs 3 or more (docs/experiments.md) "
                     "for the comparison.")
    else:
        sig = [f"{e['label']} against {report.POLICY_NAMES.get(p, p)}: {d['verdict']} "
               f"({100 * d['ratio']:+.1f} %, p = {d['p']:.3f})"
               for e in stats.values() for p, d in e["vs"].items()
               if d["p"] is not None and d["p"] < significance.ALPHA]
        separable = (f"{opts.runs} interleaved runs per policy, paired by run (same seeded "
                     f"workload). Significant at 95 % (paired t-test), {ours} against "
                     f"every other policy:\n\n" + ("\n".join(f"- {x}" for x in sig) if sig
                                                   else "- none") +
                     "\n\nEvery other difference in the table below is not significant at "
                     f"this number of runs. Each figure is tested on its own, with no "
                     f"correction for the number of tests: of these {tests}, about "
                     f"{significance.ALPHA * tests:.0f} would come out significant by chance "
                     f"if no policy differed from another.")
    seeds = sorted({r["result"]["seed"] for runs in per_policy.values() for r in runs})
    if sources:
        schedules = f"{protocol.describe_seeds(seeds)}, pooled (below)"
        pooled = (f"\nPooled from {len(sources)} comparisons of this experiment on different "
                  f"schedules, paired by schedule seed:\n\n" +
                  "\n".join(f"- {s['dir']}: {s['runs']} runs (schedule seeds {s['schedules']}), "
                            f"commit {s['commit']}, figures "
                            f"{'as recorded' if s['as_recorded'] else 'from its raw data'}, "
                            f"evaluated at {s['evaluated_at']}: `{s['command']}`"
                            for s in sources) + "\n")
        raw = "in each pooled comparison's <policy>/run<k>/"
    else:
        schedules = f"{protocol.describe_seeds(seeds)} (--seed {opts.seed}: run k plays " \
                    f"seed + k)"
        pooled, raw = "", "<policy>/run<k>/"
    servers = ", ".join(f"{s['name']} {s['cpu']:g} CPU / {s['memory']} / {s['network_mbit']:g} "
                        f"Mbit/s" for s in server_specs(opts))
    title = "Scenario 2 of the MALB paper" if sc.name == "paper" else f"Scenario {sc.name}"
    paper_rows = ("The paper's rows (10 runs of 30 minutes on its own servers, with far larger "
                  "capacity) are there for the direction of the differences, not for their "
                  "size: our servers are core shares of a small machine and the workload is "
                  "scaled to them (docs/experiments.md)." if sc.paper_figures else
                  "The paper has no figures for this workload: no paper's rows.")
    summary = f"""# {title}: {', '.join(report.POLICY_NAMES.get(p, p) for p in per_policy)}

Scenario: **{sc.name}**, {sc.about}; {schedules}.

Command: `{command}`
{f"Pooled at {evaluated_at}" if sources else f"Commit: {commit}"}; {
    datetime.datetime.now().isoformat(timespec='seconds')}{
    " (each source's commit, and where its figures come from: below)" if sources else
    f" (figures re-evaluated from the raw data at {evaluated_at})" if evaluated_at else ""}
Testbed: {'; '.join(testbeds)} (backend: real Containernet, or Debian's Mininet with the
project's Docker node)
Runs per policy: {opts.runs}; phases: 3 x {opts.phase_seconds:g} s (linear increase from
{opts.peak_rate * opts.low_fraction:g} to {opts.peak_rate:g} requests/s, stable, decrease);
servers ({'heterogeneous' if heterogeneous(opts) else 'homogeneous'}): {servers};
client links {opts.client_bw:g} Mbit/s; {scenarios.describe(opts)}; monitoring period
{opts.period:g} s (the paper's: 3 s), server figures over
{max(opts.period, opts.metric_period):g} s periods of the three load phases (the row "with the
drain" runs on until the last request ended).
Every request accounted for (sent = completed + failed): {'yes' if accounted else 'NO'}.
{pooled}{antagonists_markdown(per_policy)}{antagonised_share_markdown(per_policy, opts)}
Figures below are averages over the runs. {paper_rows}

## Statistics: means with 95 % intervals; {ours} against every other policy

{separable}

{stats_md}
{tails_md}
## Table II: load balancing level among the servers (STDEV and range across servers,
averaged over timestamps; CPU, memory, network in % of capacity, energy in W)

{t2}
## Fig. 3: average and worst-case use (fig3.png)

{f3}{per_server}
## Table III: client side (RT in ms, video TP in kB/s; Jain's index over requests; p50 and
p99 of RT over each run's completed requests, averaged over the runs; failed per policy)

{t3}{balancing_cost_markdown(per_policy, opts)}
Plots: fig3.png (and .svg), cpu_timeline.png (CPU per server over time, first run{
    " with its raw data here" if sources else ""}), response_times.png
(response-time CDFs{", of the runs with their raw data here" if sources else ""}). Raw data: {raw}.
"""
    lab.write_results(out_dir, "summary", {
        "command": command, "commit": commit, "evaluated_at": evaluated_at or commit,
        "testbed": testbeds, "options": vars(opts),
        "accounted": accounted, "results": results, "statistics": stats,
        "pooled_tails": tails,
        **({"sources": sources} if sources else {}),
        "runs": {p: [r["result"] for r in runs] for p, runs in per_policy.items()}},
        summary, echo=False)
    return {"table2": t2, "table3": t3, "fig3": f3, "accounted": accounted}


def pooled_tails(per_policy: dict[str, list[dict]]) -> tuple[dict, str]:
    """End-to-end tails over every request of each policy's runs, with intervals from
    resampling runs (significance.pooled_tails), and their section of summary.md; none
    where a run's raw requests are not here (a pooled comparison taken as recorded)."""
    rts = {p: [evaluation.completed_rts(r["requests"]) for r in runs]
           for p, runs in per_policy.items()}
    if not rts or not all(all(run) for runs in rts.values() for run in runs):
        return {}, ""
    tails = significance.pooled_tails(rts)
    return tails, (
        "\nTails of all requests but video, pooled over the runs: a run's own p99 rests on "
        "its slowest few requests. 95 % intervals by resampling whole runs (a cluster "
        "bootstrap, the same runs for both policies of a comparison; with few runs the "
        "resamples are few, so the intervals are coarse); none with fewer than "
        f"{significance.MIN_RUNS_TO_RESAMPLE} runs.\n\n" +
        significance.pooled_tails_markdown(tails, names=report.POLICY_NAMES))


def controller_ms_per_1000_connections(result: dict, load_s: float,
                                       per_request: float) -> float | None:
    """The controller's CPU milliseconds over the load phases per 1,000 TCP connections
    the requests arriving in them open (per_request each); None when not metered."""
    cores = part_cores(result.get("balancer_cores") or {}, "controller")
    connections = (result.get("requests_planned") or 0) * per_request
    if cores is None or connections <= 0:
        return None
    return 1e6 * cores * load_s / connections


def balancing_cost_markdown(per_policy: dict[str, list[dict]], opts) -> str:
    """The balancing processes' own CPU over the load phases (mean cores over the runs)
    beside the servers' (the cores their average CPU stands for), and all of them per
    1,000 requests; or "" when no run measured it."""
    shares = [s["cpu"] for s in server_specs(opts)]
    load_s = 3 * opts.phase_seconds
    per_request = scenarios.connections_per_request(opts)
    rows = []
    for p, runs in per_policy.items():
        got = [r["result"].get("balancer_cores") or {} for r in runs]

        def mean(vals):
            vals = [v for v in vals if v is not None]
            return sum(vals) / len(vals) if vals else None
        servers = []
        for r in runs:
            avg = ((r["result"].get("fig3") or {}).get("cpu") or {}).get("per_server_average")
            if avg:
                servers.append(sum(share * (avg.get(f"srv{k + 1}") or 0.0) / 100
                                   for k, share in enumerate(shares)))
        if not any(g for g in got):
            continue
        srv = sum(servers) / len(servers) if servers else None
        per_1000 = mean([balancing_cpu_per_1000(r["result"], load_s) for r in runs])
        rows.append([report.POLICY_NAMES.get(p, p),
                     *(number(mean([part_cores(g, c) for g in got]), 3)
                       for c in BALANCING_PARTS),
                     number(srv, 3), number(per_1000, 2)])
        if per_request:
            rows[-1].append(number(mean([controller_ms_per_1000_connections(
                r["result"], load_s, per_request) for r in runs]), 1))
    if not rows:
        return ""
    return ("\n## What balancing costs: the processes' own CPU (mean cores over the load "
            "phases)\n\nThe controller (ryu-manager) and the profiler run in every run "
            "(under an outside balancer the controller only installs the switches' host "
            "rules, and only malb, malb-paper and ln read the profiler); a proxy (HAProxy, "
            "nginx) carries every byte on two TCP connections, and Open vSwitch's userspace "
            "datapath (switch) forwards every packet, twice through a proxy. None of them "
            "is in the servers' figures: they run on the testbed machine outside the "
            "servers' CPU shares. The host agents are not metered. The last column is "
            "what all four parts used over the load phases, in CPU seconds per 1,000 "
            "requests arriving in them (mean over the runs)." +
            (f" Every request opens {per_request:.2f} TCP connections on average (one to "
             "the entry service and one per call down the graph); the controller's column "
             "is per 1,000 of them." if per_request else "") + "\n\n" +
            table(["policy", "controller", "profiler", "proxy", "switch", "servers (all)",
                   "balancing CPU s / 1,000 requests",
                   *(["controller CPU ms / 1,000 connections"] if per_request else [])],
                  rows, "lrrrrrr" + ("r" if per_request else ""), compact=True))


def long_flows_to(requests: list[dict], antagonist: dict, long_classes: set[str]
                  ) -> tuple[int, int]:
    """(long-flow requests that started while the antagonist ran, how many of them went to
    its server): where a policy sent the work a noisy neighbour competes with."""
    t0, t1 = antagonist.get("started_at"), antagonist.get("stopped_at")
    if t0 is None or t1 is None:
        return 0, 0
    during = [r for r in requests if r["class"] in long_classes
              and t0 <= float(r["intended"]) < t1]
    there = [r for r in during if (r.get("served_by") or "").split("-")[0] ==
             antagonist["server"]]
    return len(during), len(there)


def antagonised_share_markdown(per_policy: dict[str, list[dict]], opts) -> str:
    """Per policy and antagonist, the share of long flows started during the antagonist
    that went to its server (mean over the runs, 95 % interval), and MALB (ours) against
    each policy, paired by run; "" without antagonists or raw request records."""
    data = load_config_data(scenarios.base_config_path(opts))
    long_ms = {m["name"] for m in data.get("microservices") or ()
               if m.get("flow_class") == "long"}
    long_classes = {c["name"] for c in request_classes(opts) if c["ms"] in long_ms}
    shares: dict[str, dict[str, dict[int, float]]] = {}    # antagonist -> policy -> seed
    for p, runs in per_policy.items():
        for r in runs:
            for a in r["result"].get("antagonists", ()):
                n, there = long_flows_to(r["requests"], a, long_classes)
                if n:
                    shares.setdefault(a["name"], {}).setdefault(p, {})[
                        r["result"]["seed"]] = there / n
    if not shares:
        return ""
    rows = []
    for name, per in shares.items():
        ours = per.get(significance.CANDIDATE, {})
        for p, by_seed in per.items():
            stats = significance.mean_ci(list(by_seed.values()))
            both = sorted(set(ours) & set(by_seed))
            test = significance.paired([ours[k] for k in both], [by_seed[k] for k in both]) \
                if p != significance.CANDIDATE and both else None
            rows.append([name, report.POLICY_NAMES.get(p, p),
                         f"{number(100 * stats['mean'])} %"
                         + ("" if stats["ci"] is None else f" ± {number(100 * stats['ci'])}"),
                         "" if test is None else number(100 * test["diff"]) + " pts",
                         "" if test is None else number(test["p"], 3)])
    return ("\nLong flows (" + ", ".join(sorted(long_classes)) + ") started while an "
            "antagonist ran that went to its server (share, mean over the runs ± 95 %; "
            f"{report.POLICY_NAMES.get(significance.CANDIDATE)} against each, paired by "
            "run):\n\n" +
            table(["antagonist", "policy", "share", "difference", "p"], rows, "llrrr",
                  compact=True))


def antagonists_markdown(per_policy: dict[str, list[dict]]) -> str:
    """When each run's antagonists actually ran (s from the start of the load), or ""."""
    rows = [(p, r["result"]["run"], a) for p, runs in per_policy.items() for r in runs
            for a in r["result"].get("antagonists", ())]
    if not rows:
        return ""

    def at(a, key):
        return "–" if a.get(key) is None else f"{a[key]:.1f}"
    return ("\nAntagonists, as they ran (s from the start of the load; CPU-s the busy thread "
            "had):\n\n" +
            table(["policy", "run", "antagonist", "where", "planned", "started", "stopped",
                   "CPU-s"],
                  [[report.POLICY_NAMES.get(p, p), run, a["name"], f"{a['where']} {a['server']}",
                    f"{a['planned_start_s']:.0f}-{a['planned_stop_s']:.0f}", at(a, "started_s"),
                    at(a, "stopped_s"), at(a, "cpu_s")] for p, run, a in rows],
                  "lrlllrrr", compact=True))


def parser() -> argparse.ArgumentParser:
    return workload.parser(description=__doc__)


# Options that may differ between comparisons pooled into one: the schedules and what only
# names or reports them. Any other difference (phases, servers, workload, period) would pool
# runs of different experiments.
POOL_FREE_OPTIONS = {"seed", "runs", "first_run", "out", "progress", "resume", "paper",
                     "resummarise", "as_recorded", "policies"}


def _read_comparison(out_dir: str) -> tuple[dict, argparse.Namespace]:
    """A finished comparison's summary.json and its options, with today's defaults for any
    option its code did not have yet."""
    with open(os.path.join(out_dir, "summary.json")) as fh:
        old = json.load(fh)
    opts = parser().parse_args([])
    vars(opts).update(old["options"])
    return old, opts


def _seed(result: dict, opts) -> int:
    """The schedule seed a run played; comparisons before results carried it: seed + k."""
    return result.get("seed", opts.seed + result["run"])


def read_back_run(run_dir: str, recorded: dict, opts) -> dict:
    """A finished run evaluated again from the raw data in run_dir, `recorded` being the
    figures its result.json (or a summary.json) holds: what run_one returns."""
    cfg = load_config(os.path.join(run_dir, "config.yaml"))
    period = cfg.profiler.period_s
    load_end = recorded.get("load_end", recorded["t0"] + 3 * opts.phase_seconds)
    evaluated = evaluate_run(
        run_dir, os.path.join(run_dir, "history.sqlite"),
        (recorded["t0"], load_end, recorded["t_end"]), period,
        max(period, opts.metric_period), [s.name for s in cfg.servers],
        len(cfg.testbed.clients), f"[{recorded['policy']} run {recorded['run']}]")
    result = {**recorded, "seed": _seed(recorded, opts), "load_end": load_end,
              **evaluated["figures"]}
    return {"result": result, "requests": evaluated["requests"],
            "timeline": evaluated["timeline"]}


def _evaluate_comparison(out_dir: str, old: dict, opts) -> tuple[dict, list]:
    """Every run of a comparison evaluated again from its raw data: (runs per policy, the
    result.json files to rewrite). Writes nothing."""
    per_policy: dict[str, list[dict]] = {}
    rewritten: list[tuple[str, dict]] = []
    for policy, runs in old["runs"].items():
        for r in runs:
            run_dir = os.path.join(out_dir, policy, f"run{r['run']}")
            got = read_back_run(run_dir, {"policy": policy, **r}, opts)
            rewritten.append((os.path.join(run_dir, "result.json"), got["result"]))
            per_policy.setdefault(policy, []).append(got)
    return per_policy, rewritten


# Options that may differ between the start of a comparison and its resumption: where it
# goes and how it reports progress. Anything else would make the resumed runs another
# experiment than the finished ones.
RESUME_FREE_OPTIONS = {"out", "progress", "resume"}


def experiment_options(args) -> dict:
    """What makes two comparisons one experiment (comparison.json records it at the start)."""
    return {k: v for k, v in sorted(vars(args).items())
            if k not in RESUME_FREE_OPTIONS | {"resummarise", "as_recorded"}}


def options_differ(args, options: dict) -> list[str]:
    """The experiment options in which `args` differ from the options a comparison recorded
    (comparison.json, or a summary.json's); an option its code did not have yet counts as
    its default."""
    mine, p = experiment_options(args), parser()
    theirs = experiment_options(argparse.Namespace(**options))
    return sorted(k for k in set(mine) | set(theirs)
                  if mine.get(k) != theirs.get(k, p.get_default(k)))


def recorded(out_dir: str) -> dict | None:
    """What the comparison in out_dir recorded of itself, {"options", "commit"}: at its start
    (comparison.json), or at its end (summary.json, for one older than that record); None
    if neither is there."""
    for name in ("comparison.json", "summary.json"):
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            with open(path) as fh:
                return json.load(fh)
    return None


def require_same_options(args, out_dir: str, who: str) -> dict | None:
    """The comparison in out_dir's record (recorded), checked against `args`: exits 2
    naming the options that differ, or if the record cannot be read; None without one."""
    try:
        record = recorded(out_dir)
        differ = [] if record is None else options_differ(args, record["options"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"{who}: the record of {out_dir} cannot be read ({exc})", code=2)
    if differ:
        fail(f"{who}: that comparison ran with other options ({', '.join(differ)}); give "
             f"the same ones, or another --out", code=2)
    return record


def start_record(out_dir: str, args, commit: str) -> dict:
    """comparison.json in out_dir: the options and commit the comparison started with. With
    --resume, the record already there is checked against today's options and returned
    (a comparison from before comparison.json existed gets one now); exits 2 if they
    differ."""
    path = os.path.join(out_dir, "comparison.json")
    images = lab.images()        # the services' code is the image's, not the checkout's
    if args.resume:
        record = require_same_options(args, out_dir, f"--resume {out_dir}")
        if record is not None and os.path.exists(path):
            if record.get("images") not in (None, images):
                print(f"[comparison] warning: the containers' images are {images}, the "
                      f"comparison started with {record['images']}", file=sys.stderr)
            return record
    mine = {"options": experiment_options(args), "commit": commit, "images": images}
    with open(path, "w") as fh:
        json.dump(mine, fh, indent=1)
    return mine


def finished_run(out_dir: str, policy: str, run: int, args) -> dict | None:
    """With --resume: a run of the comparison in out_dir that finished (its result.json is
    there), read back from its raw data; None for a run to play. The directory of a run
    cut off half-way is moved aside (run<k>.interrupted, its logs say why)."""
    run_dir = os.path.join(out_dir, policy, f"run{run}")
    path = os.path.join(run_dir, "result.json")
    if not os.path.exists(path):
        if os.path.isdir(run_dir):
            lab.set_aside(run_dir)
        return None
    try:
        with open(path) as fh:
            recorded = json.load(fh)
        if _seed(recorded, args) != args.seed + run or recorded.get("policy") != policy:
            raise ValueError(f"it played {recorded.get('policy')} on schedule seed "
                             f"{_seed(recorded, args)}, not {policy} on {args.seed + run}")
        return read_back_run(run_dir, recorded, args)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, ConfigError) as exc:
        fail(f"--resume: {run_dir} is not a finished run of this comparison ({exc})", code=2)


def resummarise(out_dir: str) -> int:
    """Every run's figures again from its raw data (request records, profiler history) with
    today's evaluation, and the summary of them, for a comparison that has its summary.json:
    no testbed, no rerun. A pooled comparison is pooled again from its sources."""
    try:
        old, opts = _read_comparison(out_dir)
        if old.get("sources"):
            return pool([s["dir"] for s in old["sources"]], out_dir,
                        any(s.get("as_recorded") for s in old["sources"]))
        per_policy, rewritten = _evaluate_comparison(out_dir, old, opts)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, ConfigError) as exc:
        fail(f"--resummarise {out_dir}: not a comparison's results ({exc})", code=2)
    # written only once every run is evaluated: a run that cannot be read changes nothing
    for path, result in rewritten:
        write_result(path, result)
    tables = summarise(out_dir, opts, per_policy, old["command"], old["commit"], git_commit())
    print(f"[comparison] summary re-evaluated: {os.path.join(out_dir, 'summary.md')}")
    return 0 if tables["accounted"] else 1


def _as_recorded(old: dict, opts) -> dict:
    """A comparison's runs as its summary.json recorded their figures (no raw data to plot)."""
    return {policy: [{"result": {**r, "seed": _seed(r, opts)},
                      "requests": [], "timeline": {}} for r in runs]
            for policy, runs in old["runs"].items()}


def _missing_raw_data(src: str, old: dict) -> str | None:
    for policy, runs in old["runs"].items():
        for r in runs:
            path = os.path.join(src, policy, f"run{r['run']}", "history.sqlite")
            if not os.path.exists(path):
                return path
    return None


def pool(sources: list[str], out_dir: str, as_recorded: bool = False) -> int:
    """Comparisons of the same experiment on different schedules (a later session's runs
    with --first-run) evaluated from their raw data and summarised as one, paired by
    schedule seed, into out_dir. The sources are read, never written. With `as_recorded`, a
    source whose raw data is not here (results/ is not committed; data/ keeps summary.json)
    counts with the per-run figures its summary.json recorded."""
    per_policy: dict[str, list[dict]] = {}
    described = []
    first_opts = None
    today = git_commit()
    for src in sources:
        try:
            old, opts = _read_comparison(src)
            if old.get("sources"):
                fail(f"--resummarise {src}: already pooled; pool its sources "
                     f"({', '.join(s['dir'] for s in old['sources'])})", code=2)
            if first_opts is None:
                first_opts, first_src = opts, src
            differ = sorted(k for k in set(vars(opts)) | set(vars(first_opts))
                            if k not in POOL_FREE_OPTIONS
                            and vars(opts).get(k) != vars(first_opts).get(k))
            if differ:
                fail(f"--resummarise: {src} and {first_src} are different experiments "
                     f"(they differ in {', '.join('--' + k.replace('_', '-') for k in differ)})",
                     code=2)
            missing = _missing_raw_data(src, old)
            recorded_at = old.get("evaluated_at") or old["commit"]
            if missing and not as_recorded:
                fail(f"--resummarise {src}: its raw data is not here ({missing}); "
                     f"--as-recorded pools the per-run figures its summary.json recorded "
                     f"(evaluated at {recorded_at})", code=2)
            evaluated = _as_recorded(old, opts) if missing else \
                _evaluate_comparison(src, old, opts)[0]
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, ConfigError) as exc:
            fail(f"--resummarise {src}: not a comparison's results ({exc})", code=2)
        if per_policy and set(evaluated) != set(per_policy):
            fail(f"--resummarise: {src} ran {', '.join(evaluated)}, the comparisons before "
                 f"it {', '.join(per_policy)}", code=2)
        seeds = {p: sorted(r["result"]["seed"] for r in runs) for p, runs in evaluated.items()}
        if len({tuple(s) for s in seeds.values()}) > 1:
            fail(f"--resummarise {src}: its policies did not run the same schedules "
                 f"({'; '.join(f'{p}: {protocol.spans(s)}' for p, s in seeds.items())})", code=2)
        mine = next(iter(seeds.values()))
        seen = {r["result"]["seed"] for runs in per_policy.values() for r in runs}
        if seen & set(mine):
            fail(f"--resummarise {src}: schedule seeds {protocol.spans(sorted(seen & set(mine)))} "
                 f"are in an earlier source too; runs of one schedule would count twice "
                 f"(run the other with --first-run past them)", code=2)
        for p, runs in evaluated.items():
            per_policy.setdefault(p, []).extend(runs)
        described.append({"dir": src, "command": old["command"],
                          "commit": old["commit"], "seed": opts.seed, "runs": len(mine),
                          "schedules": protocol.spans(mine), "as_recorded": bool(missing),
                          "evaluated_at": recorded_at if missing else today})
    for runs in per_policy.values():
        runs.sort(key=lambda r: r["result"]["seed"])   # run k of every policy: one schedule
    opts = first_opts
    opts.runs = len(next(iter(per_policy.values())))
    opts.policies = list(per_policy)
    os.makedirs(out_dir, exist_ok=True)
    command = (f"python -m experiments.lb_comparison --resummarise "
               f"{' '.join(sources)} --out {out_dir}{' --as-recorded' if as_recorded else ''}")
    tables = summarise(out_dir, opts, per_policy, command, described[0]["commit"], today,
                       sources=described)
    print(f"[comparison] {len(sources)} comparisons pooled, {opts.runs} runs per policy: "
          f"{os.path.join(out_dir, 'summary.md')}")
    return 0 if tables["accounted"] else 1


def main(argv=None) -> int:
    p = parser()
    p.add_argument("--resummarise", metavar="RESULTS", nargs="+",
                   help="evaluate a finished comparison's raw data again (today's figures) "
                        "and rewrite its result.json files and summary; with several "
                        "comparisons of one experiment on different schedules (--first-run) "
                        "and --out, pool them into one summary there; runs nothing")
    p.add_argument("--as-recorded", action="store_true",
                   help="with --resummarise A B --out P: a comparison whose raw data is not "
                        "here (a committed data/ summary) is pooled with the per-run figures "
                        "its summary.json recorded")
    args = p.parse_args(argv)
    if args.as_recorded and len(args.resummarise or ()) < 2:
        fail("--as-recorded is for pooling: --resummarise A B --out P --as-recorded", code=2)
    if args.resummarise:
        if len(args.resummarise) == 1:
            if args.out:
                fail("--resummarise with one comparison rewrites it in place; --out is for "
                     "pooling several", code=2)
            return resummarise(args.resummarise[0])
        if not args.out:
            fail("--resummarise with several comparisons pools them: give --out DIRECTORY "
                 "for the pooled summary", code=2)
        return pool(args.resummarise, args.out, args.as_recorded)
    if args.resume and not args.out:
        fail("--resume continues the comparison in --out DIRECTORY: give it", code=2)
    policies = args.policies
    args.runs = args.runs or (10 if args.paper else 1)
    # a scenario's own default came in with the parse (scenarios.GOVERNED)
    args.phase_seconds = args.phase_seconds or (600.0 if args.paper else DEFAULT_PHASE_S)
    # Everything the runs will use is validated before anything starts.
    try:
        cfg = parse_config_file_data(config_data(args),
                                     config_path(scenarios.base_config_path(args)))
        check_testbed_builds(cfg)
    except ConfigError as exc:
        fail(flag_config_error(exc, FLAG_OF_FIELD), code=2)
    seeds = [args.seed + k for k in range(args.first_run, args.first_run + args.runs)]
    try:
        loadgen.validate_spec(workload_spec(cfg, args, seeds[0]))
    except KeyError as exc:
        fail(f"--scenario {args.scenario}: its workload does not fit the configuration "
             f"(it has no {exc.args[0]})", code=2)
    except ValueError as exc:
        fail(f"--scenario {args.scenario}: workload: {exc}", code=2)
    require_testbed("the comparison")
    out_dir = lab.results_dir(args.out)
    command = lab.invocation("experiments.lb_comparison", argv).strip()
    per_run_s = 3 * args.phase_seconds + scenarios.longest_request_s(args) + 40
    print(f"[comparison] scenario {args.scenario}, {len(policies)} policies x {args.runs} "
          f"runs on {protocol.describe_seeds(seeds)}, about "
          f"{len(policies) * args.runs * per_run_s / 60:.0f} min; results in {out_dir}",
          flush=True)
    per_policy: dict[str, list[dict]] = {p: [] for p in policies}
    commit = git_commit()       # the code that runs: taken now, a commit may land meanwhile
    started = start_record(out_dir, args, commit)["commit"]
    if started != commit:
        commit = f"{started}, resumed at {commit}"
    # a termination signal unwinds like ^C: the stack and any antagonist come down
    signal.signal(signal.SIGTERM, _interrupt)
    took: list[float] = []              # wall seconds of each run played here
    total, count = len(policies) * args.runs, 0
    try:
        for run in range(args.first_run, args.first_run + args.runs):
            order = protocol.run_order(policies, run)
            for position, policy in enumerate(order):
                count += 1
                done = finished_run(out_dir, policy, run, args) if args.resume else None
                if done is not None:
                    print(f"[{policy} run {run}] finished before; read back", flush=True)
                else:
                    print(f"[comparison] {count} of {total}: {policy} run {run}; "
                          f"{protocol.eta_text(took, total - count + 1, per_run_s)}",
                          flush=True)
                    began = time.time()
                per_policy[policy].append(done or run_one(policy, run, args, out_dir,
                                                          position))
                if done is None:
                    took.append(time.time() - began)
    except KeyboardInterrupt:
        # the stack of the run under way came down on its way out (Stack.__exit__)
        print(f"\n[comparison] interrupted; the runs that finished are in {out_dir}",
              file=sys.stderr, flush=True)
        return 130
    tables = summarise(out_dir, args, per_policy, command, commit)
    print("\nTable II: load balancing level among the servers\n" + tables["table2"])
    print("Table III: client side\n" + tables["table3"])
    print(f"[comparison] summary: {os.path.join(out_dir, 'summary.md')}")
    return 0 if tables["accounted"] else 1


def _interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
