"""Every experiment, benchmark and analysis the project runs, listed once: what each
measures, what it needs, where its method and figures are written up.

    .venv/bin/python -m experiments          # the experiments and analyses
    .venv/bin/python -m benchmarks --list    # the benchmarks

- Entry: one runnable module (`python -m <module>`);
- ENTRIES: all of them; HELPERS: modules with a command line that other runs start
  (inside a testbed host, or as a step of a run), not run by hand;
- of_kind, listing: the entries of a kind, and as text.

tests/unit/test_registry.py fails when a module under experiments/ or benchmarks/ has a
command line and is in neither list, so a new one cannot go unlisted.
"""
from __future__ import annotations

from dataclasses import dataclass

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
          "the results tables of README.md and docs/evaluation.md, from data/eval-N",
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
