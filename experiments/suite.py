"""The evaluation suite: every scenario of the comparison with the baselines
docs/evaluation.md names for it, then one table over all of them.

    sudo .venv/bin/python -m experiments.suite --seed 1000 --runs 5 --out results/eval
    .venv/bin/python -m experiments.suite --tabulate results/eval     # the tables again

Holds SUITE (cell -> the policies it runs; a cell is a scenario, or one of VARIANTS: a
scenario with flags of its own), PRACTICAL (the practitioners' baselines; PROXIES, those
outside the controller),
HELD_OUT_SHARES (the unequal scenario's servers), the runner (comparison_args,
run_comparison: one lb_comparison per scenario, its runs interleaved and paired by
schedule; check_finished: a scenario finished with the same options is not run again, and
the one an interrupted suite was in resumes at its run: lb_comparison --resume), holm, and
the tabulation: per scenario and policy the CPU STDEV across servers, each class's p50, p95
and p99 RT and failed requests and the same over all requests, with 95 % intervals, and
malb against every other policy (paired t-test, Holm-corrected over the scenario's
policies for the CPU figure), written to suite.md and suite.json.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from common import lab
from common.cli import ArgumentParser, choice_list, fail, number_list, positive_float, \
    positive_int, require_testbed
from common.markdown import number, table
from common.paths import WORK
from common.procs import ROOT, git_commit
from experiments import lb_comparison, protocol, report, scenarios, significance, workload

PROXIES = ("haproxy-leastconn", "haproxy-agent", "nginx-leastconn")
PRACTICAL = ("lc", "p2c", "prequal", *PROXIES)
SUITE = {
    "paper": ("srr", "ln", *PRACTICAL, "haproxy-roundrobin", "malb-paper", "malb"),
    "heavy-tail": ("srr", *PRACTICAL, "malb-paper", "malb"),
    "antagonist": ("srr", *PRACTICAL, "malb-paper", "malb"),
    "unequal": ("srr", "wrr", "wlc", *PRACTICAL, "malb-paper", "malb"),
    "callgraph": ("srr", *PRACTICAL, "malb-paper", "malb"),
    "hotel": ("srr", *PRACTICAL, "malb-paper", "malb"),
    "social": ("srr", *PRACTICAL, "malb-paper", "malb"),
    # the switch balances the short flows of the policies that can hand them to it (MALB's
    # rules); SRR keeps a decision per flow, HAProxy is outside the controller
    "callgraph-dataplane": ("srr", "haproxy-leastconn", "malb-paper", "malb"),
    # DeathStarBench with the switch balancing MALB's short flows: the proxies beside them
    # (the controller's own baselines would keep a decision per flow here; they run in the
    # tracker cells)
    "hotel-dataplane": (*PROXIES, "malb-paper", "malb"),
    "social-dataplane": (*PROXIES, "malb-paper", "malb"),
    # a decision per connection, translated by the switch's connection tracker: every
    # policy of the controller at its cheapest, beside the proxies
    "hotel-tracker": ("srr", *PRACTICAL, "malb-paper", "malb"),
    "social-tracker": ("srr", *PRACTICAL, "malb-paper", "malb"),
}
# cells that are a scenario with flags of their own: cell -> (scenario, flags)
VARIANTS = {"callgraph-dataplane": ("callgraph", ("--dataplane",)),
            **{f"{s}-{mode}": (s, (f"--{mode}",)) for s in ("hotel", "social")
               for mode in ("dataplane", "tracker")}}
# the shares the unequal scenario is evaluated on: none of its design runs used them
HELD_OUT_SHARES = (0.5, 0.4, 0.3, 0.2)


def phase_seconds(cell: str, opts) -> float:
    """--phase-seconds as given, else the scenario's own default, else the comparison's."""
    scenario = VARIANTS.get(cell, (cell, ()))[0]
    return opts.phase_seconds or scenarios.SCENARIOS[scenario].defaults.get(
        "phase_seconds", workload.DEFAULT_PHASE_S)


def comparison_args(cell: str, opts) -> list[str]:
    scenario, flags = VARIANTS.get(cell, (cell, ()))
    args = ["--scenario", scenario, "--policies", ",".join(SUITE[cell]),
            "--runs", str(opts.runs), "--seed", str(opts.seed),
            "--phase-seconds", f"{phase_seconds(cell, opts):g}",
            "--out", os.path.join(opts.out, cell), "--resume", *flags]
    if scenario == "unequal":
        args += ["--server-cpu", ",".join(f"{x:g}" for x in opts.unequal_shares)]
    return args


def check_finished(scenario: str, opts) -> bool:
    """Whether the scenario's comparison is there, finished, with the options this suite
    would give it; exits 2 if it ran with others (two experiments in one table)."""
    out = os.path.join(opts.out, scenario)
    if not os.path.exists(os.path.join(out, "summary.json")):
        return False
    args = lb_comparison.parser().parse_args(comparison_args(scenario, opts))
    lb_comparison.require_same_options(args, out, f"--out {opts.out}: {scenario}")
    return True


def run_comparison(args: list[str]) -> int:
    """One lb_comparison, waited for to the end: a ^C reaches it too (one process group)
    and it takes its testbed down before it exits, and a SIGTERM to the suite is passed
    on to it, so the suite never leaves a testbed half up or a comparison running."""
    child = subprocess.Popen([sys.executable, "-m", "experiments.lb_comparison", *args],
                             cwd=ROOT)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.terminate())
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                continue
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(opts) -> int:
    for scenario in opts.scenarios:
        out = os.path.join(opts.out, scenario)
        if check_finished(scenario, opts):
            print(f"[suite] {scenario}: done already ({out})", flush=True)
            continue
        args = comparison_args(scenario, opts)
        print(f"[suite] {scenario}: python -m experiments.lb_comparison {' '.join(args)}",
              flush=True)
        code = run_comparison(args)
        # 1 with a summary: a request was not accounted for, which the summary says; 1
        # without one: the comparison did not run (the testbed refused, for one)
        missing = not os.path.exists(os.path.join(out, "summary.json"))
        if code not in (0, 1) or missing:
            print(f"[suite] {scenario}: the comparison ended with {code}"
                  f"{' and no summary' if missing else ''}; stopping",
                  file=sys.stderr, flush=True)
            return code or 1
    return tabulate(opts.out)


def holm(pvalues: dict[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    order = sorted(pvalues, key=pvalues.get)
    m, out, running = len(order), {}, 0.0
    for i, key in enumerate(order):
        running = max(running, min(1.0, (m - i) * pvalues[key]))
        out[key] = running
    return out


def _cell(entry: dict, policy: str) -> str:
    return significance.mean_ci_text(entry["policies"].get(policy))


def tabulate(out_dir: str) -> int:
    """suite.md and suite.json from the scenarios' summaries under out_dir."""
    found = {}
    for scenario in SUITE:
        path = os.path.join(out_dir, scenario, "summary.json")
        if os.path.exists(path):
            try:
                with open(path) as fh:
                    found[scenario] = d = json.load(fh)
                d["statistics"]["cpu_stdev"], d["runs"], d["commit"]    # what the tables read
            except (OSError, ValueError, KeyError, TypeError) as exc:
                fail(f"--tabulate {out_dir}: {path} is not a comparison's summary ({exc!r})",
                     code=2)
    if not found:
        fail(f"--tabulate {out_dir}: no scenario's summary.json under it", code=2)
    policies = [p for p in dict.fromkeys(p for s in SUITE.values() for p in s)
                if any(p in d["runs"] for d in found.values())]
    names = report.POLICY_NAMES
    cpu_rows = []
    verdicts, tables = [], {}
    for scenario, d in found.items():
        cpu = d["statistics"]["cpu_stdev"]
        cpu_rows.append([scenario, *(_cell(cpu, p) for p in policies)])
        vs = cpu["vs"]
        adjusted = holm({p: v["p"] for p, v in vs.items() if v["p"] is not None})
        rows = {}
        for p, v in vs.items():
            rows[p] = {**v, "p_holm": adjusted.get(p)}
        practical = [p for p in vs if (p in PRACTICAL or p in ("wrr", "wlc"))
                     and cpu["policies"][p]["mean"] is not None]
        best = min(practical, key=lambda p: cpu["policies"][p]["mean"]) if practical else None
        srr = vs.get("srr")
        seeds = sorted({r["seed"] for rs in d["runs"].values() for r in rs})
        tables[scenario] = {"cpu_stdev": cpu, "vs": rows, "best_practical": best,
                           "seeds": protocol.describe_seeds(seeds), "commit": d["commit"],
                           "command": d["command"], "accounted": d["accounted"],
                           "classes": {k: e for k, e in d["statistics"].items() if k.endswith(
                           ("_rt_p50", "_rt_p95", "_rt_p99", "_tp", "_failed"))
                               or k == "balancing_cpu"}}
        verdicts.append(_sentence(scenario, srr, best, rows.get(best) if best else None,
                                  d["statistics"], names))
    md = ["# The evaluation suite: CPU STDEV across servers (%), mean ± 95 % interval", "",
          table(["scenario", *(names.get(p, p) for p in policies)], cpu_rows,
                "l".ljust(len(policies) + 1, "r"), compact=True).rstrip("\n"), "",
          "## MALB (ours) against the others, per scenario", ""]
    for scenario, t in tables.items():
        shown = [p for p in policies if p in t["cpu_stdev"]["policies"]]
        md += [f"### {scenario}", "", f"{t['seeds']}; commit {t['commit']}; every request "
               f"accounted for: {'yes' if t['accounted'] else 'NO'}", "",
               f"`{t['command']}`", "",
               table(["against", "CPU STDEV difference", "ratio", "95 % interval", "p",
                      "p (Holm)"],
                     [[names.get(p, p), number(v["diff"]),
                       f"{number(None if v['ratio'] is None else 100 * v['ratio'])} %",
                       f"± {number(v['ci'])}", number(v["p"], 3), number(v["p_holm"], 3)]
                      for p, v in t["vs"].items()], "lrrrrr", compact=True),
               "p50, p95 and p99 RT per class and over all requests (ms; video: mean "
               "throughput, kB/s), failed requests and balancing CPU (s per 1,000 "
               "requests), mean ± 95 %:", "",
               table(["class", *(names.get(p, p) for p in shown)],
                     [[entry["label"], *(_cell(entry, p) for p in shown)]
                      for entry in t["classes"].values()],
                     "l".ljust(len(shown) + 1, "r"), compact=True)]
    md += ["## In a sentence per scenario", "", *verdicts, ""]
    lab.write_results(out_dir, "suite", {"tabulated_at": git_commit(), "scenarios": tables},
                      "\n".join(md), echo=False)
    print("\n".join(md[:3]))         # the title and the CPU table
    print(f"[suite] tables: {os.path.join(out_dir, 'suite.md')}")
    return 0 if all(t["accounted"] for t in tables.values()) else 1


def _sentence(scenario: str, srr: dict | None, best: str | None, vs_best: dict | None,
              stats: dict, names: dict) -> str:
    """Where malb stands in the scenario, from the figures: against SRR, against the best
    practical baseline, and any class whose p99 RT it makes significantly worse."""
    parts = []
    if srr and srr["ratio"] is not None:
        parts.append(f"CPU STDEV {100 * srr['ratio']:+.1f} % against SRR ({srr['verdict']}, "
                     f"p = {number(srr['p'], 3)})")
    if best and vs_best and vs_best["ratio"] is not None:
        held = vs_best["p_holm"] is not None and vs_best["p_holm"] < significance.ALPHA
        parts.append(f"{100 * vs_best['ratio']:+.1f} % against the best practical baseline, "
                     f"{names.get(best, best)} ({vs_best['verdict']}; Holm "
                     f"{'holds' if held else 'does not hold'} it)")
    worse = []
    for key, e in stats.items():
        others = {p: v for p, v in e["policies"].items()
                  if p != significance.CANDIDATE and v["mean"] is not None}
        if key.endswith("_rt_p99") and others:
            best_p = min(others, key=lambda p: others[p]["mean"])
            if e["vs"].get(best_p, {}).get("verdict") == "significantly worse":
                worse.append(f"{e['label']} (best: {names.get(best_p, best_p)})")
    parts.append("no class's p99 RT significantly worse than the best baseline's" if not
                 worse else "p99 RT significantly worse than the best baseline's for: " +
                 ", ".join(worse))
    return f"- **{scenario}**: MALB (ours) " + "; ".join(parts) + "."


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m experiments.suite",
                       description="Every scenario with its baselines, then one table.")
    p.add_argument("--seed", type=int, default=protocol.EVALUATION.start,
                   help="run k plays seed + k (default %(default)s: the first block of the "
                        "evaluation range; docs/evaluation.md keeps a ledger of the blocks "
                        "used)")
    p.add_argument("--runs", type=positive_int, default=5)
    p.add_argument("--phase-seconds", type=positive_float,
                   help="each scenario's phases (default: the scenario's own, 60 s for the "
                        f"DeathStarBench ones, else {workload.DEFAULT_PHASE_S:g})")
    p.add_argument("--scenarios", type=choice_list(tuple(SUITE)), default=list(SUITE))
    p.add_argument("--unequal-shares", type=number_list(float, lo=0.01, hi=64, lo_open=True),
                   default=list(HELD_OUT_SHARES),
                   metavar="CORES", help="the unequal scenario's servers (default: the "
                                         "held-out 0.5,0.4,0.3,0.2)")
    p.add_argument("--out", help="results directory (default results/suite-<seed>)")
    p.add_argument("--tabulate", metavar="DIR", help="only write the tables of a suite's "
                                                     "results")
    opts = p.parse_args(argv)
    if opts.tabulate:
        return tabulate(opts.tabulate)
    opts.out = opts.out or os.path.join(WORK, "results", f"suite-{opts.seed}")
    # before a comparison is started and refused; each comparison takes the lock itself
    require_testbed("the evaluation suite", hold=False)
    os.makedirs(opts.out, exist_ok=True)
    return run(opts)


if __name__ == "__main__":
    sys.exit(main())
