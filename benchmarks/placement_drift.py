"""Benchmark: re-planning under drifting traffic (placement/partitioner.py replan(), the real
function).

    .venv/bin/python -m benchmarks.placement_drift [--services 60] [--servers 8] [--steps 12]
        [--sigma 0.3] [--max-moved 0.1] [--seeds 1,2,3] [--time-limit 5] [--out results/bench]

A generated graph per seed (benchmarks.placement.generated: a call tree with heavy and light
edges over 4 switches); at every step each edge's traffic is multiplied by exp(N(0, sigma))
(a log-normal random walk, the same walk for a seed), and the current placement is
re-planned with replan(max_moved_share). Per step: the share of units the re-plan moved,
its cost over a fresh plan's (plan() from nothing, the re-plan's own first step) and the
fresh plan's gap to the exact program's bound. The first placement is a fresh plan of the
first traffic. Results: placement_drift.json and placement_drift.md in --out.
"""
from __future__ import annotations

import math
import os
import random
import statistics
import sys

from common import lab
from common.cli import ArgumentParser, bounded, number_list, non_negative_float
from common.markdown import table
from common.procs import git_commit
from benchmarks.placement import generated
from placement.model import Problem
from placement.partitioner import moved, plan, replan

DEFAULT_OUT = os.path.join("results", "bench")


def drifted(rng: random.Random, sigma: float,
            edges: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Each edge's traffic times exp(N(0, sigma))."""
    return {e: w * math.exp(rng.gauss(0.0, sigma)) for e, w in edges.items()}


def run(services: int, servers: int, steps: int, sigma: float, max_moved: float, seed: int,
        time_limit_s: float) -> list[dict]:
    base = generated(services, servers, seed)
    rng = random.Random(seed)
    edges = dict(base.edges)
    current = plan(base, near="s1", exact_time_limit_s=time_limit_s).assignment
    rows = []
    for step in range(1, steps + 1):
        edges = drifted(rng, sigma, edges)
        problem = Problem(base.units, base.hosts, edges=edges, anchors=base.anchors,
                          switch_position=base.switch_position)
        result = replan(problem, current, max_moved, near="s1",
                        exact_time_limit_s=time_limit_s)
        capped = result.method.startswith("re-plan")
        fresh_cost = result.attempts[-1]["cost"] if capped else result.cost
        rows.append({"seed": seed, "step": step, "moved": moved(current, result.assignment),
                     "moved_share": moved(current, result.assignment) / len(base.units),
                     "capped": capped, "cost": result.cost, "fresh_cost": fresh_cost,
                     "over_fresh": result.cost / fresh_cost - 1 if fresh_cost else 0.0,
                     "bound": result.bound,
                     "stay_cost": problem.cost(current),
                     "over_bound": None if not result.bound else result.cost / result.bound - 1})
        print(f"[drift] seed {seed} step {step}/{steps}: moved {rows[-1]['moved']}, cost "
              f"{100 * rows[-1]['over_fresh']:+.1f} % against a fresh plan", flush=True)
        current = result.assignment
    return rows


def markdown(doc: dict) -> str:
    rows = doc["rows"]
    a = doc["args"]
    over = [r["over_fresh"] for r in rows]
    shares = [r["moved_share"] for r in rows]
    stay = [r["stay_cost"] / r["fresh_cost"] - 1 for r in rows if r["fresh_cost"]]
    return "\n".join([
        "# Placement under drifting traffic", "",
        f"Command: `{doc['command']}` at commit {doc['commit']}", "",
        f"{a['services']} services on {a['servers']} servers, {a['steps']} steps of "
        f"log-normal drift (sigma {a['sigma']}) per seed, seeds {a['seeds']}, at most "
        f"{100 * a['max_moved']:.0f} % of the units moved per re-plan.", "",
        table(["", "mean", "median", "max"],
              [["units moved per re-plan", f"{100 * statistics.mean(shares):.1f} %",
                f"{100 * statistics.median(shares):.1f} %", f"{100 * max(shares):.1f} %"],
               ["re-plan's cost over a fresh plan's", f"{100 * statistics.mean(over):.1f} %",
                f"{100 * statistics.median(over):.1f} %", f"{100 * max(over):.1f} %"],
               ["staying put, over a fresh plan's", f"{100 * statistics.mean(stay):.1f} %",
                f"{100 * statistics.median(stay):.1f} %", f"{100 * max(stay):.1f} %"]],
              "lrrr", compact=True),
        "", f"Re-plans at the cap (the fresh plan moved more): "
            f"{sum(r['capped'] for r in rows)} of {len(rows)}.", ""])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = ArgumentParser(prog="python -m benchmarks.placement_drift",
                        description="Re-planning under drifting traffic: moves and cost.")
    ap.add_argument("--services", type=bounded(int, 4, 400), default=60)
    ap.add_argument("--servers", type=bounded(int, 2, 256), default=8)
    ap.add_argument("--steps", type=bounded(int, 1, 1000), default=12)
    ap.add_argument("--sigma", type=bounded(float, 0.0, 3.0), default=0.3)
    ap.add_argument("--max-moved", type=bounded(float, 0.0, 1.0), default=0.1)
    ap.add_argument("--seeds", type=number_list(int, 1, 10**6), default=[1, 2, 3])
    ap.add_argument("--time-limit", type=non_negative_float, default=5.0,
                    help="seconds for the exact program in each plan (default 5)")
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    rows = [r for seed in args.seeds
            for r in run(args.services, args.servers, args.steps, args.sigma,
                         args.max_moved, seed, args.time_limit)]
    doc = {"benchmark": "placement_drift", "commit": git_commit(),
           "command": lab.invocation("benchmarks.placement_drift", argv, sudo=False),
           "args": {k: getattr(args, k) for k in ("services", "servers", "steps", "sigma",
                                                  "max_moved", "seeds", "time_limit")},
           "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    lab.write_results(args.out, "placement_drift", doc, lambda: markdown(doc), default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
