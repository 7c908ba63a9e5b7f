"""Weighted least connections (``wlc``): least connections with each instance's open
connections divided by its server's CPU cores, so a server twice the size takes twice the
connections (IPVS's ``wlc``, HAProxy's leastconn with server weights by capacity). On equal
servers it decides as ``lc``."""
from __future__ import annotations

from ryu_apps.policies import register
from ryu_apps.policies.least_connections import LeastConnections


@register("wlc", title="weighted least connections", by_capacity=True)
class WeightedLeastConnections(LeastConnections):
    """Registered with by_capacity on: the class is lc's."""
