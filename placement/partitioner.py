"""Where each microservice instance runs: the placement of Ahmed et al. (PLOS ONE), as plain
Python. Units (instances with the CPU and memory they need) go to servers so that their
traffic times the distance it travels is least, under the servers' capacities and with a
service's replicas on different servers (docs/placement.md, "The placement": the cost and
plan()'s steps).

- plan: the fewest servers near the clients, a METIS partition, parts mapped by distance,
  local search; the exact program (placement/milp.py, HiGHS) within a time limit up to
  EXACT_MAX_UNITS units, first on two or three servers' units at a time, then on all,
  which also bounds the optimum; the cheapest kept, every attempt and the gap to the bound
  reported;
- choose_hosts, metis_parts, map_parts, repair, refine, replace_groups: plan()'s steps;
- replan, moved: a new plan within a budget of moves from the current one;
- should_replace: the hysteresis (re-place only for a set gain, after a dwell time);
- spread, random_placement, greedy_network_aware: the baselines; exact: the exact program alone;
- PlacementPlan: a placement and what it costs; the problem's types (Problem, Unit, Host,
  PlacementError) are placement/model.py's.
"""
from __future__ import annotations

import bisect
import itertools
import math
import random
import time
from dataclasses import dataclass, field

from placement import milp
from placement.model import PlacementError, Problem

EXACT_MAX_UNITS = 400      # the exact program's size grows with units x servers x edges
EXACT_TIME_LIMIT_S = 10.0
REPLACE_SHARE = 0.3       # of the exact step's time: servers' units placed again, few at once
HEADROOM = 0.2            # capacity kept free when choosing how many servers to use
METIS_SEED = 1
METIS_UFACTOR = 30        # allowed imbalance, 1/1000 (METIS's k-way default)


@dataclass
class PlacementPlan:
    assignment: dict[str, str]
    cost: float
    trunk_traffic: float
    hosts_used: int
    method: str
    optimal: bool = False             # the exact program proved this the optimum
    bound: float | None = None        # every placement costs at least this (None: unknown)
    attempts: list[dict] = field(default_factory=list)   # each method tried, and its outcome
    traffic_cost: float | None = None   # its traffic x distance alone
    queueing: float | None = None       # requests at its servers, as the objective models them

    @property
    def gap(self) -> float | None:
        """(cost - bound) / cost, the solvers' convention: the optimum costs at least
        (1 - gap) x this plan's cost (0: optimal; None: no bound)."""
        if self.bound is None:
            return None
        return 0.0 if self.cost <= 0 else max(0.0, (self.cost - self.bound) / self.cost)

    def as_dict(self) -> dict:
        return {"assignment": dict(sorted(self.assignment.items())), "cost": self.cost,
                "trunk_traffic": self.trunk_traffic, "servers_used": self.hosts_used,
                "traffic_cost": self.traffic_cost, "queueing": self.queueing,
                "method": self.method, "optimal": self.optimal, "bound": self.bound,
                "gap": self.gap, "attempts": self.attempts}


def _plan(problem: Problem, assignment: dict[str, str], method: str,
          optimal: bool = False) -> PlacementPlan:
    return PlacementPlan(dict(assignment), problem.cost(assignment),
                         problem.trunk_traffic(assignment),
                         len(set(assignment.values())), method, optimal,
                         traffic_cost=problem.traffic_cost(assignment),
                         queueing=problem.queueing(assignment))


# ------------------------------------------------------------------ baselines
def spread(problem: Problem) -> PlacementPlan:
    """Round robin over the servers in order: unit k on the k-th server with room (the
    testbed's default layout spreads every service over every server)."""
    assignment: dict[str, str] = {}
    used = problem.load({})
    names = [h.name for h in problem.hosts]
    k = 0
    for u in problem.units:
        for step in range(len(names)):
            host = names[(k + step) % len(names)]
            if problem.fits(u.name, host, assignment, used):
                break
        else:
            raise PlacementError(f"spread: no server has room for {u.name}")
        _place(assignment, used, problem, u.name, host)
        k = (names.index(host) + 1) % len(names)
    return _plan(problem, assignment, "spread")


def random_placement(problem: Problem, seed: int = 1) -> PlacementPlan:
    """Each unit, in random order, on a random server with room."""
    rng = random.Random(seed)
    for _attempt in range(100):
        assignment: dict[str, str] = {}
        used = problem.load({})
        order = list(problem.units)
        rng.shuffle(order)
        ok = True
        for u in order:
            room = [h.name for h in problem.hosts
                    if problem.fits(u.name, h.name, assignment, used)]
            if not room:
                ok = False
                break
            _place(assignment, used, problem, u.name, rng.choice(room))
        if ok:
            return _plan(problem, assignment, f"random (seed {seed})")
    raise PlacementError("random: found no placement with room for every unit")


def greedy_network_aware(problem: Problem) -> PlacementPlan:
    """The Kubernetes network-aware scheduler's idea (Diktyo): place units one at a time,
    those with the most traffic first (pinned ones before all), each on the server where
    its traffic times distance to its already placed peers (and anchors) is least; ties to
    the server with most free CPU."""
    assignment: dict[str, str] = {}
    used = problem.load({})
    volume = {u.name: sum(problem.neighbours[u.name].values()) +
              sum(w for _s, w in problem.anchored[u.name]) for u in problem.units}
    order = sorted(problem.units, key=lambda u: (u.name not in problem.pinned,
                                                 -volume[u.name], u.name))

    def free_key(h: str) -> tuple:
        return -(problem.host[h].cpu - used[h][0]), h
    # per switch, its servers by most free CPU: a unit's cost on a server holding none of
    # its peers depends on the switch alone, so there the first with room is the best
    by_free = {s: sorted(map(free_key, hosts)) for s, hosts in problem.on_switch.items()}
    for u in order:
        peers = {assignment[p] for p in problem.neighbours[u.name] if p in assignment}
        options = [h for h in peers if problem.fits(u.name, h, assignment, used)]
        for ranked in by_free.values():
            for _key, h in ranked:
                if h not in peers and problem.fits(u.name, h, assignment, used):
                    options.append(h)
                    break
        if not options:
            raise PlacementError(f"greedy: no server has room for {u.name}")
        best = min(options, key=lambda h: (problem.unit_cost(u.name, h, assignment),
                                           *free_key(h)))
        ranked = by_free[problem.host[best].switch]
        ranked.remove(free_key(best))
        _place(assignment, used, problem, u.name, best)
        bisect.insort(ranked, free_key(best))
    return _plan(problem, assignment, "greedy network-aware")


def _place(assignment, used, problem, name, host) -> None:
    assignment[name] = host
    used[host][0] += problem.unit[name].cpu
    used[host][1] += problem.unit[name].memory_mb


def _unplace(assignment, used, problem, name) -> None:
    host = assignment.pop(name)
    used[host][0] -= problem.unit[name].cpu
    used[host][1] -= problem.unit[name].memory_mb


# ------------------------------------------------------------------ ours
def choose_hosts(problem: Problem, headroom: float = HEADROOM,
                 near: str | None = None) -> list[str]:
    """The fewest servers that hold every unit with headroom (the paper's consolidation),
    taken nearest first to the switch `near` (the clients'), then by capacity; at least as
    many as the widest service has replicas, and every pinned unit's server."""
    pos = problem.switch_position
    origin = pos[near] if near in pos else 0
    ranked = sorted(problem.hosts, key=lambda h: (abs(pos[h.switch] - origin), -h.cpu,
                                                  -h.memory_mb, h.name))
    need_cpu = (1 + headroom) * sum(u.cpu for u in problem.units)
    need_mem = (1 + headroom) * sum(u.memory_mb for u in problem.units)
    widest = max((len(v) for v in problem.replicas.values()), default=1)
    chosen = [h.name for h in problem.hosts if h.name in set(problem.pinned.values())]
    for h in ranked:
        if len(chosen) >= widest and \
                sum(problem.host[c].cpu for c in chosen) >= need_cpu - 1e-9 and \
                sum(problem.host[c].memory_mb for c in chosen) >= need_mem - 1e-9:
            break
        if h.name not in chosen:
            chosen.append(h.name)
    return chosen


def metis_parts(problem: Problem, hosts: list[str], seed: int = METIS_SEED) -> list[int]:
    """pymetis k-way partition of the units into len(hosts) parts, sized by the hosts' CPU
    capacities (target part weights), minimising the cut traffic."""
    import pymetis   # deferred: the METIS binding, only when METIS partitions
    names = [u.name for u in problem.units]
    index = {n: k for k, n in enumerate(names)}
    top = max(problem.edges.values(), default=1.0) or 1.0
    xadj, adjncy, eweights = [0], [], []
    for n in names:
        for peer, w in sorted(problem.neighbours[n].items()):
            adjncy.append(index[peer])
            eweights.append(max(1, round(1000 * w / top)))
        xadj.append(len(adjncy))
    vweights = [max(1, round(1000 * problem.unit[n].cpu)) for n in names]
    caps = [problem.host[h].cpu for h in hosts]
    total = sum(caps) or 1.0
    opts = pymetis.Options(seed=seed, ufactor=METIS_UFACTOR)
    result = pymetis.part_graph(len(hosts), xadj=xadj, adjncy=adjncy, vweights=vweights,
                                eweights=eweights or None,
                                tpwgts=[c / total for c in caps], options=opts)
    return list(result[1])


def map_parts(problem: Problem, parts: list[int], hosts: list[str],
              current: dict[str, str] | None = None, move_cost: float = 0.0
              ) -> dict[str, str]:
    """Parts to hosts by distance: every permutation up to 6 hosts (those that fit the
    capacities, if any do), the one with the least cost plus move_cost per unit that moves
    from `current`; greedily beyond (parts with the most traffic first, each to the free
    host with room for it where it costs least against the parts already mapped)."""
    names = [u.name for u in problem.units]
    k = len(hosts)

    def assignment_for(perm) -> dict[str, str]:
        return {n: hosts[perm[p]] for n, p in zip(names, parts)}

    def score(a):
        moves = sum(1 for n in names if current and current.get(n) not in (None, a[n]))
        return (bool(problem.violations(a)), problem.cost(a) + move_cost * moves)
    if k <= 6:
        return min((assignment_for(perm) for perm in itertools.permutations(range(k))),
                   key=score)
    members: dict[int, list[str]] = {}
    for n, p in zip(names, parts):
        members.setdefault(p, []).append(n)
    volume = {p: sum(sum(problem.neighbours[n].values()) +
                     sum(w for _s, w in problem.anchored[n]) for n in ns)
              for p, ns in members.items()}
    mapping: dict[int, str] = {}
    placed: dict[str, str] = {}
    for p in sorted(members, key=lambda p: -volume[p]):
        free = [h for h in hosts if h not in mapping.values()]
        need = sum(problem.unit[n].cpu for n in members[p])
        # a server the part fits on, if one is left (else the largest: repair moves the rest)
        room = [h for h in free if problem.host[h].cpu >= need - 1e-9] or \
            [max(free, key=lambda h: (problem.host[h].cpu, h))]
        # servers holding a mapped peer, and per switch the first other (by name): on a
        # server without peers the part's cost depends on the switch alone
        peers = {placed[q] for n in members[p] for q in problem.neighbours[n] if q in placed}
        first: dict[str, str] = {}
        for h in sorted(room):
            if h not in peers:
                first.setdefault(problem.host[h].switch, h)
        options = [h for h in room if h in peers] + list(first.values())
        best = min(options, key=lambda h: (sum(problem.unit_cost(n, h, placed)
                                               for n in members[p]), h))
        mapping[p] = best
        placed.update({n: best for n in members[p]})
    for p in range(k):             # parts METIS left empty
        if p not in mapping:
            mapping[p] = next(h for h in hosts if h not in mapping.values())
    return {n: mapping[p] for n, p in zip(names, parts)}


def repair(problem: Problem, assignment: dict[str, str]) -> dict[str, str]:
    """Make an assignment feasible when a partition left a server over its capacity (METIS
    balances within a few per cent) or two replicas together: move the unit that costs
    least to move, to the server with room where it costs least, until nothing is wrong."""
    a = dict(assignment)
    for _ in range(4 * len(a) + 1):
        used = problem.load(a)
        bad = [h.name for h in problem.hosts
               if used[h.name][0] > h.cpu + 1e-9 or used[h.name][1] > h.memory_mb + 1e-9]
        crowded = [n for names in problem.replicas.values() for n in names
                   if any(a[r] == a[n] for r in names if r < n)]
        movable = [n for n in a if n not in problem.pinned and (a[n] in bad or n in crowded)]
        if not movable:
            return a
        best = None
        for n in movable:
            origin = a[n]
            traffic = problem.unit_costs(n, a)
            _unplace(a, used, problem, n)
            here = traffic(origin) + problem.added_queueing_cost(n, origin, used)
            for h in problem.hosts:
                if h.name != origin and problem.fits(n, h.name, a, used):
                    key = (traffic(h.name) + problem.added_queueing_cost(n, h.name, used) - here,
                           n, h.name)
                    if best is None or key < best:
                        best = key
            _place(a, used, problem, n, origin)
        if best is None:
            raise PlacementError("capacity: the units do not fit the servers "
                                 "(no move makes room)")
        a[best[1]] = best[2]
    raise PlacementError("capacity: could not repair the placement")


def refine(problem: Problem, assignment: dict[str, str], max_passes: int = 20,
           swaps: bool | None = None) -> dict[str, str]:
    """Local search from a feasible assignment: move a unit to another server, or swap two
    units on different servers, whenever that lowers the cost and keeps every limit, until
    nothing helps (the paper's refinement, a unit moved next to the peer it talks to most,
    is one such move); when neither helps, two servers' whole contents exchanged. Swaps
    only between units that talk to each other's servers, and only up to a few hundred
    units unless asked."""
    a = dict(assignment)
    used = problem.load(a)
    names = [u.name for u in problem.units if u.name not in problem.pinned]
    swaps = len(names) <= 300 if swaps is None else swaps
    by_load = _ServersByLoad(problem, used)
    for _ in range(max_passes):
        improved = False
        for n in names:
            origin = a[n]
            traffic = problem.unit_costs(n, a)
            _unplace(a, used, problem, n)
            here = traffic(origin) + problem.added_queueing_cost(n, origin, used)
            target, gain = origin, 1e-9
            for h in _move_targets(problem, n, origin, a, used, by_load):
                g = here - (traffic(h) + problem.added_queueing_cost(n, h, used))
                if g > gain:
                    target, gain = h, g
            _place(a, used, problem, n, target)
            by_load.changed(origin, target)
            improved |= target != origin
        if swaps:
            for u in names:
                wanted = {a[p] for p in problem.neighbours[u]} - {a[u]}
                for v in [x for x in names if a[x] in wanted]:
                    if _try_swap(problem, a, used, u, v):
                        improved = True
            # when no unit helps alone: whole servers' contents exchanged (a group the
            # single moves cannot carry, e.g. toward the clients' switch)
            if not improved:
                improved = _swap_contents(problem, a, used)
            by_load = _ServersByLoad(problem, used)
        if not improved:
            break
    return a


def _swap_contents(problem: Problem, a: dict[str, str], used) -> bool:
    """Exchange what two servers hold (one may be empty) wherever that lowers the cost and
    each side fits the other's capacity; pinned units' servers stay. Whether any did."""
    on: dict[str, list[str]] = {h.name: [] for h in problem.hosts}
    for n, h in a.items():
        on[h].append(n)
    fixed = set(problem.pinned.values())
    hosts = [h.name for h in problem.hosts if h.name not in fixed]
    improved = False

    def outside(group: list[str], here: str, there: str, other: str) -> float:
        """The group's traffic beyond both servers, and its anchors, from `here` minus
        from `there` (edges between the two servers keep their length)."""
        gain = 0.0
        for n in group:
            for p, w in problem.neighbours[n].items():
                if a[p] not in (here, other):
                    gain += w * (problem.distance(here, a[p]) - problem.distance(there, a[p]))
            for s, w in problem.anchored[n]:
                gain += w * (problem.anchor_distance(here, s) - problem.anchor_distance(there, s))
        return gain
    for i, h1 in enumerate(hosts):
        for h2 in hosts[i + 1:]:
            g1, g2 = on[h1], on[h2]
            if not g1 and not g2:
                continue
            c1, c2 = problem.host[h1], problem.host[h2]
            if used[h1][0] > c2.cpu + 1e-9 or used[h1][1] > c2.memory_mb + 1e-9 or \
                    used[h2][0] > c1.cpu + 1e-9 or used[h2][1] > c1.memory_mb + 1e-9:
                continue
            gain = outside(g1, h1, h2, h2) + outside(g2, h2, h1, h1)
            if problem.queue_price > 0:     # each server's load onto the other's share
                gain += _pair_queueing_cost(problem, used, h1, h2) - problem.queue_price * (
                    problem.requests_at(h1, used[h2][0]) + problem.requests_at(h2, used[h1][0]))
            if gain > 1e-9:
                for n in g1:
                    a[n] = h2
                for n in g2:
                    a[n] = h1
                on[h1], on[h2] = g2, g1
                used[h1], used[h2] = used[h2], used[h1]
                improved = True
    return improved


class _ServersByLoad:
    """On each switch whose servers have one CPU share, its servers ordered by the CPU in
    use (then by the servers' order): under a queue price the first of them with room is
    where a unit adds least queueing on that switch (_move_targets). Built from the loads
    `used`; whoever changes a server's load says so (changed), except the server a unit is
    taken from while its moves are weighed, which the moves skip."""

    def __init__(self, problem: Problem, used: dict[str, list[float]]):
        self.problem, self.used = problem, used
        self.order: dict[str, list[tuple[float, int, str]]] = {}
        self.entry: dict[str, tuple[float, int, str]] = {}
        if problem.queue_price <= 0:
            return
        for switch, hosts in problem.on_switch.items():
            if problem.switch_share[switch] is not None:
                self.order[switch] = sorted(self._entry(h) for h in hosts)
                self.entry.update((e[2], e) for e in self.order[switch])

    def _entry(self, host: str) -> tuple[float, int, str]:
        return self.used[host][0], self.problem.host_index[host], host

    def changed(self, *hosts: str) -> None:
        for h in hosts:
            old = self.entry.get(h)
            if old is None or old[0] == self.used[h][0]:
                continue
            entries = self.order[self.problem.host[h].switch]
            del entries[bisect.bisect_left(entries, old)]
            self.entry[h] = self._entry(h)
            bisect.insort(entries, self.entry[h])


def _move_targets(problem: Problem, n: str, origin: str, a, used,
                  by_load: _ServersByLoad | None = None) -> list:
    """The servers worth trying for unit n, in the servers' order: those of its peers, and on
    each switch the other one with room where it adds least queueing (the first, when
    queueing has no price). A unit's traffic cost on a server holding none of its peers
    depends on the server's switch alone, so the rest of a switch's servers cannot do
    better than that one (the same move as trying every server, at a fraction of the work
    on hundreds of servers). by_load, when given, must hold `used` but for origin's load."""
    peers = {a[p] for p in problem.neighbours[n] if p in a}
    out = [h for h in peers if h != origin and problem.fits(n, h, a, used)]
    priced = problem.queue_price > 0
    for switch, hosts in problem.on_switch.items():
        if by_load is not None and switch in by_load.order:
            h = next((h for _, _, h in by_load.order[switch] if h != origin and
                      h not in peers and problem.fits(n, h, a, used)), None)
            if h is not None:
                out.append(h)
            continue
        best: tuple[float, str] | None = None
        same_share = problem.switch_share[switch] is not None
        for h in hosts:
            if h == origin or h in peers:
                continue
            if not priced:
                if problem.fits(n, h, a, used):
                    best = (0.0, h)
                    break
                continue
            # equal shares: the least used server adds the least queue; else its price.
            # The limits are checked only for a server better than the best so far.
            key = used[h][0] if same_share else problem.added_queueing_cost(n, h, used)
            if (best is None or key < best[0]) and problem.fits(n, h, a, used):
                best = (key, h)
        if best is not None:
            out.append(best[1])
    return sorted(out, key=problem.host_index.__getitem__)


def _pair_queueing_cost(problem: Problem, used, h1: str, h2: str) -> float:
    """The priced queueing on two servers at their load `used` (0 without a price)."""
    if problem.queue_price <= 0:
        return 0.0
    return problem.queue_price * (problem.requests_at(h1, used[h1][0]) +
                                  problem.requests_at(h2, used[h2][0]))


def _try_swap(problem: Problem, a, used, u: str, v: str) -> bool:
    hu, hv = a[u], a[v]
    if hu == hv:
        return False
    shared = problem.neighbours[u].get(v, 0.0) * problem.distance(hu, hv)
    before = problem.unit_cost(u, hu, a) + problem.unit_cost(v, hv, a) - shared \
        + _pair_queueing_cost(problem, used, hu, hv)
    _unplace(a, used, problem, u)
    _unplace(a, used, problem, v)
    if problem.fits(u, hv, a, used):
        _place(a, used, problem, u, hv)
        if problem.fits(v, hu, a, used):
            _place(a, used, problem, v, hu)
            after = problem.unit_cost(u, hv, a) + problem.unit_cost(v, hu, a) - shared \
                + _pair_queueing_cost(problem, used, hu, hv)
            if after < before - 1e-9:
                return True
            _unplace(a, used, problem, v)
        _unplace(a, used, problem, u)
    _place(a, used, problem, u, hu)
    _place(a, used, problem, v, hv)
    return False


def replace_groups(problem: Problem, assignment: dict[str, str], time_limit_s: float,
                   sizes: tuple[int, ...] = (2, 3)) -> dict[str, str]:
    """Large-neighbourhood search from a feasible assignment: the units of a few servers at
    a time (pairs, then triples) placed again by the exact program (placement/milp.py) with
    every other unit where it is, kept when cheaper, until no group helps or time_limit_s
    is spent. Groups: servers linked by traffic (or empty, on a switch of their own in the
    group), so that a move between them can matter."""
    deadline = time.perf_counter() + time_limit_s
    a = dict(assignment)
    for size in sizes:
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for group in _server_groups(problem, a, size, deadline):
                if time.perf_counter() >= deadline:
                    break
                sub = _sub_problem(problem, a, group)
                before = {n: a[n] for n in sub.unit}
                sol = milp.solve(sub, max(0.1, min(1.0, deadline - time.perf_counter())),
                                 start=before, trees=False)
                if sol.assignment is not None and sub.cost(sol.assignment) < \
                        sub.cost(before) - 1e-9 * max(1.0, sub.cost(before)):
                    a.update(sol.assignment)
                    improved = True
    return a


def _server_groups(problem: Problem, a: dict[str, str], size: int,
                   deadline: float = math.inf) -> list[tuple[str, ...]]:
    """Sets of `size` servers worth placing again together: every server in it holds a unit
    and talks to another in it, or is the first empty server of its switch; those found by
    the deadline (perf_counter), the triples of many servers being many."""
    links: dict[str, set[str]] = {h.name: set() for h in problem.hosts}
    for (u, v) in problem.edges:
        if a[u] != a[v]:
            links[a[u]].add(a[v])
            links[a[v]].add(a[u])
    held = set(a.values())
    empty: dict[str, str] = {}       # switch -> its first empty server
    for h in problem.hosts:
        if h.name not in held:
            empty.setdefault(h.switch, h.name)
    hosts = [h.name for h in problem.hosts if h.name in held or h.name in empty.values()]
    out = []
    for k, group in enumerate(itertools.combinations(hosts, size)):
        if k % 1000 == 999 and time.perf_counter() >= deadline:
            break
        members = set(group)
        if all(h not in held or links[h] & members for h in group) and \
                any(h in held for h in group):
            out.append(group)
    return out


def _sub_problem(problem: Problem, a: dict[str, str], group: tuple[str, ...]) -> Problem:
    """The units on the group's servers, on those servers alone; an edge to a unit elsewhere
    becomes an anchor to that unit's switch (its length from any server of the group is
    1 + hops, as the peer is on none of them)."""
    inside = {n for n, h in a.items() if h in group}
    anchors: dict[tuple[str, str], float] = {}
    for n in inside:
        for s, w in problem.anchored[n]:
            anchors[(n, s)] = anchors.get((n, s), 0.0) + w
        for q, w in problem.neighbours[n].items():
            if q not in inside:
                key = (n, problem.host[a[q]].switch)
                anchors[key] = anchors.get(key, 0.0) + w
    return Problem([u for u in problem.units if u.name in inside],
                   [problem.host[h] for h in group],
                   edges={(x, y): w for (x, y), w in problem.edges.items()
                          if x in inside and y in inside},
                   anchors=anchors, switch_position=problem.switch_position,
                   pinned={n: h for n, h in problem.pinned.items() if n in inside},
                   queue_price=problem.queue_price)


def _exact_attempt(problem: Problem, time_limit_s: float, attempts: list[dict], label: str,
                   **budget):
    """The exact program (placement/milp.py) for at most time_limit_s, up to
    EXACT_MAX_UNITS units (else None, and nothing is recorded); its outcome appended to
    attempts. budget: milp.solve's current, max_moves and start."""
    if time_limit_s <= 0 or len(problem.units) > EXACT_MAX_UNITS:
        return None
    sol = milp.solve(problem, time_limit_s, **budget)
    attempts.append({"method": f"{label} (HiGHS, {sol.status} after {sol.seconds:.1f} s)",
                     "cost": None if sol.assignment is None else problem.cost(sol.assignment),
                     "bound": sol.bound,
                     "error": None if sol.assignment else "no placement found in time"})
    return sol


def exact(problem: Problem, time_limit_s: float = EXACT_TIME_LIMIT_S) -> PlacementPlan:
    """The exact program alone (placement/milp.py) for at most time_limit_s: its best
    placement, marked optimal when proven, with its bound. PlacementError when the problem
    is beyond EXACT_MAX_UNITS units or the solver found no placement in time."""
    problem.check_solvable()
    if len(problem.units) > EXACT_MAX_UNITS:
        raise PlacementError(f"exact: {len(problem.units)} units, more than the program "
                             f"takes ({EXACT_MAX_UNITS})")
    attempts: list[dict] = []
    sol = _exact_attempt(problem, time_limit_s, attempts, "exact program")
    if sol is None or sol.assignment is None:
        raise PlacementError(f"exact: {attempts[-1]['method'] if attempts else 'not run'}: "
                             "no placement found in time")
    result = _plan(problem, sol.assignment, "exact program", optimal=sol.optimal)
    result.bound, result.attempts = sol.bound, attempts
    return result


def plan(problem: Problem, near: str | None = None, current: dict[str, str] | None = None,
         move_cost: float = 0.0, headroom: float = HEADROOM,
         exact_time_limit_s: float = EXACT_TIME_LIMIT_S) -> PlacementPlan:
    """Our placement: the fewest servers near `near` with headroom, a METIS partition sized
    by their capacities, parts mapped by distance, repaired to the limits and refined by
    local search; the greedy score refined as well; and, up to EXACT_MAX_UNITS units, the
    exact program for at most exact_time_limit_s in all (0: not run): REPLACE_SHARE of it
    on the cheapest placement so far, a few servers at a time (replace_groups), the rest on
    the whole program started from the result, whose bound says how far the plan may be
    from the optimum. The cheapest wins (then the one that uses fewer servers). Every
    attempt is in the plan's attempts: its method and cost, or why it failed."""
    problem.check_solvable()
    results: list[tuple[dict[str, str], str]] = []
    attempts: list[dict] = []

    def attempt(method: str, make) -> None:
        try:
            a = make()
        except PlacementError as exc:
            attempts.append({"method": method, "cost": None, "error": str(exc)})
            return
        attempts.append({"method": method, "cost": problem.cost(a), "error": None})
        results.append((a, method))
    hosts = choose_hosts(problem, headroom, near)
    # A few starts: the fewest servers and one or two more (capacity headroom against
    # traffic), METIS with a few seeds; fewer on large graphs, where each costs more.
    small = len(problem.units) <= 300
    extra = [h.name for h in problem.hosts if h.name not in hosts]
    counts = list(range(min(3 if small else 2, len(extra) + 1)))
    if problem.queue_price > 0:
        # a priced queue favours spreading the load: starts on every server and halfway
        counts += [m for m in (len(extra) // 2, len(extra)) if m not in counts]
    for more in counts:
        chosen = hosts + extra[:more]
        for seed in (METIS_SEED, METIS_SEED + 1, METIS_SEED + 2)[:3 if small else 1]:
            if len(chosen) == 1:
                attempt("one server + refinement", lambda chosen=chosen: refine(
                    problem, repair(problem, {u.name: chosen[0] for u in problem.units}),
                    swaps=small))
                break
            attempt(f"metis k-way ({len(chosen)} servers, seed {seed}) + refinement",
                    lambda chosen=chosen, seed=seed: refine(problem, repair(problem, map_parts(
                        problem, metis_parts(problem, chosen, seed), chosen, current,
                        move_cost)), swaps=small))
    attempt("greedy + refinement",
            lambda: refine(problem, greedy_network_aware(problem).assignment))
    bound, proven, sol = None, None, None
    if results and exact_time_limit_s > 0 and len(problem.units) <= EXACT_MAX_UNITS:
        started = time.perf_counter()
        # the cheapest placement so far, two then three servers at a time placed again
        # exactly; then the whole program starts from the result (its incumbent)
        start = min(results, key=lambda r: problem.cost(r[0]))[0]
        attempt("cheapest so far + servers re-placed by the exact program, 2-3 at a time",
                lambda: replace_groups(problem, start, REPLACE_SHARE * exact_time_limit_s))
        start = min(results, key=lambda r: problem.cost(r[0]))[0]
        sol = _exact_attempt(problem, exact_time_limit_s - (time.perf_counter() - started),
                             attempts, "exact program", start=start)
    if sol is not None:
        bound = sol.bound
        if sol.assignment is not None:
            results.append((sol.assignment, "exact program"))
            if sol.optimal:
                proven = problem.cost(sol.assignment)
    if not results:
        raise PlacementError("capacity: found no placement that fits every unit ("
                             + "; ".join(f"{a['method']}: {a['error']}" for a in attempts) + ")")
    # ties to a heuristic: its answer does not depend on the solver's clock
    best_a, method = min(results, key=lambda r: (problem.cost(r[0]), len(set(r[0].values())),
                                                 r[1] == "exact program"))
    cost = problem.cost(best_a)
    result = _plan(problem, best_a, method, optimal=proven is not None and
                   cost <= proven + 1e-9 * max(1.0, proven))
    result.bound, result.attempts = bound, attempts
    return result


def moved(before: dict[str, str], after: dict[str, str]) -> int:
    """How many units an assignment moves from another."""
    return sum(1 for n, h in after.items() if before.get(n) != h)


def replan(problem: Problem, current: dict[str, str], max_moved_share: float = 0.10,
           near: str | None = None, headroom: float = HEADROOM,
           exact_time_limit_s: float = EXACT_TIME_LIMIT_S) -> PlacementPlan:
    """A new plan that moves at most max_moved_share of the units from `current` (the
    traffic drifted; moving an instance costs a start, a drain and its warm state): the
    fresh plan when it moves few enough; else the cheaper of: from `current` made feasible,
    the single moves with the largest gain, one at a time, until the budget is spent or
    none helps; and (up to EXACT_MAX_UNITS units) the exact program with at most that many
    moves. Its bound is the fresh plan's (it holds for any placement); attempts lists all."""
    fresh = plan(problem, near=near, headroom=headroom, exact_time_limit_s=exact_time_limit_s)
    budget = int(max_moved_share * len(problem.units) + 1e-9)
    if moved(current, fresh.assignment) <= budget:
        return fresh
    a = repair(problem, {n: current[n] for n in problem.unit if n in current} |
               {n: h for n, h in fresh.assignment.items() if n not in current})
    used = problem.load(a)
    by_load = _ServersByLoad(problem, used)
    movable = [u.name for u in problem.units if u.name not in problem.pinned]
    while True:
        spent = moved(current, a)
        best = None
        for n in movable:
            origin = a[n]
            # a unit already moved may move again (or home) without spending budget
            if current.get(n) == origin and spent >= budget:
                continue
            traffic = problem.unit_costs(n, a)
            _unplace(a, used, problem, n)
            here = traffic(origin) + problem.added_queueing_cost(n, origin, used)
            for h in _move_targets(problem, n, origin, a, used, by_load):
                gain = here - (traffic(h) + problem.added_queueing_cost(n, h, used))
                if gain > 1e-9 and (best is None or gain > best[0]):
                    best = (gain, n, h)
            _place(a, used, problem, n, origin)
            by_load.changed(origin)
        if best is None:
            break
        _, n, h = best
        origin = a[n]
        _unplace(a, used, problem, n)
        _place(a, used, problem, n, h)
        by_load.changed(origin, h)
    method = f"single moves within {budget} from the current placement"
    attempts = [{"method": method, "cost": problem.cost(a), "error": None}]
    name = f"exact program within {budget} moves"
    sol = _exact_attempt(problem, exact_time_limit_s, attempts, name, current=current,
                         max_moves=budget, start=a)
    if sol is not None and sol.assignment is not None and \
            moved(current, sol.assignment) <= max(budget, moved(current, a)) and \
            problem.cost(sol.assignment) < problem.cost(a) - 1e-9:
        a, method = sol.assignment, name
    result = _plan(problem, a, f"re-plan: {method}")
    result.bound, result.attempts = fresh.bound, fresh.attempts + attempts + [
        {"method": "fresh plan", "cost": fresh.cost, "error": None,
         "moves": moved(current, fresh.assignment)}]
    return result


def should_replace(current_cost: float, new_cost: float, since_last_change_s: float | None,
                   min_gain: float = 0.10, min_dwell_s: float = 600.0) -> tuple[bool, str]:
    """Hysteresis: re-place only when the cost falls by at least min_gain (a share of the
    current cost) and the last change is at least min_dwell_s old. (decision, reason)."""
    if since_last_change_s is not None and since_last_change_s < min_dwell_s:
        return False, (f"the last change is {since_last_change_s:.0f} s old, under the "
                       f"{min_dwell_s:.0f} s dwell")
    if current_cost <= 0:
        return False, "the current placement already costs nothing"
    gain = (current_cost - new_cost) / current_cost
    if gain < min_gain:
        return False, f"a gain of {100 * gain:.1f} %, under {100 * min_gain:.0f} %"
    return True, f"a gain of {100 * gain:.1f} %"
