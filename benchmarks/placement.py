"""Benchmark: the placement partitioner (placement/partitioner.py plan(), the real function).

    .venv/bin/python -m benchmarks.placement [--sizes 10,100,1000] [--servers 4,16,64]
                                             [--small 24] [--apps configs/bookinfo.yaml,...]
                                             [--planted-sizes 200,1000,5000,20000]
                                             [--caps 0.5,0.6,0.8,1.0] [--out results/bench]

1. Plan time and cost for generated graphs of 10, 100 and 1000 services on 4, 16 and 64
   servers (chained over 4 switches, capacities at 60 % of the demand with headroom),
   against the baselines' cost (spread, random, greedy network-aware) in the same run.
2. Optimality: on ``--small`` random graphs of 5 to 10 units, the gap between plan()
   without its exact step (METIS, mapping, refinement, the greedy candidate; time limit 0)
   and the optimum the exact program (placement/milp.py, HiGHS) proves, and plan()'s own
   answer (which adds that program). Graphs of up to 400 units in part 1 get plan()'s bound
   and gap too.
3. Planted instances of --planted-sizes units (planted()): a placement close to a proven
   bound built in, where the bound holds at any size; plan()'s gap to it and its time.
4. Applications: each --apps configuration's call graph under a request rate at its entry
   services that makes its CPU demand APP_DEMAND_SHARE of its servers' CPU
   (placement/apps.py expected_graph; a configuration's `# benchmark-mix:` line, if any,
   weighs its entries), at each --caps share of the servers' CPU: plan() (as `python -m
   placement plan` runs it) against the exact program given --exact-time-limit, the
   greedy and spread placements; the gap to the best proven bound and to the best
   placement either found.

Graphs: a seeded DAG per size (each service called by one of the few before it, some
extra calls; heavy edges 40 kB/request, light 2 kB; the first service anchored to the
clients' switch), CPU per service drawn from 0.02 to 0.1 cores. Results: placement.json
and placement.md in --out.
"""
from __future__ import annotations

import os
import random
import statistics
import sys
import time

from common import lab
from common.cli import ArgumentParser, bounded, choice_list, number_list
from common.config import load_config
from common.markdown import number, table
from common.procs import git_commit
from placement import milp
from placement.apps import entry_mix, expected_graph
from placement.problem import build_problem
from placement.queueing import queue_length
from placement.model import Host, PlacementError, Problem, Unit
from placement.partitioner import greedy_network_aware, plan, random_placement, spread

DEFAULT_OUT = os.path.join("results", "bench")
SWITCHES = 4
PARTS = ("scale", "small", "apps", "planted")
DEFAULT_APPS = ("configs/bookinfo.yaml", "configs/callgraph30.yaml", "configs/socialnetwork.yaml",
                "configs/hotelreservation.yaml")
DEFAULT_CAPS = (0.5, 0.6, 0.8, 1.0)
# the application's CPU demand as a share of its servers' CPU: at the default cap (0.6)
# two thirds of what the cap allows, at 0.5 four fifths
APP_DEMAND_SHARE = 0.4
PLANTED_PER_SERVER = 10        # units per cluster (and server) of a planted instance
PLANTED_SIZES = (200, 1000, 5000, 20000)


def generated(services: int, servers: int, seed: int = 1) -> Problem:
    rng = random.Random(seed * 1000 + services)
    names = [f"m{k}" for k in range(services)]
    units = [Unit(n, n, rng.choice([0.02, 0.04, 0.06, 0.1]), 20.0) for n in names]
    edges = {}
    for k in range(1, services):
        parent = names[rng.randrange(max(0, k - 6), k)]
        edges[(parent, names[k])] = 40000.0 if rng.random() < 0.2 else 2000.0
    for _ in range(services // 10):
        a, b = sorted(rng.sample(range(services), 2))
        edges[(names[a], names[b])] = edges.get((names[a], names[b]), 0) + 2000.0
    demand = sum(u.cpu for u in units)
    cpu = max(max(u.cpu for u in units), 1.2 * demand / (0.6 * servers))
    switch = [f"s{1 + k * SWITCHES // servers}" for k in range(servers)]
    hosts = [Host(f"srv{k + 1}", round(cpu, 4), 100000.0, switch[k]) for k in range(servers)]
    return Problem(units, hosts, edges=edges, anchors={(names[0], "s1"): 20000.0},
                   switch_position={f"s{k + 1}": k for k in range(SWITCHES)})


def planted(units: int, seed: int = 1, queue_price: float = 0.0
            ) -> tuple[Problem, dict[str, str]]:
    """A generated instance with a planted placement close to a proven bound: one cluster
    of units per server (servers = units / PLANTED_PER_SERVER, 4 to 256, over 4 switches),
    each cluster 90 % of its server's CPU and held together by heavy edges; each unit
    anchored to its server's switch and, half of them, less heavily to another switch; and
    light edges between clusters (one per cluster, to a unit of another). Any placement
    costs at least what every unit's anchors cost on its best switch (edges cost >= 0:
    planted_bound); the planted one, every cluster whole on its own server, costs that
    plus its light edges. Under a queue price (the latency objective) every server of the
    planted placement is equally loaded, which the bound's queueing part also is.
    (problem, the planted placement)."""
    rng = random.Random(seed * 7919 + units)
    servers = max(4, min(256, units // PLANTED_PER_SERVER))
    switch = [f"s{1 + k * SWITCHES // servers}" for k in range(servers)]
    position = {f"s{k + 1}": k for k in range(SWITCHES)}
    hosts = [Host(f"srv{k + 1}", 1.0, 100000.0, switch[k]) for k in range(servers)]
    members: list[list[str]] = [[] for _ in range(servers)]
    for k in range(units):
        members[rng.randrange(servers) if k >= servers else k].append(f"u{k}")
    out_units, edges, anchors, optimum = [], {}, {}, {}
    for k, names in enumerate(members):
        weights = [rng.uniform(0.5, 1.5) for _ in names]
        total = sum(weights)
        out_units += [Unit(n, n, 0.9 * w / total, 20.0) for n, w in zip(names, weights)]
        for j in range(1, len(names)):                 # a random tree and a few more edges
            edges[(names[rng.randrange(j)], names[j])] = rng.uniform(1000, 5000)
        for _ in range(len(names) // 3):
            a, b = rng.sample(names, 2) if len(names) > 1 else (names[0], names[0])
            if a != b:
                edges[(a, b)] = edges.get((a, b), 0.0) + rng.uniform(1000, 5000)
        other_cluster = members[rng.randrange(servers)]
        if other_cluster is not names and other_cluster:
            edges[(rng.choice(names), rng.choice(other_cluster))] = rng.uniform(50, 300)
        for n in names:
            optimum[n] = hosts[k].name
            home = rng.uniform(200, 2000)
            anchors[(n, switch[k])] = home
            if rng.random() < 0.5:
                other = rng.choice([s for s in position if s != switch[k]])
                anchors[(n, other)] = rng.uniform(0, 0.8) * home
    problem = Problem(out_units, hosts, edges=edges, anchors=anchors, switch_position=position,
                      queue_price=queue_price)
    return problem, optimum


def planted_bound(problem: Problem) -> float:
    """Every placement's cost is at least this: each unit's anchors at the switch where
    they cost least (edges ignored, as they cost >= 0; capacities ignored), plus, under a
    queue price, the queueing of the whole load spread evenly: the sum over H servers of
    queue_length(rho_h) is at least H x queue_length(mean rho) (convex), and the mean of
    rho_h is at least the load over H x the fastest share."""
    anchors = sum(min(sum(w * (1 + problem.switch_distance(s, t)) for t, w in links)
                      for s in problem.switch_position)
                  for links in problem.anchored.values() if links)
    if problem.queue_price <= 0 or not problem.hosts:
        return anchors
    count, fastest = len(problem.hosts), max(h.speed for h in problem.hosts)
    load = sum(u.cpu for u in problem.units)
    return anchors + problem.queue_price * count * queue_length(load / (count * fastest))


def planted_run(sizes, exact_time_limit_s: float = 10.0, queue_price: float = 0.0
                ) -> list[dict]:
    """plan() on planted instances: its gap to the proven bound (the solvers' convention,
    (cost - bound) / cost), the planted placement's, greedy's, and plan()'s time."""
    rows = []
    for n in sizes:
        problem, planted_at = planted(n, queue_price=queue_price)
        bound = max(planted_bound(problem), 0.0)
        started = time.perf_counter()
        result = plan(problem, near="s1", exact_time_limit_s=exact_time_limit_s)
        took = time.perf_counter() - started
        assert not problem.violations(result.assignment) and not problem.violations(planted_at)
        bound = max(bound, result.bound or 0.0)

        def gap(cost: float, bound: float = bound) -> float:
            return 0.0 if cost <= 0 else max(0.0, (cost - bound) / cost)
        greedy = greedy_network_aware(problem).cost
        rows.append({"units": n, "servers": len(problem.hosts), "bound": round(bound, 1),
                     "planted_cost": round(problem.cost(planted_at), 1),
                     "planted_gap": gap(problem.cost(planted_at)),
                     "cost": round(result.cost, 1), "gap": gap(result.cost),
                     "plan_s": round(took, 3), "method": result.method,
                     "greedy_cost": round(greedy, 1), "greedy_gap": gap(greedy)})
        r = rows[-1]
        print(f"[placement] planted {n} units: gap {100 * r['gap']:.2f} % (the planted "
              f"placement's {100 * r['planted_gap']:.2f} %) in {took:.1f} s", file=sys.stderr)
    return rows


def scale_run(sizes, servers, repeats: int = 3) -> list[dict]:
    rows = []
    for n in sizes:
        for k in servers:
            problem = generated(n, k)
            times, result = [], None
            for _ in range(repeats):
                t = time.perf_counter()
                result = plan(problem, near="s1")
                times.append(time.perf_counter() - t)
            assert not problem.violations(result.assignment)
            base = {"spread": spread(problem).cost,
                    "random": random_placement(problem, 1).cost,
                    "greedy": greedy_network_aware(problem).cost}
            rows.append({"services": n, "servers": k, "plan_s": round(statistics.median(times), 4),
                         "plan_s_max": round(max(times), 4), "cost": result.cost,
                         "trunk_traffic": result.trunk_traffic,
                         "servers_used": result.hosts_used, "method": result.method,
                         "optimal": result.optimal, "bound": result.bound, "gap": result.gap,
                         "baseline_cost": base,
                         "vs_spread": round(result.cost / base["spread"], 4)
                         if base["spread"] else None,
                         "vs_greedy": round(result.cost / base["greedy"], 4)
                         if base["greedy"] else None})
    return rows


def small_graphs(count: int) -> list[dict]:
    """Heuristic alone and plan() against the optimum, on graphs exact search solves."""
    rows = []
    for seed in range(count):
        rng = random.Random(seed)
        n = rng.randint(5, 10)
        names = [f"u{k}" for k in range(n)]
        edges = {(a, b): rng.choice([1, 5, 20, 50]) for i, a in enumerate(names)
                 for b in names[i + 1:] if rng.random() < 0.35}
        problem = Problem([Unit(x, x, rng.choice([0.1, 0.2, 0.3]), 10) for x in names],
                          [Host(f"srv{k + 1}", 0.7, 1000, f"s{1 + k // 2}") for k in range(6)],
                          edges=edges, anchors={(names[0], "s1"): 10.0},
                          switch_position={"s1": 0, "s2": 1, "s3": 2})
        solution = milp.solve(problem)
        if not solution.optimal:
            continue
        optimum = problem.cost(solution.assignment)
        heuristic = plan(problem, near="s1", exact_time_limit_s=0).cost   # heuristics alone
        full = plan(problem, near="s1")
        rows.append({"seed": seed, "units": n, "optimum": optimum, "heuristic": heuristic,
                     "plan": full.cost, "plan_optimal": full.optimal,
                     "heuristic_gap": 0.0 if optimum == 0 else
                     round(heuristic / optimum - 1, 4) if optimum else None})
    return rows


def app_problem(path: str, cap: float, queue_price: float = 0.0
                ) -> tuple[Problem, str | None, float]:
    """The placement problem of a configuration's application at the benchmark's load:
    (problem, the clients' switch, requests/s in all)."""
    cfg = load_config(path)
    called = {c.service for m in cfg.microservices for c in (m.calls or ())}
    entries = [m.name for m in cfg.microservices if m.name not in called]
    mix = entry_mix(path, entries)
    total = sum(mix.values())
    per_request = expected_graph(cfg, {e: w / total for e, w in mix.items()})
    demand = sum(v["cpu_cores"] for v in per_request["vertices"].values())
    if demand <= 0:
        raise ValueError(f"{path}: its services use no CPU per request (cpu_ms)")
    rate = APP_DEMAND_SHARE * sum(s.cpu for s in cfg.servers) / demand
    graph = expected_graph(cfg, {e: rate * w / total for e, w in mix.items()})
    layout = {m.name: sorted({i.server for i in cfg.instances_of(m.name)})
              for m in cfg.microservices}
    near = cfg.testbed.clients[0].switch if cfg.testbed.clients else None
    return build_problem(cfg, graph, layout, max_utilization=cap,
                         queue_price=queue_price), near, rate


def baseline_cost(method, problem: Problem) -> float | None:
    """A baseline's cost, None where it finds no placement (spread at a tight cap)."""
    try:
        return method(problem).cost
    except PlacementError:
        return None


def apps_run(paths, caps, exact_time_limit_s: float, queue_price: float = 0.0) -> list[dict]:
    rows = []
    for path in paths:
        for cap in caps:
            problem, near, rate = app_problem(path, cap, queue_price)
            started = time.perf_counter()
            try:
                ours = plan(problem, near=near)
            except PlacementError as exc:      # no placement fits at this cap: say so
                rows.append({"config": path, "cap": cap, "units": len(problem.units),
                             "servers": len(problem.hosts), "requests_per_s": round(rate, 3),
                             "error": str(exc)})
                print(f"[placement] {path} cap {cap:g}: {exc}", file=sys.stderr)
                continue
            took = time.perf_counter() - started
            exact = milp.solve(problem, time_limit_s=exact_time_limit_s)
            exact_cost = None if exact.assignment is None else problem.cost(exact.assignment)
            best = min(c for c in (ours.cost, exact_cost) if c is not None)
            bound = max(ours.bound or 0.0, exact.bound)
            rows.append({
                "config": path, "cap": cap, "units": len(problem.units),
                "servers": len(problem.hosts), "requests_per_s": round(rate, 3),
                "plan_s": round(took, 3), "plan_method": ours.method, "cost": ours.cost,
                "exact_cost": exact_cost, "exact_optimal": exact.optimal,
                "exact_s": round(exact.seconds, 3), "bound": bound,
                "gap_to_bound": 0.0 if ours.cost <= 0 else
                max(0.0, (ours.cost - bound) / ours.cost),
                "above_best": 0.0 if best <= 0 else ours.cost / best - 1,
                "greedy_cost": baseline_cost(greedy_network_aware, problem),
                "spread_cost": baseline_cost(spread, problem), "error": None})
            r = rows[-1]
            print(f"[placement] {path} cap {cap:g}: ours {r['cost']:.0f}, exact "
                  f"{exact_cost if exact_cost is None else round(exact_cost)}"
                  f"{' (optimal)' if exact.optimal else ''}, bound {bound:.0f}",
                  file=sys.stderr)
    return rows


def markdown(doc: dict) -> str:
    lines = ["# Placement benchmark", "", f"Command: `{doc['command']}` at commit "
             f"{doc['commit']}", ""]
    if doc["scale"]:
        lines += [table(
            ["services", "servers", "plan time s (median of 3)", "servers used", "cost",
             "gap to the bound (share of cost)", "% of spread's cost", "% of greedy's",
             "% of random's"],
            [[r["services"], r["servers"], r["plan_s"], r["servers_used"], number(r["cost"], 0),
              "no bound" if r["gap"] is None else f"{100 * r['gap']:.1f} %",
              f"{100 * r['vs_spread']:.1f} %", f"{100 * r['vs_greedy']:.1f} %",
              f"{100 * r['cost'] / r['baseline_cost']['random']:.1f} %"]
             for r in doc["scale"]], "r" * 9, compact=True)]
    apps = doc.get("apps") or []
    if apps:
        objective = (f"the latency objective at queue price {doc['queue_price']:g}"
                     if doc.get("queue_price") else "the traffic objective")
        lines += ["", f"Applications (their CPU demand {100 * APP_DEMAND_SHARE:.0f} % of their "
                  f"servers' CPU; {objective}; the exact program given "
                  f"{doc['exact_time_limit_s']:g} s):", "",
                  table(["configuration", "cap", "units", "servers", "ours", "its method",
                         "plan time s",
                         "exact program", "best bound", "ours above the best found",
                         "ours above the bound", "greedy", "spread"],
                        [[r["config"], r["cap"], r["units"], r["servers"],
                          f"none fits: {r['error']}", *[""] * 8] if r["error"] else
                         [r["config"], r["cap"], r["units"], r["servers"], number(r["cost"], 0),
                          r["plan_method"], r["plan_s"],
                          "none found" if r["exact_cost"] is None else
                          number(r["exact_cost"], 0) + (" (optimal)" if r["exact_optimal"]
                                                        else ""),
                          number(r["bound"], 0), f"{100 * r['above_best']:.1f} %",
                          f"{100 * r['gap_to_bound']:.1f} %",
                          *("none fits" if c is None else number(c, 0)
                            for c in (r["greedy_cost"], r["spread_cost"]))] for r in apps],
                        "lrrrrlrrrrrrr", compact=True)]
    planted_rows = doc.get("planted") or []
    if planted_rows:
        lines += ["", "Planted instances (a placement near a proven bound built in; "
                  "`planted()`): plan()'s gap to the bound, the planted placement's and "
                  "greedy's, (cost - bound) / cost:", "",
                  table(["units", "servers", "bound", "plan() cost", "plan() gap",
                         "planted gap", "greedy gap", "plan() s"],
                        [[r["units"], r["servers"], number(r["bound"], 0), number(r["cost"], 0),
                          f"{100 * r['gap']:.2f} %", f"{100 * r['planted_gap']:.2f} %",
                          f"{100 * r['greedy_gap']:.1f} %", r["plan_s"]]
                         for r in planted_rows], "r" * 8, compact=True)]
    small = doc["small"]
    if not small:
        return "\n".join(lines + [""])
    gaps = [r["heuristic_gap"] for r in small if r["heuristic_gap"] is not None]
    lines += [f"Small graphs ({len(small)} solved exactly, 5-10 units on 6 servers): "
              f"plan() found the optimum in {sum(r['plan'] == r['optimum'] for r in small)}; "
              f"the heuristic alone (no exact step) was within 5 % of it in "
              f"{sum(g <= 0.05 for g in gaps)}, worst gap {100 * max(gaps, default=0):.1f} %, "
              f"mean {100 * statistics.mean(gaps) if gaps else 0:.2f} %.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = ArgumentParser(prog="python -m benchmarks.placement",
                        description="The placement partitioner: time, cost, optimality gap.")
    ap.add_argument("--sizes", type=number_list(int, 2, 20000), default=[10, 100, 1000])
    ap.add_argument("--servers", type=number_list(int, 2, 256), default=[4, 16, 64])
    ap.add_argument("--small", type=bounded(int, 0, 1000), default=24,
                    help="small graphs solved exactly (default 24)")
    ap.add_argument("--apps", type=lambda v: [p for p in v.split(",") if p],
                    default=list(DEFAULT_APPS),
                    help="call-graph configurations (default: " + ",".join(DEFAULT_APPS) + ")")
    ap.add_argument("--caps", type=number_list(float, 0.05, 1.0), default=list(DEFAULT_CAPS))
    ap.add_argument("--exact-time-limit", type=bounded(float, 0.1, 3600), default=60.0,
                    help="seconds the exact program gets per application (default 60)")
    ap.add_argument("--planted-sizes", type=number_list(int, 8, 50000),
                    default=list(PLANTED_SIZES),
                    help="units of the planted instances (default "
                         + ",".join(map(str, PLANTED_SIZES)) + ")")
    ap.add_argument("--queue-price", type=bounded(float, 0.0), default=0.0,
                    help="the applications and planted parts under the latency objective at "
                         "this queue price (default 0: the traffic objective)")
    ap.add_argument("--parts", type=choice_list(PARTS), default=list(PARTS),
                    help=f"which parts to run (default all: {','.join(PARTS)})")
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    for path in args.apps:
        if not os.path.isfile(path):
            ap.error(f"--apps: no configuration file {path!r}")
    doc = {"benchmark": "placement", "commit": git_commit(),
           "command": lab.invocation("benchmarks.placement", argv, sudo=False),
           "scale": scale_run(args.sizes, args.servers) if "scale" in args.parts else [],
           "small": small_graphs(args.small) if "small" in args.parts else [],
           "exact_time_limit_s": args.exact_time_limit,
           "queue_price": args.queue_price,
           "apps": apps_run(args.apps, args.caps, args.exact_time_limit, args.queue_price)
           if "apps" in args.parts else [],
           "planted": planted_run(args.planted_sizes, queue_price=args.queue_price)
           if "planted" in args.parts else []}
    os.makedirs(args.out, exist_ok=True)
    lab.write_results(args.out, "placement", doc, lambda: markdown(doc), default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
