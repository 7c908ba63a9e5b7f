"""Simple round robin (``srr``), the paper's first baseline: each microservice's in-service
instances in turn, whatever their load."""
from __future__ import annotations

from ryu_apps.policies import register
from ryu_apps.policies.base import Policy
from ryu_apps.policies.shared_rules import round_robin


@register("srr")
class RoundRobin(Policy):
    title = "SRR"

    def choose(self, view, ms, candidates, now, flow):
        return round_robin(view, self, ms, candidates, now, "srr baseline")
