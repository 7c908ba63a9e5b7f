"""Rules several policies share (plain Python; the view and the deciding policy passed in):

- round_robin: the next in-service instance in the microservice's turn (kept in the view, so
  a policy switched at run time goes on where the last one left off);
- measure, least_load: a server's load as a policy weighs it, corrected for the flows its
  data does not show yet (estimators/pending_assignments.py), and the server with the least;
- capacity_shares, weighted_turn: shares of new flows by server capacity, and smooth
  weighted round robin (nginx's) over them;
- least_in_turn: the least score, ties in round-robin order (HAProxy's leastconn);
- cores_of, open_per_capacity: a server's CPU cores, an instance's open connections per core.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ryu_apps.policies.base import Backend, Decision, NoBackend, Policy

if TYPE_CHECKING:
    from ryu_apps.load_view import LoadView


def round_robin(view: LoadView, policy: Policy, ms: str, candidates: list[Backend],
                now: float, reason: str) -> Decision:
    """The next of the candidates in the microservice's turn over its whole pool."""
    pool = view.pools[ms]
    start = view.turn(ms)
    names = {b.name for b in candidates}
    for step in range(len(pool)):
        b = pool[(start + step) % len(pool)]
        if b.name in names:
            view.advance_turn(ms, start + step + 1)
            return policy.decision(b, "round-robin", reason, now)
    raise NoBackend(f"no healthy instance of {ms}")   # unreachable: candidates non-empty


def measure(view: LoadView, server: str, weights: tuple[float, float, float],
            algorithm: str, now: float) -> tuple[float, float, float] | None:
    """(load, time of the data it rests on, how long that data takes to show a new flow
    in full), or None without fresh data.

    Least network load reads the switches' port statistics first (the reactive baseline
    of the paper); weighted least load reads the profiler's per-server estimates, with the
    switches' network figure when the profiler has none."""
    prof, switch = view.loads[server], view.switch_net[server]
    # each view's sample time, None when it is not fresh (a fresh one has a time)
    prof_t = prof.sample_time if view.fresh(prof, now) else None
    switch_t = switch.sample_time if view.fresh(switch, now) else None
    if algorithm == "least-network-load":
        if switch_t is not None and switch.net is not None:
            return switch.net, switch_t, 0.0
        if prof_t is not None and prof.net is not None:
            return prof.net, prof_t, view.profiles.prediction_lag_s
        return None
    if prof_t is None:
        return None
    net = prof.net if prof.net is not None else (switch.net if switch_t is not None else None)
    a, b, g = weights
    load = 0.0
    for w, v in ((a, prof.cpu), (b, prof.mem), (g, net)):
        if w > 0:
            if v is None:
                return None
            load += w * v
    return load, prof_t, view.profiles.prediction_lag_s


def least_load(view: LoadView, policy: Policy, ms: str, candidates: list[Backend],
               now: float, algorithm: str, weights: tuple[float, float, float],
               extra_cpu: dict[str, float] | None = None) -> Decision:
    """The least loaded server's instance; ties on fewer pending flows, then instance
    order. Servers without fresh data are left out; with none fresh, round robin.
    extra_cpu: CPU points per server to add to its load (weighted as CPU)."""
    measured = {b.server: m for b in candidates
                if (m := measure(view, b.server, weights, algorithm, now)) is not None}
    fresh = [b for b in candidates if b.server in measured]
    if not fresh:
        return round_robin(view, policy, ms, candidates, now,
                           f"{algorithm}: no fresh load data, round robin")
    pending, scores = {}, {}
    for b in fresh:
        load, data_time, lag = measured[b.server]
        pending[b.server], shares = view.pending(b.server, data_time, lag)
        scores[b.server] = load + view.cost(shares, weights) + \
            weights[0] * (extra_cpu or {}).get(b.server, 0.0)
    best = min(fresh, key=lambda b: (scores[b.server], pending[b.server], b.order))
    left_out = len(candidates) - len(fresh)
    reason = f"{algorithm}: {best.server} lowest of {len(fresh)}" + \
        (f" ({left_out} without fresh load data left out)" if left_out else "")
    return policy.decision(best, algorithm, reason, now,
                           {s: round(v, 3) for s, v in scores.items()}, weights)


def capacity_shares(view: LoadView, candidates: list[Backend],
                    weights: tuple[float, float, float]) -> dict[str, float]:
    """Per instance, its server's capacity relative to the candidates' mean, in the given
    resource weights (CPU, memory, network)."""
    caps = [view.capacities[b.server] for b in candidates]
    means = [sum(c[i] for c in caps) / len(caps) for i in range(3)]
    return {b.name: sum(w * c[i] / means[i] for i, w in enumerate(weights) if means[i] > 0)
            for b, c in zip(candidates, caps)}


def weighted_turn(credit: dict[str, float], share: dict[str, float],
                  candidates: list[Backend], pool: list[Backend] | None = None) -> Backend:
    """Smooth weighted round robin (nginx's): every candidate gains its share, the one with
    the most credit is chosen and pays the total. `credit` is the caller's, kept between
    calls; an instance left out of this turn but still in `pool` (the instance calling its
    own VIP, one out of service) keeps its credit, neither gaining nor paying; one no longer
    in the pool (or in `share`, without a pool) loses it."""
    keep = set(share) | {b.name for b in pool or ()}
    for name in list(credit):
        if name not in keep:
            del credit[name]
    for name, w in share.items():
        credit[name] = credit.get(name, 0.0) + w
    best = max(candidates, key=lambda b: (credit[b.name], -b.order))
    credit[best.name] -= sum(share.values())
    return best


def cores_of(view: LoadView, server: str) -> float:
    """The server's CPU cores (1 when its capacity is unknown: every server alike)."""
    cap = view.capacities.get(server)
    return cap[0] if cap is not None and cap[0] > 0 else 1.0


def open_per_capacity(view: LoadView, b: Backend) -> float:
    """The instance's open connections over its server's CPU cores: equal servers order
    as the plain counts."""
    return view.open_connections(b.name) / cores_of(view, b.server)


def least_in_turn(view: LoadView, policy: Policy, ms: str, candidates: list[Backend],
                  now: float, scores: dict[str, float], algorithm: str, reason: str,
                  weights: tuple[float, float, float] | None = None) -> Decision:
    """The candidate with the least score (per instance name); among equal ones, the
    next in the microservice's round-robin turn, which moves past the chosen one."""
    pool = view.pools[ms]
    n, start = len(pool), view.turn(ms)
    pos = {b.name: i for i, b in enumerate(pool)}
    best = min(candidates, key=lambda b: (round(scores[b.name], 9), (pos[b.name] - start) % n))
    view.advance_turn(ms, pos[best.name] + 1)
    return policy.decision(best, algorithm, reason, now,
                           {b.server: round(scores[b.name], 3) for b in candidates}, weights)
