"""The hand-packed OpenFlow messages are byte-for-byte what Ryu would send."""
import itertools

from ryu_apps import ofwire
from ryu_apps.framework import module, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

arp, ethernet, ipv4, packet, tcp, udp = (
    module(f"lib.packet.{name}") for name in ("arp", "ethernet", "ipv4", "packet", "tcp", "udp"))


class DP:
    ofproto = ofp
    ofproto_parser = parser


def ryu_bytes(msg, xid):
    msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


def test_flow_mod_matches_ryu():
    fields = {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": "10.0.200.1", "tcp_src": 40000,
              "ipv4_dst": "10.0.0.100", "tcp_dst": 8002}
    actions = [parser.OFPActionSetField(eth_dst="02:00:00:01:02:02"),
               parser.OFPActionSetField(ipv4_dst="10.0.2.2"),
               parser.OFPActionSetField(tcp_dst=80), parser.OFPActionOutput(6)]
    ryu = parser.OFPFlowMod(DP, cookie=0x4D4C100200700001, priority=200,
                            match=parser.OFPMatch(**fields), idle_timeout=10, hard_timeout=30,
                            flags=ofp.OFPFF_SEND_FLOW_REM,
                            instructions=[parser.OFPInstructionActions(
                                ofp.OFPIT_APPLY_ACTIONS, actions)])
    mine = ofwire.flow_mod(77, 0x4D4C100200700001, 200, fields,
                           ofwire.forward_actions("tcp", "02:00:00:01:02:02", "10.0.2.2", 80,
                                                  8002, 6), 10, 30, ofwire.OFPFF_SEND_FLOW_REM)
    assert mine == ryu_bytes(ryu, 77)


def test_nat_pair_and_barrier_match_ryu_for_udp_too():
    xids = itertools.count(5)
    buf = ofwire.nat_messages(lambda: next(xids), "udp", 0x11, 0x22, 200, 10, 0, "10.0.200.2",
                              5353, 9, "10.0.0.100", 53, "02:00:00:00:00:64",
                              "02:00:00:01:01:03", "10.0.1.3", 53, 3)
    rev = parser.OFPFlowMod(DP, cookie=0x22, priority=200, idle_timeout=10,
                            flags=ofp.OFPFF_SEND_FLOW_REM,
                            match=parser.OFPMatch(eth_type=0x800, ip_proto=17,
                                                  ipv4_src="10.0.1.3", udp_src=53,
                                                  ipv4_dst="10.0.200.2", udp_dst=5353),
                            instructions=[parser.OFPInstructionActions(
                                ofp.OFPIT_APPLY_ACTIONS,
                                [parser.OFPActionSetField(eth_src="02:00:00:00:00:64"),
                                 parser.OFPActionSetField(ipv4_src="10.0.0.100"),
                                 parser.OFPActionOutput(9)])])
    fwd = parser.OFPFlowMod(DP, cookie=0x11, priority=200, idle_timeout=10,
                            flags=ofp.OFPFF_SEND_FLOW_REM,
                            match=parser.OFPMatch(eth_type=0x800, ip_proto=17,
                                                  ipv4_src="10.0.200.2", udp_src=5353,
                                                  ipv4_dst="10.0.0.100", udp_dst=53),
                            instructions=[parser.OFPInstructionActions(
                                ofp.OFPIT_APPLY_ACTIONS,
                                [parser.OFPActionSetField(eth_dst="02:00:00:01:01:03"),
                                 parser.OFPActionSetField(ipv4_dst="10.0.1.3"),
                                 parser.OFPActionOutput(3)])])
    expected = ryu_bytes(rev, 5) + ryu_bytes(fwd, 6) + ryu_bytes(parser.OFPBarrierRequest(DP), 7)
    assert buf == expected


def test_packet_out_matches_ryu():
    data = b"\x01" * 60
    acts = ofwire.action_set_field("eth_dst", "02:00:00:01:01:02") + ofwire.action_output(4)
    ryu = parser.OFPPacketOut(DP, buffer_id=ofp.OFP_NO_BUFFER, in_port=13, data=data,
                              actions=[parser.OFPActionSetField(eth_dst="02:00:00:01:01:02"),
                                       parser.OFPActionOutput(4)])
    assert ofwire.packet_out(9, 13, acts, data) == ryu_bytes(ryu, 9)


def _frame(*protocols):
    p = packet.Packet()
    for proto in protocols:
        p.add_protocol(proto)
    p.serialize()
    return bytes(p.data)


def test_parse_frame_tcp_udp_arp():
    eth = ethernet.ethernet(dst="02:00:00:00:00:64", src="02:00:00:02:00:01", ethertype=0x800)
    f = ofwire.parse_frame(_frame(eth, ipv4.ipv4(src="10.0.200.1", dst="10.0.0.100", proto=6),
                                  tcp.tcp(src_port=40000, dst_port=8002, seq=7, ack=9,
                                          bits=tcp.TCP_SYN | tcp.TCP_ACK)))
    assert (f.eth_src, f.eth_dst, f.ip_src, f.ip_dst, f.ip_proto, f.src_port, f.dst_port) == \
        ("02:00:00:02:00:01", "02:00:00:00:00:64", "10.0.200.1", "10.0.0.100", 6, 40000, 8002)
    assert f.tcp_flags & ofwire.TCP_SYN and f.tcp_flags & ofwire.TCP_ACK
    assert (f.tcp_seq, f.tcp_ack) == (7, 9)
    eth = ethernet.ethernet(dst="02:00:00:00:00:64", src="02:00:00:02:00:01", ethertype=0x800)
    f = ofwire.parse_frame(_frame(eth, ipv4.ipv4(src="10.0.200.1", dst="10.0.0.100", proto=17),
                                  udp.udp(src_port=5353, dst_port=53)))
    assert (f.ip_proto, f.src_port, f.dst_port) == (17, 5353, 53)
    eth = ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:02:00:01", ethertype=0x806)
    f = ofwire.parse_frame(_frame(eth, arp.arp(opcode=1, src_mac="02:00:00:02:00:01",
                                               src_ip="10.0.200.1", dst_ip="10.0.0.100")))
    assert (f.arp_op, f.arp_spa, f.arp_tpa, f.arp_sha) == (1, "10.0.200.1", "10.0.0.100",
                                                           "02:00:00:02:00:01")
    assert ofwire.parse_frame(b"\x00" * 10) is None


def test_frames_the_controller_sends_are_what_ryu_builds_and_parses():
    vip_mac, cli_mac = "02:00:00:00:00:64", "02:00:00:02:00:01"
    # an ARP reply for a VIP: the bytes Ryu's packet library makes (which pads the frame to
    # Ethernet's 60-byte minimum, as the switch does anyway)
    mine = ofwire.arp_frame(ofwire.ARP_REPLY, vip_mac, "10.0.0.100", cli_mac, "10.0.200.1")
    ryu = packet.Packet()
    ryu.add_protocol(ethernet.ethernet(ethertype=0x0806, dst=cli_mac, src=vip_mac))
    ryu.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=vip_mac, src_ip="10.0.0.100",
                             dst_mac=cli_mac, dst_ip="10.0.200.1"))
    ryu.serialize()
    theirs = bytes(ryu.data)
    assert len(mine) == 42 and theirs[:42] == mine and not any(theirs[42:])
    # a TCP reset: Ryu reads the fields back, and both checksums hold
    frame = ofwire.tcp_frame(cli_mac, vip_mac, "10.0.0.100", "10.0.200.1", 8002, 40000,
                             seq=123456, flags=ofwire.TCP_RST, window=0)
    p = packet.Packet(frame)
    ip, seg = p.get_protocol(ipv4.ipv4), p.get_protocol(tcp.tcp)
    assert (ip.src, ip.dst, ip.proto, ip.ttl) == ("10.0.0.100", "10.0.200.1", 6, 64)
    assert (seg.src_port, seg.dst_port, seg.seq, seg.bits, seg.window_size) == \
        (8002, 40000, 123456, tcp.TCP_RST, 0)
    assert ofwire.checksum(frame[14:34]) == 0
    pseudo = frame[26:34] + bytes([0, 6, 0, 20])
    assert ofwire.checksum(pseudo + frame[34:54]) == 0
    f = ofwire.parse_frame(frame)
    assert (f.ip_src, f.src_port, f.tcp_seq, f.tcp_flags) == ("10.0.0.100", 8002, 123456,
                                                              ofwire.TCP_RST)


# ---------------------------------------------------------------- the core's other messages
def _apply(actions):
    return [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]


def test_base_rules_with_masks_meters_and_goto_match_ryu():
    to_ctl = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
    ctl = ofwire.action_output(ofwire.OFPP_CONTROLLER, ofwire.OFPCML_NO_BUFFER)
    cases = [
        (parser.OFPFlowMod(DP, table_id=1, priority=0, match=parser.OFPMatch(),
                           instructions=[parser.OFPInstructionMeter(2)] + _apply(to_ctl)),
         ofwire.flow_mod(9, 0, 0, {}, ctl, table=1, meter=2)),
        (parser.OFPFlowMod(DP, priority=100, match=parser.OFPMatch(eth_type=0x806,
                                                                   arp_tpa="10.0.0.100"),
                           instructions=_apply(to_ctl)),
         ofwire.flow_mod(9, 0, 100, {"eth_type": 0x806, "arp_tpa": "10.0.0.100"}, ctl)),
        (parser.OFPFlowMod(DP, priority=101, match=parser.OFPMatch(
            eth_type=0x800, ip_proto=6, ipv4_dst="10.0.0.100", tcp_dst=(0xF000, 0xFC00)),
            instructions=_apply(to_ctl)),
         ofwire.flow_mod(9, 0, 101, {"eth_type": 0x800, "ip_proto": 6,
                                     "ipv4_dst": "10.0.0.100", "tcp_dst": (0xF000, 0xFC00)},
                         ctl)),
        (parser.OFPFlowMod(DP, priority=150, match=parser.OFPMatch(
            eth_type=0x800, ip_proto=17, ipv4_src="10.0.1.2", udp_src=53,
            ipv4_dst=("10.0.200.0", "255.255.255.0")), instructions=_apply(to_ctl)),
         ofwire.flow_mod(9, 0, 150, {"eth_type": 0x800, "ip_proto": 17, "ipv4_src": "10.0.1.2",
                                     "udp_src": 53,
                                     "ipv4_dst": ("10.0.200.0", "255.255.255.0")}, ctl)),
        (parser.OFPFlowMod(DP, priority=170, cookie=0x4D44000200000003,
                           match=parser.OFPMatch(eth_type=0x800),
                           instructions=_apply([parser.OFPActionSetField(
                               eth_src="02:00:00:00:00:64")]) +
                           [parser.OFPInstructionGotoTable(1)]),
         ofwire.flow_mod(9, 0x4D44000200000003, 170, {"eth_type": 0x800},
                         ofwire.action_set_field("eth_src", "02:00:00:00:00:64"), goto=1)),
        (parser.OFPFlowMod(DP, priority=120, match=parser.OFPMatch(eth_dst="02:00:00:01:01:02"),
                           instructions=_apply([parser.OFPActionGroup(0x4D001)]),
                           idle_timeout=300),
         ofwire.flow_mod(9, 0, 120, {"eth_dst": "02:00:00:01:01:02"},
                         ofwire.action_group(0x4D001), idle_timeout=300)),
        (parser.OFPFlowMod(DP, table_id=0, command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                           out_group=ofp.OFPG_ANY, cookie=0x4D44000100000002,
                           cookie_mask=0xFFFFFFFFFFFFFFFF, match=parser.OFPMatch()),
         ofwire.flow_delete(9, 0x4D44000100000002, 0xFFFFFFFFFFFFFFFF)),
    ]
    for ryu, mine in cases:
        assert mine == ryu_bytes(ryu, 9)


def test_meters_groups_and_statistics_requests_match_ryu():
    band = parser.OFPMeterBandDrop(rate=200, burst_size=200)
    flags = ofp.OFPMF_PKTPS | ofp.OFPMF_BURST
    assert ofwire.meter_mod(3, ofwire.OFPMC_MODIFY, flags, 1, 200, 200) == \
        ryu_bytes(parser.OFPMeterMod(DP, ofp.OFPMC_MODIFY, flags, 1, [band]), 3)
    buckets = [parser.OFPBucket(weight=1, watch_port=4, watch_group=ofp.OFPG_ANY,
                                actions=[parser.OFPActionSetField(eth_dst="02:00:00:01:01:02"),
                                         parser.OFPActionOutput(4, ofp.OFPCML_NO_BUFFER)]),
               parser.OFPBucket(weight=1, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY,
                                actions=[parser.OFPActionOutput(ofp.OFPP_CONTROLLER,
                                                                ofp.OFPCML_NO_BUFFER)])]
    mine = (ofwire.bucket(ofwire.action_set_field("eth_dst", "02:00:00:01:01:02") +
                          ofwire.action_output(4, ofwire.OFPCML_NO_BUFFER), watch_port=4) +
            ofwire.bucket(ofwire.action_output(ofwire.OFPP_CONTROLLER,
                                               ofwire.OFPCML_NO_BUFFER)))
    assert ofwire.group_mod(4, ofwire.OFPGC_ADD, ofwire.OFPGT_SELECT, 0x4D001, mine) == \
        ryu_bytes(parser.OFPGroupMod(DP, ofp.OFPGC_ADD, ofp.OFPGT_SELECT, 0x4D001, buckets), 4)
    assert ofwire.group_mod(4, ofwire.OFPGC_DELETE, ofwire.OFPGT_SELECT, 0x4D001) == \
        ryu_bytes(parser.OFPGroupMod(DP, ofp.OFPGC_DELETE, ofp.OFPGT_SELECT, 0x4D001, []), 4)
    assert ofwire.multipart_request(5, ofwire.OFPMP_METER_FEATURES) == \
        ryu_bytes(parser.OFPMeterFeaturesStatsRequest(DP, 0), 5)
    assert ofwire.multipart_request(5, ofwire.OFPMP_GROUP_FEATURES) == \
        ryu_bytes(parser.OFPGroupFeaturesStatsRequest(DP, 0), 5)
    assert ofwire.port_stats_request(6) == \
        ryu_bytes(parser.OFPPortStatsRequest(DP, 0, ofp.OFPP_ANY), 6)
    cookie, mask = 0x4D4C000000000003, (0xFFFF << 48) | 7
    assert ofwire.flow_stats_request(7, cookie, mask) == ryu_bytes(parser.OFPFlowStatsRequest(
        DP, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, cookie, mask, parser.OFPMatch()), 7)


def test_l2_packet_out_matches_ryu():
    data = b"\x01" * 60
    ryu = parser.OFPPacketOut(DP, buffer_id=ofp.OFP_NO_BUFFER, in_port=3,
                              actions=[parser.OFPActionOutput(ofp.OFPP_FLOOD)], data=data)
    assert ofwire.packet_out(8, 3, ofwire.action_output(ofwire.OFPP_FLOOD), data) == \
        ryu_bytes(ryu, 8)


def test_a_fin_watch_matches_ryu():
    # tcp_flags is an ONF experimenter field in OpenFlow 1.3 (Ryu and Open vSwitch agree)
    fields = {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": "10.0.2.3", "tcp_src": 8003,
              "ipv4_dst": "10.0.200.1", "tcp_dst": 40000}
    actions = [parser.OFPActionSetField(eth_src="02:00:00:00:00:64"),
               parser.OFPActionSetField(ipv4_src="10.0.0.100"), parser.OFPActionOutput(3),
               parser.OFPActionOutput(ofp.OFPP_CONTROLLER, 128)]
    ryu = parser.OFPFlowMod(DP, cookie=0x4D46000200700001, priority=201,
                            match=parser.OFPMatch(**fields, tcp_flags=(1, 1)), hard_timeout=600,
                            instructions=[parser.OFPInstructionActions(
                                ofp.OFPIT_APPLY_ACTIONS, actions)])
    mine = ofwire.fin_watch(9, 0x4D46000200700001, 201, 600, "10.0.2.3", 8003, "10.0.200.1",
                            40000, ofwire.reverse_actions("tcp", "02:00:00:00:00:64",
                                                          "10.0.0.100", 8003, 8003, 3))
    assert mine == ryu_bytes(ryu, 9)
