"""LinkDiscovery: in the user's own network (`network:`), the links between switches found
by LLDP instead of configured (ryu_apps/links.py): a discovery frame out of every port of
every switch each monitoring period, the frames heard back, links not heard for a while
forgotten, and the next hops towards every switch taken again when the links change (the
dict the new-flow path and every manager hold, updated in place)."""
from __future__ import annotations

from collections.abc import Callable

from ryu_apps.flowpath import next_hops
from ryu_apps.links import Links
from ryu_apps.managers.base import Manager, controller_packet_out
from ryu_apps.core_result import CoreResult


class LinkDiscovery(Manager):
    """on: whether the network is the user's (else nothing is sent or heard); next_hop: the
    shared {dpid: {dpid: port}}; switches: those connected; pools_changed(now, out): the
    core's, for the data-plane groups' buckets that may point elsewhere now."""

    def __init__(self, cfg, on: bool, xid: Callable[[int], int], next_hop: dict,
                 switches: set[int], pools_changed: Callable[[float, CoreResult], CoreResult]):
        self.cfg, self.on, self.xid = cfg, on, xid
        self.next_hop, self.switches, self.pools_changed_of = next_hop, switches, pools_changed
        self.links = Links(cfg.controller.monitoring_period_s)

    def switch_down(self, dpid: int, now: float) -> None:
        self.links.switch_gone(dpid)

    def heard(self, dpid: int, in_port: int, data: bytes, now: float) -> CoreResult:
        """An LLDP frame that came in: a link found, or one heard again."""
        out = CoreResult(kinds=["lldp"])
        if self.on and self.links.heard(dpid, in_port, data, now):
            peer, peer_port = self.links.links[(dpid, in_port)][0]
            out.infos.append(f"link found: switch {dpid:016x} port {in_port} - "
                             f"{peer:016x} port {peer_port}")
            self._changed(out, now)
        return out

    def discover(self, now: float) -> CoreResult:
        """A discovery frame out of every port of every switch, and links not heard for a
        while forgotten."""
        out = CoreResult()
        if not self.on:
            return out
        gone = self.links.expire(now)
        for (a, ap), (b, bp) in gone:
            if a < b:
                out.warnings.append(f"link gone: switch {a:016x} port {ap} - {b:016x} port {bp}")
        if gone:
            self._changed(out, now)
        for dpid in sorted(self.switches):
            frames = self.links.frames(dpid)
            if frames:
                out.sends.append((dpid, b"".join(
                    controller_packet_out(self.xid(dpid), frame, port) for port, frame in frames)))
        return out

    def ports_seen(self, dpid: int, ports: list[int]) -> None:
        if self.on:
            self.links.ports_seen(dpid, ports)

    def _changed(self, out: CoreResult, now: float) -> None:
        hops = next_hops(self.cfg, self.links.adjacency())
        self.next_hop.clear()
        self.next_hop.update(hops)
        self.pools_changed_of(now, out)
