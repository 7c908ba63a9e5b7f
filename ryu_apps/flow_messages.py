"""The OpenFlow messages of one flow on one switch, as plain Python: its NAT rule pair (with
a FIN watch first when its end is watched), the tracker's rules a tracked flow needs, its
first packet sent on, a reset for a client, and the port towards an instance that they all
go out of (ryu_apps/flowpath.py decides which; the managers send them again).

- FlowMessages: for_new_flow, nat_rules, tracker_rules, first_packet, tcp_reset,
  port_towards;
- PRIO_NAT, PRIO_FIN_WATCH, FIN_WATCH_HARD_S: the rules' priorities and timeouts.
"""
from __future__ import annotations

from collections.abc import Callable

from ryu_apps import ofwire
from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FlowRecord, fin_cookie
from ryu_apps.locations import InstanceLocations
from ryu_apps.tracker import Tracker

PRIO_NAT = 200
PRIO_FIN_WATCH = PRIO_NAT + 1
# a FIN watch whose flow never sends one goes after this (the policy core forgets the flow
# at the same age: estimators/open_flows.OpenFlows)
FIN_WATCH_HARD_S = 600


class FlowMessages:
    """instances: {name: slot}; next_hop: {(dpid, dpid): port} over the trunks and links;
    mac_to_port: what the L2 path learned; tracker: tracker mode's, or None. The dicts are
    the path's own, changed in place as links are found and MACs learned."""

    def __init__(self, cfg, backends: dict, xid: Callable[[int], int], instances: dict,
                 locations: InstanceLocations, next_hop: dict, mac_to_port: dict,
                 tracker: Tracker | None):
        self.cfg, self.backends, self.xid, self.instances = cfg, backends, xid, instances
        self.locations, self.next_hop, self.mac_to_port = locations, next_hop, mac_to_port
        self.tracker = tracker

    def for_new_flow(self, dpid: int, in_port: int, data: bytes, rec: FlowRecord,
                     now: float) -> bytes:
        """Rules, barrier and the first packet in one write: the switch applies the rules
        before it sends the packet on (tracked: the packet-out that commits it, after any
        rule of the tracker's table the switch lacks)."""
        if rec.tracked:
            return self.first_packet(dpid, in_port, data, rec)
        return self.nat_rules(dpid, rec, now) + self.first_packet(dpid, in_port, data, rec)

    def nat_rules(self, dpid: int, rec: FlowRecord, now: float) -> bytes:
        """The flow's rule pair and a barrier; reverse rule first, so the instance's answer
        is rewritten as soon as it comes. A watched flow's FIN watch goes first."""
        backend = self.backends[rec.instance]
        c = self.cfg.controller
        watch = b""
        if rec.fin_watch:
            watch = ofwire.fin_watch(
                self.xid(dpid), fin_cookie(rec.flow_id), PRIO_FIN_WATCH, FIN_WATCH_HARD_S,
                backend.ip, backend.port, rec.client_ip, rec.client_port,
                ofwire.reverse_actions("tcp", c.vip_mac, rec.vip, rec.vport, backend.port,
                                       rec.client_in_port))
        pair = ofwire.nat_messages(
            lambda: self.xid(dpid), rec.protocol, rec.flow_id | (DIR_FORWARD << 44),
            rec.flow_id | (DIR_REVERSE << 44), PRIO_NAT, c.idle_timeout_s, c.hard_timeout_s,
            rec.client_ip, rec.client_port, rec.client_in_port, rec.vip, rec.vport, c.vip_mac,
            backend.mac, backend.ip, backend.port,
            self.port_towards(dpid, self.instances[backend.name]))
        rec.rules_sent = now        # built: no path to the instance raised no LookupError
        return watch + pair

    def tracker_rules(self, dpid: int, rec: FlowRecord) -> bytes:
        """The tracker's rules a tracked flow needs that the switch lacks."""
        backend = self.backends[rec.instance]
        assert self.tracker is not None         # a tracked flow: tracker mode
        return self.tracker.rules(self.xid, dpid, rec.client_in_port, backend.name,
                                  backend.mac, backend.ip, backend.port,
                                  self.port_towards(dpid, self.instances[backend.name]),
                                  rec.client_ip)

    def first_packet(self, dpid: int, in_port: int, data: bytes, rec: FlowRecord) -> bytes:
        backend = self.backends[rec.instance]
        if rec.tracked:
            assert self.tracker is not None     # a tracked flow: tracker mode
            return self.tracker_rules(dpid, rec) + self.tracker.commit(
                self.xid, dpid, in_port, data, backend.ip, backend.port, rec.vport)
        actions = ofwire.forward_actions(rec.protocol, backend.mac, backend.ip, backend.port,
                                         rec.vport,
                                         self.port_towards(dpid, self.instances[backend.name]))
        return ofwire.packet_out(self.xid(dpid), in_port, actions, data)

    def tcp_reset(self, dpid: int, in_port: int, f: ofwire.Frame) -> bytes:
        """A RST answering segment f (which carries an ACK), from where f was sent to, out of
        the port f came in on (RFC 9293: seq = the segment's acknowledgment number)."""
        frame = ofwire.tcp_frame(f.eth_src, self.cfg.controller.vip_mac, f.ip_dst, f.ip_src,
                                 f.dst_port, f.src_port, f.tcp_ack, flags=ofwire.TCP_RST,
                                 window=0)
        return ofwire.packet_out(self.xid(dpid), ofwire.OFPP_CONTROLLER,
                                 ofwire.action_output(in_port), frame)

    def port_towards(self, dpid: int, inst) -> int:
        """The instance's own port on its switch; elsewhere the trunk towards its switch
        (configured or found), else where its MAC was learned."""
        at = self.locations.where(inst.name)
        if at is None:
            raise LookupError(f"{inst.name} is not located yet")
        if at[0] == dpid:
            return at[1]
        port = self.next_hop.get((dpid, at[0]))
        if port is None:
            port = self.mac_to_port.get(dpid, {}).get(inst.mac)
        if port is None:
            raise LookupError(f"no path from switch {dpid} to {inst.name}")
        return port
