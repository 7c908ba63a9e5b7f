"""Every experiment, benchmark and analysis the project runs, listed once: what each
measures, what it needs, where its method and figures are written up.

    .venv/bin/python -m experiments list              # the experiments and analyses
    .venv/bin/python -m experiments run suite --help  # one of them, by name
    .venv/bin/python -m benchmarks list               # the benchmarks
    .venv/bin/python -m benchmarks run placement ...

- Entry: one runnable module (`python -m <module>`);
- ENTRIES: all of them; HELPERS: modules with a command line that other runs start
  (inside a testbed host, or as a step of a run), not run by hand;
- of_kind, listing, find: the entries of a kind, as text, and one by name;
- command_line: `list` and `run <name> [its arguments]`, the command line of
  `python -m experiments` and `python -m benchmarks`.

tests/unit/test_registry.py fails when a module under experiments/ or benchmarks/ has a
command line and is in neither list, so a new one cannot go unlisted.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from common.cli import ArgumentParser

KINDS = ("experiment", "analysis", "benchmark")
TESTBED = "root and the testbed (OVS, Docker, Mininet)"
NOTHING = "no root, no testbed"


@dataclass(frozen=True)
class Entry:
    module: str         # python -m <module>
    kind: str           # one of KINDS
    what: str           # what it measures or makes, one line
    needs: str          # TESTBED, NOTHING, or what else
    doc: str            # the page (and section) that writes up its method and figures
    in_make_bench: bool = False   # `make bench` (python -m benchmarks) runs it


ENTRIES: tuple[Entry, ...] = (
    # experiments: on the testbed, against baselines in the same run
    Entry("experiments.lb_comparison", "experiment",
          "the balancing policies on one workload (the paper's Scenario 2 and beyond), "
          "interleaved runs, clients' times, balance, balancing CPU", TESTBED,
          "docs/experiments.md"),
    Entry("experiments.suite", "experiment",
          "every scenario of the comparison with its baselines, then one table: the "
          "evaluations of docs/evaluation.md", TESTBED, "docs/evaluation.md"),
    Entry("experiments.placement_comparison", "experiment",
          "placements (spread, random, greedy, ours under the traffic and the latency "
          "objective, exact) moved live and measured end to end", TESTBED,
          "docs/placement.md#latest-figures"),
    Entry("experiments.slo_energy", "experiment",
          "SLO-driven frequency against the kernel's governors: SLO held, energy per "
          "request", TESTBED, "docs/slo.md"),
    Entry("experiments.faults", "experiment",
          "the fault suite: components killed, hung, starved and restarted under load",
          TESTBED, "docs/reliability.md"),
    Entry("experiments.soak", "experiment",
          "the whole stack under a steady load for a long while, everything that could "
          "grow sampled", TESTBED, "docs/reliability.md"),
    Entry("experiments.profiling_accuracy", "experiment",
          "the paper's Scenario 1: RM and ARMA prediction error per microservice and phase "
          "(live, or analysed from a recorded history)", TESTBED + " (live); "
          + NOTHING + " (analyse)", "docs/experiments.md#scenario-1-profiling-accuracy"),
    # models and analyses: no testbed
    Entry("experiments.lb_model", "analysis",
          "a fluid model of the comparison that drives the real policy and profiler code",
          NOTHING, "docs/experiments.md"),
    Entry("experiments.placement_model", "analysis",
          "a queueing model of end-to-end time under a placement: the latency objective's "
          "price on design seeds", NOTHING, "docs/placement.md#the-latency-objective"),
    Entry("experiments.decision_audit", "analysis",
          "how right the least-load decisions of a comparison's run were", NOTHING,
          "docs/experiments.md"),
    Entry("experiments.standing", "analysis",
          "every results table of README.md and docs/, from the summaries under data/",
          NOTHING, "docs/evaluation.md"),
    Entry("experiments.haproxy", "analysis",
          "HAProxy as the outside balancer: the configuration a run gives it, rendered",
          NOTHING, "docs/haproxy.md"),
    Entry("experiments.nginx", "analysis",
          "nginx as a second outside balancer: its configuration, rendered", NOTHING,
          "docs/haproxy.md"),
    Entry("experiments.scenarios", "analysis",
          "the comparison's named workloads; writes the generated call-graph and "
          "DeathStarBench configurations", NOTHING, "docs/experiments.md"),
    # benchmarks: a real code path against a baseline measured in the same run
    Entry("benchmarks.controller", "benchmark",
          "packet-in to flow-mod latency and new-flow rate against simple_switch_13, then "
          "the modes (benchmarks.modes)", TESTBED, "docs/controller.md#benchmark",
          in_make_bench=True),
    Entry("benchmarks.modes", "benchmark",
          "the controller's modes on one topology: direct path, per flow, least load, "
          "select group, drains, SYN flood", TESTBED, "docs/controller.md#benchmark"),
    Entry("benchmarks.controller_alone", "benchmark",
          "the controller alone, driven by an emulated switch, against a minimal NAT app "
          "and simple_switch_13", NOTHING, "docs/controller.md#benchmark"),
    Entry("benchmarks.fastpath", "benchmark",
          "per-flow connection setup on the testbed against the direct path and a minimal "
          "NAT app, in interleaved rounds", TESTBED, "docs/controller.md#benchmark"),
    Entry("benchmarks.breakdown", "benchmark",
          "where a per-flow connection's setup time goes, from captures on one clock",
          TESTBED, "docs/controller.md#benchmark"),
    Entry("benchmarks.core_stalls", "benchmark",
          "the controller core's event-loop stalls at a least-load flow rate, against "
          "another checkout", NOTHING, "docs/controller.md#benchmark"),
    Entry("benchmarks.decision_cost", "benchmark",
          "the least-load decision's cost against the number of pending flows", NOTHING,
          "docs/profiler.md", in_make_bench=True),
    Entry("benchmarks.profiler_period", "benchmark",
          "the profiler's CPU per period at 10 to 1,000 microservices and 20,000 flows",
          NOTHING, "docs/profiler.md", in_make_bench=True),
    Entry("benchmarks.probes", "benchmark",
          "what an agent's GET /probes costs against reading the same counters directly",
          TESTBED, "docs/controller.md#probes-requests-in-flight-and-latency"),
    Entry("benchmarks.concurrency", "benchmark",
          "every HTTP server of the project against N simultaneous clients", TESTBED,
          "docs/reliability.md"),
    Entry("benchmarks.idle_clients", "benchmark",
          "every HTTP server of the project beside 2,000 idle or half-sent connections",
          "the controller, profiler and an agent on loopback (no testbed)",
          "docs/reliability.md#limits-jsonserver"),
    Entry("benchmarks.haproxy", "benchmark",
          "what HAProxy as the outside balancer costs beside the OpenFlow path", TESTBED,
          "docs/haproxy.md"),
    Entry("benchmarks.placement", "benchmark",
          "plan quality and time: generated graphs, small graphs and applications against "
          "the exact program, planted instances", NOTHING, "docs/placement.md#latest-figures"),
    Entry("benchmarks.placement_drift", "benchmark",
          "re-planning under drifting traffic: moves and cost against a fresh plan",
          NOTHING, "docs/placement.md"),
)

# command lines started by other runs, not by hand
HELPERS: tuple[str, ...] = (
    "experiments.loadgen",      # the open-loop workload, inside a client host
    "benchmarks.connect",       # TCP setups from a client host (fastpath, modes)
    "benchmarks.holdconns",     # established connections held through a VIP (modes)
    "benchmarks.pktgen",        # raw new-flow frames at a fixed rate (controller)
)


def of_kind(*kinds: str) -> list[Entry]:
    return [e for e in ENTRIES if e.kind in kinds]


def listing(kinds: tuple[str, ...]) -> str:
    """The entries of those kinds as text, one block each: `python -m module`, what it
    measures, what it needs, where it is written up."""
    lines = []
    for e in of_kind(*kinds):
        lines += [f"python -m {e.module}  ({e.kind})", f"    {e.what}",
                  f"    needs: {e.needs}; written up in {e.doc}"
                  + ("; run by `make bench`" if e.in_make_bench else ""), ""]
    return "\n".join(lines)


def find(name: str, kinds: tuple[str, ...]) -> Entry | None:
    """The entry of those kinds named by its module (`experiments.suite`) or by the
    module's last part (`suite`)."""
    for e in of_kind(*kinds):
        if name in (e.module, e.module.rsplit(".", 1)[-1]):
            return e
    return None


def command_line(prog: str, description: str, kinds: tuple[str, ...],
                 bare: Callable[[], int], argv: list[str] | None = None) -> int:
    """`prog list` prints the entries of those kinds; `prog run <name> [arguments]` runs
    one in this process (its own command line gets the arguments, as with `python -m
    <module>`); `prog` alone calls bare()."""
    ap = ArgumentParser(prog=prog, description=description,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="the same as `list`")
    sub = ap.add_subparsers(dest="action", metavar="{list,run}")
    sub.add_parser("list", help="name each one: what it measures, needs, where written up")
    run = sub.add_parser("run", help="run one by name; the arguments after it are its own "
                                     "(`run <name> --help` shows them)")
    names = [e.module.rsplit(".", 1)[-1] for e in of_kind(*kinds)]
    run.add_argument("name", nargs="?", help="one of: " + ", ".join(names))
    run.add_argument("arguments", nargs=argparse.REMAINDER,
                     help="passed to its command line")
    args = ap.parse_args(argv)
    if args.list or args.action == "list":
        print(listing(kinds))
        return 0
    if args.action != "run":
        return bare()
    entry = find(args.name, kinds) if args.name else None
    if entry is None:
        said = f"no {' or '.join(kinds)} named {args.name!r}" if args.name else "name one"
        run.error(f"{said}; one of: {', '.join(names)}")
    # as `python -m <module> <arguments>` would: a module that reads sys.argv (to record
    # the command that made its results) must see its own line, not `run <name>`
    saved, sys.argv = sys.argv, [entry.module, *args.arguments]
    try:
        return importlib.import_module(entry.module).main(args.arguments)
    finally:
        sys.argv = saved
