"""Weighted round robin (``wrr``): each instance in turn in proportion to its server's CPU
cores, by smooth weighted round robin (nginx's: no burst to the biggest server), the fair
round robin on unequal servers (IPVS's ``wrr``, HAProxy's roundrobin with server weights).
On equal servers it is round robin."""
from __future__ import annotations

from ryu_apps.policies import register
from ryu_apps.policies.base import Policy
from ryu_apps.policies.shared_rules import cores_of, weighted_turn

CPU_ONLY = (1.0, 0.0, 0.0)


@register("wrr")
class WeightedRoundRobin(Policy):
    title = "weighted round robin"

    def __init__(self, options=None):
        super().__init__(options)
        self._credit: dict[str, dict[str, float]] = {}      # ms -> instance -> credit

    def choose(self, view, ms, candidates, now, flow):
        share = {b.name: cores_of(view, b.server) for b in candidates}
        best = weighted_turn(self._credit.setdefault(ms, {}), share, candidates,
                             view.pools.get(ms))
        return self.decision(best, "weighted-round-robin",
                             "round robin weighted by the servers' CPU cores", now,
                             {b.server: share[b.name] for b in candidates}, CPU_ONLY)

