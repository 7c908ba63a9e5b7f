"""Per-service latency budgets from one end-to-end objective on a call graph (plain Python).

A request to the entry service e crosses a tree of calls; its latency at e is e's own work
plus its calls, the calls to different services in parallel and a service's repeated calls
in turn (services/callgraph.py serves them so):

    L_s = own_s + max over callees c of count_sc x E_sc,    E_sc = net_sc + L_c

where E_sc is the call's latency as the caller sees it (the profiler's graph: each edge's
`rt_p95_ms`, from the callers' histograms) and L_s the service's own latency (its
`/latency`). From the measured L and E the split reads each service's own part (own_s, what
a core's frequency speeds up or slows down) and each call's way there and back (net_sc,
which it does not). It then gives every own part the same factor k, the one for which L_e
meets the target, and each service the budget L_s(k): its SLO loop then holds its own
latency, subtree included, at what the end-to-end objective allows it. Erms (Luo et al.,
"Erms: Efficient Resource Management for Shared Microservices with SLA Guarantees", ASPLOS
2023) splits an end-to-end target along the graph for scaling containers, by each
service's latency-resource profile; a uniform factor is the simplest split with the same
shape, and needs no profile.

Percentiles do not add: a sum of p95s is above the p95 of the sum, so budgets from p95
figures are conservative.

- split: the budgets, the factor k and whether the target can be met at all;
- Split: its answer.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_FACTOR = 1000.0        # a target this many times above the measured latency: no limit


@dataclass(frozen=True)
class Split:
    budgets_ms: dict[str, float]   # per service reachable from the entry: its latency budget
    factor: float                  # every own part's factor (below 1: faster than measured)
    feasible: bool                 # False: the calls' network parts alone exceed the target
    own_ms: dict[str, float]       # the own parts the measurements imply
    reason: str


def _order(entry: str, calls: dict[str, list[tuple[str, int]]]) -> list[str]:
    """The services reachable from entry, callees before callers (a DAG: the configuration
    refuses cycles)."""
    out, seen = [], set()

    def visit(s: str) -> None:
        if s in seen:
            return
        seen.add(s)
        for c, _n in calls.get(s, ()):
            visit(c)
        out.append(s)
    visit(entry)
    return out


def split(target_ms: float, entry: str, calls: dict[str, list[tuple[str, int]]],
          latency_ms: dict[str, float], edge_ms: dict[tuple[str, str], float]) -> Split:
    """The budgets for `target_ms` at `entry` (its own latency, as its loop reads it), from
    `calls` (service -> [(callee, count)]), each service's measured latency and each call's
    measured latency as its caller sees it. ValueError naming what is missing."""
    if not target_ms > 0:
        raise ValueError(f"target_ms: expected > 0, got {target_ms!r}")
    order = _order(entry, calls)
    for s in order:
        if not latency_ms.get(s, -1) >= 0:
            raise ValueError(f"latency_ms[{s!r}]: no measured latency")
        for c, _n in calls.get(s, ()):
            if not edge_ms.get((s, c), -1) >= 0:
                raise ValueError(f"edge_ms[({s!r}, {c!r})]: no measured call latency")
    own, net = {}, {}
    for s in order:
        below = max((n * edge_ms[(s, c)] for c, n in calls.get(s, ())), default=0.0)
        own[s] = max(0.0, latency_ms[s] - below)
        for c, _n in calls.get(s, ()):
            net[(s, c)] = max(0.0, edge_ms[(s, c)] - latency_ms[c])

    def at(k: float) -> dict[str, float]:
        lat: dict[str, float] = {}
        for s in order:
            lat[s] = k * own[s] + max((n * (net[(s, c)] + lat[c])
                                       for c, n in calls.get(s, ())), default=0.0)
        return lat
    floor = at(0.0)[entry]
    if floor >= target_ms:
        return Split(at(0.0), 0.0, False, own,
                     f"the calls' network parts alone take {floor:.1f} ms of "
                     f"{target_ms:g}: no frequency meets the target")
    if at(MAX_FACTOR)[entry] <= target_ms:
        return Split(at(MAX_FACTOR), MAX_FACTOR, True, own,
                     "the target allows any frequency")
    lo, hi = 0.0, MAX_FACTOR          # L_e(k) rises with k: bisection
    for _ in range(100):
        mid = (lo + hi) / 2
        if at(mid)[entry] <= target_ms:
            lo = mid
        else:
            hi = mid
    budgets = at(lo)
    return Split(budgets, lo, True, own,
                 f"every service's own part x {lo:.3f} meets {target_ms:g} ms at {entry}")
