"""Least connections (``lc``): the instance with the fewest open connections as the
controller counts them (every TCP flow followed to its FIN; a short flow whose rules idle
out without one ends then), ties in round-robin order. What HAProxy's ``balance leastconn``
and IPVS's ``lc`` do. UDP flows are not counted (the controller sees no end of them)."""
from __future__ import annotations

from dataclasses import dataclass

from ryu_apps.policies import register
from ryu_apps.policies.base import Options, Policy
from ryu_apps.policies.shared_rules import least_in_turn, open_per_capacity


@dataclass(frozen=True)
class ConnectionOptions(Options):
    by_capacity: bool = False       # open connections over the server's CPU cores


@register("lc")
class LeastConnections(Policy):
    title = "least connections"
    Options = ConnectionOptions
    options: ConnectionOptions  # Policy.__init__ sets it: of this class's Options

    def choose(self, view, ms, candidates, now, flow):
        if self.options.by_capacity:
            scores = {b.name: open_per_capacity(view, b) for b in candidates}
            how = "fewest open connections per CPU core"
        else:
            scores = {b.name: float(view.open_connections(b.name)) for b in candidates}
            how = "fewest open connections"
        return least_in_turn(view, self, ms, candidates, now, scores, self.algorithm, how)

    @property
    def algorithm(self) -> str:
        return "weighted-least-connections" if self.options.by_capacity \
            else "least-connections"

    def watches(self, view, ms):
        return True           # every connection is counted to its end
