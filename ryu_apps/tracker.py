"""Tracker mode (controller.dataplane.short_flows: tracker): a short-flow TCP connection is
still decided by the controller, but its address translation is kept by Open vSwitch's
connection tracker instead of a rule pair, so the flow table does not change per connection
(docs/controller.md, "Tracker mode"). Plain Python: OpenFlow messages as bytes.

On a switch, in table 0, TCP to a VIP's service port, and the instances' answers to callers
on that switch (where the orphan rules go), pass through the tracker (`ct(nat)`, in the
switch's own zone) into CT_TABLE. There:

- a new connection to a VIP comes to the controller (the catch-all, metered), which answers
  with one packet-out: `ct(commit, nat(dst=instance), ct_mark=client port,
  ct_label=instance address)` and on into
  CT_TABLE;
- a client's segment, translated, goes towards its instance (a rule per instance, sent
  with the first connection to it); its reset also comes to the controller;
- an answer, translated back to the VIP, goes out of the port its connection came in on
  (a rule per client port, sent with the first connection from it); its FIN or reset also
  comes to the controller (cookie WATCH_COOKIE: the flow's end, flowpath.fin);
- above those two, a pair of counting rules per (client port, instance), sent with the
  first connection between them (cookies PAIR_COOKIE | pair id): the same actions, so
  the switch counts the bytes each caller exchanges with each instance without a rule per
  connection (the communication graph's edges, docs/placement.md). The commit marks a
  connection with its client's port (ct_mark) and its instance's address (ct_label), which
  the answers' counting rule matches after the translation back to the VIP;
- an instance's answer that the tracker does not hold comes to the controller unmetered,
  as the orphan rules send it (flowpath.orphan);
- anything else to the controller, through the catch-all (cookie MISS_COOKIE): a segment to
  a VIP that the tracker does not hold (a resumption or a reset), or one it does hold that
  met the datapath's cached "to controller" path before the rule it needs was added
  (flowpath.tracked_miss sends it on).

- Tracker: each switch's zone, the per-switch rules sent so far, the rules a connection
  needs and the packet-out of its start, the counting rules' statistics request and what
  their counters grew by (pair_bytes);
- table_rules, answer_rules: the static parts;
- CT_TABLE, PRIO_*: the table and priorities.
"""
from __future__ import annotations

import socket

from common.config.model import TRACKER_ZONES as ZONES
from common.config.model import tracker_zone
from ryu_apps import ofwire
from ryu_apps.flows import FIN_TAG
from ryu_apps.managers.base import TO_CONTROLLER

CT_TABLE = 1
PRIO_TRACK_VIP = 110        # table 0: above the VIPs' to-controller rules and health probes
PRIO_TRACK_ANSWER = 160     # table 0: above the orphan rules, below the NAT rule pairs
PRIO_CT_WATCH, PRIO_CT_PAIR, PRIO_CT_PASS = 20, 15, 10      # CT_TABLE
PRIO_CT_ORPHAN = 1                        # CT_TABLE: above the metered catch-all
WATCH_COOKIE = FIN_TAG << 48              # a watched end, with no flow id: by its 5-tuple
MISS_COOKIE = 0x4D54 << 48                # CT_TABLE's catch-all: a header maybe translated
PAIR_COOKIE = 0x4D50 << 48                # CT_TABLE's counting rules: | pair id << 1 | answer
PAIR_MASK = 0xFFFF << 48
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


def label(inst_ip: str) -> int:
    """A connection's ct_label: its instance's address (an answer, translated back to the
    VIP, no longer carries it)."""
    return int.from_bytes(socket.inet_aton(inst_ip), "big")


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
        # the counting rules: a pair id per (switch, client port, instance), kept across
        # reconnections (a cookie means one pair for the process's life); the pairs each
        # switch has been sent, with the port towards the instance they were sent with;
        # the client's address behind each pair; its rules' counters as last read
        self.pair_ids: dict[tuple[int, int, str], int] = {}
        self.pairs: dict[int, tuple[int, int, str]] = {}
        self.pairs_sent: dict[int, dict[tuple[int, str], int]] = {}
        self.pair_client: dict[int, str] = {}
        self.counters: dict[int, int | None] = {}     # cookie -> bytes (None: not known)

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
        for in_port, inst in self.pairs_sent.pop(dpid, {}):
            # the switch may have kept the rules and their counters (a control channel
            # that dropped) or not (it restarted): their next reading is a new baseline,
            # counted as nothing, rather than what was counted once already counted again
            cookie = PAIR_COOKIE | self.pair_ids[(dpid, in_port, inst)] << 1
            self.counters[cookie] = self.counters[cookie | 1] = None

    def rules(self, xid, dpid: int, in_port: int, inst_name: str, inst_mac: str,
              inst_ip: str, inst_port: int, out_port: int, client_ip: str) -> bytes:
        """The rules a connection from `in_port` (the client at `client_ip`) to the
        instance needs that the switch lacks: towards the instance (with a copy of the
        client's reset), the answers' way back out of `in_port` (with copies of the
        instance's FIN and reset), and the pair's counting rules (again for every pair of
        the instance when the way towards it changed)."""
        buf = b""
        towards = {"eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP,
                   "ipv4_dst": inst_ip, "tcp_dst": inst_port,
                   "ct_state": (TRACKED, TRACKED | REPLY)}
        on = towards_actions(inst_mac, out_port)
        sent = self.pairs_sent.setdefault(dpid, {})
        if self.instance_ports.setdefault(dpid, {}).get(inst_name) != out_port:
            buf += ofwire.flow_mod(xid(dpid), 0, PRIO_CT_PASS, towards, on, table=CT_TABLE)
            buf += ofwire.flow_mod(xid(dpid), WATCH_COOKIE, PRIO_CT_WATCH, {
                **towards, "tcp_flags": (ofwire.TCP_RST,) * 2}, on + TO_CONTROLLER,
                table=CT_TABLE)
            self.instance_ports[dpid][inst_name] = out_port
            # the instance's other pairs on this switch forward by the old way: sent again
            for (port, inst) in [k for k in sent if k[1] == inst_name and k[0] != in_port]:
                buf += self._pair_rules(xid, dpid, port, inst_name, inst_ip, towards, on)
                sent[(port, inst)] = out_port
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
        pair = self.pair_ids.setdefault((dpid, in_port, inst_name), len(self.pair_ids) + 1)
        self.pairs[pair] = (dpid, in_port, inst_name)
        self.pair_client[pair] = client_ip
        if sent.get((in_port, inst_name)) != out_port:
            buf += self._pair_rules(xid, dpid, in_port, inst_name, inst_ip, towards, on)
            sent[(in_port, inst_name)] = out_port
        return buf

    def _pair_rules(self, xid, dpid: int, in_port: int, inst_name: str, inst_ip: str,
                    towards: dict, on: bytes) -> bytes:
        """A (client port, instance) pair's counting rules: its segments towards the
        instance, and the instance's answers to it, each with the actions of the rule it
        sits above."""
        cookie = PAIR_COOKIE | self.pair_ids[(dpid, in_port, inst_name)] << 1
        answer = {"eth_type": ofwire.ETH_TYPE_IP, "ct_state": (TRACKED | REPLY,) * 2,
                  "ct_mark": in_port, "ct_label": label(inst_ip)}
        return ofwire.flow_mod(xid(dpid), cookie, PRIO_CT_PAIR, {**towards, "ct_mark": in_port},
                               on, table=CT_TABLE) + \
            ofwire.flow_mod(xid(dpid), cookie | 1, PRIO_CT_PAIR, answer,
                            self.back_actions(in_port), table=CT_TABLE)

    def pair_stats_request(self, xid: int, dpid: int) -> bytes:
        """The counting rules' statistics, when the switch has been sent any."""
        if not self.pairs_sent.get(dpid):
            return b""
        return ofwire.flow_stats_request(xid, PAIR_COOKIE, PAIR_MASK)

    def pair_bytes(self, dpid: int, cookie: int, byte_count: int) -> tuple[str, str, int] | None:
        """What a counting rule's counter grew by since it was last read, as (client
        address, instance, bytes); None for a rule that is not a pair's of this process on
        this switch (a previous controller's), and for the first reading after the switch
        reconnected (a baseline)."""
        pair = self.pairs.get((cookie & ~PAIR_MASK) >> 1)
        if cookie & PAIR_MASK != PAIR_COOKIE or pair is None or pair[0] != dpid:
            return None
        last = self.counters.get(cookie, 0)
        self.counters[cookie] = byte_count
        if last is None:
            return None
        # a rule sent again (its way changed) may start counting from zero
        grown = byte_count - last if byte_count >= last else byte_count
        return self.pair_client[(cookie & ~PAIR_MASK) >> 1], pair[2], grown

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
                              ofwire.action_set_field("ct_mark", in_port) +
                              ofwire.action_set_field("ct_label", label(inst_ip)))
        return ofwire.packet_out(xid(dpid), in_port, ct, data)
