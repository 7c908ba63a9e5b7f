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
- priced_split: budgets from per-service frequencies chosen where a MHz buys the most
  latency at the entry per watt (the power model's), instead of one factor for all;
- Split: their answer;
- Objective: one end-to-end objective (the entry, its target, the calls below it);
- BudgetPlanner: the split kept up to date from periodic readings (smoothed as the
  profiler's graph is), and which loops' targets to change; BudgetPlan: one period's answer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from slo.energy import CorePowerModel

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
    freq_mhz: dict[str, int] | None = None   # priced_split: the frequency each budget assumes


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


def _parts(target_ms: float, entry: str, calls: dict[str, list[tuple[str, int]]],
           latency_ms: dict[str, float], edge_ms: dict[tuple[str, str], float]
           ) -> tuple[list[str], dict[str, float], dict[tuple[str, str], float]]:
    """(the services callees first, each one's own part, each call's network part) from
    the measurements; ValueError naming what is missing."""
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
    return order, own, net


def _latencies(order: list[str], calls: dict[str, list[tuple[str, int]]],
               own: dict[str, float], net: dict[tuple[str, str], float],
               scale: dict[str, float]) -> dict[str, float]:
    """Every service's latency, subtree included, with its own part times scale[s]."""
    lat: dict[str, float] = {}
    for s in order:
        lat[s] = scale[s] * own[s] + max((n * (net[(s, c)] + lat[c])
                                          for c, n in calls.get(s, ())), default=0.0)
    return lat


def split(target_ms: float, entry: str, calls: dict[str, list[tuple[str, int]]],
          latency_ms: dict[str, float], edge_ms: dict[tuple[str, str], float]) -> Split:
    """The budgets for `target_ms` at `entry` (its own latency, as its loop reads it), from
    `calls` (service -> [(callee, count)]), each service's measured latency and each call's
    measured latency as its caller sees it. ValueError naming what is missing."""
    order, own, net = _parts(target_ms, entry, calls, latency_ms, edge_ms)

    def at(k: float) -> dict[str, float]:
        return _latencies(order, calls, own, net, dict.fromkeys(order, k))
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


# raising a service that is not on the entry's slowest branch buys nothing at the entry,
# and parallel branches as slow as each other buy nothing one at a time: the sum of every
# service's latency, at this weight, breaks those ties toward the branches that wait
TIE_WEIGHT = 1e-3


def priced_split(target_ms: float, entry: str, calls: dict[str, list[tuple[str, int]]],
                 latency_ms: dict[str, float], edge_ms: dict[tuple[str, str], float],
                 freq_mhz: dict[str, float], busy: dict[str, float], power,
                 step_mhz: int = 100) -> Split:
    """Budgets from frequencies priced by power: every service starts at the power model's
    minimum frequency, and the step that lowers the entry's latency most per watt is
    taken, one at a time, until the entry meets `target_ms` (each own part scales as
    f_measured / f: CPU-bound work). A service's watts at f are its core's leakage plus
    its busy share, busy x f_measured / f (at most 1), of the dynamic power at f
    (slo.energy.CorePowerModel's). Each budget is the service's latency, subtree
    included, at the frequencies chosen, which the Split lists. `freq_mhz`: the frequency
    each service's latency was measured at; `busy`: its cores' busy share then.
    ValueError naming what is missing. Where the uniform split slows every own part
    alike, this one gives the MHz to the services whose milliseconds are cheapest."""
    order, own, net = _parts(target_ms, entry, calls, latency_ms, edge_ms)
    for s in order:
        if not freq_mhz.get(s, 0) > 0:
            raise ValueError(f"freq_mhz[{s!r}]: no frequency measured")
        if not 0 <= busy.get(s, -1) <= 1:
            raise ValueError(f"busy[{s!r}]: expected a busy share in [0, 1]")
    lo, hi = int(power.f_min_mhz), int(power.f_max_mhz)
    f = dict.fromkeys(order, lo)

    def latencies(freqs: dict[str, int]) -> dict[str, float]:
        return _latencies(order, calls, own, net,
                          {s: freq_mhz[s] / freqs[s] for s in order})

    def watts(s: str, fs: int) -> float:
        share = min(1.0, busy[s] * freq_mhz[s] / fs)
        return power.leakage_w(fs) + share * power.dynamic_w(fs)

    def cost(lat: dict[str, float]) -> float:
        return lat[entry] + TIE_WEIGHT * sum(lat.values())
    lat = latencies(f)
    while lat[entry] > target_ms:
        best, best_gain = None, 0.0
        for s in order:
            if f[s] >= hi:
                continue
            up = {**f, s: min(hi, f[s] + step_mhz)}
            gain = (cost(lat) - cost(latencies(up))) / max(
                1e-9, watts(s, up[s]) - watts(s, f[s]))
            if gain > best_gain:
                best, best_gain = s, gain
        if best is None:
            return Split(lat, lat[entry] / latency_ms[entry] if latency_ms[entry] else 0.0,
                         False, own, f"{lat[entry]:.1f} ms at {entry} with every service "
                         f"on its path at {hi} MHz: no frequency meets {target_ms:g} ms",
                         dict(f))
        f[best] = min(hi, f[best] + step_mhz)
        lat = latencies(f)
    factor = lat[entry] / latency_ms[entry] if latency_ms[entry] else MAX_FACTOR
    chosen = ", ".join(f"{s} {f[s]}" for s in reversed(order))
    return Split(lat, factor, True, own, f"MHz priced by watts ({chosen}) meet "
                 f"{target_ms:g} ms at {entry}: {lat[entry]:.1f} ms", dict(f))


SPLITS = ("uniform", "priced")


@dataclass(frozen=True)
class Objective:
    """An end-to-end objective: `target_ms` for the requests at `entry`, whose loop keeps
    it; calls: service -> [(callee, count)] for every service the entry reaches; `split`:
    `uniform` (split) or `priced` (priced_split, with `power` and `step_mhz`)."""
    entry: str
    target_ms: float
    calls: dict[str, list[tuple[str, int]]]
    split: str = "uniform"
    power: CorePowerModel = field(default_factory=CorePowerModel)
    step_mhz: int = 100

    def __post_init__(self):
        if self.split not in SPLITS:
            raise ValueError(f"split: expected one of {', '.join(SPLITS)}, got {self.split!r}")

    @property
    def services(self) -> list[str]:
        """The services below the entry, whose loops get budgets (callees first)."""
        return [s for s in _order(self.entry, self.calls) if s != self.entry]


@dataclass(frozen=True)
class BudgetPlan:
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
    says the loop lost it (`forget`). The priced split also needs each loop's frequency and
    busy share (smoothed alike: the latency is a mix of the frequencies of its window)."""
    objective: Objective
    window_s: float = 30.0
    latency_ms: dict[str, float] = field(default_factory=dict)     # smoothed
    freq_mhz: dict[str, float] = field(default_factory=dict)       # smoothed
    busy: dict[str, float] = field(default_factory=dict)           # smoothed
    last_time: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    last: BudgetPlan | None = None

    def observe(self, now: float, latency_ms: dict[str, float],
                freq_mhz: dict[str, float] | None = None,
                busy: dict[str, float] | None = None) -> None:
        """The services' latest readings (ms; a service without one is left out), with the
        frequency and busy share each ran at where known."""
        for s, v in latency_ms.items():
            if v is None or not math.isfinite(v) or v < 0:
                continue
            before = self.last_time.get(s)
            alpha = 1.0 if before is None else \
                1.0 - math.exp(-max(0.0, now - before) / self.window_s)
            self.latency_ms[s] = _ewma(self.latency_ms.get(s), float(v), alpha)
            f = (freq_mhz or {}).get(s)
            if f is not None and math.isfinite(f) and f > 0:
                self.freq_mhz[s] = _ewma(self.freq_mhz.get(s), float(f), alpha)
            b = (busy or {}).get(s)
            if b is not None and math.isfinite(b) and b >= 0:
                self.busy[s] = _ewma(self.busy.get(s), min(1.0, float(b)), alpha)
            self.last_time[s] = now

    def plan(self, edge_ms: dict[tuple[str, str], float]) -> BudgetPlan:
        """The split from the smoothed readings and the calls' latencies, and the targets to
        send; call after observe()."""
        o = self.objective
        missing = [s for s in _order(o.entry, o.calls) if s not in self.latency_ms]
        missing += [f"{a} -> {b}" for a in _order(o.entry, o.calls) for b, _n in
                    o.calls.get(a, ()) if edge_ms.get((a, b)) is None]
        if o.split == "priced":
            missing += [f"{s} frequency" for s in _order(o.entry, o.calls)
                        if s not in self.freq_mhz or s not in self.busy]
        if missing:
            self.last = BudgetPlan(None, {}, missing)
            return self.last
        found = split(o.target_ms, o.entry, o.calls, self.latency_ms, edge_ms) \
            if o.split == "uniform" else \
            priced_split(o.target_ms, o.entry, o.calls, self.latency_ms, edge_ms,
                         self.freq_mhz, self.busy, o.power, o.step_mhz)
        send = {}
        for s in o.services:
            budget = max(MIN_BUDGET_MS, found.budgets_ms[s])
            before = self.sent.get(s)
            if before is None or abs(budget - before) >= RESEND_SHARE * before:
                send[s] = round(budget, 3)
        self.last = BudgetPlan(found, send, [])
        return self.last

    def confirm(self, service: str, target_ms: float) -> None:
        """The service's loops took target_ms (every replica)."""
        self.sent[service] = target_ms

    def forget(self, service: str) -> None:
        """The service's loops may not hold what was sent (one failed, or one is new):
        send its budget at the next plan."""
        self.sent.pop(service, None)
