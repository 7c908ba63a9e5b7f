"""A fake OpenFlow 1.3 network for unit tests, in the spirit of faucet's FakeOFTable: the
bytes a controller sends are decoded (flow mods by Ryu's parser, as a switch would; group
mods, meter mods, statistics requests and packet-outs by struct here, since Ryu parses only
what switches send) and applied to per-switch tables, groups and meters, which then answer
"where does this packet go, rewritten how", across trunks from switch to switch. Open vSwitch's
connection tracker is modelled for `ct` without NAT (data-plane mode's moving slots): an entry
per zone and 5-tuple, committed with its mark; `+new` or `+est`, never `+inv`. Tracker mode's
`ct(nat)` is not modelled (tests/integration/test_tracker.py runs the real one)."""
from __future__ import annotations

import ipaddress
import struct
import zlib
from typing import NamedTuple

from ryu_apps import ofwire
from ryu_apps.framework import module, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

ofproto_parser = module("ofproto.ofproto_parser")

CONTROLLER = ofp.OFPP_CONTROLLER


class _Datapath:
    ofproto, ofproto_parser = ofp, parser


class PacketOut(NamedTuple):
    in_port: int
    actions: list
    data: bytes


class GroupMod(NamedTuple):
    command: int
    group_type: int
    group_id: int
    buckets: list          # (weight, watch_port, actions)


class MeterMod(NamedTuple):
    command: int
    flags: int
    meter_id: int
    bands: list            # (type, rate, burst)


class Request(NamedTuple):
    mp_type: int
    body: bytes
    xid: int = 0


class EchoRequest(NamedTuple):
    xid: int
    data: bytes


class RoleRequest(NamedTuple):
    role: int             # ofp.OFPCR_ROLE_*
    generation: int


def _actions(buf: bytes, start: int, end: int) -> list:
    out, pos = [], start
    while pos < end:
        action = parser.OFPAction.parser(buf, pos)
        out.append(action)
        pos += action.len
    return out


def decode(buf: bytes) -> list:
    """Concatenated OpenFlow messages -> flow mods (Ryu's parser), packet-outs, group and
    meter mods, statistics, echo and role requests; barriers skipped."""
    out, off = [], 0
    while off < len(buf):
        version, msg_type, length, xid = ofproto_parser.header(buf[off:])
        body = buf[off:off + length]
        if msg_type == ofp.OFPT_PACKET_OUT:
            _, in_port, actions_len = struct.unpack_from("!IIH", body, 8)
            out.append(PacketOut(in_port, _actions(body, 24, 24 + actions_len),
                                 body[24 + actions_len:]))
        elif msg_type == ofp.OFPT_FLOW_MOD:
            out.append(ofproto_parser.msg(_Datapath(), version, msg_type, length, xid, body))
        elif msg_type == ofp.OFPT_GROUP_MOD:
            command, gtype, gid = struct.unpack_from("!HBxI", body, 8)
            buckets, pos = [], 16
            while pos < length:
                blen, weight, watch_port, _ = struct.unpack_from("!HHII", body, pos)
                buckets.append((weight, watch_port, _actions(body, pos + 16, pos + blen)))
                pos += blen
            out.append(GroupMod(command, gtype, gid, buckets))
        elif msg_type == ofp.OFPT_METER_MOD:
            command, flags, mid = struct.unpack_from("!HHI", body, 8)
            bands = [struct.unpack_from("!HHII", body, pos) for pos in range(16, length, 16)]
            out.append(MeterMod(command, flags, mid, [(t, rate, burst)
                                                      for t, _, rate, burst in bands]))
        elif msg_type == ofp.OFPT_MULTIPART_REQUEST:
            out.append(Request(struct.unpack_from("!H", body, 8)[0], body[16:], xid))
        elif msg_type == ofp.OFPT_ECHO_REQUEST:
            out.append(EchoRequest(xid, body[8:]))
        elif msg_type == ofp.OFPT_ROLE_REQUEST:
            out.append(RoleRequest(*struct.unpack_from("!I4xQ", body, 8)))
        off += length
    return out


def fields_of(frame: bytes) -> dict:
    """A frame as the match fields a switch sees."""
    f = ofwire.parse_frame(frame)
    pkt = {"eth_src": f.eth_src, "eth_dst": f.eth_dst, "eth_type": f.eth_type}
    if f.eth_type == ofwire.ETH_TYPE_LLDP:
        pkt["lldp"] = frame          # carried whole: its TLVs say where it was sent
    elif f.eth_type == ofwire.ETH_TYPE_ARP:
        pkt.update(arp_op=f.arp_op, arp_spa=f.arp_spa, arp_tpa=f.arp_tpa, arp_sha=f.arp_sha)
    elif f.eth_type == ofwire.ETH_TYPE_IP:
        l4 = "tcp" if f.ip_proto == 6 else "udp"
        pkt.update(ip_proto=f.ip_proto, ipv4_src=f.ip_src, ipv4_dst=f.ip_dst,
                   **{f"{l4}_src": f.src_port, f"{l4}_dst": f.dst_port})
        if f.ip_proto == 6:
            pkt.update(tcp_flags=f.tcp_flags, tcp_seq=f.tcp_seq, tcp_ack=f.tcp_ack)
    return pkt


def frame_of(pkt: dict) -> bytes:
    """Match fields back to a frame (what a switch puts in a packet-in)."""
    if "lldp" in pkt:
        return pkt["lldp"]
    if pkt["eth_type"] == ofwire.ETH_TYPE_ARP:
        return ofwire.arp_frame(pkt["arp_op"], pkt["eth_src"], pkt["arp_spa"],
                                pkt.get("arp_tha", "00:00:00:00:00:00"), pkt["arp_tpa"],
                                eth_dst=pkt["eth_dst"])
    if "ipv4_src" not in pkt:
        return ofwire.ethernet(pkt["eth_dst"], pkt["eth_src"], pkt["eth_type"], b"\0" * 46)
    if pkt.get("ip_proto") == 6:
        return ofwire.tcp_frame(pkt["eth_dst"], pkt["eth_src"], pkt["ipv4_src"],
                                pkt["ipv4_dst"], pkt["tcp_src"], pkt["tcp_dst"],
                                pkt.get("tcp_seq", 1), pkt.get("tcp_ack", 0),
                                pkt.get("tcp_flags", ofwire.TCP_ACK))
    return ofwire.ethernet(pkt["eth_dst"], pkt["eth_src"], ofwire.ETH_TYPE_IP,
                           ofwire.udp_datagram(pkt["ipv4_src"], pkt["ipv4_dst"],
                                               pkt["udp_src"], pkt["udp_dst"], b"x"))


def _matches(match: dict, pkt: dict) -> bool:
    for k, v in match.items():
        if k not in pkt:
            return False
        if isinstance(v, tuple):
            value, mask = v
            if isinstance(value, str):
                net = ipaddress.ip_network(f"{value}/{mask}", strict=False)
                if ipaddress.ip_address(pkt[k]) not in net:
                    return False
            elif pkt[k] & mask != value & mask:
                return False
        elif pkt[k] != v:
            return False
    return True


class Rule(NamedTuple):
    table: int
    priority: int
    match: dict
    actions: list
    cookie: int
    meter: int | None
    goto: int | None
    idle_timeout: int
    flags: int


class FakeSwitch:
    """One switch: tables of rules, select groups, meters; what it was asked for."""

    def __init__(self, dpid: int):
        self.dpid = dpid
        self.rules: list[Rule] = []
        self.groups: dict[int, list] = {}
        self.meters: dict[int, list] = {}
        self.requests: list[Request] = []
        self.packet_outs: list[PacketOut] = []
        self.echoes: list[EchoRequest] = []      # not answered yet
        self.roles: list[RoleRequest] = []
        self.conntrack: dict[tuple, int] = {}      # (zone, 5-tuple) -> mark
        self.packets: dict[int, int] = {}          # id(rule) -> packets it matched

    def apply(self, buf: bytes) -> list:
        msgs = decode(buf)
        for m in msgs:
            if isinstance(m, parser.OFPFlowMod):
                self._flow_mod(m)
            elif isinstance(m, GroupMod):
                if m.command == ofp.OFPGC_DELETE:
                    self.groups.pop(m.group_id, None)
                else:
                    assert m.group_type == ofp.OFPGT_SELECT
                    self.groups[m.group_id] = m.buckets
            elif isinstance(m, MeterMod):
                self.meters[m.meter_id] = m.bands
            elif isinstance(m, Request):
                self.requests.append(m)
            elif isinstance(m, PacketOut):
                self.packet_outs.append(m)
            elif isinstance(m, EchoRequest):
                self.echoes.append(m)
            elif isinstance(m, RoleRequest):
                self.roles.append(m)
        return msgs

    def answer_echoes(self) -> list[int]:
        """The xids of the echo requests not answered yet, in order; answered now."""
        xids, self.echoes = [e.xid for e in self.echoes], []
        return xids

    def _flow_mod(self, m) -> None:
        if m.command == ofp.OFPFC_DELETE:
            mask = m.cookie_mask
            self.rules = [r for r in self.rules
                          if not (r.table == m.table_id and r.cookie & mask == m.cookie & mask)]
            return
        match = dict(m.match.items())
        actions, meter, goto = [], None, None
        for i in m.instructions:
            if isinstance(i, parser.OFPInstructionActions):
                actions += i.actions
            elif isinstance(i, parser.OFPInstructionMeter):
                meter = i.meter_id
            elif isinstance(i, parser.OFPInstructionGotoTable):
                goto = i.table_id
        # an ADD of the same table, priority and match replaces the rule
        self.rules = [r for r in self.rules
                      if (r.table, r.priority, r.match) != (m.table_id, m.priority, match)]
        self.rules.append(Rule(m.table_id, m.priority, match, actions, m.cookie, meter, goto,
                               m.idle_timeout, m.flags))

    def lookup(self, pkt: dict, table: int = 0) -> Rule | None:
        return max((r for r in self.rules if r.table == table and _matches(r.match, pkt)),
                   key=lambda r: r.priority, default=None)

    def remove(self, cookie: int) -> Rule | None:
        """A rule times out (the switch would send flow-removed)."""
        rule = next((r for r in self.rules if r.cookie == cookie), None)
        if rule is not None:
            self.rules.remove(rule)
        return rule

    def rules_of(self, cookie: int, mask: int) -> list[tuple[Rule, int]]:
        """The rules whose cookie matches, with the packets each matched (a statistics
        request's answer)."""
        return [(r, self.packets.get(id(r), 0)) for r in self.rules
                if r.cookie & mask == cookie & mask]

    def nat_rules(self) -> list[Rule]:
        return [r for r in self.rules if r.cookie >> 48 == 0x4D4C]

    def process(self, pkt: dict, table: int = 0) -> list[tuple[int, dict, Rule | None]]:
        """Through the pipeline: the (out port, packet, rule that sent it) of every output;
        [] for a drop or a miss without a table-miss rule."""
        pkt, outs = dict(pkt), []
        while True:
            rule = self.lookup(pkt, table)
            if rule is None:
                return outs
            self.packets[id(rule)] = self.packets.get(id(rule), 0) + 1
            outs += self.run(rule.actions, pkt, rule)
            if rule.goto is None:
                return outs
            table = rule.goto

    def run(self, actions, pkt: dict, rule: Rule | None = None) -> list:
        outs = []
        for a in actions:
            if isinstance(a, parser.OFPActionSetField):
                pkt[a.key] = a.value
            elif isinstance(a, parser.OFPActionOutput):
                outs.append((a.port, dict(pkt), rule))
            elif isinstance(a, parser.OFPActionGroup):
                buckets = self.groups[a.group_id]
                # the flow's 5-tuple picks a bucket (OVS hashes it; any even hash will do)
                key = "|".join(str(pkt.get(k)) for k in ("ipv4_src", "ipv4_dst", "ip_proto",
                                                         "tcp_src", "tcp_dst", "udp_src",
                                                         "udp_dst"))
                _, _, bucket_actions = buckets[zlib.crc32(key.encode()) % len(buckets)]
                outs += self.run(bucket_actions, pkt, rule)
            elif isinstance(a, parser.NXActionCT) and \
                    not any(isinstance(n, parser.NXActionNAT) for n in a.actions):
                outs += self._ct(a, pkt)
        return outs

    def _ct(self, a, pkt: dict) -> list:
        l4 = "tcp" if pkt.get("ip_proto") == 6 else "udp"
        key = (a.zone_ofs_nbits, *(pkt.get(k) for k in ("ipv4_src", "ipv4_dst", "ip_proto",
                                                         f"{l4}_src", f"{l4}_dst")))
        mark = self.conntrack.get(key)
        if a.flags & ofwire.NX_CT_F_COMMIT and mark is None:
            self.conntrack[key] = next((n.value for n in a.actions if isinstance(
                n, parser.OFPActionSetField) and n.key == "ct_mark"), 0)
        if a.recirc_table == ofwire.NX_CT_RECIRC_NONE:
            return []
        state = ofwire.CT_TRACKED | (ofwire.CT_NEW if mark is None else ofwire.CT_EST)
        return self.process({**pkt, "ct_state": state, "ct_mark": mark or 0}, a.recirc_table)


class FakeNetwork:
    """Switches joined by the configuration's trunks, or by `links` (dpid a, port a, dpid b,
    port b) the controller is not told of (the user's own network). A packet goes from
    switch to switch until it leaves on a host port, reaches the controller, or is dropped."""

    def __init__(self, cfg, links=None):
        self.switches = {s.dpid: FakeSwitch(s.dpid) for s in cfg.testbed.switches}
        dpid = {s.name: s.dpid for s in cfg.testbed.switches}
        if links is None:
            links = [(dpid[t.a], t.a_port, dpid[t.b], t.b_port) for t in cfg.testbed.trunks]
        self.trunk: dict[tuple[int, int], tuple[int, int]] = {}
        for a, a_port, b, b_port in links:
            self.trunk[(a, a_port)] = (b, b_port)
            self.trunk[(b, b_port)] = (a, a_port)
        self.delivered: list[tuple[int, int, dict]] = []    # packet-outs that left a host port
        # packet-outs that crossed a link and met a rule sending them to the controller:
        # (dpid, in port there, packet, rule)
        self.punted: list[tuple[int, int, dict, object]] = []

    def send(self, dpid: int, in_port: int, pkt: dict, hops: int = 8) -> list:
        """Where pkt, entering switch dpid on in_port, ends up: a list of (dpid, port, packet,
        rule, in_port there); port CONTROLLER for a packet-in."""
        ends = []
        for port, out, rule in self.switches[dpid].process({**pkt, "in_port": in_port}):
            out.pop("in_port", None)
            if (dpid, port) in self.trunk and hops:
                peer, peer_port = self.trunk[(dpid, port)]
                ends += self.send(peer, peer_port, out, hops - 1)
            else:
                ends.append((dpid, port, out, rule, in_port))
        return ends

    def apply(self, sends) -> None:
        """What the controller sent: tables changed, packet-outs sent on their way."""
        for dpid, buf in sends:
            for m in self.switches[dpid].apply(buf):
                if not isinstance(m, PacketOut):
                    continue
                pkt = fields_of(m.data)
                for port, out, _ in self.switches[dpid].run(m.actions, pkt):
                    if (dpid, port) in self.trunk:
                        peer, peer_port = self.trunk[(dpid, port)]
                        for end in self.send(peer, peer_port, out):
                            if end[1] == CONTROLLER:
                                self.punted.append((end[0], end[4], end[2], end[3]))
                            else:
                                self.delivered.append(end[:3])
                    else:
                        self.delivered.append((dpid, port, out))
