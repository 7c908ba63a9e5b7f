"""Least network load (``ln``), the paper's second baseline: the server whose network the
switches' port counters show least used (the profiler's figure while they have none),
corrected for the flows sent since."""
from __future__ import annotations

from ryu_apps.policies import register
from ryu_apps.policies.base import Policy
from ryu_apps.policies.shared_rules import least_load

NETWORK_ONLY = (0.0, 0.0, 1.0)


@register("ln")
class LeastNetworkLoad(Policy):
    title = "LN"

    def choose(self, view, ms, candidates, now, flow):
        return least_load(view, self, ms, candidates, now, "least-network-load", NETWORK_ONLY)
