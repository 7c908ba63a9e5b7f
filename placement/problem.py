"""From what the platform knows to a placement problem, and from a plan to the moves that
carry it out (plain Python: the configuration, the profiler's graph and the current layout
in, plain data out; docs/placement.md, "The placement": units, edges, the CPU cap).

- build_problem: units (a microservice's instances, its measured CPU and memory split among
  them, with floors), edges (the graph's traffic split over replica pairs; the clients'
  anchor a unit to their switch), servers (MAX_UTILIZATION of their CPU may be filled);
- OBJECTIVES, queue_price: the objectives by name and the queue price each sets;
- check_graph, check_layout: input that does not fit the configuration, named;
- current_assignment, layout_of, unit_names: layouts and assignments;
- moves_between, Move: the instance moves that turn one layout into another.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.config import Config
from common.numbers import finite_non_negative
from placement.model import Host, PlacementError, Problem, Unit

CPU_FLOOR_CORES = 0.02
MEMORY_FLOOR_MB = 20.0
MAX_UTILIZATION = 0.6
CLIENTS_PREFIX = "clients@"
# what a request waiting or in service at a server costs under the latency objective, in
# bytes/s x hops: chosen on design seeds by the queueing model (docs/placement.md, "The
# latency objective"; experiments/placement_model.py)
QUEUE_PRICE = 3e5
# traffic: traffic x distance alone (the paper's); latency: plus the priced queueing
OBJECTIVES = ("traffic", "latency")


def queue_price(objective: str, price: float | None = None) -> float:
    """The queue price an objective sets: 0 for traffic; for latency `price`, by default
    QUEUE_PRICE. PlacementError for an unknown objective or a price with traffic."""
    if objective not in OBJECTIVES:
        raise PlacementError(f"objective: expected one of {', '.join(OBJECTIVES)}, got "
                             f"{objective!r}")
    if objective == "traffic":
        if price:
            raise PlacementError("queue price: only the latency objective has one")
        return 0.0
    return QUEUE_PRICE if price is None else price


@dataclass(frozen=True)
class Move:
    microservice: str
    source: str            # server it leaves
    target: str            # server it goes to

    def as_dict(self) -> dict:
        return {"microservice": self.microservice, "from": self.source, "to": self.target}


def unit_names(microservice: str, replicas: int) -> list[str]:
    return [microservice] if replicas == 1 else \
        [f"{microservice}#{k + 1}" for k in range(replicas)]


def check_graph(cfg: Config, graph: dict) -> None:
    """Refuse a graph that does not fit the configuration, naming the problem."""
    if not isinstance(graph, dict) or not isinstance(graph.get("edges", []), list) or \
            not isinstance(graph.get("vertices", {}), dict):
        raise PlacementError("graph: expected {\"vertices\": {...}, \"edges\": [...]} as "
                             "GET /graph of the profiler answers")
    names = {m.name for m in cfg.microservices}
    switches = {s.name for s in cfg.testbed.switches}
    for k, e in enumerate(graph.get("edges", [])):
        if not isinstance(e, dict):
            raise PlacementError(f"graph.edges[{k}]: expected an object")
        caller, callee = e.get("caller"), e.get("callee")
        if callee not in names:
            raise PlacementError(f"graph.edges[{k}].callee: unknown microservice {callee!r}")
        if caller not in names and not (isinstance(caller, str) and
                                        caller.startswith(CLIENTS_PREFIX) and
                                        caller[len(CLIENTS_PREFIX):] in switches):
            raise PlacementError(f"graph.edges[{k}].caller: unknown microservice or client "
                                 f"switch {caller!r}")
        w = e.get("bytes_per_s")
        if not finite_non_negative(w):
            raise PlacementError(f"graph.edges[{k}].bytes_per_s: expected a number >= 0, "
                                 f"got {w!r}")
    for name, v in graph.get("vertices", {}).items():
        if name not in names:
            raise PlacementError(f"graph.vertices: unknown microservice {name!r}")
        for key in ("cpu_cores", "memory_mb"):
            x = v.get(key) if isinstance(v, dict) else "?"
            if x is not None and not finite_non_negative(x):
                raise PlacementError(f"graph.vertices.{name}.{key}: expected a number >= 0 "
                                     f"or null, got {x!r}")


def check_layout(cfg: Config, layout: dict[str, list[str]]) -> None:
    names = {m.name for m in cfg.microservices}
    servers = {s.name for s in cfg.servers}
    for ms, where in layout.items():
        if ms not in names:
            raise PlacementError(f"layout: unknown microservice {ms!r}")
        if not isinstance(where, list) or not where or len(set(where)) != len(where):
            raise PlacementError(f"layout.{ms}: expected a list of distinct servers")
        for s in where:
            if s not in servers:
                raise PlacementError(f"layout.{ms}: unknown server {s!r}")
    missing = names - set(layout)
    if missing:
        raise PlacementError(f"layout: no server for {sorted(missing)[0]}")


def build_problem(cfg: Config, graph: dict, layout: dict[str, list[str]],
                  cpu_floor: float = CPU_FLOOR_CORES,
                  memory_floor: float = MEMORY_FLOOR_MB,
                  max_utilization: float = MAX_UTILIZATION,
                  queue_price: float = 0.0) -> Problem:
    """The placement problem for the current layout {microservice: [servers]} (its
    replica counts) and the profiler's graph; each server offers `max_utilization` of its
    CPU share, and its whole share is what the priced queueing sees (queue_price: 0 for
    traffic alone)."""
    if not 0 < max_utilization <= 1:
        raise PlacementError(f"max_utilization: expected a share in (0, 1], got "
                             f"{max_utilization!r}")
    check_graph(cfg, graph)
    check_layout(cfg, layout)
    vertices = graph.get("vertices", {})
    units, names_of = [], {}
    for m in cfg.microservices:
        replicas = len(layout[m.name])
        v = vertices.get(m.name) or {}
        cpu = max(cpu_floor, (v.get("cpu_cores") or 0.0) / replicas)
        mem = max(memory_floor, (v.get("memory_mb") or 0.0) / replicas)
        names_of[m.name] = unit_names(m.name, replicas)
        units += [Unit(n, m.name, cpu, mem) for n in names_of[m.name]]
    edges: dict[tuple[str, str], float] = {}
    anchors: dict[tuple[str, str], float] = {}
    for e in graph.get("edges", []):
        w = float(e["bytes_per_s"])
        callee_units = names_of[e["callee"]]
        if e["caller"].startswith(CLIENTS_PREFIX):
            switch = e["caller"][len(CLIENTS_PREFIX):]
            for u in callee_units:
                key = (u, switch)
                anchors[key] = anchors.get(key, 0.0) + w / len(callee_units)
            continue
        caller_units = names_of[e["caller"]]
        share = w / (len(caller_units) * len(callee_units))
        for a in caller_units:
            for b in callee_units:
                if a != b:
                    key = (a, b)
                    edges[key] = edges.get(key, 0.0) + share
    hosts = [Host(s.name, s.cpu * max_utilization, float(s.memory_mb), s.switch, share=s.cpu)
             for s in cfg.servers]
    position = {s.name: k for k, s in enumerate(cfg.testbed.switches)}
    return Problem(units, hosts, edges=edges, anchors=anchors, switch_position=position,
                   queue_price=queue_price)


def current_assignment(problem: Problem, layout: dict[str, list[str]]) -> dict[str, str]:
    """The units where the layout has them (replica k on the k-th server listed)."""
    out = {}
    for ms, servers in layout.items():
        for name, server in zip(problem.replicas.get(ms, []), servers):
            out[name] = server
    return out


def layout_of(assignment: dict[str, str], problem: Problem) -> dict[str, list[str]]:
    return {ms: [assignment[n] for n in names] for ms, names in problem.replicas.items()}


def moves_between(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[Move]:
    """The instance moves that turn one layout into another: per microservice, each server
    it leaves paired with one it goes to (the replica count is the same)."""
    out = []
    for ms in sorted(after):
        leave = [s for s in before.get(ms, []) if s not in after[ms]]
        go = [s for s in after[ms] if s not in before.get(ms, [])]
        if len(leave) != len(go):
            raise PlacementError(f"{ms}: {len(before.get(ms, []))} replicas now, "
                                 f"{len(after[ms])} in the plan")
        out += [Move(ms, a, b) for a, b in zip(leave, go)]
    return out
