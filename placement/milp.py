"""The placement problem as a mixed-integer linear program, solved by HiGHS (through
highspy, which takes a starting placement): the proven optimum where it finishes in time,
and in any case a lower bound on every placement's cost, so that a plan can say how far
from the optimum it may be (docs/placement.md, "The placement", step 6).

Variables: x[u, h] = 1 when unit u runs on server h; per edge (u, v), s >= x[u, h] - x[v, h]
for every h (s = 1 when u and v are on different servers) and, per link c of the switch
chain, t_c >= |F_u(c) - F_v(c)| (F_u(c) = whether u's switch is at position <= c, linear in
x), whose sum is the trunk hops between u and v. The distance between two units is
(1 - same server) + switch hops, so an edge of weight w costs w * (s + sum t); an anchor's
cost is linear in x. Constraints: each unit on one server, CPU and memory per server, a
service's replicas on different servers, pinned units where they are pinned. Valid
inequalities that only tighten the bound (the relaxation alone would split every unit evenly
over interchangeable servers and cost next to nothing): s >= the same difference summed over
a switch's servers; and per tree of edges whose units need more than k servers' (or
switches') capacity, at least k of its edges cut (or trunk hops): trees along the heaviest
edges, then, for a few rounds before the search, those that the switch-level relaxation (one
server per switch with all its capacity; its optimum is a bound too) breaks.

With a price on queueing (Problem.queue_price), a column per server z_h >= the price times
the tangents of its queue length at TANGENT_LOADS (the queue length is convex in the
load, so the largest tangent is below it, exact at the points): the program's cost is then
at most the real one, so its bound stays a bound, and a placement is called optimal only
when its real cost is within HiGHS's gap of that bound.

- solve(problem, time_limit_s, current, max_moves, start): Solution (assignment or None,
  lower bound, whether proven optimal, status text, seconds), optionally within a budget of
  moves and from a starting placement;
- lower_bound(problem): the bound of the linear relaxation alone (fast, weak).
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

import numpy as np

from placement.model import Host, Problem
from placement.queueing import queue_length, queue_slope

TREE_LEVELS = 3           # tree inequalities for up to this many servers' worth of units
SEPARATION_ROUNDS = 30    # relaxations solved to find the tree inequalities they break
# utilisations where the queue length's tangents are taken (denser where it bends)
TANGENT_LOADS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85,
                 0.9, 0.95)
RELATIVE_GAP = 1e-4       # HiGHS's default mip_rel_gap: what "proven optimal" allows


@dataclass
class Solution:
    assignment: dict[str, str] | None   # None: nothing feasible found in time
    bound: float                        # every placement costs at least this
    optimal: bool                       # the solver proved assignment optimal
    status: str
    seconds: float


class _Model:
    """The program's rows and columns; columns: x (units x hosts), then per edge s and one t
    per link of the switch chain, then (with a price on queueing) one z per host."""

    def __init__(self, problem: Problem, current: dict[str, str] | None = None,
                 max_moves: int | None = None, trees: bool = True,
                 cuts: Problem | None = None, room: dict[str, int] | None = None):
        p = problem
        self.problem = p
        self.cuts = cuts or p      # whose servers' capacities the tree inequalities use
        self.units = [u.name for u in p.units]
        self.hosts = [h.name for h in p.hosts]
        self.edges = list(p.edges.items())
        nu, nh, ne = len(self.units), len(self.hosts), len(self.edges)
        self.nx = nu * nh
        self.pos = [p.switch_position[h.switch] for h in p.hosts]
        self.links = max(p.switch_position.values(), default=0)
        self.per_edge = 1 + self.links
        self.nz = self.nx + self.per_edge * ne          # the first z column
        priced = p.queue_price > 0
        n = self.nz + (nh if priced else 0)
        ui = {name: k for k, name in enumerate(self.units)}
        on_switch: dict[int, list[int]] = {}
        for h, q in enumerate(self.pos):
            on_switch.setdefault(q, []).append(h)

        def x(u: int, h: int) -> int:
            return u * nh + h

        c = np.zeros(n)
        for k, name in enumerate(self.units):
            for h, host in enumerate(self.hosts):
                c[x(k, h)] = sum(w * p.anchor_distance(host, s) for s, w in p.anchored[name])
        rows, cols, vals, lo, hi = [], [], [], [], []
        r = 0

        def row(entries, low, high):
            nonlocal r
            for col, val in entries:
                rows.append(r)
                cols.append(col)
                vals.append(val)
            lo.append(low)
            hi.append(high)
            r += 1
        for k in range(nu):                                  # each unit on one server
            row(((x(k, h), 1.0) for h in range(nh)), 1.0, 1.0)
        for h, server in enumerate(p.hosts):                 # capacities
            row(((x(k, h), p.unit[n_].cpu) for k, n_ in enumerate(self.units)),
                -np.inf, server.cpu + 1e-9)
            if any(p.unit[n_].memory_mb for n_ in self.units):
                row(((x(k, h), p.unit[n_].memory_mb) for k, n_ in enumerate(self.units)),
                    -np.inf, server.memory_mb + 1e-9)
        for names in p.replicas.values():                   # replicas apart
            if len(names) > 1:
                for h in range(nh):
                    row(((x(ui[n_], h), 1.0) for n_ in names), -np.inf,
                        float((room or {}).get(self.hosts[h], 1)))
        for e, ((a, b), w) in enumerate(self.edges):
            s = self.nx + self.per_edge * e
            c[s:s + self.per_edge] = w
            ka, kb = ui[a], ui[b]
            for link in range(self.links):                   # t >= +-(F_a(c) - F_b(c))
                left = [h for h in range(nh) if self.pos[h] <= link]
                for sign in (1.0, -1.0):
                    row([(s + 1 + link, 1.0)] + [(x(ka, h), -sign) for h in left]
                        + [(x(kb, h), sign) for h in left], 0.0, np.inf)
            for h in range(nh):                              # s >= x[a, h] - x[b, h]
                row([(s, 1.0), (x(ka, h), -1.0), (x(kb, h), 1.0)], 0.0, np.inf)
            if len(on_switch) > 1:                           # ... and over a switch's servers
                for hs in on_switch.values():
                    if len(hs) > 1:
                        for sign in (1.0, -1.0):
                            row([(s, 1.0)] + [(x(ka, h), -sign) for h in hs]
                                + [(x(kb, h), sign) for h in hs], 0.0, np.inf)
        self.row = row
        if priced:                                           # z_h >= price x tangent
            for h in range(nh):
                c[self.nz + h] = 1.0
                self.add_tangents(h, TANGENT_LOADS)
        self.index = {key: e for e, key in enumerate(p.edges)}
        if trees:
            self.add_trees(_tree_cuts(self.cuts, lambda e, w, name: (-w, name)))
        if current is not None and max_moves is not None:   # at most max_moves units move
            stay = [(x(ui[name], self.hosts.index(host)), 1.0)
                    for name, host in current.items() if name in ui and host in p.host]
            row(stay, len(stay) - max_moves, np.inf)
        upper = np.ones(n)
        for e in range(ne):                                  # t: unbounded above
            start = self.nx + self.per_edge * e + 1
            upper[start:start + self.links] = np.inf
        upper[self.nz:] = np.inf                             # z: likewise
        lower = np.zeros(n)
        for name, host in p.pinned.items():
            k, h0 = ui[name], self.hosts.index(host)
            for h in range(nh):
                upper[x(k, h)] = 1.0 if h == h0 else 0.0
                lower[x(k, h)] = 1.0 if h == h0 else 0.0
        self.c, self.lower, self.upper = c, lower, upper
        self.rows, self.cols, self.vals, self.lo, self.hi = rows, cols, vals, lo, hi

    def add_tangents(self, h: int, loads) -> None:
        """Rows z_h >= the price times queue_length's tangent at each utilisation in loads
        (below the curve, exact at the point: convex)."""
        p = self.problem
        speed = p.hosts[h].speed
        if speed <= 0:
            return
        nh = len(self.hosts)
        for rho in loads:
            at = p.queue_price * queue_length(rho)
            slope = p.queue_price * queue_slope(rho) / speed
            self.row([(self.nz + h, 1.0)] +
                     [(k * nh + h, -slope * p.unit[n_].cpu) for k, n_ in enumerate(self.units)],
                     at - slope * rho * speed, np.inf)

    def add_trees(self, trees) -> int:
        """Rows for tree inequalities (_tree_cuts' answers); how many."""
        for edges, need, trunk in trees:
            cols = [self.nx + self.per_edge * e + k for e in edges
                    for k in (range(1, self.per_edge) if trunk else (0,))]
            self.row(((col, 1.0) for col in cols), float(need), np.inf)
        return len(trees)

    def separate(self, values) -> list:
        """Rows for the tree inequalities that the relaxation's values break (and those
        trees): grown along the edges it keeps together most (least s, or least hops),
        heaviest first."""
        kept = {}
        for e in range(len(self.edges)):
            s = self.nx + self.per_edge * e
            kept[e] = (values[s], values[s + 1:s + self.per_edge].sum())
        found = []
        for trunk in (False, True):
            def key(e, w, name, trunk=trunk):
                return (round(kept[e][trunk], 6), -w, name)
            for edges, need, kind in _tree_cuts(self.cuts, key, only=trunk):
                if sum(kept[e][kind] for e in edges) < need - 1e-6:
                    found.append((edges, need, kind))
        self.add_trees(found)
        return found

    def highs(self, integer: bool = True):
        import highspy   # deferred: HiGHS, only when the program runs
        order = np.lexsort((self.rows, self.cols))           # column-wise for HiGHS
        cols = np.asarray(self.cols, dtype=np.int64)[order]
        num_rows = len(self.lo)
        row_lower, row_upper = np.array(self.lo, dtype=float), np.array(self.hi, dtype=float)
        n = len(self.c)
        start = np.searchsorted(cols, np.arange(n + 1)).astype(np.int32)
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        integrality = np.zeros(n, dtype=np.int32)
        if integer:
            integrality[:self.nx] = 1
        inf = highspy.kHighsInf
        h.passModel(n, num_rows, len(cols), 1, 1, 0.0, self.c, self.lower,
                    np.where(np.isinf(self.upper), inf, self.upper),
                    np.where(np.isinf(row_lower), -inf, row_lower),
                    np.where(np.isinf(row_upper), inf, row_upper), start,
                    np.asarray(self.rows, dtype=np.int32)[order],
                    np.asarray(self.vals, dtype=float)[order], integrality)
        return h

    def values(self, assignment: dict[str, str]) -> np.ndarray:
        """The columns' values for a placement (x, and the least s and t it allows)."""
        nh = len(self.hosts)
        hi = {name: k for k, name in enumerate(self.hosts)}
        v = np.zeros(len(self.c))
        for k, name in enumerate(self.units):
            v[k * nh + hi[assignment[name]]] = 1.0
        for e, ((a, b), _w) in enumerate(self.edges):
            s = self.nx + self.per_edge * e
            ha, hb = assignment[a], assignment[b]
            v[s] = float(ha != hb)
            pa, pb = self.pos[hi[ha]], self.pos[hi[hb]]
            for link in range(min(pa, pb), max(pa, pb)):
                v[s + 1 + link] = 1.0
        if len(v) > self.nz:                                 # z: the real priced queueing
            p = self.problem
            for h, (cpu, _mem) in enumerate(p.load(assignment).values()):
                v[self.nz + h] = p.queue_price * p.requests_at(self.hosts[h], cpu)
        return v

    def assignment(self, xs) -> dict[str, str]:
        nh = len(self.hosts)
        return {name: self.hosts[int(np.argmax(xs[k * nh:(k + 1) * nh]))]
                for k, name in enumerate(self.units)}


def _tree_cuts(problem: Problem, priority, only: bool | None = None
               ) -> list[tuple[list[int], int, bool]]:
    """Trees of edges (edge indices), how many of their edges any placement cuts, and
    whether that count is of trunk hops (else of server changes). From each unit, edges
    out of the tree added one at a time, least priority(edge index, weight, far unit) first
    (Prim's order); once the tree's units need more than k servers' CPU or memory (the
    largest server's), at least k + 1 servers hold them, so at least k of its edges join
    different servers; likewise once they need more than k switches' worth, at least k of
    its edges cross a trunk (up to TREE_LEVELS, and for the tree of the unit's whole
    component). only: just one of the two kinds."""
    caps = [(max((h.cpu for h in problem.hosts), default=0.0),
             max((h.memory_mb for h in problem.hosts), default=0.0))]
    switch: dict[str, list[float]] = {}
    for h in problem.hosts:
        switch.setdefault(h.switch, [0.0, 0.0])
        switch[h.switch][0] += h.cpu
        switch[h.switch][1] += h.memory_mb
    if len(switch) > 1:
        caps.append((max(c for c, _m in switch.values()), max(m for _c, m in switch.values())))
    kinds = [k for k in range(len(caps)) if only is None or k == int(only)]
    if not kinds:
        return []
    index = {key: e for e, key in enumerate(problem.edges)}

    def edge(a: str, b: str) -> int:
        return index[(a, b) if (a, b) in index else (b, a)]
    seen, out = set(), []
    for root in problem.units:
        inside, tree = {root.name}, []
        need_cpu, need_mem = root.cpu, root.memory_mb
        levels = {k: 0 for k in kinds}
        frontier = [(priority(edge(root.name, b), w, b), b, root.name)
                    for b, w in problem.neighbours[root.name].items()]
        heapq.heapify(frontier)
        while frontier:
            _key, b, a = heapq.heappop(frontier)
            if b in inside:
                continue
            inside.add(b)
            tree.append(edge(a, b))
            for q, w in problem.neighbours[b].items():
                if q not in inside:
                    heapq.heappush(frontier, (priority(edge(b, q), w, q), q, b))
            need_cpu += problem.unit[b].cpu
            need_mem += problem.unit[b].memory_mb
            for kind in kinds:
                cpu, mem = caps[kind]
                k = max(_servers_needed(need_cpu, cpu), _servers_needed(need_mem, mem)) - 1
                if levels[kind] < k and levels[kind] < TREE_LEVELS:
                    levels[kind] = k
                    key = (frozenset(tree), kind)
                    if key not in seen:
                        seen.add(key)
                        out.append((sorted(tree), k, bool(kind)))
        for kind in kinds:                               # and the whole component's tree
            cpu, mem = caps[kind]
            k = max(_servers_needed(need_cpu, cpu), _servers_needed(need_mem, mem)) - 1
            key = (frozenset(tree), kind)
            if k > levels[kind] and key not in seen:
                seen.add(key)
                out.append((sorted(tree), k, bool(kind)))
    return out


def _by_switch(problem: Problem) -> tuple[Problem, dict[str, int]]:
    """The switch-level relaxation: one server per switch with all of its servers' CPU and
    memory (pins moved to it), and how many replicas of a service each may hold."""
    total: dict[str, list[float]] = {}
    for h in problem.hosts:
        total.setdefault(h.switch, [0.0, 0.0, 0, 0.0])
        total[h.switch][0] += h.cpu
        total[h.switch][1] += h.memory_mb
        total[h.switch][2] += 1
        total[h.switch][3] += h.speed
    name = {s: f"all of {s}" for s in total}
    # one queue as fast as the switch's servers together holds fewer requests than they do
    # (queue_length is convex and 0 at 0), so the priced relaxation is still below
    relaxed = Problem(list(problem.units), [Host(name[s], c, m, s, share=v)
                                            for s, (c, m, _k, v) in total.items()],
                      edges=dict(problem.edges), anchors=dict(problem.anchors),
                      switch_position=dict(problem.switch_position),
                      pinned={n: name[problem.host[h].switch]
                              for n, h in problem.pinned.items()},
                      queue_price=problem.queue_price)
    return relaxed, {name[s]: int(k) for s, (_c, _m, k, _v) in total.items()}


def _servers_needed(need: float, capacity: float) -> int:
    if capacity <= 0:
        return 1 if need <= 0 else 10 ** 9
    return max(1, math.ceil((need - 1e-6) / capacity - 1e-6))   # margin: the rows' 1e-9 slack


def solve(problem: Problem, time_limit_s: float = 10.0, current: dict[str, str] | None = None,
          max_moves: int | None = None, start: dict[str, str] | None = None,
          trees: bool = True) -> Solution:
    """HiGHS on the program for at most time_limit_s: the best placement it found (checked
    against problem.violations, None if it found none), its proven lower bound (0 when it
    has none), and whether it proved that placement optimal. With current and max_moves:
    at most max_moves units away from where current has them (the bound is then this
    constrained program's). start: a feasible placement the search begins from (its
    incumbent; the answer then costs at most as much)."""
    import highspy   # deferred: HiGHS, only when the program runs
    started = time.perf_counter()
    relaxed = 0.0
    model = _Model(problem, current, max_moves, trees=trees)
    if trees:
        # tree inequalities that the switch-level relaxation breaks (one server per switch
        # with all its capacity: solved in milliseconds, and hardly weaker than the full
        # relaxation, which may split units evenly over a switch's servers), for a few
        # rounds; its optimum is a bound as well (without the budget of moves: lower, valid)
        relaxation, room = _by_switch(problem)
        switches = _Model(relaxation, cuts=problem, room=room)
        for _round in range(SEPARATION_ROUNDS):
            lp = switches.highs(integer=False)
            lp.setOptionValue("time_limit", max(0.1, time_limit_s / 4))
            lp.run()
            if lp.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                break
            relaxed = max(relaxed, lp.getInfo().objective_function_value)
            found = switches.separate(np.asarray(lp.getSolution().col_value))
            model.add_trees(found)
            if not found or time.perf_counter() - started > time_limit_s / 4:
                break
    begin = start if start is not None and not problem.violations(start) else None
    if begin is not None and problem.queue_price > 0:
        # tangents at the start's own loads: the start costs the program what it really
        # costs, and the bound is tightest where good placements are
        for k, (cpu, _mem) in enumerate(problem.load(begin).values()):
            speed = problem.hosts[k].speed
            if speed > 0 and cpu > 0:
                model.add_tangents(k, (cpu / speed,))
    h = model.highs()
    h.setOptionValue("time_limit", max(0.1, time_limit_s - (time.perf_counter() - started)))
    if begin is not None:
        values = model.values(begin)
        h.setSolution(len(values), np.arange(len(values), dtype=np.int32), values)
    h.run()
    seconds = time.perf_counter() - started
    status_code = h.getModelStatus()
    info = h.getInfo()
    status = {highspy.HighsModelStatus.kOptimal: "optimal",
              highspy.HighsModelStatus.kTimeLimit: "stopped at its limit",
              highspy.HighsModelStatus.kInfeasible: "infeasible"}.get(
                  status_code, h.modelStatusToString(status_code))
    bound = info.mip_dual_bound
    bound = float(bound) if bound is not None and math.isfinite(bound) else 0.0
    bound = max(bound, relaxed)
    assignment = None
    if info.primal_solution_status == 2:                     # a feasible point
        placed = model.assignment(np.asarray(h.getSolution().col_value))
        if not problem.violations(placed):
            assignment = placed
    if begin is not None and (assignment is None or
                              problem.cost(assignment) > problem.cost(begin)):
        # with priced queueing the program weighs the tangents, below the real cost: its
        # answer may cost more than its start; the start then stands
        assignment = begin
    # optimal: to HiGHS's relative gap (1e-4 by default), the bound then within it; with
    # priced queueing the program's tangents are below the real cost, so the real cost of
    # its answer must be within that gap of the bound as well
    optimal = status_code == highspy.HighsModelStatus.kOptimal and assignment is not None \
        and (problem.queue_price <= 0 or problem.cost(assignment) <=
             max(0.0, bound) + RELATIVE_GAP * max(1.0, abs(bound)))
    return Solution(assignment, max(0.0, bound), optimal, status, seconds)


def lower_bound(problem: Problem) -> float:
    """The linear relaxation's optimum, with the tree inequalities along the heaviest edges:
    a bound every placement's cost is above (weak where servers are interchangeable)."""
    import highspy   # deferred: HiGHS, only when the program runs
    h = _Model(problem).highs(integer=False)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return 0.0
    return max(0.0, float(h.getInfo().objective_function_value))
