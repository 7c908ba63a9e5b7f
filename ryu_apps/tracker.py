"""Tracker mode (controller.dataplane.short_flows: tracker): a short-flow TCP connection is
still decided by the controller, but its address translation is kept by Open vSwitch's
connection tracker instead of a rule pair, so the flow table does not change per connection
(docs/controller.md, "Tracker mode"). Plain Python: OpenFlow messages as bytes.

On a switch, in table 0, TCP to a VIP's service port, and the instances' answers to callers
on that switch (where the orphan rules go), pass through the tracker (`ct(nat)`, in the
switch's own zone) into CT_TABLE. There:

- a new connection to a VIP comes to the controller (the catch-all, metered), which answers
  with one packet-out: `ct(commit, nat(dst=instance), ct_mark=client port)` and on into
  CT_TABLE;
- a client's segment, translated, goes towards its instance (a rule per instance, sent
  with the first connection to it); its reset also comes to the controller;
- an answer, translated back to the VIP, goes out of the port its connection came in on
  (a rule per client port, sent with the first connection from it); its FIN or reset also
  comes to the controller (cookie WATCH_COOKIE: the flow's end, flowpath.fin);
- an instance's answer that the tracker does not hold comes to the controller unmetered,
  as the orphan rules send it (flowpath.orphan);
- anything else to the controller, through the catch-all (cookie MISS_COOKIE): a segment to
  a VIP that the tracker does not hold (a resumption or a reset), or one it does hold that
  met the datapath's cached "to controller" path before the rule it needs was added
  (flowpath.tracked_miss sends it on).

- Tracker: each switch's zone, the per-switch rules sent so far, the rules a connection
  needs and the packet-out of its start;
- table_rules, answer_rules: the static parts;
- CT_TABLE, PRIO_*: the table and priorities.
"""
from __future__ import annotations

from common.config.model import TRACKER_ZONES as ZONES
from common.config.model import tracker_zone
from ryu_apps import ofwire
from ryu_apps.flows import FIN_TAG
from ryu_apps.managers.base import TO_CONTROLLER

CT_TABLE = 1
PRIO_TRACK_VIP = 110        # table 0: above the VIPs' to-controller rules and health probes
PRIO_TRACK_ANSWER = 160     # table 0: above the orphan rules, below the NAT rule pairs
PRIO_CT_WATCH, PRIO_CT_PASS = 20, 10      # CT_TABLE
PRIO_CT_ORPHAN = 1                        # CT_TABLE: above the metered catch-all
WATCH_COOKIE = FIN_TAG << 48              # a watched end, with no flow id: by its 5-tuple
MISS_COOKIE = 0x4D54 << 48                # CT_TABLE's catch-all: a header maybe translated
TRACKED, REPLY = ofwire.CT_TRACKED, ofwire.CT_REPLY


def table_rules(xid, dpid: int, zone: int, vips: list[tuple[str, int]],
                meter: int | None) -> bytes:
    """TCP to each (VIP, port) through the tracker, and CT_TABLE's catch-all to the
    controller (through the new flows' packet-in meter, as the VIP rules)."""
    buf = b""
    for vip, port in vips:
        buf += ofwire.flow_mod(xid(dpid), 0, PRIO_TRACK_VIP, {
            "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP, "ipv4_dst": vip,
            "tcp_dst": port}, _track(zone))
    return buf + ofwire.flow_mod(xid(dpid), MISS_COOKIE, 0, {}, TO_CONTROLLER,
                                 table=CT_TABLE, meter=meter)


def answer_rules(xid, dpid: int, zone: int, inst_ip: str, port: int,
                 dst: tuple[str, str]) -> bytes:
    """An instance's TCP answers to `dst` (an address and mask) through the tracker; those
    it does not hold (still from the instance's address) on to the controller unmetered, as
    the orphan rules they pass over."""
    answers = {"eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP,
               "ipv4_src": inst_ip, "tcp_src": port, "ipv4_dst": dst}
    return ofwire.flow_mod(xid(dpid), 0, PRIO_TRACK_ANSWER, answers, _track(zone)) + \
        ofwire.flow_mod(xid(dpid), 0, PRIO_CT_ORPHAN, answers, TO_CONTROLLER, table=CT_TABLE)


def towards_actions(inst_mac: str, out_port: int) -> bytes:
    """A client's segment's, translated to the instance: its MAC, towards it."""
    return ofwire.action_set_field("eth_dst", inst_mac) + ofwire.action_output(out_port)


def _track(zone: int) -> bytes:
    return ofwire.action_ct(zone, CT_TABLE, actions=ofwire.action_nat())


class Tracker:
    """Each switch's tracker zone, what each switch has been sent beyond the static rules,
    and the messages of a connection's start."""

    def __init__(self, vip_mac: str, zones: dict[int, int]):
        self.vip_mac = vip_mac
        # Open vSwitch's userspace bridges share one tracker, and an answer must be
        # translated back only at the switch that translated its connection, not again at
        # each switch on its way: a zone per configured switch (`zones`, datapath id ->
        # zone: from the configuration, by default from the datapath id alone, so adding a
        # switch renumbers none and connections tracked before a restart stay known).
        # Other switches get no tracked connection; their zone is the same function of
        # their id, moved past the configured ones it would share
        self.zones = dict(zones)
        self._taken = set(self.zones.values())
        self.client_ports: dict[int, set[int]] = {}           # per switch
        self.instance_ports: dict[int, dict[str, int]] = {}   # per switch: instance -> port

    @classmethod
    def of(cls, cfg) -> Tracker:
        """The configuration's: its VIP MAC, and each configured switch's zone."""
        return cls(cfg.controller.vip_mac, {s.dpid: s.tracker_zone for s in cfg.testbed.switches})

    def zone(self, dpid: int) -> int:
        if dpid in self.zones:
            return self.zones[dpid]
        zone = tracker_zone(dpid)
        while zone in self._taken and len(self._taken) < ZONES:
            zone = zone % ZONES + 1
        return zone

    def forget(self, dpid: int) -> None:
        """The switch (re)connected: what it had been sent may be gone."""
        self.client_ports.pop(dpid, None)
        self.instance_ports.pop(dpid, None)

    def rules(self, xid, dpid: int, in_port: int, inst_name: str, inst_mac: str,
              inst_ip: str, inst_port: int, out_port: int) -> bytes:
        """The rules a connection from `in_port` to the instance needs that the switch
        lacks: towards the instance (with a copy of the client's reset), and the answers'
        way back out of `in_port` (with copies of the instance's FIN and reset)."""
        buf = b""
        if self.instance_ports.setdefault(dpid, {}).get(inst_name) != out_port:
            towards = {"eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP,
                       "ipv4_dst": inst_ip, "tcp_dst": inst_port,
                       "ct_state": (TRACKED, TRACKED | REPLY)}
            on = towards_actions(inst_mac, out_port)
            buf += ofwire.flow_mod(xid(dpid), 0, PRIO_CT_PASS, towards, on, table=CT_TABLE)
            buf += ofwire.flow_mod(xid(dpid), WATCH_COOKIE, PRIO_CT_WATCH, {
                **towards, "tcp_flags": (ofwire.TCP_RST,) * 2}, on + TO_CONTROLLER,
                table=CT_TABLE)
            self.instance_ports[dpid][inst_name] = out_port
        if in_port not in self.client_ports.setdefault(dpid, set()):
            back = self.back_actions(in_port)
            answer = {"eth_type": ofwire.ETH_TYPE_IP, "ct_state": (TRACKED | REPLY,) * 2,
                      "ct_mark": in_port}
            buf += ofwire.flow_mod(xid(dpid), 0, PRIO_CT_PASS, answer, back, table=CT_TABLE)
            for flag in (ofwire.TCP_FIN, ofwire.TCP_RST):
                buf += ofwire.flow_mod(xid(dpid), WATCH_COOKIE, PRIO_CT_WATCH, {
                    **answer, "ip_proto": ofwire.IPPROTO_TCP, "tcp_flags": (flag, flag)},
                    back + TO_CONTROLLER, table=CT_TABLE)
            self.client_ports[dpid].add(in_port)
        return buf

    def back_actions(self, client_port: int) -> bytes:
        """An answer's, translated back to the VIP: the VIP's MAC, out of the client's port."""
        return ofwire.action_set_field("eth_src", self.vip_mac) + \
            ofwire.action_output(client_port)

    def commit(self, xid, dpid: int, in_port: int, data: bytes, inst_ip: str,
               inst_port: int, vport: int) -> bytes:
        """The packet-out that commits a connection to the tracker, translated towards the
        instance and marked with the client's port."""
        nat = ofwire.action_nat(inst_ip, inst_port if inst_port != vport else None)
        ct = ofwire.action_ct(self.zone(dpid), CT_TABLE, commit=True, actions=nat +
                              ofwire.action_set_field("ct_mark", in_port))
        return ofwire.packet_out(xid(dpid), in_port, ct, data)
