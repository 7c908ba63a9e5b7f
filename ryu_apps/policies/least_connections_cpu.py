"""Least connections weighted by idle CPU (``lc-cpu``): each instance's open connections
plus one, over its server's weight, the fewest wins (ties in round-robin order). A
server's weight is its CPU cores times its idle share of them in the latest sample,
``max(1, 100 - cpu %)`` percent, as HAProxy's ``balance leastconn`` computes it with
``agent-check`` weights fed from the servers' CPU (experiments/haproxy.py's ``agent``
mode: what a practitioner wires up). A server without a fresh sample counts at its full
weight (HAProxy would keep the last weight it was told). In the controller, so it decides
per flow on the same connections and samples as the other policies, without a proxy."""
from __future__ import annotations

from ryu_apps.policies import register
from ryu_apps.policies.base import Policy
from ryu_apps.policies.shared_rules import cores_of, least_in_turn


def idle_share(view, server: str, now: float) -> float:
    """The server's idle CPU share (0.01-1) in its latest fresh sample; 1 without one."""
    load = view.loads[server]
    if not view.fresh(load, now):
        return 1.0
    cpu = load.measured[0] if load.measured and load.measured[0] is not None else load.cpu
    if cpu is None:
        return 1.0
    return max(1.0, 100.0 - cpu) / 100.0


@register("lc-cpu", title="least connections by idle CPU")
class LeastConnectionsByIdleCpu(Policy):
    title = "least connections by idle CPU"
    algorithm = "least-connections-idle-cpu"

    def choose(self, view, ms, candidates, now, flow):
        weight = {s: cores_of(view, s) * idle_share(view, s, now)
                  for s in {b.server for b in candidates}}
        scores = {b.name: (view.open_connections(b.name) + 1) / weight[b.server]
                  for b in candidates}
        return least_in_turn(view, self, ms, candidates, now, scores, self.algorithm,
                             "fewest open connections per idle CPU core")

    def watches(self, view, ms):
        return True           # every connection is counted to its end
