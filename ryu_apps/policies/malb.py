"""MALB (Kalafatidis and Mamatas, "Microservices-Adaptive Software-Defined Load Balancing for
5G and Beyond Ecosystems", IEEE TNSM), as the paper states it (``malb-paper``: section
III.C's rule) and with this project's additions (``malb``), each an option of its own
(docs/controller.md: "Policies", "How a decision is made").

- Malb: the policy, registered under both names with their presets;
- MalbOptions: the options beyond the paper's rule, each off in ``malb-paper``;
- LOOKAHEAD_S: how far ahead a measured long flow counts (5 s);
- HEADROOM_FLOOR, SHARE_SMOOTHING: the data-plane shares' floor and step (load_shares).
"""
from __future__ import annotations

from dataclasses import dataclass

from ryu_apps.policies import register
from ryu_apps.policies.base import Options, Policy
from ryu_apps.policies.rules import capacity_shares, least_in_turn, least_load, round_robin, \
    weighted_turn

LOOKAHEAD_S = 5.0
# Data-plane shares by load (load_shares): a server at 90 % or more still gets this part of
# its capacity share, so that it is never starved of flows whose measurements would show it
# recovering; each new sample moves the shares this far towards their target, so that
# shares driven by loads they change do not swing from period to period.
HEADROOM_FLOOR = 0.1
SHARE_SMOOTHING = 0.5
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
      as that server's load, when its agent reads the whole server."""
    short_flows: str = "least-remaining"
    capacity_weighted: bool = True
    long_flows: str = "running-load"
    per_flow_weights: bool = True
    spread: bool = True
    load_shares: bool = True
    outside_use: bool = True
    lookahead_s: float = LOOKAHEAD_S

    def __post_init__(self):
        if self.short_flows not in SHORT_RULES:
            raise ValueError(f"short_flows: one of {', '.join(SHORT_RULES)}, "
                             f"got {self.short_flows!r}")
        if self.long_flows not in LONG_RULES:
            raise ValueError(f"long_flows: one of {', '.join(LONG_RULES)}, "
                             f"got {self.long_flows!r}")
        if not isinstance(self.lookahead_s, (int, float)) or not self.lookahead_s >= 0:
            raise ValueError(f"lookahead_s: a number of seconds >= 0, got {self.lookahead_s!r}")


@register("malb-paper", rank=3, title="MALB (paper's rule)", short_flows="round-robin",
          capacity_weighted=False, long_flows="predicted-load", per_flow_weights=False,
          spread=False, load_shares=False, outside_use=False)
@register("malb", rank=4, title="MALB (ours)")
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
        o = self.options
        weights = view.profiles.weights(ms, now)[0]
        if view.profiles.flow_class(ms)[0] == "short":
            if o.short_flows == "least-remaining" and flow.watched is not None:
                return self._least_remaining(view, ms, candidates, now, weights)
            if o.capacity_weighted and view.unequal_servers(candidates):
                share = capacity_shares(view, candidates, weights)
                best = weighted_turn(self._credit.setdefault(ms, {}), share, candidates)
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
        if self.options.load_shares:
            shares = self._load_shares(view, ms, candidates, now)
            if shares is not None:
                return shares
        if self.options.capacity_weighted and view.unequal_servers(candidates):
            return capacity_shares(view, candidates, view.profiles.weights(ms, now)[0])
        return super().short_flow_shares(view, ms, candidates, now)

    def _load_shares(self, view, ms, candidates, now) -> dict[str, float] | None:
        """What the switch can do with what MALB knows: in data-plane mode the controller
        sees no short flow, so no remaining flow time; it sees each server's measured load
        every period. Each instance's share is its capacity share times its server's
        headroom (1 - the latest measured load in the microservice's per-flow weights,
        at least HEADROOM_FLOOR), and moves SHARE_SMOOTHING of the way there at each new
        sample. None when no candidate's server has fresh data (capacity shares then)."""
        weights = view.profiles.flow_weights(ms, now)[0]
        loads, times = {}, []
        for b in candidates:
            sample = view.loads[b.server]
            if not view.fresh(sample, now):
                continue
            figures = sample.measured if sample.measured is not None else \
                (sample.cpu, sample.mem, sample.net)
            if figures[0] is not None:
                figures = (figures[0] + self._outside(sample), *figures[1:])
            if any(w > 0 and v is None for w, v in zip(weights, figures)):
                continue
            loads[b.name] = sum(w * v for w, v in zip(weights, figures) if w > 0)
            times.append((b.name, sample.sample_time))
        if not loads:
            self._shares.pop(ms, None)
            return None
        capacity = capacity_shares(view, candidates, weights) \
            if view.unequal_servers(candidates) else {b.name: 1.0 for b in candidates}
        mean = sum(loads.values()) / len(loads)    # a server without data: the mean's
        target = {b.name: capacity[b.name] * max(HEADROOM_FLOOR,
                                                 1.0 - loads.get(b.name, mean) / 100.0)
                  for b in candidates}
        total = sum(target.values())
        target = {n: v / total for n, v in target.items()}
        key = tuple(sorted(times))
        last = self._shares.get(ms)
        if last is not None and set(target) <= set(last[1]):
            # the same instances, or some left (drained, failed): the others keep their
            # proportions, so only the slots of those that left move (Maglev's minimal
            # disruption), and a new sample moves them SHARE_SMOOTHING of the way as ever
            kept = {n: last[1][n] for n in target}
            kept_total = sum(kept.values())
            kept = {n: v / kept_total for n, v in kept.items()}
            if tuple(t for t in last[0] if t[0] in target) == key:
                self._shares[ms] = (key, kept)
                return dict(kept)         # no new sample: the shares stand
            target = {n: kept[n] + SHARE_SMOOTHING * (target[n] - kept[n]) for n in target}
        self._shares[ms] = (key, target)
        return dict(target)

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
        scores = {b.name: (view.connections.remaining(b.name, now, survival) + new)
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
            meas, then_cpu, then_net, skip = view.running_estimate.base(c.server, load)
            if any(w > 0 and v is None for w, v in zip(weights, meas)):
                continue
            now_cpu, now_net, running[c.server] = view.running_estimate.flows(
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
