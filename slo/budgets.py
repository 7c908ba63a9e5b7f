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
- Split: its answer;
- Objective: one end-to-end objective (the entry, its target, the calls below it);
- BudgetPlanner: the split kept up to date from periodic readings (smoothed as the
  profiler's graph is), and which loops' targets to change; Plan: one period's answer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

MAX_FACTOR = 1000.0        # a target this many times above the measured latency: no limit
# a loop's target is changed only when its budget moved by this share since it was set:
# the readings are p95s of a few seconds of requests, and a target that follows their
# noise makes the loop chase it
RESEND_SHARE = 0.05
MIN_BUDGET_MS = 0.1        # the smallest target a loop takes (configuration's slo.target_ms)


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


@dataclass(frozen=True)
class Objective:
    """An end-to-end objective: `target_ms` for the requests at `entry`, whose loop keeps
    it; calls: service -> [(callee, count)] for every service the entry reaches."""
    entry: str
    target_ms: float
    calls: dict[str, list[tuple[str, int]]]

    @property
    def services(self) -> list[str]:
        """The services below the entry, whose loops get budgets (callees first)."""
        return [s for s in _order(self.entry, self.calls) if s != self.entry]


@dataclass(frozen=True)
class Plan:
    split: Split | None              # None: not every latency is measured yet
    send: dict[str, float]           # service -> the target its loops are to be set to
    waiting_for: list[str]           # what is not measured yet (services, "a -> b" calls)


def _ewma(old: float | None, new: float, alpha: float) -> float:
    return new if old is None else old + alpha * (new - old)


@dataclass
class BudgetPlanner:
    """One objective's budgets from each period's readings: every service's latency as its
    loop reads it and every call's latency as its caller sees it (the profiler's graph,
    smoothed over `window_s`; the services' readings get the same smoothing here, so that
    each own part is a difference of like with like). A loop's target is sent again only
    when its budget moved by RESEND_SHARE since it was last set (`sent`), or when the caller
    says the loop lost it (`forget`)."""
    objective: Objective
    window_s: float = 30.0
    latency_ms: dict[str, float] = field(default_factory=dict)     # smoothed
    last_time: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    last: Plan | None = None

    def observe(self, now: float, latency_ms: dict[str, float]) -> None:
        """The services' latest readings (ms; a service without one is left out)."""
        for s, v in latency_ms.items():
            if v is None or not math.isfinite(v) or v < 0:
                continue
            before = self.last_time.get(s)
            alpha = 1.0 if before is None else \
                1.0 - math.exp(-max(0.0, now - before) / self.window_s)
            self.latency_ms[s] = _ewma(self.latency_ms.get(s), float(v), alpha)
            self.last_time[s] = now

    def plan(self, edge_ms: dict[tuple[str, str], float]) -> Plan:
        """The split from the smoothed readings and the calls' latencies, and the targets to
        send; call after observe()."""
        o = self.objective
        missing = [s for s in _order(o.entry, o.calls) if s not in self.latency_ms]
        missing += [f"{a} -> {b}" for a in _order(o.entry, o.calls) for b, _n in
                    o.calls.get(a, ()) if edge_ms.get((a, b)) is None]
        if missing:
            self.last = Plan(None, {}, missing)
            return self.last
        found = split(o.target_ms, o.entry, o.calls, self.latency_ms, edge_ms)
        send = {}
        for s in o.services:
            budget = max(MIN_BUDGET_MS, found.budgets_ms[s])
            before = self.sent.get(s)
            if before is None or abs(budget - before) >= RESEND_SHARE * before:
                send[s] = round(budget, 3)
        self.last = Plan(found, send, [])
        return self.last

    def confirm(self, service: str, target_ms: float) -> None:
        """The service's loops took target_ms (every replica)."""
        self.sent[service] = target_ms

    def forget(self, service: str) -> None:
        """The service's loops may not hold what was sent (one failed, or one is new):
        send its budget at the next plan."""
        self.sent.pop(service, None)
