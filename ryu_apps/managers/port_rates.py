"""PortRates: per-port byte rates from the switches' port statistics; the instances' ports
give each server's network use to the policy core, and every port's rates go to the
profiler with the flow records."""
from __future__ import annotations

from typing import NamedTuple

from common.netuse import network_percent
from ryu_apps.managers.base import Manager
from ryu_apps.core_result import CoreResult


class PortStat(NamedTuple):
    port_no: int
    rx_bytes: int
    tx_bytes: int


class PortRates(Manager):
    def __init__(self, cfg, plan, policy_core):
        self.cfg, self.plan, self.policy_core = cfg, plan, policy_core
        self.prev: dict[tuple[int, int], tuple[int, int, float]] = {}
        self.rates: dict[tuple[int, int], dict] = {}

    def port_stats(self, dpid: int, entries: list[PortStat], now: float) -> CoreResult:
        """Rates per port since the last reply; the instances' ports give each server's
        network utilisation to the policy core."""
        per_server: dict[str, list[float]] = {}
        for st in entries:
            key = (dpid, st.port_no)
            prev = self.prev.get(key)
            self.prev[key] = (st.rx_bytes, st.tx_bytes, now)
            if prev is None or now - prev[2] <= 0:
                continue
            dt = now - prev[2]
            rx = max(0, st.rx_bytes - prev[0]) / dt
            tx = max(0, st.tx_bytes - prev[1]) / dt
            owner = self.plan.port_owner(*key)
            self.rates[key] = {"dpid": dpid, "port": st.port_no, "time": now,
                               "rx_bytes_per_s": round(rx, 1), "tx_bytes_per_s": round(tx, 1),
                               "instance": owner.name if owner else None,
                               "server": owner.server if owner else None}
            if owner is not None:
                both = per_server.setdefault(owner.server, [0.0, 0.0])
                both[0] += rx
                both[1] += tx
        for server, (rx, tx) in per_server.items():
            capacity = self.cfg.server(server).network_mbit * 1e6 / 8
            self.policy_core.update_network(server, network_percent(rx, tx, capacity), now)
        return CoreResult()
