"""MALB (Kalafatidis and Mamatas, "Microservices-Adaptive Software-Defined Load Balancing for
5G and Beyond Ecosystems", IEEE TNSM), as the paper states it (``malb-paper``: section
III.C's rule) and with this project's additions (``malb``), each an option of its own
(docs/controller.md: "Policies", "How a decision is made").

- Malb: the policy, registered under both names with their presets;
- MalbOptions: the options beyond the paper's rule, each off in ``malb-paper``;
- LOOKAHEAD_S: how far ahead a measured long flow counts (5 s);
- HEADROOM_FLOOR, BALANCE_GAIN: the data-plane shares' floor and step (load_shares);
- connection_factor: the data-plane shares set by the switches' counts of open connections;
- NEAR_SLACK: ``malb-near``'s load allowance for an instance on the caller's switch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ryu_apps.policies import register
from ryu_apps.policies.base import Options, Policy
from ryu_apps.policies.shared_rules import capacity_shares, least_in_turn, least_load, \
    round_robin, weighted_turn

LOOKAHEAD_S = 5.0
# Data-plane shares by load (load_shares): an instance keeps at least this part of its
# capacity share, so that it is never starved of flows whose measurements would show its
# server recovering; at each new sample a share is multiplied by exp(-BALANCE_GAIN x its
# server's load above the mean / 100): a server 20 points above the others' mean loses
# about 18 % of its share per sample, a step the loads follow within a period or two
# without swinging past (design runs: docs/journal/2026-12-06-connections-in-the-switch.md).
HEADROOM_FLOOR = 0.1
BALANCE_GAIN = 1.0
# malb-near: an instance on the caller's switch is preferred while its servers' mean load is
# at most this many points above the other candidates' (the joint rule of placement and
# balancing; set before any run, not tuned: docs/placement.md's protocol for issue 68)
NEAR_SLACK = 10.0
SHORT_RULES = ("round-robin", "least-remaining")
LONG_RULES = ("predicted-load", "running-load")


@dataclass(frozen=True)
class MalbOptions(Options):
    """The paper's rule: short-flow microservices by round robin, long-flow ones to the
    server with the least weighted load alpha*cpu + beta*mem + gamma*net of the profiler's
    predictions. Beyond it, each off in ``malb-paper``:

    - short_flows="least-remaining": a short flow whose end the controller watches goes to
      the instance with the least flow time still to carry; unwatched ones by round robin;
    - capacity_weighted: on unequal servers, round robin weighted by the servers' capacities;
    - long_flows="running-load": once the profiler knows per-flow use, each server's load
      now (estimators/running_load.py), each measured flow counted for the part of the next
      lookahead_s it is expected still to run;
    - per_flow_weights: resources weighed by their shares of what one flow uses, not by the
      profiler's weights;
    - spread: on unequal servers, a long flow where its cost raises the variance of the
      servers' loads least, not to the least loaded server;
    - load_shares: in data-plane mode, the select group's shares follow the servers'
      measured loads (capacity x headroom, smoothed), not their capacities alone;
    - outside_use: CPU used on a server beside its containers (a process the containers'
      docker stats do not show, which starves them so that they measure as idle) counts
      as that server's load, when its agent reads the whole server;
    - connection_shares: in data-plane mode, each instance's share is divided by 1 + its
      open connections as the switches count them (controller.dataplane.connection_poll_s)
      over its part of the shares, so that an instance holding more connections than its
      part gets fewer new ones until its count falls (connection_factor);
    - near_slack: when an instance calls the microservice and some of its instances are on
      the caller's switch, the flow goes to one of those (by the rules above, among them)
      unless their servers' mean load is more than near_slack points above the other
      candidates' mean; a call that crosses no trunk is worth that much load. None: off
      (``malb``); ``malb-near`` sets NEAR_SLACK. The switch balancing short flows in
      data-plane mode does not see the caller: there it applies to the long flows."""
    short_flows: str = "least-remaining"
    capacity_weighted: bool = True
    long_flows: str = "running-load"
    per_flow_weights: bool = True
    spread: bool = True
    load_shares: bool = True
    outside_use: bool = True
    connection_shares: bool = True
    lookahead_s: float = LOOKAHEAD_S
    near_slack: float | None = None

    def __post_init__(self):
        if self.short_flows not in SHORT_RULES:
            raise ValueError(f"short_flows: one of {', '.join(SHORT_RULES)}, "
                             f"got {self.short_flows!r}")
        if self.long_flows not in LONG_RULES:
            raise ValueError(f"long_flows: one of {', '.join(LONG_RULES)}, "
                             f"got {self.long_flows!r}")
        if not isinstance(self.lookahead_s, (int, float)) or not self.lookahead_s >= 0:
            raise ValueError(f"lookahead_s: a number of seconds >= 0, got {self.lookahead_s!r}")
        if self.near_slack is not None and (
                isinstance(self.near_slack, bool) or
                not isinstance(self.near_slack, (int, float)) or not self.near_slack >= 0
                or math.isinf(self.near_slack)):
            raise ValueError(f"near_slack: load points >= 0 or null, got {self.near_slack!r}")


def _floored(shares: dict[str, float], floor: dict[str, float]) -> dict[str, float]:
    """The shares normalised, each raised to its floor (the floors sum to less than 1),
    the others scaled down to make room."""
    total = sum(shares.values())
    shares = {n: v / total for n, v in shares.items()}
    low: set[str] = set()
    while True:
        low |= {n for n, v in shares.items() if v < floor[n]}
        room = 1.0 - sum(floor[n] for n in low)
        rest = sum(v for n, v in shares.items() if n not in low)
        out = {n: floor[n] if n in low else v * room / rest for n, v in shares.items()}
        if all(out[n] >= floor[n] - 1e-12 for n in out) or rest <= 0:
            return out
        shares = out


def connection_factor(shares: dict[str, float], open_now: dict[str, int]) -> dict[str, float]:
    """The shares, each divided by 1 + the instance's open connections over its part of
    the shares (its share times the number of instances: 1 when the shares are equal), and
    normalised. Equal counts on equal parts leave the shares as they are; an instance with
    n connections more than its part gets about 1/(1 + n) of its share while the others
    take the rest. The switch cannot send each new connection to the least busy instance,
    as least connections does: the shares hold until the next count, so the factor moves
    them only as far as the counts differ (no herd onto the instance that was idle at the
    last count)."""
    total, k = sum(shares.values()), len(shares)
    if total <= 0:
        return dict(shares)
    out = {n: s / (1.0 + open_now.get(n, 0) / (s / total * k)) if s > 0 else 0.0
           for n, s in shares.items()}
    norm = sum(out.values())
    return {n: v / norm for n, v in out.items()}


@register("malb-paper", title="MALB (paper's rule)", short_flows="round-robin",
          capacity_weighted=False, long_flows="predicted-load", per_flow_weights=False,
          spread=False, load_shares=False, outside_use=False, connection_shares=False)
@register("malb", title="MALB (ours)")
@register("malb-near", title="MALB, caller's switch first", near_slack=NEAR_SLACK)
class Malb(Policy):
    title = "MALB"
    Options = MalbOptions
    options: MalbOptions  # Policy.__init__ sets it: of this class's Options
    dataplane = True

    def __init__(self, options=None):
        super().__init__(options)
        self._credit: dict[str, dict[str, float]] = {}      # ms -> instance -> credit
        # ms -> (the sample times the shares rest on, the shares): load_shares's smoothing
        self._shares: dict[str, tuple[tuple, dict[str, float]]] = {}

    def choose(self, view, ms, candidates, now, flow):
        near, why = self._near_caller(view, ms, candidates, now, flow)
        decision = self._choose(view, ms, near, now, flow)
        return decision if why is None else replace(decision,
                                                    reason=f"{why}; {decision.reason}")

    def _choose(self, view, ms, candidates, now, flow):
        o = self.options
        weights = view.profiles.weights(ms, now)[0]
        if view.profiles.flow_class(ms)[0] == "short":
            if o.short_flows == "least-remaining" and flow.watched is not None:
                return self._least_remaining(view, ms, candidates, now, weights)
            if o.capacity_weighted and view.unequal_servers(candidates):
                share = capacity_shares(view, candidates, weights)
                best = weighted_turn(self._credit.setdefault(ms, {}), share, candidates,
                                     view.pools.get(ms))
                return self.decision(best, "weighted-round-robin",
                                     "short flows: round robin weighted by server capacity",
                                     now, {b.server: round(share[b.name], 3)
                                           for b in candidates}, weights)
            return round_robin(view, self, ms, candidates, now,
                               "short flows: round robin")
        if o.long_flows == "running-load" and view.running_model():
            w = view.profiles.flow_weights(ms, now)[0] if o.per_flow_weights else weights
            return self._least_running_load(view, ms, candidates, now, w)
        extra = {c.server: self._outside(view.loads[c.server]) for c in candidates} \
            if o.outside_use else None
        return least_load(view, self, ms, candidates, now, "weighted-least-load", weights,
                          extra)

    def watches(self, view, ms):
        # least-remaining counts the short flows open on each instance: it needs their ends
        return self.options.short_flows == "least-remaining" or super().watches(view, ms)

    def short_flow_shares(self, view, ms, candidates, now):
        shares = self._load_shares(view, ms, candidates, now) \
            if self.options.load_shares else None
        if shares is None and self.options.capacity_weighted and \
                view.unequal_servers(candidates):
            shares = capacity_shares(view, candidates, view.profiles.weights(ms, now)[0])
        if shares is None:
            shares = super().short_flow_shares(view, ms, candidates, now)
        if self.options.connection_shares:
            counts = view.switch_connection_counts(shares, now)
            if counts is not None:
                return connection_factor(shares, counts)
        return shares

    def _load_shares(self, view, ms, candidates, now) -> dict[str, float] | None:
        """What the switch can do with what MALB knows: in data-plane mode the controller
        sees no short flow, so no remaining flow time; it sees each server's measured load
        every period (the latest measured load in the microservice's per-flow weights, with
        the use beside the containers). At each new sample every instance's share is
        multiplied by exp(-BALANCE_GAIN x (its server's load - the mean of the
        candidates' servers' loads) / 100) and normalised, each kept at HEADROOM_FLOOR of
        its capacity share at least: the shares move until the servers that the
        microservice's instances share are loaded alike, or an instance is at its floor.
        Replicas placed on overlapping servers (a chain of servers, each sharing
        microservices with the next) so pass load along the chain. Starts from the
        capacity shares; a server without fresh data counts at the mean. None when no
        candidate's server has fresh data (capacity shares then)."""
        weights = view.profiles.flow_weights(ms, now)[0]
        loads, times = {}, []
        for b in candidates:
            load = self._measured_load(view, b.server, weights, now)
            if load is not None:
                loads[b.name] = load
                times.append((b.name, view.loads[b.server].sample_time))
        if not loads:
            self._shares.pop(ms, None)
            return None
        capacity = capacity_shares(view, candidates, weights) \
            if view.unequal_servers(candidates) else {b.name: 1.0 for b in candidates}
        total = sum(capacity.values())
        capacity = {n: v / total for n, v in capacity.items()}
        key = tuple(sorted(times))
        last = self._shares.get(ms)
        if last is not None and set(capacity) <= set(last[1]):
            # the same instances, or some left (drained, failed): the others keep their
            # proportions, so only the slots of those that left move (Maglev's minimal
            # disruption)
            kept = {n: last[1][n] for n in capacity}
            kept_total = sum(kept.values())
            shares = {n: v / kept_total for n, v in kept.items()}
            if tuple(t for t in last[0] if t[0] in capacity) == key:
                self._shares[ms] = (key, shares)
                return dict(shares)         # no new sample: the shares stand
        else:
            shares = dict(capacity)
        mean = sum(loads.values()) / len(loads)
        shares = {n: v * math.exp(-BALANCE_GAIN * (loads.get(n, mean) - mean) / 100.0)
                  for n, v in shares.items()}
        shares = _floored(shares, {n: HEADROOM_FLOOR * c for n, c in capacity.items()})
        self._shares[ms] = (key, shares)
        return dict(shares)

    def _measured_load(self, view, server, weights, now) -> float | None:
        """The server's latest measured load (the prediction's figures when there is no
        measurement) in these weights, with the use beside its containers; None without
        fresh data for a weighted resource."""
        sample = view.loads[server]
        if not view.fresh(sample, now):
            return None
        figures = sample.measured if sample.measured is not None else \
            (sample.cpu, sample.mem, sample.net)
        if figures[0] is not None:
            figures = (figures[0] + self._outside(sample), *figures[1:])
        if any(w > 0 and v is None for w, v in zip(weights, figures)):
            return None
        return sum(w * v for w, v in zip(weights, figures) if w > 0)

    # ------------------------------------------------------------ the caller's switch
    def _near_caller(self, view, ms, candidates, now, flow) -> tuple[list, str | None]:
        """The candidates on the caller's switch and why, when near_slack lets them take
        the flow; else all of them and None. A server without fresh data counts at the
        mean of those with; with none fresh, the near ones take it (nothing says they
        cannot)."""
        slack = self.options.near_slack
        site = view.site_of_address(flow.caller) if slack is not None else None
        if slack is None or site is None:
            return candidates, None
        near = [b for b in candidates if view.sites.get(b.server) == site]
        if not near or len(near) == len(candidates):
            return candidates, None
        weights = view.profiles.flow_weights(ms, now)[0]
        loads = {b.server: x for b in candidates
                 if (x := self._measured_load(view, b.server, weights, now)) is not None}
        if not loads:
            return near, f"on the caller's switch {site} (no fresh load data)"
        mean = sum(loads.values()) / len(loads)
        far = [b for b in candidates if b not in near]
        near_load = sum(loads.get(b.server, mean) for b in near) / len(near)
        far_load = sum(loads.get(b.server, mean) for b in far) / len(far)
        if near_load > far_load + slack:
            return candidates, (f"the caller's switch {site} too loaded ({near_load:.0f} > "
                                f"{far_load:.0f} + {slack:g}): every switch")
        return near, (f"on the caller's switch {site} ({near_load:.0f} <= {far_load:.0f} + "
                      f"{slack:g})")

    # ------------------------------------------------------------ short flows
    def _least_remaining(self, view, ms, candidates, now, weights):
        """The instance with the least flow time still to carry, its open flows each at the
        expected remaining life of a flow of its age (the profiled durations; one per open
        flow until they are known), with the new flow's own expected life, over the
        server's capacity share on unequal servers. Round robin lets 10 MB objects queue on
        one instance's link while another's is idle; this cuts the ui's RT spread. Ties go
        in round-robin order."""
        survival = view.profiles.survival.get(ms)
        new = survival.expected_remaining(0.0) if survival is not None else 1.0
        share = capacity_shares(view, candidates, weights) \
            if view.unequal_servers(candidates) else {}
        scores = {b.name: (view.remaining_connections(b.name, now, survival) + new)
                  / max(share.get(b.name, 1.0), 1e-9) for b in candidates}
        basis = "profiled durations" if survival is not None else "open flows"
        return least_in_turn(view, self, ms, candidates, now, scores, "least-remaining",
                             f"short flows: least flow time still to carry ({basis})",
                             weights)

    # ------------------------------------------------------------ long flows
    def _least_running_load(self, view, ms, candidates, now, weights):
        """Weighted least load on (the server's base load, what its flows do not explain,
        + what the flows it runs now cost, + what runs beside its containers)."""
        a, b, g = weights
        scores, running = {}, {}
        for c in candidates:
            load = view.loads[c.server]
            if not view.fresh(load, now):
                continue
            meas, then_cpu, then_net, skip = view.running_base(c.server, load)
            if any(w > 0 and v is None for w, v in zip(weights, meas)):
                continue
            now_cpu, now_net, running[c.server] = view.running_flows(
                c.server, now, skip, self.options.lookahead_s)
            cpu = max(0.0, (meas[0] or 0.0) - then_cpu) + now_cpu + self._outside(load)
            net = max(0.0, (meas[2] or 0.0) - then_net) + now_net
            scores[c.server] = a * cpu + b * (meas[1] or 0.0) + g * net
        fresh = [c for c in candidates if c.server in scores]
        if not fresh:
            return round_robin(view, self, ms, candidates, now,
                               "weighted-least-load: no fresh load data, round robin")
        rank = self._spread_raise(view, ms, fresh, scores, weights) \
            if self.options.spread else None
        best = min(fresh, key=lambda c: ((rank or scores)[c.server], running[c.server],
                                         c.order))
        left_out = len(candidates) - len(fresh)
        how = "raises the spread least" if rank else "lowest"
        reason = f"weighted-least-load (running flows): {best.server} {how} of {len(fresh)}" \
            + (f" ({left_out} without fresh load data left out)" if left_out else "")
        return self.decision(best, "weighted-least-load", reason, now,
                             {s: round(v, 3) for s, v in scores.items()}, weights)

    def _outside(self, load) -> float:
        """The CPU used beside the server's containers that counts as its load."""
        return (load.outside_cpu or 0.0) if self.options.outside_use else 0.0

    @staticmethod
    def _spread_raise(view, ms, fresh, loads, weights) -> dict[str, float] | None:
        """On unequal servers, per server how much the new flow would raise the variance
        of the servers' loads if it went there (times n), or None on equal servers or while
        a flow's cost is unknown. A flow of d load points on server s (its per-flow use
        over s's capacity) changes the variance by d/n * (2 * (load_s - mean) + d * (1 -
        1/n)). On equal servers d is the same everywhere and this orders the servers as
        their loads do. On unequal ones the least loaded server is often a small one, where
        a job is a big step: least load keeps the small servers' lows level with the big
        ones' and so their means above."""
        if len(fresh) < 2 or not view.unequal_servers(fresh):
            return None
        a, _b, g = weights
        step = {}
        for c in fresh:
            own = view.flow_cost(ms, c.server)
            if own is None:
                return None
            step[c.server] = a * own[0] + g * own[1]
        n = len(fresh)
        mean = sum(loads[c.server] for c in fresh) / n
        return {s: d * (2 * (loads[s] - mean) + d * (1 - 1 / n)) for s, d in step.items()}
