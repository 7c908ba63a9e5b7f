"""The placement problem: what is placed (Unit), where (Host), the traffic between units and
to the clients' switches, the servers' limits, and the cost a placement is judged by
(docs/placement.md, "The placement" and "The latency objective"). Plain data and arithmetic,
shared by the heuristics (placement/partitioner.py) and the exact program (placement/milp.py).

- Problem: units, servers, edges, anchors, switch chain, pins, queue price; its cost
  (traffic x distance, plus the priced queueing), a unit's cost on a server, the servers'
  loads, feasibility (fits, violations, check_solvable);
- Unit, Host: an instance to place and a server;
- PlacementError: input that cannot be placed, with the reason.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from placement.queueing import queue_length


class PlacementError(ValueError):
    """The input cannot be placed (names, capacities): the message says why."""


@dataclass(frozen=True)
class Host:
    """A server that can hold units."""
    name: str
    cpu: float               # cores a plan may fill (its CPU share, or the capped part of it)
    memory_mb: float
    switch: str
    share: float | None = None   # its whole CPU share, what queueing sees (None: cpu)

    @property
    def speed(self) -> float:
        return self.cpu if self.share is None else self.share


@dataclass(frozen=True)
class Unit:
    """One instance to place (a replica of a microservice)."""
    name: str
    service: str
    cpu: float               # cores it needs
    memory_mb: float = 0.0


@dataclass
class Problem:
    """units; edges {(u, v): weight} between unit names (either order; both directions
    are added up); anchors {(unit, switch): weight}; hosts; the switch chain (switch ->
    position, for distances); pinned {unit: host} units that must stay; queue_price: what
    a request waiting or in service on a server costs, in the traffic's units (bytes/s x
    hops): 0 prices traffic alone (the paper's objective), above 0 the cost adds
    queue_price x sum over servers of queue_length(CPU used / the server's share)
    (docs/placement.md, "The latency objective")."""
    units: list[Unit]
    hosts: list[Host]
    edges: dict[tuple[str, str], float] = field(default_factory=dict)
    anchors: dict[tuple[str, str], float] = field(default_factory=dict)
    switch_position: dict[str, int] = field(default_factory=dict)
    pinned: dict[str, str] = field(default_factory=dict)
    queue_price: float = 0.0

    def __post_init__(self):
        self.unit = {u.name: u for u in self.units}
        self.host = {h.name: h for h in self.hosts}
        if len(self.unit) != len(self.units):
            raise PlacementError("units: a unit name appears twice")
        if len(self.host) != len(self.hosts):
            raise PlacementError("servers: a server name appears twice")
        if not (self.queue_price >= 0) or self.queue_price == math.inf:
            raise PlacementError(f"queue_price: expected a finite number >= 0, got "
                                 f"{self.queue_price!r}")
        if not self.switch_position:
            self.switch_position = {s: k for k, s in
                                    enumerate(dict.fromkeys(h.switch for h in self.hosts))}
        for h in self.hosts:
            if h.switch not in self.switch_position:
                raise PlacementError(f"servers: {h.name}'s switch {h.switch!r} is not in the "
                                     f"topology")
            if not (h.cpu >= 0 and h.memory_mb >= 0) or math.inf in (h.cpu, h.memory_mb):
                raise PlacementError(f"servers: {h.name}: capacities must be finite and >= 0")
            if not (h.speed >= 0) or h.speed == math.inf:
                raise PlacementError(f"servers: {h.name}: share must be finite and >= 0")
            if h.speed == 0 and h.cpu > 0:
                raise PlacementError(f"servers: {h.name}: a share of 0 cannot offer "
                                     f"{h.cpu:g} cores")
        for u in self.units:
            if not (u.cpu >= 0 and u.memory_mb >= 0) or math.inf in (u.cpu, u.memory_mb):
                raise PlacementError(f"units: {u.name}: demands must be finite and >= 0")
        merged: dict[tuple[str, str], float] = {}
        for (a, b), w in self.edges.items():
            for name in (a, b):
                if name not in self.unit:
                    raise PlacementError(f"edges: unknown unit {name!r}")
            if not (w >= 0) or w == math.inf:
                raise PlacementError(f"edges: {a}-{b}: weight must be finite and >= 0")
            if a != b and w > 0:
                key = (a, b) if a < b else (b, a)
                merged[key] = merged.get(key, 0.0) + float(w)
        self.edges = merged
        for (name, switch), w in self.anchors.items():
            if name not in self.unit:
                raise PlacementError(f"anchors: unknown unit {name!r}")
            if switch not in self.switch_position:
                raise PlacementError(f"anchors: unknown switch {switch!r}")
            if not (w >= 0) or w == math.inf:
                raise PlacementError(f"anchors: {name}@{switch}: weight must be finite, >= 0")
        for name, host in self.pinned.items():
            if name not in self.unit or host not in self.host:
                raise PlacementError(f"pinned: unknown unit or server in {name}->{host}")
        self.neighbours: dict[str, dict[str, float]] = {u.name: {} for u in self.units}
        for (a, b), w in self.edges.items():
            self.neighbours[a][b] = w
            self.neighbours[b][a] = w
        self.anchored: dict[str, list[tuple[str, float]]] = {u.name: [] for u in self.units}
        for (name, switch), w in self.anchors.items():
            if w > 0:
                self.anchored[name].append((switch, float(w)))
        self.replicas: dict[str, list[str]] = {}
        for u in self.units:
            self.replicas.setdefault(u.service, []).append(u.name)
        # servers by switch and their order: what the moves try (_move_targets)
        self.host_index = {h.name: k for k, h in enumerate(self.hosts)}
        self.on_switch: dict[str, list[str]] = {}
        for h in self.hosts:
            self.on_switch.setdefault(h.switch, []).append(h.name)
        # a switch's one CPU share when all its servers have the same (None otherwise)
        self.switch_share: dict[str, float | None] = {}
        for switch, names in self.on_switch.items():
            speeds = {self.host[h].speed for h in names}
            self.switch_share[switch] = speeds.pop() if len(speeds) == 1 else None

    # -------------------------------------------------------------- distances and cost
    def switch_distance(self, a: str, b: str) -> int:
        return abs(self.switch_position[a] - self.switch_position[b])

    def distance(self, h1: str, h2: str) -> int:
        """0 on the same server, 1 on the same switch, one more per trunk hop."""
        if h1 == h2:
            return 0
        return 1 + self.switch_distance(self.host[h1].switch, self.host[h2].switch)

    def anchor_distance(self, host: str, switch: str) -> int:
        """A unit on host to an endpoint on switch: 1 on the same switch, +1 per hop."""
        return 1 + self.switch_distance(self.host[host].switch, switch)

    def cost(self, assignment: dict[str, str]) -> float:
        """The objective: traffic x distance, plus the priced queueing when queue_price > 0."""
        total = self.traffic_cost(assignment)
        if self.queue_price > 0:
            total += self.queue_price * self.queueing(assignment)
        return total

    def traffic_cost(self, assignment: dict[str, str]) -> float:
        """Traffic x distance over edges and anchors (the paper's cost)."""
        total = sum(w * self.distance(assignment[a], assignment[b])
                    for (a, b), w in self.edges.items())
        return total + sum(w * self.anchor_distance(assignment[n], s)
                           for n, links in self.anchored.items() for s, w in links)

    def queueing(self, assignment: dict[str, str]) -> float:
        """Requests waiting or in service on all servers, as queue_length models them (by
        Little's law the sum is proportional to the mean time a request spends at servers)."""
        return sum(self.requests_at(h, cpu) for h, (cpu, _mem) in self.load(assignment).items())

    def requests_at(self, host: str, cpu: float) -> float:
        """queue_length on host with cpu cores of units on it (a server of no share holds
        nothing: the capacity rows keep units off it)."""
        speed = self.host[host].speed
        if cpu <= 0:
            return 0.0
        return queue_length(cpu / speed) if speed > 0 else queue_length(1.0)

    def added_queueing_cost(self, name: str, host: str, used: dict[str, list[float]]) -> float:
        """What placing unit name on host adds to the priced queueing, given the servers'
        load `used` without it (0 when queueing has no price)."""
        if self.queue_price <= 0:
            return 0.0
        cpu = used[host][0]
        return self.queue_price * (self.requests_at(host, cpu + self.unit[name].cpu) -
                                   self.requests_at(host, cpu))

    def trunk_traffic(self, assignment: dict[str, str]) -> float:
        """Traffic times trunk hops: what crosses the inter-switch links."""
        total = sum(w * self.switch_distance(self.host[assignment[a]].switch,
                                             self.host[assignment[b]].switch)
                    for (a, b), w in self.edges.items())
        return total + sum(w * self.switch_distance(self.host[assignment[n]].switch, s)
                           for n, links in self.anchored.items() for s, w in links)

    def unit_cost(self, name: str, host: str, assignment: dict[str, str]) -> float:
        """What unit name adds to the cost on host, given where its peers are."""
        c = sum(w * self.distance(host, assignment[p])
                for p, w in self.neighbours[name].items() if p in assignment)
        return c + sum(w * self.anchor_distance(host, s) for s, w in self.anchored[name])

    def unit_costs(self, name: str, assignment: dict[str, str]) -> Callable[[str], float]:
        """unit_cost(name, host, assignment) as a function of host (equal up to rounding),
        for weighing many servers at once: a server's distance to a peer or an anchor is 1
        plus the switches' distance (less 1 on the peer's own server), so the peers' and
        anchors' weights are summed by switch once and each switch's cost computed once."""
        by_switch: dict[str, float] = {}
        on_host: dict[str, float] = {}
        for p, w in self.neighbours[name].items():
            h = assignment.get(p)
            if h is not None:
                s = self.host[h].switch
                by_switch[s] = by_switch.get(s, 0.0) + w
                on_host[h] = on_host.get(h, 0.0) + w
        for s, w in self.anchored[name]:
            by_switch[s] = by_switch.get(s, 0.0) + w
        pos = self.switch_position
        at_switch: dict[str, float] = {}

        def cost(host: str) -> float:
            s = self.host[host].switch
            c = at_switch.get(s)
            if c is None:
                c = at_switch[s] = sum(w * (1 + abs(pos[s] - pos[t]))
                                       for t, w in by_switch.items())
            return c - on_host.get(host, 0.0)
        return cost

    # -------------------------------------------------------------- feasibility
    def load(self, assignment: dict[str, str]) -> dict[str, list[float]]:
        used = {h.name: [0.0, 0.0] for h in self.hosts}
        for name, host in assignment.items():
            used[host][0] += self.unit[name].cpu
            used[host][1] += self.unit[name].memory_mb
        return used

    def fits(self, name: str, host: str, assignment: dict[str, str],
             used: dict[str, list[float]]) -> bool:
        """Whether unit name may go to host: capacity, a replica of its service not there
        already, its pin."""
        u, h = self.unit[name], self.host[host]
        if self.pinned.get(name, host) != host:
            return False
        if used[host][0] + u.cpu > h.cpu + 1e-9 or \
                used[host][1] + u.memory_mb > h.memory_mb + 1e-9:
            return False
        return not any(assignment.get(r) == host for r in self.replicas[u.service]
                       if r != name)

    def violations(self, assignment: dict[str, str]) -> list[str]:
        """Everything wrong with a complete assignment (empty: feasible)."""
        out = [f"{n}: not placed" for n in self.unit if n not in assignment]
        out += [f"{n}: unknown server {h!r}" for n, h in assignment.items()
                if h not in self.host]
        if out:
            return out
        used = self.load(assignment)
        for h in self.hosts:
            cpu, mem = used[h.name]
            if cpu > h.cpu + 1e-9:
                out.append(f"{h.name}: CPU {cpu:.3g} of {h.cpu:.3g} cores")
            if mem > h.memory_mb + 1e-9:
                out.append(f"{h.name}: memory {mem:.4g} of {h.memory_mb:.4g} MB")
        for service, names in self.replicas.items():
            hosts = [assignment[n] for n in names]
            if len(set(hosts)) < len(hosts):
                out.append(f"{service}: two replicas on one server")
        out += [f"{n}: pinned to {h}" for n, h in self.pinned.items() if assignment[n] != h]
        return out

    def check_solvable(self) -> None:
        """Refuse what cannot fit at all, naming the reason (PlacementError)."""
        need_cpu = sum(u.cpu for u in self.units)
        need_mem = sum(u.memory_mb for u in self.units)
        have_cpu = sum(h.cpu for h in self.hosts)
        have_mem = sum(h.memory_mb for h in self.hosts)
        if need_cpu > have_cpu + 1e-9:
            raise PlacementError(f"capacity: the units need {need_cpu:.3g} cores, the "
                                 f"servers have {have_cpu:.3g}")
        if need_mem > have_mem + 1e-9:
            raise PlacementError(f"capacity: the units need {need_mem:.4g} MB, the servers "
                                 f"have {have_mem:.4g}")
        for u in self.units:
            if not any(u.cpu <= h.cpu + 1e-9 and u.memory_mb <= h.memory_mb + 1e-9
                       for h in self.hosts):
                raise PlacementError(f"capacity: {u.name} ({u.cpu:.3g} cores, "
                                     f"{u.memory_mb:.4g} MB) fits on no server")
        widest = max((len(v) for v in self.replicas.values()), default=0)
        if widest > len(self.hosts):
            raise PlacementError(f"replicas: a service has {widest} replicas for "
                                 f"{len(self.hosts)} servers")
