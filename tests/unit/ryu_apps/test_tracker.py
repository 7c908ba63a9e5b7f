"""Tracker mode (ryu_apps/tracker.py): a short-flow TCP connection is decided by the
controller and translated by the switch's connection tracker. The messages are decoded by
Ryu's parser, as a switch would; the connection tracker itself runs in
tests/integration/test_tracker.py."""
from __future__ import annotations

import struct

import pytest

from common.config import ConfigError, parse_config_file_data
from ryu_apps import ofwire, tracker
from ryu_apps.framework import module, ofproto_v1_3_parser as parser
from ryu_apps.managers.flow_statistics import FlowStat, FlowStatistics
from ryu_apps.managers.switch_rules import SwitchRules
from ryu_apps.network_plan import NetworkPlan
from tests.lib.fakeswitch import PacketOut, Request, decode
from tests.lib.controller import make as make_controller
from tests.unit.ryu_apps.test_flowpath import NOW, VIP, client_frame, make, packet_in
from tests.unit.ryu_apps.test_own_network import network_config

nicira_ext = module("ofproto.nicira_ext")


def own_network(switches: list[dict]) -> dict:
    """A configuration of the user's network on these switches (instances found by the
    controller), in tracker mode."""
    data = network_config()
    data["controller"] = {**data["controller"], "dataplane": {"short_flows": "tracker"}}
    data["network"] = {"switches": switches, "instances": [
        {k: v for k, v in inst.items() if k not in ("switch", "port")}
        for inst in data["network"]["instances"]]}
    return data


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


def client_reset(cfg, inst, sport: int) -> bytes:
    """The client's reset as the tracker's watch copies it: translated to the instance."""
    c = cfg.testbed.clients[0]
    return ofwire.tcp_frame(inst.mac, c.mac, c.ip, inst.ip, sport, 8002, 1001,
                            flags=ofwire.TCP_RST)


def make_core_tracked():
    """The controller core in tracker mode, with its fake switches."""
    return make_controller(policy="srr", dataplane={"short_flows": "tracker"})


def statistics(cfg, path) -> FlowStatistics:
    return FlowStatistics(cfg, NetworkPlan(cfg), path.xid, path.policy_core, path.flows, path,
                          {cfg.testbed.clients[0].dpid})


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
    # per instance, its rule towards it and a watch of the client's reset; per client port,
    # its answer rule and two watches (the instance's FIN and reset); per (client port,
    # instance), the two counting rules above them
    assert len(mods) == 4 * len(uis) + 3 and {m.table_id for m in mods} == {tracker.CT_TABLE}
    counting = [m for m in mods if m.cookie & tracker.PAIR_MASK == tracker.PAIR_COOKIE]
    assert len(counting) == 2 * len(uis) and \
        {m.priority for m in counting} == {tracker.PRIO_CT_PAIR}
    assert sorted(dict(m.match.items())["ct_label"] for m in counting if m.cookie & 1) == \
        sorted(tracker.label(i.ip) for i in uis)
    assert {dict(m.match.items())["ct_mark"] for m in counting} == {c.switch_port}
    watches = [dict(m.match.items()) for m in mods if m.cookie == tracker.WATCH_COOKIE]
    assert sorted(w["tcp_flags"] for w in watches if "ct_mark" in w) == \
        [(ofwire.TCP_FIN,) * 2, (ofwire.TCP_RST,) * 2]
    assert sorted(w["ipv4_dst"] for w in watches if "ct_mark" not in w) == \
        sorted(i.ip for i in uis)
    later = packet_in(cfg, path, sw, client_frame(cfg, 41000))
    assert flow_mods(later) == []                       # no table change per connection
    (out,) = packet_outs(later)
    inst = path.instances[later.decision.instance]
    (ct,) = out.actions
    assert isinstance(ct, parser.NXActionCT) and ct.flags == nicira_ext.NX_CT_F_COMMIT
    assert (ct.zone_ofs_nbits, ct.recirc_table) == (path.tracker.zone(c.dpid), tracker.CT_TABLE)
    nat, mark, label = ct.actions
    assert (nat.range_ipv4_min, nat.range_ipv4_max) == (inst.ip, inst.ip)
    assert mark.value == c.switch_port and out.in_port == c.switch_port
    assert label.key == "ct_label" and label.value == tracker.label(inst.ip)
    rec = path.flows.lookup((c.dpid, "tcp", c.ip, 41000, VIP, 8002))
    assert rec.tracked and rec.fin_watch and path.flows.tracked_count() == len(uis) + 1


def test_a_connection_the_tracker_does_not_hold_goes_on_a_rule_pair_not_round_a_loop():
    cfg, path, sw = tracked()
    first = packet_in(cfg, path, sw, client_frame(cfg, 41000))
    inst = path.instances[first.decision.instance]
    # the client's SYN again, sent while the first waited for the controller: the same
    # commit once more, no decision, no rule
    again = packet_in(cfg, path, sw, client_frame(cfg, 41000), now=NOW + 1.0)
    assert again.kinds == ["repeat"] and again.decision is None and not flow_mods(again)
    assert packet_outs(again)[0].actions[0].actions[0].range_ipv4_min == inst.ip
    # back once more: the tracker refuses the commit (or lost it)
    again = packet_in(cfg, path, sw, client_frame(cfg, 41000), now=NOW + 1.1)
    assert again.kinds == ["repeat"] and again.decision is None
    assert {m.priority for m in flow_mods(again)} >= {200}          # the NAT pair
    (out,) = packet_outs(again)
    assert not any(isinstance(a, parser.NXActionCT) for a in out.actions)
    assert dict((a.key, a.value) for a in out.actions
                if isinstance(a, parser.OFPActionSetField))["ipv4_dst"] == inst.ip
    c = cfg.testbed.clients[0]
    rec = path.flows.lookup((c.dpid, "tcp", c.ip, 41000, VIP, 8002))
    assert not rec.tracked and path.flows.tracked_count() == 0
    # and once more: the rule pair's own repeat, no tracker
    third = packet_in(cfg, path, sw, client_frame(cfg, 41000), now=NOW + 1.2)
    assert not flow_mods(third) and not any(
        isinstance(a, parser.NXActionCT) for a in packet_outs(third)[0].actions)
    # round robin watches no flow: when the pair idles out, the flow ends there, not as a
    # dormant one reported as running for minutes (a tracked flow's FIN watch was the
    # tracker's, not the policy's)
    assert not rec.fin_watch
    stats = statistics(cfg, path)
    for direction in (1, 2):
        stats.flow_removed(c.dpid, rec.flow_id | direction << 44, 10.0, 100, 2,
                           ofwire.OFPRR_IDLE_TIMEOUT, NOW + 11.2)
    assert not rec.dormant and not rec.running
    (told,) = path.flows.take_report(NOW + 400)
    assert told.as_record(cfg.controller.idle_timeout_s, now=NOW + 400)["duration_s"] < 2


def test_a_tracked_connection_with_no_path_to_its_instance_is_left_as_it_is():
    # its instance moved where no path from the client's switch leads (the user's
    # network, a link not found yet): the client's SYN again and the instance's answer
    # are dropped before the connection is touched, not taken off the tracker
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000))
    inst = path.instances[r.decision.instance]
    rec = path.flows.lookup((c.dpid, "tcp", c.ip, 40000, VIP, 8002))
    where = path.locations.configured[inst.name]
    path.locations.configured[inst.name] = (0x99, 1)          # a switch no link leads to
    for k in range(3):
        again = packet_in(cfg, path, sw, client_frame(cfg, 40000), now=NOW + 1 + k)
        assert again.kinds == ["repeat", "no_path"] and not again.sends
    answer = ofwire.tcp_frame(c.mac, inst.mac, inst.ip, c.ip, 8002, 40000, 5,
                              flags=ofwire.TCP_FIN | ofwire.TCP_ACK)
    out = path.orphan(c.dpid, answer, ofwire.parse_frame(answer), NOW + 5, lambda d: True)
    assert out.kinds == ["no_path"] and not out.sends
    assert rec.tracked and rec.recommits == 0 and rec.fin_at is None and rec.ended is None
    assert path.flows.tracked_count() == 1
    # a path again: the repeat is the tracker's commit once more, as before
    path.locations.configured[inst.name] = where
    again = packet_in(cfg, path, sw, client_frame(cfg, 40000), now=NOW + 6)
    assert again.kinds == ["repeat"] and rec.tracked and rec.recommits == 1


def test_a_tracked_connection_not_restored_is_left_to_age_out_not_ended_as_lost():
    # no rules of its own for the statistics to list: a reconnection that cannot send its
    # tracker rules leaves it to tracked_max_s
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000))
    rec = path.flows.lookup((c.dpid, "tcp", c.ip, 40000, VIP, 8002))
    path.locations.configured[r.decision.instance] = (0x99, 1)
    stats = statistics(cfg, path)
    path.tracker.forget(c.dpid)      # reconnected (SwitchRules.switch_up, before this)
    (request,) = [m for buf in stats.switch_up(c.dpid, NOW + 1) for m in decode(buf)
                  if isinstance(m, Request) and m.mp_type == ofwire.OFPMP_FLOW]
    assert stats.unrestored and rec.rules_sent == 0.0
    assert not stats.flow_stats(c.dpid, [], NOW + 2, request.xid).warnings
    assert rec.ended is None and rec.tracked


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


def test_the_clients_reset_ends_a_tracked_flow_for_the_profiler_and_the_policy():
    cfg, path, sw = tracked("malb")
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000))
    inst = path.instances[r.decision.instance]
    rst = client_reset(cfg, inst, 40000)
    out = path.fin(c.dpid, ofwire.parse_frame(rst), NOW + 0.3)
    assert out.kinds == ["fin"] and path.flows.active_count() == 0
    assert path.policy_core.connections.open_count(inst.name) == 0
    (rec,) = path.flows.take_report(NOW + 0.5)
    assert rec.as_record(cfg.controller.idle_timeout_s, now=NOW + 0.5)["duration_s"] == 0.3


def test_a_tracked_flow_whose_end_was_never_seen_stops_counting_at_the_limit():
    cfg, path, sw = tracked("malb")
    stats = statistics(cfg, path)
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000))
    inst = r.decision.instance
    packet_in(cfg, path, sw, client_frame(cfg, 40001), now=NOW + 20)
    idle = cfg.controller.idle_timeout_s
    # while it runs the controller has seen its first packet only: no evidence of a long
    # flow however long it lasts (a SYN flood's half-open connections would be)
    (running, _) = path.flows.take_report(NOW + 25)
    assert running.as_record(idle, now=NOW + 25)["duration_s"] == 0.0
    stats.poll_stats(NOW + 25)
    assert path.flows.active_count() == 2 and path.flows.tracked_count() == 2
    limit = cfg.controller.dataplane.tracked_max_s
    stats.poll_stats(NOW + limit + 1)          # the first is past the limit, not the second
    assert path.flows.active_count() == 1 and path.flows.tracked_count() == 1
    assert path.policy_core.connections.open_count(inst) == 0
    # for the policy it carried nothing after its first packet, not 30 s
    carried = path.policy_core.connections.flow_seconds
    assert carried(inst, NOW + limit + 1) - carried(inst, NOW + 0.01) < 0.5
    (rec,) = [r for r in path.flows.take_report(NOW + limit + 2) if not r.running]
    record = rec.as_record(idle, now=NOW + limit + 2)
    assert record["end_reason"] == "no_fin" and record["duration_s"] == 0.0


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
    # those the tracker does not hold on to the controller unmetered, as the orphan rules
    orphans = [m for m in mods if m.table_id == tracker.CT_TABLE and
               m.priority == tracker.PRIO_CT_ORPHAN]
    assert [dict(m.match.items()) for m in orphans] == [dict(m.match.items()) for m in answers]
    assert all(len(m.instructions) == 1 for m in orphans)         # no meter instruction
    assert [m for m in mods if m.table_id == tracker.CT_TABLE and m.priority == 0]
    uis = cfg.instances_of("ui")
    for k in range(len(uis)):
        packet_in(cfg, path, sw, client_frame(cfg, 40000 + k))
    assert not flow_mods(packet_in(cfg, path, sw, client_frame(cfg, 40100)))
    rules.switch_up(c.dpid, NOW + 5)                       # reconnected: sent again
    assert flow_mods(packet_in(cfg, path, sw, client_frame(cfg, 40101)))
    # and at once, those of tracked connections under way (the switch may have lost its
    # rules but not its tracker), each once
    rules.switch_up(c.dpid, NOW + 6)
    again = [m for buf in statistics(cfg, path).switch_up(c.dpid, NOW + 6)
             for m in decode(buf) if isinstance(m, parser.OFPFlowMod)]
    assert len(again) == 4 * len(uis) + 3 and {m.table_id for m in again} == {tracker.CT_TABLE}


def test_each_configured_switch_has_a_tracker_zone_of_its_own():
    cfg, path, sw = make("srr", switches=3, dataplane={"short_flows": "tracker"})
    zones = [path.tracker.zone(s.dpid) for s in cfg.testbed.switches]
    assert len(set(zones)) == 3 and all(1 <= z <= tracker.ZONES for z in zones)
    # a switch the configuration does not hold shares no configured switch's zone
    foreign = tracker.Tracker("02:00:00:00:00:01", {1: 1, 2: 3, 3: 2})
    assert foreign.zone(1 + tracker.ZONES) == 4 and foreign.zone(4) == 4


def test_a_switch_keeps_its_zone_when_switches_are_added_to_the_configuration():
    # connections tracked before a restart with the new configuration stay known: a zone
    # depends on the switch's datapath id (or its tracker_zone) alone
    def zones(*dpids, **zone_of):
        data = own_network([{"name": f"s{d}", "dpid": d,
                             **({"tracker_zone": zone_of[f"s{d}"]} if f"s{d}" in zone_of
                                else {})} for d in dpids])
        return {s.name: s.tracker_zone for s in
                parse_config_file_data(data, "own.yaml").testbed.switches}

    before = zones(5, 9)
    assert zones(2, 5, 9, 0x30) | before == zones(2, 5, 9, 0x30)
    assert zones(5, 9, s9=77) == {"s5": 5, "s9": 77}


@pytest.mark.parametrize("dpids, zone_of, message", [
    ((1, 1 + tracker.ZONES), {}, r"switches 's1' and 's65535' have the same connection-tracker "
                                  r"zone 1"),
    ((1, 2), {"s2": 1}, r"same connection-tracker zone 1 .* give one another tracker_zone"),
    ((1,), {"s1": 0xFFFF}, r"network.switches\[0\].tracker_zone: "),   # the transitions'

])
def test_a_zone_two_switches_would_share_is_refused(dpids, zone_of, message):
    data = own_network([{"name": f"s{d}", "dpid": d, **({"tracker_zone": zone_of[f"s{d}"]}
                                                        if f"s{d}" in zone_of else {})}
                        for d in dpids])
    with pytest.raises(ConfigError, match=message):
        parse_config_file_data(data, "own.yaml")


def test_tracked_flows_have_no_rules_to_poll():
    cfg, path, sw = tracked()
    stats = statistics(cfg, path)
    for k in range(100):              # as rule pairs: 200 rules, polled in slices
        packet_in(cfg, path, sw, client_frame(cfg, 40000 + k))
    assert stats.poll_stats(NOW + 1).next_in_s == cfg.controller.monitoring_period_s


def test_a_tracked_flow_that_comes_back_after_its_end_resumes_on_a_rule_pair():
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    packet_in(cfg, path, sw, client_frame(cfg, 40000))
    path.fin(c.dpid, ofwire.parse_frame(fin_from(cfg, 8002, 40000)), NOW + 0.4)
    # the client's last ACK, after the tracker forgot the connection
    back = packet_in(cfg, path, sw, client_frame(cfg, 40000, flags=ofwire.TCP_ACK),
                     now=NOW + 0.5)
    assert back.kinds == ["resumed"] and {m.priority for m in flow_mods(back)} >= {200}
    assert not any(isinstance(a, parser.NXActionCT) for a in packet_outs(back)[0].actions)
    rec = path.flows.lookup((c.dpid, "tcp", c.ip, 40000, VIP, 8002))
    assert not rec.tracked and path.flows.tracked_count() == 0


def test_a_tracked_segment_ahead_of_its_rule_is_sent_on_as_the_rule_would():
    cfg, path, sw = tracked("malb")
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000))
    inst = path.instances[r.decision.instance]
    # the client's next segment, translated by the tracker, from the catch-all
    ahead = ofwire.tcp_frame(cfg.controller.vip_mac, c.mac, c.ip, inst.ip, 40000, 8002, 1001,
                             flags=ofwire.TCP_ACK)
    out = path.tracked_miss(c.dpid, c.switch_port, ahead, ofwire.parse_frame(ahead), NOW)
    (po,) = packet_outs(out)
    assert out.kinds == ["repeat"] and not flow_mods(out)
    assert [(a.key, a.value) for a in po.actions if isinstance(a, parser.OFPActionSetField)] \
        == [("eth_dst", inst.mac)]
    assert po.actions[-1].port == path.port_towards(c.dpid, inst)
    # the instance's FIN, translated back: sent out of the client's port, and the flow ends
    fin = ofwire.tcp_frame(c.mac, inst.mac, VIP, c.ip, 8002, 40000, 5,
                           flags=ofwire.TCP_FIN | ofwire.TCP_ACK)
    out = path.tracked_miss(c.dpid, 9, fin, ofwire.parse_frame(fin), NOW + 0.2)
    (po,) = packet_outs(out)
    assert out.kinds == ["repeat", "fin"] and po.actions[-1].port == c.switch_port
    assert path.flows.active_count() == 0
    assert path.policy_core.connections.open_count(inst.name) == 0
    # an untranslated segment (to the VIP) is not one: the VIP's own path takes it
    syn = client_frame(cfg, 40001)
    assert not path.tracked_miss(c.dpid, c.switch_port, syn, ofwire.parse_frame(syn),
                                 NOW).handled


def test_a_rule_pairs_segment_from_the_catch_all_is_not_the_trackers():
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000, port=8003))      # long: a pair
    inst = path.instances[r.decision.instance]
    seg = ofwire.tcp_frame(cfg.controller.vip_mac, c.mac, c.ip, inst.ip, 40000, 8003, 1001,
                           flags=ofwire.TCP_ACK)
    assert not path.tracked_miss(c.dpid, c.switch_port, seg, ofwire.parse_frame(seg),
                                 NOW).handled
    # nor is a client's reset of a tracked flow that ended already anything to end
    r = packet_in(cfg, path, sw, client_frame(cfg, 40001))
    ui = path.instances[r.decision.instance]
    path.fin(c.dpid, ofwire.parse_frame(fin_from(cfg, 8002, 40001)), NOW + 0.1)
    assert path.fin(c.dpid, ofwire.parse_frame(client_reset(cfg, ui, 40001)), NOW + 0.2) \
        .kinds == ["fin"] and path.flows.active_count() == 1


def test_the_controller_core_sends_the_catch_alls_translated_segments_on():
    cfg, ctl, net = make_core_tracked()
    c = cfg.testbed.clients[0]
    syn = client_frame(cfg, 40000)
    first = ctl.packet_in(c.dpid, c.switch_port, syn, NOW, cookie=tracker.MISS_COOKIE)
    assert first.kinds == ["new_flow"]              # untranslated: the VIP's own path
    inst = ctl.path.instances[first.decision.instance]
    ahead = ofwire.tcp_frame(cfg.controller.vip_mac, c.mac, c.ip, inst.ip, 40000, 8002, 1001,
                             flags=ofwire.TCP_ACK)
    r = ctl.packet_in(c.dpid, c.switch_port, ahead, NOW, cookie=tracker.MISS_COOKIE)
    assert r.kinds == ["repeat"] and r.sends


def test_an_instance_calling_its_own_vip_through_the_path_is_never_given_itself():
    cfg, path, sw = tracked()
    me = cfg.instances_of("ui")[0]
    for sport in range(40000, 40008):
        syn = ofwire.tcp_frame(cfg.controller.vip_mac, me.mac, me.ip, VIP, sport, 8002, 1000,
                               flags=ofwire.TCP_SYN)
        r = path.vip_packet(me.dpid, me.switch_port, syn, ofwire.parse_frame(syn), NOW)
        assert r.decision.instance != me.name


def counting_rules(results) -> dict[int, parser.OFPFlowMod]:
    return {m.cookie: m for r in results for m in flow_mods(r)
            if m.cookie & tracker.PAIR_MASK == tracker.PAIR_COOKIE}


def test_the_counting_rules_give_the_graph_each_pairs_bytes_with_no_rule_per_connection():
    cfg, path, sw = tracked()
    c = cfg.testbed.clients[0]
    uis = cfg.instances_of("ui")
    first = [packet_in(cfg, path, sw, client_frame(cfg, 40000 + k)) for k in range(len(uis))]
    counting = counting_rules(first)
    stats = statistics(cfg, path)
    requests = [m for m in decode(stats.stats_requests(c.dpid))
                if isinstance(m, Request) and m.mp_type == ofwire.OFPMP_FLOW]
    assert len(requests) == 2     # the NAT rules' slice, and the counting rules with slice 0
    assert not [m for m in decode(stats.stats_requests(c.dpid, 1, 2))
                if isinstance(m, Request) and m.mp_type == ofwire.OFPMP_FLOW][1:]
    path.flows.take_pairs()       # the new flows counted so far
    inst_of = {tracker.label(i.ip): i.name for i in uis}
    ip_of = {i.ip: i.name for i in uis}

    def pair(m) -> str:
        fields = dict(m.match.items())
        return inst_of[fields["ct_label"]] if m.cookie & 1 else ip_of[fields["ipv4_dst"]]

    def read(counts: dict[str, tuple[int, int]]) -> dict:
        """A statistics reply: per instance, (bytes towards it, bytes of its answers)."""
        stats.flow_stats(c.dpid, [FlowStat(cookie, 1.0, counts[pair(m)][cookie & 1], 1, {})
                                  for cookie, m in counting.items()] +
                         [FlowStat(tracker.PAIR_COOKIE | 999 << 1, 1.0, 5000, 5, {})], NOW + 2)
        return path.flows.take_pairs()[0]

    assert read({i.name: (100 * k, 1000 * k) for k, i in enumerate(uis, 1)}) == \
        {(c.ip, i.name): 1100 * k for k, i in enumerate(uis, 1)}
    # what grew since; a rule sent again counts from zero (its counter restarted)
    grown = read({i.name: (100 * k + 50, 1000 * k + 500) if k > 1 else (30, 20)
                  for k, i in enumerate(uis, 1)})
    assert grown == {(c.ip, uis[0].name): 50, **{(c.ip, i.name): 550
                                                  for i in uis[1:]}}
    assert read({i.name: (100 * k + 50, 1000 * k + 500) if k > 1 else (30, 20)
                 for k, i in enumerate(uis, 1)}) == {}      # nothing new: no edge bytes
    # the switch reconnected: what it reads next is a baseline (it may have kept its
    # counters), not bytes counted twice
    path.tracker.forget(c.dpid)
    for k in range(len(uis)):
        packet_in(cfg, path, sw, client_frame(cfg, 42000 + k))
    assert read({i.name: (5000, 5000) for i in uis}) == {}
    assert read({i.name: (5100, 5000) for i in uis}) == {(c.ip, i.name): 100 for i in uis}


def test_an_instance_whose_way_changes_gets_every_pairs_counting_rules_again():
    t = tracker.Tracker("02:00:00:00:00:fe", {1: 1})
    xid = iter(range(1, 100))

    def mods(in_port: int, out_port: int) -> list[parser.OFPFlowMod]:
        buf = t.rules(lambda dpid: next(xid), 1, in_port, "srv1-ui", "02:00:00:01:01:02",
                      "10.0.1.2", 8002, out_port, f"10.0.0.{in_port}")
        return [m for m in decode(buf) if isinstance(m, parser.OFPFlowMod)]

    def counting_out(ms) -> dict[tuple[int, int], int]:
        """(pair's client port, answer) -> the port it sends to."""
        return {(dict(m.match.items())["ct_mark"], m.cookie & 1):
                m.instructions[0].actions[-1].port for m in ms
                if m.cookie & tracker.PAIR_MASK == tracker.PAIR_COOKIE}

    assert counting_out(mods(1, 5)) == {(1, 0): 5, (1, 1): 1}
    assert counting_out(mods(2, 5)) == {(2, 0): 5, (2, 1): 2}
    assert mods(1, 5) == []                      # all there: nothing per connection
    # the instance moved (now out of port 6): both pairs' rules towards it are sent again
    assert counting_out(mods(1, 6)) == {(1, 0): 6, (1, 1): 1, (2, 0): 6, (2, 1): 2}
    t.forget(1)                                  # the switch reconnected: sent again
    assert counting_out(mods(2, 6)) == {(2, 0): 6, (2, 1): 2}
