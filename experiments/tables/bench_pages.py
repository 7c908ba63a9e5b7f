"""docs/profiler.md's and docs/haproxy.md's results tables, from the benchmarks' summaries
committed under data/bench/ (each JSON names its command and the commit that ran).

- period_table: what one profiler period costs (benchmarks.profiler_period), every
  configuration of the default run (data/bench/profiler_period.json) then of the paced
  one (profiler_period-paced.json);
- haproxy_table: HAProxy beside the OpenFlow path, one burst of ui objects per path, the
  means over the rounds (benchmarks.haproxy, data/bench/haproxy.json);
- probes_table: what GET /probes costs the agents and services against nsenter + curl
  (benchmarks.probes), each figure run by run (data/bench/probes-92d08bd.json, the
  first run, and data/bench/probes.json, the second);
- BLOCKS: where they go.
"""
from __future__ import annotations

import math

from common.markdown import number, table
from experiments.tables.block import Block

# ------------------------------------------------------------------ the profiler's period

PERIOD_SOURCES = ("bench/profiler_period.json", "bench/profiler_period-paced.json")
PREDICTOR_NAMES = {"rm": "RM", "arma": "ARMA"}


def _predictor(result: dict, setup: dict) -> str:
    """"RM, w = 10": the predictor and its window (a run warms up over one window), and
    whether each period took its real length."""
    text = f"{PREDICTOR_NAMES.get(result['predictor'], result['predictor'])}, " \
           f"w = {result['warmup_periods']}"
    return text + (f", paced ({number(setup['period_s'], 0)} s per period)"
                   if setup.get("paced") else "")


def _fits(result: dict) -> str:
    """ARMA's fits done against those due in the measured periods, and the fit worker's
    CPU (unpaced runs give the worker almost no wall time: only a paced run's count
    tells)."""
    arma = result.get("arma")
    if not arma:
        return "–"
    worker = arma.get("worker_cpu_share")
    return f"{arma['fits_done']:,} / {arma['fits_due']:,}" + \
        ("" if worker is None else f", {100 * worker:.0f} %")


def _period_row(result: dict, setup: dict) -> list[str]:
    """One configuration's cells (setup: its run's, which says whether it was paced)."""
    period = result["period_cpu_ms"]
    return [number(result["size"], 0), number(result["active_flows"], 0),
            _predictor(result, setup), number(result["records_per_period"]["mean"], 0),
            f"{number(period['mean'])} / {number(period['p95'])}",
            number(result["report_cpu_ms"]["mean"]), f"{100 * result['core_share']:.1f} %",
            _fits(result)]


def _period_runs(runs: tuple[dict, ...]) -> str:
    """How many periods each run measured, on what machine, at which code."""
    parts = [f"{'paced' if r['setup'].get('paced') else 'unpaced'}: "
             f"{r['setup']['periods']} periods" for r in runs]
    cpus = sorted({r["machine"]["cpu_count"] for r in runs})
    commits = list(dict.fromkeys(r["commit"] for r in runs))
    return (f"Means over the measured periods ({', '.join(parts)}) after one window's "
            f"warm-up, {runs[0]['setup']['servers']} servers; "
            f"{'/'.join(map(str, cpus))}-core machine; code at {', '.join(commits)}.")


def period_table(*runs: dict) -> str:
    """A row per configuration of each run, in the runs' order: the flow records reported a
    period, the period's CPU, the reports' CPU, both as a share of a core over the period,
    and ARMA's fits."""
    rows = [_period_row(result, run["setup"]) for run in runs for result in run["results"]]
    return table(["microservices", "active flows", "predictor", "flow records / period",
                  "period CPU ms (mean / p95)", "report CPU ms", "share of a core",
                  "ARMA fits done / due, worker CPU"], rows, "rrlrrrrl") + "\n" + \
        f"*Share of a core*: period and report CPU over the " \
        f"{number(runs[0]['setup']['period_s'], 0)} s period. {_period_runs(runs)}\n"


# ---------------------------------------------------------------------------- HAProxy

HAPROXY_SOURCES = ("bench/haproxy.json",)


def _controller_cpu(row: dict) -> float | None:
    """The controller's CPU seconds: ryu_cpu_s in the committed run, controller_cpu_s in the
    benchmark's later summaries."""
    return row.get("ryu_cpu_s", row.get("controller_cpu_s"))


def haproxy_table(run: dict) -> str:
    """A row per path (the VIP, then HAProxy in each mode): requests answered, the burst's
    length and rate, each process's CPU seconds over one burst, HAProxy's against the
    servers'; means over the rounds."""
    rows = [[r["path"], r["ok"], number(r["seconds"]), number(r["mb_per_s"]),
             number(r["haproxy_cpu_s"], 2), number(_controller_cpu(r), 2),
             number(r["ovs_cpu_s"], 2), number(r["servers_cpu_s"], 2),
             number(r["haproxy_vs_servers"], 3)] for r in run["summary"]]
    s = run["settings"]
    return table(["Path", "Answered", "Burst (s)", "MB/s", "HAProxy CPU s",
                  "ryu-manager CPU s", "ovs-vswitchd CPU s", "Servers' CPU s",
                  "HAProxy / servers"], rows, "llrrrrrrr") + "\n" + (
        f"Means over {s['rounds']} rounds; a burst: {s['objects']} ui objects of "
        f"{number(s['size'] / 1e6, 0)} MB per client, {s['parallel']} at a time; CPU seconds "
        f"over one burst; the controller under {s['policy']}; code at {run['commit']}.") + "\n"


# ------------------------------------------------------------------------ GET /probes

SIGNIFICANT = 2


def significant(value: float | None, digits: int = SIGNIFICANT) -> str:
    """A figure to `digits` significant digits (the benchmark's clocks are no better), in
    plain notation."""
    if value is None:
        return "–"
    if value == 0:
        return "0"
    return number(value, max(0, digits - 1 - math.floor(math.log10(abs(value)))))


def _per_run(runs: tuple[dict, ...], figure) -> str:
    """One figure of every run, separated by "; " (figure: run -> its text)."""
    return "; ".join(figure(r) for r in runs)


def _quantiles(found: dict) -> str:
    """"2.4 / 8.2": a p50 and p99 the benchmark measured."""
    return f"{significant(found['p50'])} / {significant(found['p99'])}"


def probes_table(*runs: dict) -> str:
    """GET /probes against reading through nsenter + curl, each run's figure in turn."""
    def spawned(r: dict) -> str:
        per_reading = r["nsenter_curl"]["spawned_cpu_ms_per_reading"]
        return significant(r["sequential"]["instances_per_answer"] * per_reading)
    names = " / ".join(f"run {k}" for k in range(1, len(runs) + 1))
    rows = [
        ["one answer, wall at the client p50 / p99",
         _per_run(runs, lambda r: _quantiles(r["sequential"]["client_wall_ms"])) + " ms",
         "–"],
        ["the agent's own time for it (`took_ms`) p50 / p99",
         _per_run(runs, lambda r: _quantiles(r["sequential"]["agent_took_ms"])) + " ms", "–"],
        ["one reading, wall p50 / p99", "–",
         _per_run(runs, lambda r: _quantiles(r["nsenter_curl"]["wall_ms_per_reading"]))
         + " ms"],
        ["agent CPU per answer",
         _per_run(runs, lambda r: significant(r["sequential"]["agent_cpu_ms_per_answer"]))
         + " ms",
         _per_run(runs, spawned) + " ms (" + _per_run(runs, lambda r: significant(
             r["nsenter_curl"]["spawned_cpu_ms_per_reading"])) + " ms per reading, in the "
         "processes it spawns)"],
        ["service CPU per reading (its container's cgroup)",
         _per_run(runs, lambda r: significant(r["sequential"]["service_cpu_ms_per_reading"]))
         + " ms", "the same request"],
        ["every agent asked at a steady rate: extra CPU per agent",
         _per_run(runs, lambda r: significant(
             r["steady"]["agent_extra_cpu_percent_of_a_core"]["mean"])) + " % of a core",
         "–"],
        ["the same: extra CPU per service instance",
         _per_run(runs, lambda r: significant(
             r["steady"]["service_extra_cpu_percent_of_a_core_per_instance"]["mean"]))
         + " % of a core", "–"],
    ]
    steady = "; ".join(f"run {k}: {r['steady']['agents']} agents at "
                       f"{number(r['steady']['rate_per_s'], 0)} answers/s for "
                       f"{number(r['steady']['seconds'], 0)} s, "
                       f"{r['sequential']['instances_per_answer']} instances an answer, "
                       f"code at {r['commit']}" for k, r in enumerate(runs, start=1))
    return table(["figure", f"GET /probes, {names}", f"nsenter + curl, {names}"], rows,
                 "lrr") + "\n" + f"{steady}.\n"


BLOCKS: tuple[Block, ...] = (
    Block("docs/profiler.md", "profiler period cost", PERIOD_SOURCES, period_table),
    Block("docs/haproxy.md", "HAProxy beside the OpenFlow path", HAPROXY_SOURCES,
          haproxy_table),
    Block("docs/profiler.md", "GET /probes cost", ("bench/probes-92d08bd.json",
                                                   "bench/probes.json"), probes_table),
)
