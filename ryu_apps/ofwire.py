"""OpenFlow 1.3 messages built as bytes (the new-flow path's, and every other message the
controller core sends: base rules, meters, select groups, statistics requests), and the
frames the platform sends (ARP answers, health probes, resets; benchmark and test traffic)
built and parsed with struct.

The new-flow path (packet-in -> rule pair -> barrier -> packet-out) is MALB's hot path.
Building its messages with Ryu's generic classes costs about 2 ms per flow (OXM objects,
address conversions through netaddr, generic serialisation); here they are packed directly,
byte-for-byte the same as Ryu's serialisation (tests/unit/ryu_apps/test_ofwire.py compares them),
in a few microseconds. Plain functions: data in, bytes out; no Ryu import.
"""
from __future__ import annotations

import socket
import struct
from typing import NamedTuple

OFP_VERSION = 0x04
OFPT_ECHO_REQUEST = 2
OFPT_PACKET_OUT, OFPT_FLOW_MOD, OFPT_GROUP_MOD, OFPT_MULTIPART_REQUEST = 13, 14, 15, 18
OFPT_BARRIER_REQUEST, OFPT_METER_MOD = 20, 29
OFPFC_ADD, OFPFC_DELETE = 0, 3
OFPFF_SEND_FLOW_REM = 1
OFP_NO_BUFFER = 0xFFFFFFFF
OFP_DEFAULT_PRIORITY = 0x8000
OFPP_FLOOD, OFPP_CONTROLLER, OFPP_ANY = 0xFFFFFFFB, 0xFFFFFFFD, 0xFFFFFFFF
OFPG_ANY = 0xFFFFFFFF
OFPTT_ALL = 0xFF
OFPCML_MAX, OFPCML_NO_BUFFER = 0xFFE5, 0xFFFF
OFPIT_GOTO_TABLE, OFPIT_APPLY_ACTIONS, OFPIT_METER = 1, 4, 6
OFPAT_OUTPUT, OFPAT_GROUP, OFPAT_SET_FIELD = 0, 22, 25
OFPGC_ADD, OFPGC_MODIFY, OFPGC_DELETE = 0, 1, 2
OFPGT_SELECT = 1
OFPMC_ADD, OFPMC_MODIFY = 0, 1
OFPMF_PKTPS, OFPMF_BURST = 1 << 1, 1 << 2
OFPMBT_DROP = 1
OFPMP_FLOW, OFPMP_PORT_STATS, OFPMP_GROUP_FEATURES, OFPMP_METER_FEATURES = 1, 4, 8, 11
OFPRR_IDLE_TIMEOUT, OFPRR_HARD_TIMEOUT, OFPRR_DELETE = 0, 1, 2
OFPPR_DELETE = 1
OFPPS_LINK_DOWN = 1
OFPMT_OXM = 1
OXM_CLASS = 0x8000
# OXM field numbers and value sizes (OpenFlow 1.3, section 7.2.3.7)
OXM = {"in_port": (0, 4), "eth_dst": (3, 6), "eth_src": (4, 6), "eth_type": (5, 2),
       "ip_proto": (10, 1), "ipv4_src": (11, 4), "ipv4_dst": (12, 4), "tcp_src": (13, 2),
       "tcp_dst": (14, 2), "udp_src": (15, 2), "udp_dst": (16, 2), "arp_tpa": (23, 4)}
# Open vSwitch's connection-tracker fields and its register 0, NXM class 1 in an OpenFlow
# 1.3 match or set_field (ovs-fields(7)); Ryu puts them before the OXM fields, as it sorts
# by header
NXM1_CLASS = 0x0001
NXM = {"reg0": (0, 4), "ct_state": (105, 4), "ct_mark": (107, 4), "ct_label": (108, 16)}
CT_NEW, CT_EST, CT_REPLY, CT_INVALID, CT_TRACKED = 0x01, 0x02, 0x08, 0x10, 0x20
# Nicira actions: the tracker (nx_action_conntrack) and its NAT (nx_action_nat)
NX_VENDOR = 0x00002320
NXAST_CT, NXAST_NAT = 35, 36
NX_CT_F_COMMIT = 1
NX_CT_RECIRC_NONE = 0xFF
NX_NAT_F_DST = 1 << 1
NX_NAT_RANGE_IPV4_MIN, NX_NAT_RANGE_IPV4_MAX = 1 << 0, 1 << 1
NX_NAT_RANGE_PROTO_MIN, NX_NAT_RANGE_PROTO_MAX = 1 << 4, 1 << 5
ETH_TYPE_IP, ETH_TYPE_ARP, ETH_TYPE_LLDP = 0x0800, 0x0806, 0x88CC
IPPROTO_TCP, IPPROTO_UDP = 6, 17
IPPROTO = {"tcp": IPPROTO_TCP, "udp": IPPROTO_UDP}


def _value(name: str, value) -> bytes:
    field, size = OXM[name]
    if name.startswith("eth_") and name != "eth_type":
        return bytes.fromhex(value.replace(":", ""))
    if name.startswith("ipv4_") or name.startswith("arp_"):
        return socket.inet_aton(value)
    return value.to_bytes(size, "big")


# TCP flags: in OpenFlow 1.3 an ONF experimenter field (EXT-109; OXM_OF_TCP_FLAGS from 1.5),
# which Open vSwitch matches since 2.4 and Ryu names tcp_flags
ONF_EXPERIMENTER = 0x4F4E4600
ONF_TCP_FLAGS = 42


def _oxm_tcp_flags(value) -> bytes:
    flags, mask = value if isinstance(value, tuple) else (value, None)
    if mask is None:
        return struct.pack("!HBBIH", 0xFFFF, ONF_TCP_FLAGS << 1, 6, ONF_EXPERIMENTER, flags)
    return struct.pack("!HBBIHH", 0xFFFF, ONF_TCP_FLAGS << 1 | 1, 8, ONF_EXPERIMENTER,
                       flags, mask)


def oxm(name: str, value) -> bytes:
    """One OXM TLV; a (value, mask) pair gives the masked form (value, then mask)."""
    if name == "tcp_flags":
        return _oxm_tcp_flags(value)
    if name in NXM:
        field, size = NXM[name]
        if isinstance(value, tuple):
            return struct.pack("!HBB", NXM1_CLASS, field << 1 | 1, 2 * size) + \
                value[0].to_bytes(size, "big") + value[1].to_bytes(size, "big")
        return struct.pack("!HBB", NXM1_CLASS, field << 1, size) + value.to_bytes(size, "big")
    field, size = OXM[name]
    if isinstance(value, tuple):
        return struct.pack("!HBB", OXM_CLASS, field << 1 | 1, 2 * size) + \
            _value(name, value[0]) + _value(name, value[1])
    return struct.pack("!HBB", OXM_CLASS, field << 1, size) + _value(name, value)


def _field_order(name: str) -> int:
    # by class, then field: Nicira's class 1 first, experimenter fields last, as Ryu
    if name in NXM:
        return -(1 << 8) + NXM[name][0]
    return OXM[name][0] if name in OXM else 1 << 16


def _pad8(n: int) -> int:
    return (n + 7) // 8 * 8 - n


def match(fields: dict) -> bytes:
    """ofp_match with OXM fields in field-number order (as Ryu sorts them), padded to 8."""
    body = b"".join(oxm(k, fields[k]) for k in sorted(fields, key=_field_order))
    length = 4 + len(body)
    return struct.pack("!HH", OFPMT_OXM, length) + body + b"\0" * _pad8(length)


def action_output(port: int, max_len: int = OFPCML_MAX) -> bytes:
    return struct.pack("!HHIH6x", OFPAT_OUTPUT, 16, port, max_len)


def action_set_field(name: str, value) -> bytes:
    field = oxm(name, value)
    length = 4 + len(field)
    length += _pad8(length)
    return struct.pack("!HH", OFPAT_SET_FIELD, length) + field + \
        b"\0" * (length - 4 - len(field))


def action_group(group_id: int) -> bytes:
    return struct.pack("!HHI", OFPAT_GROUP, 8, group_id)


def action_ct(zone: int, table: int = NX_CT_RECIRC_NONE, commit: bool = False,
              actions: bytes = b"") -> bytes:
    """Open vSwitch's `ct`: the packet through the connection tracker in `zone` (an
    immediate value), then on in `table`; `actions` (nat, set_field of ct_mark) apply to a
    connection it commits."""
    return struct.pack("!HHIHHIHB3xH", 0xFFFF, 24 + len(actions), NX_VENDOR, NXAST_CT,
                       NX_CT_F_COMMIT if commit else 0, 0, zone, table, 0) + actions


def action_nat(dst_ip: str | None = None, dst_port: int | None = None) -> bytes:
    """`nat` inside `ct`: with no address, the translation of a connection the tracker holds
    (both ways); with one, a new connection's destination becomes dst_ip[:dst_port]."""
    flags = present = 0
    body = b""
    if dst_ip is not None:
        flags, present = NX_NAT_F_DST, NX_NAT_RANGE_IPV4_MIN | NX_NAT_RANGE_IPV4_MAX
        body = socket.inet_aton(dst_ip) * 2
        if dst_port is not None:
            present |= NX_NAT_RANGE_PROTO_MIN | NX_NAT_RANGE_PROTO_MAX
            body += struct.pack("!HH", dst_port, dst_port)
    length = 16 + len(body)
    return struct.pack("!HHIH2xHH", 0xFFFF, length + _pad8(length), NX_VENDOR, NXAST_NAT,
                       flags, present) + body + b"\0" * _pad8(length)


def apply_actions(actions: bytes) -> bytes:
    return struct.pack("!HH4x", OFPIT_APPLY_ACTIONS, 8 + len(actions)) + actions


def instructions(actions: bytes, meter: int | None = None, goto: int | None = None) -> bytes:
    """Meter, apply-actions, goto-table: in that order (as Ryu serialises a list in that order)."""
    out = b"" if meter is None else struct.pack("!HHI", OFPIT_METER, 8, meter)
    out += apply_actions(actions)
    if goto is not None:
        out += struct.pack("!HHB3x", OFPIT_GOTO_TABLE, 8, goto)
    return out


def header(msg_type: int, length: int, xid: int) -> bytes:
    return struct.pack("!BBHI", OFP_VERSION, msg_type, length, xid)


def flow_mod(xid: int, cookie: int, priority: int, match_fields: dict, actions: bytes,
             idle_timeout: int = 0, hard_timeout: int = 0, flags: int = 0, table: int = 0,
             meter: int | None = None, goto: int | None = None) -> bytes:
    """An ADD with apply-actions (and a meter, a goto-table when given)."""
    # out_port and out_group are ignored by ADD; 0, as Ryu sends them
    body = struct.pack("!QQBBHHHIIIH2x", cookie, 0, table, OFPFC_ADD, idle_timeout,
                       hard_timeout, priority, OFP_NO_BUFFER, 0, 0, flags)
    rest = match(match_fields) + instructions(actions, meter, goto)
    return header(OFPT_FLOW_MOD, 8 + len(body) + len(rest), xid) + body + rest


def flow_delete(xid: int, cookie: int, cookie_mask: int, table: int = 0) -> bytes:
    """A DELETE of every rule whose cookie matches (any match, port and group)."""
    body = struct.pack("!QQBBHHHIIIH2x", cookie, cookie_mask, table, OFPFC_DELETE, 0, 0,
                       OFP_DEFAULT_PRIORITY, OFP_NO_BUFFER, OFPP_ANY, OFPG_ANY, 0)
    rest = match({})
    return header(OFPT_FLOW_MOD, 8 + len(body) + len(rest), xid) + body + rest


def meter_mod(xid: int, command: int, flags: int, meter_id: int, rate: int,
              burst: int) -> bytes:
    """One meter with one drop band."""
    band = struct.pack("!HHII4x", OFPMBT_DROP, 16, rate, burst)
    body = struct.pack("!HHI", command, flags, meter_id) + band
    return header(OFPT_METER_MOD, 8 + len(body), xid) + body


def bucket(actions: bytes, weight: int = 1, watch_port: int = OFPP_ANY,
           watch_group: int = OFPG_ANY) -> bytes:
    return struct.pack("!HHII4x", 16 + len(actions), weight, watch_port, watch_group) + \
        actions


def group_mod(xid: int, command: int, group_type: int, group_id: int,
              buckets: bytes = b"") -> bytes:
    body = struct.pack("!HBxI", command, group_type, group_id) + buckets
    return header(OFPT_GROUP_MOD, 8 + len(body), xid) + body


def multipart_request(xid: int, mp_type: int, body: bytes = b"") -> bytes:
    return header(OFPT_MULTIPART_REQUEST, 16 + len(body), xid) + \
        struct.pack("!HH4x", mp_type, 0) + body


def flow_stats_request(xid: int, cookie: int, cookie_mask: int) -> bytes:
    """Statistics of the rules of every table whose cookie matches."""
    return multipart_request(xid, OFPMP_FLOW, struct.pack(
        "!B3xII4xQQ", OFPTT_ALL, OFPP_ANY, OFPG_ANY, cookie, cookie_mask) + match({}))


def port_stats_request(xid: int) -> bytes:
    return multipart_request(xid, OFPMP_PORT_STATS, struct.pack("!I4x", OFPP_ANY))


def packet_out(xid: int, in_port: int, actions: bytes, data: bytes) -> bytes:
    body = struct.pack("!IIH6x", OFP_NO_BUFFER, in_port, len(actions))
    return header(OFPT_PACKET_OUT, 8 + len(body) + len(actions) + len(data), xid) + body + \
        actions + data


def barrier_request(xid: int) -> bytes:
    return header(OFPT_BARRIER_REQUEST, 8, xid)


def echo_request(xid: int, data: bytes = b"") -> bytes:
    return header(OFPT_ECHO_REQUEST, 8 + len(data), xid) + data


# ------------------------------------------------------------------ the NAT rule pair
def forward_actions(protocol: str, inst_mac: str, inst_ip: str, inst_port: int, vport: int,
                    out_port: int) -> bytes:
    acts = action_set_field("eth_dst", inst_mac) + action_set_field("ipv4_dst", inst_ip)
    if inst_port != vport:
        acts += action_set_field(f"{protocol}_dst", inst_port)
    return acts + action_output(out_port)


def reverse_actions(protocol: str, vip_mac: str, vip: str, vport: int, inst_port: int,
                    client_port_on_switch: int) -> bytes:
    acts = action_set_field("eth_src", vip_mac) + action_set_field("ipv4_src", vip)
    if inst_port != vport:
        acts += action_set_field(f"{protocol}_src", vport)
    return acts + action_output(client_port_on_switch)


def reverse_match(protocol: str, inst_ip: str, inst_port: int, client_ip: str,
                  client_port: int) -> dict:
    """An instance's answers on one flow, before the reverse NAT."""
    return {"eth_type": ETH_TYPE_IP, "ip_proto": IPPROTO[protocol], "ipv4_src": inst_ip,
            f"{protocol}_src": inst_port, "ipv4_dst": client_ip, f"{protocol}_dst": client_port}


def fin_watch(xid: int, cookie: int, priority: int, hard: int, inst_ip: str, inst_port: int,
              client_ip: str, client_port: int, rev_actions: bytes) -> bytes:
    """A rule above a TCP flow's reverse rule for the instance's FIN: the same rewrite and
    output, and its headers to the controller, which so learns when the flow ends. No idle
    timeout (it matches once, at the end); `hard` bounds a flow that never sends one."""
    m = {**reverse_match("tcp", inst_ip, inst_port, client_ip, client_port),
         "tcp_flags": (TCP_FIN, TCP_FIN)}
    return flow_mod(xid, cookie, priority, m, rev_actions + action_output(OFPP_CONTROLLER, 128),
                    0, hard, 0)


def nat_messages(next_xid, protocol: str, cookie_fwd: int, cookie_rev: int, priority: int,
                 idle: int, hard: int, client_ip: str, client_port: int, client_in_port: int,
                 vip: str, vport: int, vip_mac: str, inst_mac: str, inst_ip: str,
                 inst_port: int, out_port: int) -> bytes:
    """Reverse rule, forward rule and a barrier, in that order, as one buffer.
    ``next_xid()`` gives transaction ids."""
    l4 = protocol
    rev_match = reverse_match(l4, inst_ip, inst_port, client_ip, client_port)
    rev_actions = reverse_actions(l4, vip_mac, vip, vport, inst_port, client_in_port)
    fwd_match = {"eth_type": ETH_TYPE_IP, "ip_proto": IPPROTO[l4], "ipv4_src": client_ip,
                 f"{l4}_src": client_port, "ipv4_dst": vip, f"{l4}_dst": vport}
    fwd_actions = forward_actions(l4, inst_mac, inst_ip, inst_port, vport, out_port)
    return (flow_mod(next_xid(), cookie_rev, priority, rev_match, rev_actions, idle, hard,
                     OFPFF_SEND_FLOW_REM) +
            flow_mod(next_xid(), cookie_fwd, priority, fwd_match, fwd_actions, idle, hard,
                     OFPFF_SEND_FLOW_REM) +
            barrier_request(next_xid()))


# ------------------------------------------------------------------ frames built
ARP_REQUEST, ARP_REPLY = 1, 2


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def ethernet(dst: str, src: str, eth_type: int, payload: bytes) -> bytes:
    return mac_bytes(dst) + mac_bytes(src) + struct.pack("!H", eth_type) + payload


def arp_frame(op: int, src_mac: str, src_ip: str, dst_mac: str, dst_ip: str,
              eth_dst: str | None = None) -> bytes:
    """An ARP request or reply in its Ethernet frame (to dst_mac, or eth_dst)."""
    body = struct.pack("!HHBBH6s4s6s4s", 1, ETH_TYPE_IP, 6, 4, op, mac_bytes(src_mac),
                       socket.inet_aton(src_ip), mac_bytes(dst_mac), socket.inet_aton(dst_ip))
    return ethernet(eth_dst or dst_mac, src_mac, ETH_TYPE_ARP, body)


def ipv4(src: str, dst: str, proto: int, payload: bytes, ttl: int = 64) -> bytes:
    """An IPv4 packet (no options, don't fragment) around payload, with its checksum."""
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, ttl, proto,
                         0, socket.inet_aton(src), socket.inet_aton(dst))
    return header[:10] + struct.pack("!H", checksum(header)) + header[12:] + payload


def tcp_segment(src: str, dst: str, sport: int, dport: int, seq: int, ack: int = 0,
                flags: int = 0x02, window: int = 64240) -> bytes:
    """A bare TCP header (no options, no payload) with its checksum; no IP header."""
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, window, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
    return tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]


def tcp_frame(eth_dst: str, eth_src: str, src: str, dst: str, sport: int, dport: int,
              seq: int, ack: int = 0, flags: int = 0x02, window: int = 64240) -> bytes:
    return ethernet(eth_dst, eth_src, ETH_TYPE_IP,
                    ipv4(src, dst, 6, tcp_segment(src, dst, sport, dport, seq, ack, flags,
                                                   window)))


def udp_datagram(src: str, dst: str, sport: int, dport: int, payload: bytes) -> bytes:
    """A UDP packet in its IPv4 packet (checksum 0: optional over IPv4)."""
    return ipv4(src, dst, 17, struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) +
                payload)


# ------------------------------------------------------------------ frames parsed
class Frame(NamedTuple):
    eth_dst: str
    eth_src: str
    eth_type: int
    arp_op: int = 0
    arp_spa: str = ""        # ARP sender / target protocol addresses
    arp_tpa: str = ""
    arp_sha: str = ""
    ip_src: str = ""
    ip_dst: str = ""
    ip_proto: int = 0
    src_port: int = 0
    dst_port: int = 0
    tcp_flags: int = 0
    tcp_seq: int = 0
    tcp_ack: int = 0


def _mac(b: bytes) -> str:
    return b.hex(":")


def parse_frame(data: bytes) -> Frame | None:
    """Ethernet + ARP, or Ethernet + IPv4 (+ TCP/UDP ports). None for a runt frame."""
    if len(data) < 14:
        return None
    eth_type = int.from_bytes(data[12:14], "big")
    dst, src = _mac(data[0:6]), _mac(data[6:12])
    if eth_type == ETH_TYPE_ARP and len(data) >= 42:
        op = int.from_bytes(data[20:22], "big")
        return Frame(dst, src, eth_type, arp_op=op, arp_sha=_mac(data[22:28]),
                     arp_spa=socket.inet_ntoa(data[28:32]), arp_tpa=socket.inet_ntoa(data[38:42]))
    if eth_type != ETH_TYPE_IP or len(data) < 34:
        return Frame(dst, src, eth_type)
    ihl = (data[14] & 0x0F) * 4
    proto = data[23]
    ip_src, ip_dst = socket.inet_ntoa(data[26:30]), socket.inet_ntoa(data[30:34])
    l4 = 14 + ihl
    if proto == 6 and len(data) >= l4 + 14:
        sport, dport, seq, ack = struct.unpack("!HHII", data[l4:l4 + 12])
        return Frame(dst, src, eth_type, ip_src=ip_src, ip_dst=ip_dst, ip_proto=proto,
                     src_port=sport, dst_port=dport, tcp_flags=data[l4 + 13], tcp_seq=seq,
                     tcp_ack=ack)
    if proto == 17 and len(data) >= l4 + 4:
        sport, dport = struct.unpack("!HH", data[l4:l4 + 4])
        return Frame(dst, src, eth_type, ip_src=ip_src, ip_dst=ip_dst, ip_proto=proto,
                     src_port=sport, dst_port=dport)
    return Frame(dst, src, eth_type, ip_src=ip_src, ip_dst=ip_dst, ip_proto=proto)


TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK = 0x01, 0x02, 0x04, 0x10
