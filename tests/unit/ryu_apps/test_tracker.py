"""Tracker mode (ryu_apps/tracker.py): a short-flow TCP connection is decided by the
controller and translated by the switch's connection tracker. The messages are decoded by
Ryu's parser, as a switch would; the connection tracker itself runs in
tests/integration/test_tracker.py."""
from __future__ import annotations

import struct

from ryu.ofproto import nicira_ext, ofproto_v1_3_parser as parser

from ryu_apps import ofwire, tracker
from ryu_apps.managers.switch_rules import SwitchRules
from ryu_apps.network_plan import NetworkPlan
from tests.lib.fakeswitch import PacketOut, decode
from tests.unit.ryu_apps.test_flowpath import NOW, VIP, client_frame, make, packet_in


def tracked(policy="srr"):
    return make(policy, dataplane={"short_flows": "tracker"})


def flow_mods(result) -> list:
    return [m for _, buf in result.sends for m in decode(buf)
            if isinstance(m, parser.OFPFlowMod)]


def packet_outs(result) -> list:
    return [m for _, buf in result.sends for m in decode(buf) if isinstance(m, PacketOut)]


def fin_from(cfg, inst_port: int, sport: int, flags=ofwire.TCP_FIN | ofwire.TCP_ACK) -> bytes:
    """The instance's FIN as the tracker's watch copies it: translated back to the VIP."""
    c = cfg.testbed.clients[0]
    return ofwire.tcp_frame(c.mac, cfg.controller.vip_mac, VIP, c.ip, inst_port, sport, 5,
                            flags=flags)


def test_the_tracker_fields_and_actions_are_packed_as_ryu_and_open_vswitch_read_them():
    m = parser.OFPMatch(eth_type=0x0800, ip_proto=6, ipv4_dst="10.0.1.2", tcp_dst=8002,
                        ct_state=(0x20, 0x28), ct_mark=13)
    buf = bytearray()
    m.serialize(buf, 0)
    assert ofwire.match({"eth_type": 0x0800, "ip_proto": 6, "ipv4_dst": "10.0.1.2",
                         "tcp_dst": 8002, "ct_state": (0x20, 0x28), "ct_mark": 13}) == buf
    for ours, ryus in (
            (ofwire.action_ct(3, 1, actions=ofwire.action_nat()),
             parser.NXActionCT(flags=0, zone_src="", zone_ofs_nbits=3, recirc_table=1,
                               alg=0, actions=[parser.NXActionNAT(flags=0)])),
            (ofwire.action_ct(9, 1, True, ofwire.action_nat("10.0.1.2") +
                              ofwire.action_set_field("ct_mark", 13)),
             parser.NXActionCT(flags=nicira_ext.NX_CT_F_COMMIT, zone_src="", zone_ofs_nbits=9,
                               recirc_table=1, alg=0, actions=[
                                   parser.NXActionNAT(flags=2, range_ipv4_min="10.0.1.2",
                                                      range_ipv4_max="10.0.1.2"),
                                   parser.OFPActionSetField(ct_mark=13)]))):
        buf = bytearray()
        ryus.serialize(buf, 0)
        assert ours == buf
    # with a port: Ryu's serialiser misplaces the padding of a 28-byte NAT, so by the layout
    # of Open vSwitch's nx_action_nat (ovs-ofctl parse-actions reads ours as
    # nat(dst=10.0.1.2:8080))
    nat = ofwire.action_nat("10.0.1.2", 8080)
    assert len(nat) == 32 and struct.unpack("!HHIHHHH", nat[:16]) == \
        (0xFFFF, 32, ofwire.NX_VENDOR, ofwire.NXAST_NAT, 0, ofwire.NX_NAT_F_DST, 0x33)
    assert nat[16:28] == bytes([10, 0, 1, 2, 10, 0, 1, 2]) + struct.pack("!HH", 8080, 8080)


def test_a_short_flow_connection_is_one_packet_out_once_the_switch_has_its_rules():
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    uis = cfg.instances_of("ui")
    first = [packet_in(cfg, path, sw, client_frame(cfg, 40000 + k)) for k in range(len(uis))]
    assert all(r.kinds == ["new_flow"] for r in first)
    assert {r.decision.instance for r in first} == {i.name for i in uis}     # round robin
    mods = [m for r in first for m in flow_mods(r)]
    # per instance, its rule towards it; per client port, its answer rule and two watches
    assert len(mods) == len(uis) + 3 and {m.table_id for m in mods} == {tracker.CT_TABLE}
    watches = [m for m in mods if m.cookie == tracker.WATCH_COOKIE]
    assert sorted(dict(m.match.items())["tcp_flags"] for m in watches) == \
        [(ofwire.TCP_FIN,) * 2, (ofwire.TCP_RST,) * 2]
    later = packet_in(cfg, path, sw, client_frame(cfg, 41000))
    assert flow_mods(later) == []                       # no table change per connection
    (out,) = packet_outs(later)
    inst = path.instances[later.decision.instance]
    (ct,) = out.actions
    assert isinstance(ct, parser.NXActionCT) and ct.flags == nicira_ext.NX_CT_F_COMMIT
    assert (ct.zone_ofs_nbits, ct.recirc_table) == (tracker.ct_zone(c.dpid), tracker.CT_TABLE)
    nat, mark = ct.actions
    assert (nat.range_ipv4_min, nat.range_ipv4_max) == (inst.ip, inst.ip)
    assert mark.value == c.switch_port and out.in_port == c.switch_port
    rec = path.flows.lookup((c.dpid, "tcp", c.ip, 41000, VIP, 8002))
    assert rec.tracked and rec.fin_watch
    # a SYN retransmitted before the tracker had the first: the same commit, no decision
    again = packet_in(cfg, path, sw, client_frame(cfg, 41000))
    assert again.kinds == ["repeat"] and packet_outs(again)[0].actions[0].actions[0] \
        .range_ipv4_min == inst.ip


def test_a_long_flow_microservice_keeps_its_rule_pair_in_tracker_mode():
    cfg, path, sw = tracked()
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000, port=8003))     # backend: long
    mods = flow_mods(r)
    assert {m.priority for m in mods} >= {200} and {m.table_id for m in mods} == {0}
    c = cfg.testbed.clients[0]
    assert not path.flows.lookup((c.dpid, "tcp", c.ip, 40000, VIP, 8003)).tracked


def test_the_watched_fin_ends_a_tracked_flow_for_the_profiler_and_the_policy_at_once():
    cfg, path, sw = tracked("malb")
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000))
    inst = r.decision.instance
    assert path.policy_core.connections.open_count(inst) == 1
    out = path.fin(c.dpid, ofwire.parse_frame(fin_from(cfg, 8002, 40000)), NOW + 0.4)
    assert out.kinds == ["fin"]
    assert path.flows.active_count() == 0
    assert path.policy_core.connections.open_count(inst) == 0
    (rec,) = path.flows.take_report(NOW + 0.5)
    assert rec.as_record(cfg.controller.idle_timeout_s, now=NOW + 0.5)["duration_s"] == \
        round(0.4, 3) and rec.end_reason == "fin"


def test_a_tracked_flow_whose_end_was_never_seen_ends_at_the_watch_limit():
    cfg, path, sw = tracked()
    packet_in(cfg, path, sw, client_frame(cfg, 40000))
    assert path.flows.take_report(NOW + 1) and path.flows.active_count() == 1
    limit = path.flows.dormant_max_s
    (rec,) = path.flows.take_report(NOW + limit + 1)
    assert rec.end_reason == "no_fin" and path.flows.active_count() == 0


def test_an_answer_the_tracker_lost_puts_the_connection_on_rules():
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000))
    inst = path.instances[r.decision.instance]
    answer = ofwire.tcp_frame(c.mac, inst.mac, inst.ip, c.ip, 8002, 40000, 5,
                              flags=ofwire.TCP_ACK)
    out = path.orphan(c.dpid, answer, ofwire.parse_frame(answer), NOW + 1, lambda d: True)
    assert out.kinds == ["repeat"]
    assert {m.priority for m in flow_mods(out)} >= {200}           # the NAT pair
    assert not path.flows.lookup((c.dpid, "tcp", c.ip, 40000, VIP, 8002)).tracked


def test_a_switch_gets_the_tracker_rules_and_again_what_it_lacks_after_reconnecting():
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    plan = NetworkPlan(cfg)
    rules = SwitchRules(cfg, plan, path.xid, path.next_hop, path.mac_to_port, False,
                        path.client_orphans, path.tracker)
    mods = [m for buf in rules.switch_up(c.dpid, NOW) for m in decode(buf)
            if isinstance(m, parser.OFPFlowMod)]
    into = [m for m in mods if m.priority == tracker.PRIO_TRACK_VIP]
    assert sorted(dict(m.match.items())["tcp_dst"] for m in into) == \
        sorted(m.port for m in cfg.microservices if m.protocol == "tcp")
    # each instance's answers to each block of callers on the switch, as its orphan rules
    answers = [m for m in mods if m.priority == tracker.PRIO_TRACK_ANSWER]
    assert len(answers) == len(plan.local_blocks[c.dpid]) * len(
        [i for i in cfg.slots if cfg.microservice(i.microservice).protocol == "tcp"])
    ct = answers[0].instructions[0].actions[0]
    assert (ct.flags, ct.recirc_table) == (0, tracker.CT_TABLE)
    assert [m for m in mods if m.table_id == tracker.CT_TABLE and m.priority == 0]
    uis = cfg.instances_of("ui")
    for k in range(len(uis)):
        packet_in(cfg, path, sw, client_frame(cfg, 40000 + k))
    assert not flow_mods(packet_in(cfg, path, sw, client_frame(cfg, 40100)))
    rules.switch_up(c.dpid, NOW + 5)                       # reconnected: sent again
    assert flow_mods(packet_in(cfg, path, sw, client_frame(cfg, 40101)))
