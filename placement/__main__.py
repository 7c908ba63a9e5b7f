"""Placement of microservice instances by their communication graph (Ahmed et al., PLOS ONE).

    python -m placement plan      # the plan for the running testbed: graph from the
                                  # profiler, layout from the controller; nothing moves
    python -m placement plan --graph graph.json --layout layout.json --config configs/bookinfo.yaml
    python -m placement apply     # plan, then move instances live (testbed control API)
    python -m placement apply --every 5        # re-plan every 5 minutes, with hysteresis
    python -m placement apply --every 5 --max-moved 0.1   # ... moving at most 10 % each time
    python -m placement export --format k8s --out bookinfo-k8s.yaml
    python -m placement generate --services 30 --seed 7 --out configs/callgraph30.yaml

Methods: ours (METIS partition, mapping by distance, local search, and the exact program
solved by HiGHS within --time-limit, which bounds the optimum; the plan says its gap to that
bound), greedy (network-aware greedy score), spread (round robin), random. Objectives for
ours: traffic (traffic x distance, the paper's) or latency (plus a price on each server's
queue, --queue-price). docs/placement.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import yaml

from common.cli import ArgumentParser, bounded, fail, non_negative_float, positive_float
from common.config import ConfigError, load_config
from common.httpjson import HttpError, get_json
from placement.apply import ApplyError, ControllerClient, RemoteTestbed, apply_moves
from placement.apps import generate
from placement.k8s import check_registry, manifests, to_yaml
from placement.model import PlacementError
from placement.partitioner import EXACT_TIME_LIMIT_S, greedy_network_aware, plan, \
    random_placement, replan, should_replace, spread
from placement.problem import OBJECTIVES, QUEUE_PRICE, Move, build_problem, check_layout, \
    current_assignment, layout_of, moves_between, queue_price

METHODS = ("ours", "greedy", "spread", "random")


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m placement", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name, helptext in (("plan", "compute a placement; nothing moves"),
                           ("apply", "compute a placement and carry it out live"),
                           ("export", "write the placement as Kubernetes manifests"),
                           ("generate", "write a generated call-graph application")):
        sp = sub.add_parser(name, help=helptext)
        if name == "generate":
            sp.add_argument("--services", type=bounded(int, 2, 99), default=30)
            sp.add_argument("--seed", type=int, default=7)
            sp.add_argument("--out", help="file (default: standard output)")
            continue
        sp.add_argument("--config", help="configuration (default $MALB_CONFIG or "
                                         "configs/paper.yaml)")
        sp.add_argument("--graph", help="the graph as JSON (GET /graph of the profiler; "
                                        "default: ask the profiler)")
        sp.add_argument("--layout", help="JSON {microservice: [servers]} (default: ask the "
                                         "controller)")
        sp.add_argument("--controller", help="controller REST URL (default from the "
                                             "configuration)")
        sp.add_argument("--method", choices=METHODS, default="ours")
        sp.add_argument("--seed", type=int, default=1, help="for --method random")
        sp.add_argument("--headroom", type=non_negative_float, default=0.2,
                        help="capacity kept free when choosing servers (default 0.2)")
        sp.add_argument("--max-utilization", type=bounded(float, 0.05, 1.0), default=0.6,
                        help="share of each server's CPU a plan may fill (default 0.6)")
        sp.add_argument("--objective", choices=OBJECTIVES, default="traffic",
                        help="for --method ours: traffic x distance (traffic, the default) or "
                             "that plus the priced queueing at each server (latency)")
        sp.add_argument("--queue-price", type=non_negative_float, metavar="BYTES_PER_S",
                        help="for --objective latency: what a request queued at a server "
                             f"costs, in bytes/s x hops (default {QUEUE_PRICE:g})")
        sp.add_argument("--max-moved", type=bounded(float, 0.0, 1.0), metavar="SHARE",
                        help="for --method ours: move at most this share of the instances "
                             "from the current layout (a re-plan; default: a fresh plan)")
        sp.add_argument("--time-limit", type=non_negative_float, default=EXACT_TIME_LIMIT_S,
                        help="seconds the exact program may run for --method ours (default "
                             f"{EXACT_TIME_LIMIT_S:g}; 0: heuristics only, no bound)")
        sp.add_argument("--out", help="write the plan (or manifests) here as well")
        if name == "apply":
            sp.add_argument("--testbed", help="testbed control URL (default "
                                              "http://127.0.0.1:<testbed.control_port>)")
            sp.add_argument("--min-gain", type=bounded(float, 0, 1), default=0.10,
                            help="re-place only for this share less cost (default 0.10)")
            sp.add_argument("--dwell", type=non_negative_float, default=600.0,
                            help="seconds since the last change before another (default 600)")
            sp.add_argument("--force", action="store_true", help="no hysteresis")
            sp.add_argument("--every", type=positive_float, metavar="MINUTES",
                            help="re-plan periodically")
            sp.add_argument("--drain-timeout", type=positive_float, default=60.0,
                            help="seconds to wait for an old instance's flows (default 60)")
            sp.add_argument("--batch", type=bounded(int, 1, 100), default=1, metavar="N",
                            help="moves carried out together: their new instances start one "
                                 "after the other, their health and drain waits overlap "
                                 "(default 1: one move at a time)")
        if name == "export":
            sp.add_argument("--format", choices=("k8s",), required=True)
            sp.add_argument("--namespace", default="default")
            sp.add_argument("--registry", type=_registry,
                            help="prefix of the image references (e.g. "
                            "registry.example.org:5000): the cluster pulls the images "
                            "there; push them with docker tag/push first")
            sp.add_argument("--plan", help="a plan written by `plan --out` (default: compute "
                                           "one)")
    return p


def _read_json(path: str, what: str):
    try:
        with open(path) as fh:
            return json.load(fh)
    except OSError as exc:
        fail(f"{what} {path}: {exc.strerror}", code=2)
    except ValueError as exc:
        fail(f"{what} {path}: not valid JSON: {exc}", code=2)


def inputs(args, cfg) -> tuple[dict, dict]:
    """(graph, layout) from the files given, or from the running profiler and controller."""
    if args.graph:
        graph = _read_json(args.graph, "--graph")
    else:
        try:
            graph = get_json(f"{cfg.profiler.url}/graph", 5.0)
        except HttpError as exc:
            fail(f"no --graph, and the profiler does not answer: {exc}", code=1)
    if args.layout:
        layout = _read_json(args.layout, "--layout")
        if not isinstance(layout, dict):
            fail("--layout: expected a JSON object {microservice: [servers]}", code=2)
    else:
        try:
            layout = ControllerClient(controller_url(args, cfg)).layout()
        except HttpError as exc:
            fail(f"no --layout, and the controller does not answer: {exc}", code=1)
    return graph, layout


def controller_url(args, cfg) -> str:
    return args.controller or f"http://127.0.0.1:{cfg.controller.rest_port}"


def compute(args, cfg, graph: dict, layout: dict) -> dict:
    """The plan: the chosen method's layout, its cost and the current one's, the moves."""
    problem = build_problem(cfg, graph, layout, max_utilization=args.max_utilization,
                            queue_price=queue_price(args.objective, args.queue_price)
                            if args.method == "ours" else 0.0)
    before = current_assignment(problem, layout)
    near = cfg.testbed.clients[0].switch if cfg.testbed.clients else None
    if args.method == "ours" and args.max_moved is not None:
        result = replan(problem, before, args.max_moved, near=near, headroom=args.headroom,
                        exact_time_limit_s=args.time_limit)
    elif args.method == "ours":
        result = plan(problem, near=near, headroom=args.headroom,
                      exact_time_limit_s=args.time_limit)
    elif args.method == "greedy":
        result = greedy_network_aware(problem)
    elif args.method == "spread":
        result = spread(problem)
    else:
        result = random_placement(problem, args.seed)
    after = layout_of(result.assignment, problem)
    return {"method": result.method, "optimal": result.optimal, "bound": result.bound,
            "gap": result.gap, "attempts": result.attempts,
            "objective": "latency" if problem.queue_price > 0 else "traffic",
            "queue_price": problem.queue_price,
            "before": {"cost": problem.cost(before), "traffic_cost": problem.traffic_cost(before),
                       "queueing": problem.queueing(before),
                       "trunk_traffic": problem.trunk_traffic(before), "layout": layout,
                       # the current layout is not checked against the cap when it was
                       # made (the testbed spreads every service): say where it is over
                       "violations": problem.violations(before)},
            "after": {"cost": result.cost, "traffic_cost": result.traffic_cost,
                      "queueing": result.queueing, "trunk_traffic": result.trunk_traffic,
                      "servers_used": result.hosts_used, "layout": after},
            "moves": [m.as_dict() for m in moves_between(layout, after)],
            "edges": graph.get("edges", [])}


def show(doc: dict) -> None:
    b, a = doc["before"], doc["after"]
    for problem in b.get("violations", []):
        print(f"the current layout breaks a limit: {problem}")
    gap = doc.get("gap")
    print(f"method: {doc['method']}" + (" (optimal)" if doc["optimal"] else
                                         "" if gap is None else
                                         f" (the optimum costs at least {100 * (1 - gap):.1f} "
                                         f"% of it: a gap of {100 * gap:.1f} %)"))
    for tried in doc.get("attempts", []):
        outcome = f"cost {tried['cost']:,.0f}" if tried["cost"] is not None else \
            tried["error"]
        print(f"  tried {tried['method']}: {outcome}")
    if doc.get("queue_price"):
        print(f"cost (traffic x distance + {doc['queue_price']:g} x requests queued at the "
              f"servers): {b['cost']:,.0f} -> {a['cost']:,.0f}; requests queued (modelled) "
              f"{b['queueing']:.2f} -> {a['queueing']:.2f}")
    print(f"traffic x distance, bytes/s: {b['traffic_cost']:,.0f} -> {a['traffic_cost']:,.0f}; "
          f"over trunks {b['trunk_traffic']:,.0f} -> {a['trunk_traffic']:,.0f} bytes/s; "
          f"{a['servers_used']} servers")
    for ms in sorted(a["layout"]):
        was, now = b["layout"].get(ms, []), a["layout"][ms]
        print(f"  {ms:<16} {','.join(was):<20} -> {','.join(now)}"
              + ("" if sorted(was) == sorted(now) else "   (moves)"))
    print(f"{len(doc['moves'])} move(s)")


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if getattr(args, "queue_price", None) is not None and args.objective != "latency":
        ap.error("--queue-price: only with --objective latency")
    if args.command == "generate":
        text = yaml.safe_dump(generate(args.services, args.seed), sort_keys=False)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text)
        else:
            sys.stdout.write(text)
        return 0
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
    if args.command == "export":
        return export(args, cfg)
    while True:
        graph, layout = inputs(args, cfg)
        try:
            doc = compute(args, cfg, graph, layout)
        except PlacementError as exc:
            why = str(exc)
            if why.startswith("capacity"):
                why += f" (each filled to at most --max-utilization {args.max_utilization:g})"
            fail(why, code=2)
        show(doc)
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(doc, fh, indent=1)
        if args.command == "plan":
            return 0
        status = apply(args, cfg, doc)
        if not args.every:
            return status
        time.sleep(args.every * 60)


_last_change: list[float | None] = [None]


def apply(args, cfg, doc: dict) -> int:
    since = None if _last_change[0] is None else time.monotonic() - _last_change[0]
    go, why = (True, "forced") if args.force else should_replace(
        doc["before"]["cost"], doc["after"]["cost"], since, args.min_gain, args.dwell)
    if not go:
        print(f"[placement] not applied: {why}")
        return 0
    if not doc["moves"]:
        print("[placement] nothing to move")
        return 0
    print(f"[placement] applying ({why})", flush=True)
    moves = [Move(m["microservice"], m["from"], m["to"]) for m in doc["moves"]]
    testbed_url = args.testbed or f"http://127.0.0.1:{cfg.testbed.control_port}"
    try:
        token = cfg.security.token
        results = apply_moves(cfg, moves, ControllerClient(controller_url(args, cfg),
                                                           token=token),
                              RemoteTestbed(testbed_url, token=token),
                              drain_timeout_s=args.drain_timeout,
                              log=lambda m: print(m, flush=True), batch=args.batch)
    except (ApplyError, HttpError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if getattr(exc, "done", None):
            print(f"[placement] {len(exc.done)} move(s) done before it: " +
                  json.dumps([r.as_dict() for r in exc.done]))
        return 1
    _last_change[0] = time.monotonic()
    print(f"[placement] {len(results)} move(s) done: " +
          json.dumps([r.as_dict() for r in results]))
    return 0


def _registry(text: str) -> str:
    try:
        return check_registry(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def export(args, cfg) -> int:
    if args.plan:
        doc = _read_json(args.plan, "--plan")
        try:
            layout, graph = doc["after"]["layout"], {"edges": doc.get("edges", [])}
            check_layout(cfg, layout)
        except (KeyError, TypeError):
            fail("--plan: expected a plan written by `python -m placement plan --out`", code=2)
        except PlacementError as exc:
            fail(f"--plan: {exc}", code=2)
    else:
        graph, layout = inputs(args, cfg)
        try:
            doc = compute(args, cfg, graph, layout)
        except PlacementError as exc:
            fail(str(exc), code=2)
        layout = doc["after"]["layout"]
    text = to_yaml(manifests(cfg, layout, graph, args.namespace, args.registry))
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
        print(f"written {args.out}: {2 * len(cfg.microservices)} manifests")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
