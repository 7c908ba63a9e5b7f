"""The placement problem as a mixed-integer linear program, solved by HiGHS (through
scipy.optimize.milp, already a dependency): the proven optimum where it finishes in time,
and in any case a lower bound on every placement's cost, so that a plan can say how far
from the optimum it may be (docs/placement.md, "Exact solution and bound").

Variables: x[u, h] = 1 when unit u runs on server h; per edge (u, v), d >= |P(u) - P(v)|
(P(u) = the position of u's switch in the chain, linear in x) and s >= x[u, h] - x[v, h]
for every h (s = 1 when u and v are on different servers). The distance between two
units is (1 - same server) + switch hops, so an edge of weight w costs w * (s + d); an
anchor's cost is linear in x. Constraints: each unit on one server, CPU and memory per
server, a service's replicas on different servers, pinned units where they are pinned.

- solve(problem, time_limit_s, current, max_moves): Solution (assignment or None, lower
  bound, whether proven optimal, status text, seconds), optionally within a budget of moves;
- lower_bound(problem): the bound of the linear relaxation alone (fast, weak).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

if TYPE_CHECKING:
    from placement.partitioner import Problem

_STATUS = {0: "optimal", 1: "stopped at its limit", 2: "infeasible", 3: "unbounded",
           4: "solver error"}


@dataclass
class Solution:
    assignment: dict[str, str] | None   # None: nothing feasible found in time
    bound: float                        # every placement costs at least this
    optimal: bool                       # the solver proved assignment optimal
    status: str
    seconds: float


class _Model:
    """The program's matrices; columns: x (units x hosts), then d and s per edge."""

    def __init__(self, problem: Problem, current: dict[str, str] | None = None,
                 max_moves: int | None = None):
        p = problem
        self.units = [u.name for u in p.units]
        self.hosts = [h.name for h in p.hosts]
        self.edges = list(p.edges.items())
        nu, nh, ne = len(self.units), len(self.hosts), len(self.edges)
        self.nx = nu * nh
        n = self.nx + 2 * ne
        ui = {name: k for k, name in enumerate(self.units)}
        pos = [p.switch_position[h.switch] for h in p.hosts]

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
        for h, host in enumerate(p.hosts):                   # capacities
            row(((x(k, h), p.unit[n_].cpu) for k, n_ in enumerate(self.units)),
                -np.inf, host.cpu + 1e-9)
            if any(p.unit[n_].memory_mb for n_ in self.units):
                row(((x(k, h), p.unit[n_].memory_mb) for k, n_ in enumerate(self.units)),
                    -np.inf, host.memory_mb + 1e-9)
        for names in p.replicas.values():                   # replicas apart
            if len(names) > 1:
                for h in range(nh):
                    row(((x(ui[n_], h), 1.0) for n_ in names), -np.inf, 1.0)
        for e, ((a, b), w) in enumerate(self.edges):
            d, s = self.nx + 2 * e, self.nx + 2 * e + 1
            c[d] = c[s] = w
            ka, kb = ui[a], ui[b]
            for sign in (1.0, -1.0):                         # d >= +-(P(a) - P(b))
                row([(d, 1.0)] + [(x(ka, h), -sign * pos[h]) for h in range(nh) if pos[h]]
                    + [(x(kb, h), sign * pos[h]) for h in range(nh) if pos[h]], 0.0, np.inf)
            for h in range(nh):                              # s >= x[a, h] - x[b, h]
                row([(s, 1.0), (x(ka, h), -1.0), (x(kb, h), 1.0)], 0.0, np.inf)
        if current is not None and max_moves is not None:   # at most max_moves units move
            stay = [(x(ui[name], self.hosts.index(host)), 1.0)
                    for name, host in current.items() if name in ui and host in p.host]
            row(stay, len(stay) - max_moves, np.inf)
        upper = np.ones(n)
        upper[self.nx::2] = np.inf                           # d: hops, unbounded above
        lower = np.zeros(n)
        for name, host in p.pinned.items():
            k, h0 = ui[name], self.hosts.index(host)
            for h in range(nh):
                upper[x(k, h)] = 1.0 if h == h0 else 0.0
                lower[x(k, h)] = 1.0 if h == h0 else 0.0
        self.c = c
        self.constraints = LinearConstraint(coo_matrix((vals, (rows, cols)), shape=(r, n)),
                                            np.array(lo), np.array(hi))
        self.bounds = Bounds(lower, upper)
        self.integrality = np.zeros(n)
        self.integrality[:self.nx] = 1

    def assignment(self, xs) -> dict[str, str]:
        nh = len(self.hosts)
        return {name: self.hosts[int(np.argmax(xs[k * nh:(k + 1) * nh]))]
                for k, name in enumerate(self.units)}


def solve(problem: Problem, time_limit_s: float = 10.0, current: dict[str, str] | None = None,
          max_moves: int | None = None) -> Solution:
    """HiGHS on the program for at most time_limit_s: the best placement it found (checked
    against problem.violations, None if it found none), its proven lower bound (0 when it
    has none), and whether it proved that placement optimal. With current and max_moves:
    at most max_moves units away from where current has them (the bound is then this
    constrained program's)."""
    started = time.perf_counter()
    model = _Model(problem, current, max_moves)
    res = milp(model.c, constraints=model.constraints, bounds=model.bounds,
               integrality=model.integrality,
               options={"time_limit": max(0.1, time_limit_s), "disp": False})
    seconds = time.perf_counter() - started
    status = _STATUS.get(res.status, f"status {res.status}")
    bound = getattr(res, "mip_dual_bound", None)
    bound = float(bound) if bound is not None and math.isfinite(bound) else 0.0
    assignment = None
    if res.x is not None:
        found = model.assignment(res.x)
        if not problem.violations(found):
            assignment = found
    # optimal: to HiGHS's relative gap (1e-4 by default), the bound then within it
    optimal = res.status == 0 and assignment is not None
    return Solution(assignment, max(0.0, bound), optimal, status, seconds)


def lower_bound(problem: Problem) -> float:
    """The linear relaxation's optimum: a bound every placement's cost is above (weak where
    servers are interchangeable: the relaxation may split every unit evenly)."""
    model = _Model(problem)
    res = milp(model.c, constraints=model.constraints, bounds=model.bounds,
               integrality=np.zeros_like(model.integrality), options={"disp": False})
    return max(0.0, float(res.fun)) if res.status == 0 else 0.0
