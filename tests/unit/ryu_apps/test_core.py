"""The controller core (ryu_apps/core.py) against a fake network (tests/lib/fakeswitch.py):
every event goes in as the shell would pass it, the OpenFlow bytes that come out are decoded
and applied to fake switches, and the tests ask those switches where packets go."""
from __future__ import annotations

import copy
import math
import struct

import pytest

from common.config import DEFAULT_MICROSERVICES
from ryu_apps import dataplane, ofwire
from ryu_apps.core import FlowStat, PortStat
from ryu_apps.managers.dataplane_groups import COUNTERS as DP_OPENED_COOKIE
from ryu_apps.managers.flow_statistics import COOKIE_BASE
from ryu_apps.managers.profiler_exchange import PROFILER_READY_S, next_exchange_in
from ryu_apps.managers.switch_rules import MISS_METER, PACKET_IN_METER
from ryu_apps.core_result import CoreResult
from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FIN_TAG
from ryu_apps import policies
from ryu_apps.policies import Backend
from tests.lib.controller import NOW, UDP_MS, VIP, answer_of, client_pkt, expire_flow, \
    from_client, from_instance, inject, instance_at, make, new_core, new_flow
from tests.lib.fakeswitch import CONTROLLER, GroupMod, decode, fields_of, frame_of

# ---------------------------------------------------------------- switch connected
def test_a_connected_switch_sends_the_vips_to_the_controller_and_knows_every_host():
    cfg, ctl, net = make()
    sw = net.switches[1]
    c = cfg.testbed.clients[0]
    inst = cfg.instances_of("ui")[0]
    # unknown destinations and the VIPs go to the controller; known hosts to their port
    assert net.send(1, c.switch_port, {"eth_dst": "02:99:00:00:00:01", "eth_type": 0x86dd}
                    )[0][1] == CONTROLLER
    arp = fields_of(ofwire.arp_frame(ofwire.ARP_REQUEST, c.mac, c.ip, "00:00:00:00:00:00", VIP,
                                     eth_dst="ff:ff:ff:ff:ff:ff"))
    assert net.send(1, c.switch_port, arp)[0][1] == CONTROLLER
    assert net.send(1, c.switch_port, client_pkt(cfg, 40000))[0][1] == CONTROLLER
    to_inst = {"eth_dst": inst.mac, "eth_type": 0x0800, "ipv4_dst": inst.ip}
    assert net.send(1, c.switch_port, to_inst)[0][1] == inst.switch_port
    # an instance's answer no NAT rule rewrites comes to the controller, not out by L2
    orphan = answer_of(client_pkt(cfg, 40000) | {"ipv4_dst": inst.ip, "eth_dst": inst.mac})
    assert net.send(1, inst.switch_port, orphan)[0][1] == CONTROLLER
    # and it asked what rules a previous controller left, and the ports' counters
    assert [r.mp_type for r in sw.requests][-2:] == [ofwire.OFPMP_FLOW, ofwire.OFPMP_PORT_STATS]
    assert ctl.status()["switches"] == ["0000000000000001"]


def test_packet_ins_are_metered_when_the_switch_has_meters_and_only_then():
    cfg, ctl, net = make(packet_in_limit_per_s=300)
    sw = net.switches[1]
    assert ofwire.OFPMP_METER_FEATURES in [r.mp_type for r in sw.requests]
    assert all(r.meter is None for r in sw.rules)
    r = ctl.meter_features(1, max_meter=0, band_types=0, capabilities=0, now=NOW)
    assert r.warnings and not r.sends
    net.apply(ctl.meter_features(1, 100, 1 << ofwire.OFPMBT_DROP, ofwire.OFPMF_PKTPS,
                                 NOW).sends)
    assert sw.meters == {PACKET_IN_METER: [(1, 300, 300)], MISS_METER: [(1, 300, 300)]}
    c = cfg.testbed.clients[0]
    (_, port, _, rule, _), = net.send(1, c.switch_port, client_pkt(cfg, 40000))
    assert port == CONTROLLER and rule.meter == PACKET_IN_METER
    (_, _, _, miss, _), = net.send(1, c.switch_port, {"eth_dst": "02:99:00:00:00:01",
                                                       "eth_type": 0x86dd})
    assert miss.meter == MISS_METER and miss.priority == 0
    # health-probe answers go around the meter
    inst = cfg.instances_of("ui")[0]
    probe = {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": inst.ip, "ipv4_dst": VIP,
             "tcp_src": 8002, "tcp_dst": 0xF001, "eth_src": inst.mac, "eth_dst": "x"}
    (_, port, _, rule, _), = net.send(1, inst.switch_port, probe)
    assert port == CONTROLLER and rule.meter is None
    assert ctl.status()["packet_in_limit_per_s"] == {"0000000000000001": 300}


# ---------------------------------------------------------------- packet-ins
def test_arp_for_a_vip_is_answered_with_the_vip_mac():
    cfg, ctl, net = make()
    c = cfg.testbed.clients[0]
    arp = fields_of(ofwire.arp_frame(ofwire.ARP_REQUEST, c.mac, c.ip, "00:00:00:00:00:00", VIP,
                                     eth_dst="ff:ff:ff:ff:ff:ff"))
    _, (r,) = from_client(cfg, ctl, net, arp)
    assert r.kinds == ["arp_vip"]
    dpid, port, reply = net.delivered[-1]
    assert (dpid, port) == (c.dpid, c.switch_port)
    assert (reply["arp_op"], reply["arp_spa"], reply["arp_sha"], reply["eth_dst"]) == \
        (ofwire.ARP_REPLY, VIP, cfg.controller.vip_mac, c.mac)


@pytest.mark.parametrize("policy", ["srr", "ln", "malb", "malb-paper", "maglev"])
def test_a_new_flow_under_every_policy_is_then_carried_by_the_switch_both_ways(policy):
    cfg, ctl, net = make(policy)
    c = cfg.testbed.clients[0]
    inst, first = new_flow(cfg, ctl, net, 40000, port=8003)
    assert first["tcp_dst"] == 8003 and ctl.decisions[-1]["policy"] == policy
    # the next segment and the answer never reach the controller
    (leave,), results = from_client(cfg, ctl, net, client_pkt(cfg, 40000, 8003, ofwire.TCP_ACK))
    assert not results and leave[:2] == (inst.dpid, inst.switch_port)
    (back,), results = from_instance(cfg, ctl, net, inst, answer_of(first))
    assert not results and back[:2] == (c.dpid, c.switch_port)
    assert (back[2]["ipv4_src"], back[2]["eth_src"], back[2]["tcp_src"]) == \
        (VIP, cfg.controller.vip_mac, 8003)
    assert ctl.status()["active_flows"] == 1


def test_udp_and_an_instance_port_other_than_the_vip_port():
    ms = copy.deepcopy(DEFAULT_MICROSERVICES) + [UDP_MS]
    cfg, ctl, net = make(microservices=ms)
    for name, b in list(ctl.backends.items()):     # ui's instances listen on 9002
        if b.microservice == "ui":
            ctl.backends[name] = Backend(b.name, b.microservice, b.server, b.ip, b.mac, 9002,
                                         b.order)
    c = cfg.testbed.clients[0]
    inst, pkt = new_flow(cfg, ctl, net, 40005)
    assert pkt["tcp_dst"] == 9002
    (back,), _ = from_instance(cfg, ctl, net, inst, {**answer_of(pkt), "tcp_src": 9002})
    assert back[2]["tcp_src"] == 8002 and back[2]["ipv4_src"] == VIP
    inst, pkt = new_flow(cfg, ctl, net, 40006, port=5353, proto="udp")
    assert inst.microservice == "dns" and pkt["udp_dst"] == 5353
    (leave,), results = from_client(cfg, ctl, net, client_pkt(cfg, 40006, 5353, proto="udp"))
    assert not results and leave[2]["ipv4_dst"] == inst.ip
    (back,), _ = from_instance(cfg, ctl, net, inst, answer_of(pkt))
    assert back[:2] == (c.dpid, c.switch_port) and back[2]["udp_src"] == 5353


def test_an_instance_on_another_switch_is_reached_over_the_trunks_and_answers_back():
    cfg, ctl, net = make(switches=3)
    c = cfg.testbed.clients[0]
    far = max(cfg.instances_of("ui"), key=lambda i: abs(i.dpid - c.dpid))
    assert far.dpid != c.dpid
    for b in ctl.policy_core.pools["ui"]:
        ctl.policy_core.set_health(b.name, b.name == far.name)
    inst, pkt = new_flow(cfg, ctl, net, 40007)
    assert inst == far
    (leave,), results = from_client(cfg, ctl, net, client_pkt(cfg, 40007, flags=ofwire.TCP_ACK))
    assert not results and leave[:2] == (far.dpid, far.switch_port)
    (back,), results = from_instance(cfg, ctl, net, far, answer_of(pkt))
    assert not results and back[:2] == (c.dpid, c.switch_port) and back[2]["ipv4_src"] == VIP


def test_a_flow_removed_ends_the_flow_and_its_next_segment_resumes_it_on_its_instance():
    cfg, ctl, net = make()
    inst, _ = new_flow(cfg, ctl, net, 40002)
    expire_flow(cfg, ctl, net, NOW + 12)
    assert ctl.status()["active_flows"] == 0
    leaves, (r,) = from_client(cfg, ctl, net, client_pkt(cfg, 40002, flags=ofwire.TCP_ACK),
                               NOW + 13)
    assert r.kinds == ["resumed"] and r.decision is None and not leaves
    assert net.delivered[-1][2]["ipv4_dst"] == inst.ip
    assert len(net.switches[1].nat_rules()) == 2 and ctl.status()["active_flows"] == 1


def fin_watches(net):
    return [r for sw in net.switches.values() for r in sw.rules if r.cookie >> 48 == FIN_TAG]


def open_short(ctl) -> int:
    """The short (ui) flows the policy core has open."""
    return sum(ctl.policy_core.connections.open_count(b.name)
               for b in ctl.policy_core.pools["ui"])


def test_a_long_flows_fin_reaches_the_client_and_tells_the_policy_core_it_ended():
    cfg, ctl, net = make("malb")
    c = cfg.testbed.clients[0]
    inst, pkt = new_flow(cfg, ctl, net, 40010, port=8003)          # backend: long
    assert ctl.policy_core.running_load(inst.server, NOW + 1)[2] == 0      # no cost known yet
    assert len(ctl.policy_core.open_flows) == 1 and len(fin_watches(net)) == 1
    ui, _ = new_flow(cfg, ctl, net, 40011, port=8002)   # ui: short, watched for malb's choice
    assert len(ctl.policy_core.open_flows) == 1 and open_short(ctl) == 1
    assert len(fin_watches(net)) == 2
    # data from the instance: the reverse rule, no controller
    (back,), results = from_instance(cfg, ctl, net, inst, answer_of(pkt, ofwire.TCP_ACK))
    assert not results and back[2]["ipv4_src"] == VIP
    # its FIN: rewritten and delivered by the switch, and a copy to the controller
    leaves, (r,) = from_instance(cfg, ctl, net, inst,
                                 answer_of(pkt, ofwire.TCP_FIN | ofwire.TCP_ACK), NOW + 5)
    (dpid, port, fin), = leaves
    assert (dpid, port, fin["ipv4_src"], fin["tcp_src"]) == (c.dpid, c.switch_port, VIP, 8003)
    assert r.kinds == ["fin"] and not r.sends
    assert len(ctl.policy_core.open_flows) == 0
    assert ctl.policy_core.open_flows.running(inst.server, NOW + 6) == {}
    assert ctl.policy_core.open_flows.running(inst.server, NOW + 4) == {"backend": 1}


def test_short_flows_are_watched_to_their_fin_under_malb_only():
    cfg, ctl, net = make("malb")
    inst, pkt = new_flow(cfg, ctl, net, 40013, port=8002)            # ui: short
    assert len(fin_watches(net)) == 1 and ctl.policy_core.connections.open_count(inst.name) == 1
    leaves, (r,) = from_instance(cfg, ctl, net, inst,
                                 answer_of(pkt, ofwire.TCP_FIN | ofwire.TCP_ACK), NOW + 2)
    assert r.kinds == ["fin"] and open_short(ctl) == 0
    # a ui object whose FIN never came (a SYN flood's half-open flow): its rules idle out
    # and it ends; a job computing in silence idles out too, but runs on until its FIN
    new_flow(cfg, ctl, net, 40015, port=8002)
    job, _ = new_flow(cfg, ctl, net, 40016, port=8003)
    assert open_short(ctl) == 1 and len(ctl.policy_core.open_flows) == 1
    expire_flow(cfg, ctl, net, NOW + 20)
    assert open_short(ctl) == 0 and len(ctl.policy_core.open_flows) == 1
    for policy in ("srr", "ln", "malb-paper", "maglev"):
        cfg, ctl, net = make(policy)
        new_flow(cfg, ctl, net, 40014, port=8002)
        assert not fin_watches(net) and open_short(ctl) == 0, policy


def test_a_pair_that_idles_out_deletes_its_fin_watch_once():
    """The first of the pair's rules to go takes the FIN watch with it; the second's
    removal sends nothing (a second delete was a sixth message per flow)."""
    cfg, ctl, net = make("malb")
    new_flow(cfg, ctl, net, 40017, port=8003)
    sw = net.switches[1]
    deletes = []
    for rule in sw.nat_rules():
        sw.remove(rule.cookie)
        r = ctl.flow_removed(1, rule.cookie, 12.0, 100, 2, ofwire.OFPRR_IDLE_TIMEOUT, NOW + 12)
        deletes += [m for _, buf in r.sends for m in decode(buf)
                    if getattr(m, "command", None) == ofwire.OFPFC_DELETE]
        net.apply(r.sends)
    assert len(deletes) == 1 and deletes[0].cookie >> 48 == FIN_TAG and not fin_watches(net)


def told_profiler(ctl, now):
    """The flow records of the controller's next report to the profiler."""
    return [f for body in ctl.profiler_report(now) if body is not None for f in body["flows"]]


def test_a_watched_flow_whose_rules_idle_out_mid_job_stays_running_until_its_fin():
    cfg, ctl, net = make("malb")
    inst, pkt = new_flow(cfg, ctl, net, 40012, port=8003)
    assert [f["active"] for f in told_profiler(ctl, NOW + 1)] == [True]
    # a job computes in silence: the pair idles out; its FIN watch goes with it
    expire_flow(cfg, ctl, net, NOW + 10)
    assert not fin_watches(net) and len(ctl.policy_core.open_flows) == 1
    assert ctl.policy_core.open_flows.running(inst.server, NOW + 15) == {"backend": 1}
    # ... and the profiler goes on counting it: no end (it had one, a few hundred ms long,
    # which halved what the profiler took one job to cost), told it is long
    (job,) = told_profiler(ctl, NOW + 11)
    assert job["active"] and job["duration_s"] == pytest.approx(11.0)
    assert told_profiler(ctl, NOW + 20) == []
    # the answer comes back as an orphan: resumed, its three rules again
    leaves, (r,) = from_instance(cfg, ctl, net, inst, answer_of(pkt, ofwire.TCP_ACK), NOW + 30)
    assert r.kinds == ["resumed"] and len(fin_watches(net)) == 1
    # the FIN through the watch ends it, for the profiler at once (not when its rules idle
    # out, an idle timeout later), lasting to its FIN
    leaves, (r,) = from_instance(cfg, ctl, net, inst,
                                 answer_of(pkt, ofwire.TCP_FIN | ofwire.TCP_ACK), NOW + 30.2)
    assert r.kinds == ["fin"] and len(leaves) == 1 and len(ctl.policy_core.open_flows) == 0
    (job,) = told_profiler(ctl, NOW + 31)
    assert not job["active"] and job["duration_s"] == pytest.approx(30.2)
    assert job["end_reason"] == "fin"
    expire_flow(cfg, ctl, net, NOW + 41)
    assert told_profiler(ctl, NOW + 47) == []             # ended once


def test_a_half_open_short_flow_ends_for_the_profiler_when_its_rules_idle_out():
    cfg, ctl, net = make("malb")
    inst, _ = new_flow(cfg, ctl, net, 40017, port=8002)    # ui: short, no FIN ever
    told_profiler(ctl, NOW + 1)
    idle = cfg.controller.idle_timeout_s
    expire_flow(cfg, ctl, net, NOW + idle + 3)
    (obj,) = told_profiler(ctl, NOW + idle + 9)
    assert not obj["active"] and obj["end_reason"] == "idle_timeout"
    # it went quiet the idle timeout before its rules went: the seconds it carried end there
    carried = ctl.policy_core.connections.flow_seconds
    assert carried(inst.name, NOW + idle + 3) == pytest.approx(3.0, abs=0.01)


def test_a_fin_that_comes_as_an_orphan_ends_the_flow_too():
    cfg, ctl, net = make("malb")
    c = cfg.testbed.clients[0]
    inst, pkt = new_flow(cfg, ctl, net, 40014, port=8003)
    expire_flow(cfg, ctl, net, NOW + 10)
    leaves, (r,) = from_instance(cfg, ctl, net, inst,
                                 answer_of(pkt, ofwire.TCP_FIN | ofwire.TCP_ACK), NOW + 30)
    assert r.kinds == ["resumed"] and len(ctl.policy_core.open_flows) == 0
    dpid, port, fin = net.delivered[-1]
    assert (dpid, port, fin["ipv4_src"]) == (c.dpid, c.switch_port, VIP)


def test_an_orphan_answer_resumes_its_flow_and_reaches_the_client_as_the_vip():
    cfg, ctl, net = make()
    c = cfg.testbed.clients[0]
    inst, pkt = new_flow(cfg, ctl, net, 40004)
    expire_flow(cfg, ctl, net, NOW + 12)
    leaves, (r,) = from_instance(cfg, ctl, net, inst, answer_of(pkt, ofwire.TCP_ACK), NOW + 13)
    assert r.kinds == ["resumed"] and not leaves
    dpid, port, back = net.delivered[-1]
    assert (dpid, port, back["ipv4_src"], back["tcp_src"]) == (c.dpid, c.switch_port, VIP, 8002)
    # the rules are back: the next answer needs no controller
    (again,), results = from_instance(cfg, ctl, net, inst, answer_of(pkt, ofwire.TCP_ACK))
    assert not results and again[2]["ipv4_src"] == VIP


def test_a_segment_nobody_owns_gets_a_reset_and_unknown_hosts_are_flooded_then_learned():
    cfg, ctl, net = make()
    c = cfg.testbed.clients[0]
    _, (r,) = from_client(cfg, ctl, net, client_pkt(cfg, 40003, flags=ofwire.TCP_ACK, ack=77))
    assert r.kinds == ["tcp_not_syn"]
    _, port, rst = net.delivered[-1]
    assert port == c.switch_port and rst["tcp_flags"] & ofwire.TCP_RST and rst["tcp_seq"] == 77
    a, b = "02:99:00:00:00:0a", "02:99:00:00:00:0b"
    _, (r,) = inject(ctl, net, 1, 7, {"eth_src": a, "eth_dst": b, "eth_type": 0x88B5})
    assert r.kinds == ["l2"] and net.delivered[-1][1] == ofwire.OFPP_FLOOD
    inject(ctl, net, 1, 8, {"eth_src": b, "eth_dst": a, "eth_type": 0x88B5})
    assert net.delivered[-1][1] == 7                # learned: sent to a's port
    (leave,), results = inject(ctl, net, 1, 8, {"eth_src": b, "eth_dst": a, "eth_type": 0x88B5})
    assert not results and leave[1] == 7            # and a rule carries the rest


# ---------------------------------------------------------------- reconnect, restart
def test_a_reconnected_switch_gets_the_nat_rules_of_flows_under_way_back():
    cfg, ctl, net = make()
    inst, _ = new_flow(cfg, ctl, net, 40010)
    r = ctl.switch_gone(1, NOW + 1)
    assert r.warnings and ctl.status()["switches"] == []
    net.switches[1].rules.clear()                  # it restarted with empty tables
    net.apply(ctl.switch_connected(1, NOW + 2).sends)
    (leave,), results = from_client(cfg, ctl, net, client_pkt(cfg, 40010, flags=ofwire.TCP_ACK))
    assert not results and leave[2]["ipv4_dst"] == inst.ip


def test_a_restarted_controller_adopts_the_rules_it_finds_and_resumes_their_flows():
    cfg, ctl, net = make()
    inst, pkt = new_flow(cfg, ctl, net, 40011)
    rules = net.switches[1].nat_rules()
    # a new controller: the switch keeps its rules and reports them (flow statistics)
    ctl = new_core(cfg)
    net.apply(ctl.switch_connected(1, NOW + 5).sends)
    entries = [FlowStat(r.cookie, 5.0, 1000, 10, r.match,
                        tuple(a.port for a in r.actions if hasattr(a, "port"))) for r in rules]
    out = ctl.flow_stats(1, entries + [FlowStat(0x1234, 1.0, 0, 0, {})], NOW + 5)
    assert len(out.infos) == 1 and ("set", "malb_active_flows", (), 1) in out.metrics
    assert ctl.instances_view()[inst.name]["active_flows"] == 1
    # the adopted flow's rules idle out; its next segment resumes it on the same instance
    expire_flow(cfg, ctl, net, NOW + 20)
    _, (r,) = from_client(cfg, ctl, net, client_pkt(cfg, 40011, flags=ofwire.TCP_ACK), NOW + 21)
    assert r.kinds == ["resumed"] and net.delivered[-1][2]["ipv4_dst"] == inst.ip
    c = cfg.testbed.clients[0]
    (back,), _ = from_instance(cfg, ctl, net, inst, answer_of(pkt, ofwire.TCP_ACK), NOW + 21)
    assert back[:2] == (c.dpid, c.switch_port)


def test_a_tagged_rule_with_no_direction_of_ours_is_neither_counted_nor_adopted():
    cfg, ctl, net = make()
    new_flow(cfg, ctl, net, 40013)
    rule = net.switches[1].nat_rules()[0]
    odd = (rule.cookie & ~(0xF << 44)) | (3 << 44)          # our tag, direction 3
    rec = next(iter(ctl.flows.flows.values()))
    before = (rec.bytes_fwd, rec.bytes_rev, rec.removed)
    out = ctl.flow_stats(1, [FlowStat(odd, 5.0, 9000, 90, rule.match, ())], NOW + 5)
    assert not out.infos and (rec.bytes_fwd, rec.bytes_rev, rec.removed) == before
    ctl.flow_removed(1, odd, 5.0, 9000, 90, ofwire.OFPRR_IDLE_TIMEOUT, NOW + 6)
    assert rec.ended is None and ctl.instances_view()[rec.instance]["active_flows"] == 1


def test_orphan_answers_wait_for_their_edge_switch_to_come_back():
    cfg, ctl, net = make()
    inst, pkt = new_flow(cfg, ctl, net, 40012)
    expire_flow(cfg, ctl, net, NOW + 12)
    ctl.switch_gone(1, NOW + 12)
    r = ctl.packet_in(1, inst.switch_port, frame_of(answer_of(pkt, ofwire.TCP_ACK)), NOW + 13)
    assert r.kinds == ["resumed"] and not r.sends


# ---------------------------------------------------------------- statistics
def test_the_timer_polls_flow_statistics_in_slices_with_ports_once_per_cycle():
    cfg, ctl, net = make(monitoring_period_s=3)
    for sport in range(41000, 41100):        # 100 flows, 200 rules: 8 slices of ~32
        new_flow(cfg, ctl, net, sport, port=8001)
    sw = net.switches[1]
    sw.requests.clear()
    steps = [ctl.poll_stats(NOW + k) for k in range(9)]
    for s in steps:
        net.apply(s.sends)
    flows = [r for r in sw.requests if r.mp_type == ofwire.OFPMP_FLOW]
    ports = [r for r in sw.requests if r.mp_type == ofwire.OFPMP_PORT_STATS]
    # cookie and mask (body bytes 16-31): the NAT cookie space, one slice of the low bits
    cookies = [(int.from_bytes(r.body[16:24], "big"), int.from_bytes(r.body[24:32], "big"))
               for r in flows]
    assert [c & 7 for c, _ in cookies] == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    assert all(c >> 48 == COOKIE_BASE >> 48 and m == (0xFFFF << 48) | 7 for c, m in cookies)
    assert len(ports) == 2 and steps[0].next_in_s == pytest.approx(3 / 8)


def test_port_statistics_give_each_server_its_network_utilisation():
    cfg, ctl, net = make()
    inst = cfg.instances_of("ui")[0]
    ctl.port_stats(1, [PortStat(inst.switch_port, 0, 0), PortStat(99, 0, 0)], NOW)
    mbit = cfg.server(inst.server).network_mbit
    ctl.port_stats(1, [PortStat(inst.switch_port, int(mbit * 1e6 / 8), 0),
                       PortStat(99, 10**9, 0)], NOW + 2)     # half the capacity over 2 s
    srv = ctl.status()["servers"][inst.server]
    assert srv["net_switch"] == pytest.approx(50, abs=1)
    ports = next(ctl.profiler_report(NOW + 3))["ports"]
    assert {(p["port"], p["instance"]) for p in ports} == {(inst.switch_port, inst.name),
                                                           (99, None)}


# ---------------------------------------------------------------- profiler
def test_profiler_answers_set_weights_and_classes_and_bad_ones_change_nothing():
    ms = copy.deepcopy(DEFAULT_MICROSERVICES)
    next(m for m in ms if m["name"] == "ui")["flow_class"] = "auto"
    cfg, ctl, net = make(policy="malb", microservices=ms)
    new_flow(cfg, ctl, net, 40020)
    before = ctl.status()
    bodies = list(ctl.profiler_report(NOW + 3))
    assert len(bodies[0]["flows"]) == 1 and bodies[0]["pairs"]["edges"]
    # not JSON objects: a failed exchange, nothing changes, the report goes out again
    r = ctl.profiler_answer([1, 2], {"servers": {}}, NOW + 3)
    assert r.warnings and ctl.status()["profiler"]["reachable"] is False
    assert ctl.status()["microservices"] == before["microservices"]
    assert not ctl.profiler_failed("connection refused", NOW + 3).warnings   # said once
    bodies = list(ctl.profiler_report(NOW + 6))
    assert len(bodies[0]["flows"]) == 1
    ctl.profiler_pairs_sent(NOW + 6)
    good = {"microservices": {"ui": {"weights": {"alpha": 1, "beta": 0, "gamma": 3},
                                     "flow_class": "short"}}}
    r = ctl.profiler_answer(good, {"servers": {}}, NOW + 6)
    assert r.infos == ["profiler reachable again"] and not r.warnings
    st = ctl.status()["microservices"]["ui"]
    assert st["weights"] == {"alpha": 0.25, "beta": 0.0, "gamma": 0.75}
    assert (st["weights_source"], st["flow_class"], st["flow_class_source"]) == \
        ("profiler", "short", "profiler")
    ui = ctl.cfg.microservice("ui")       # where clients reach it: the live view shows it
    assert (st["vip"], st["port"], st["protocol"]) == (ui.vip, ui.port, ui.protocol)
    applied = ctl.status()["microservices"]
    bad = {"microservices": {"ui": {"weights": {"alpha": -1, "beta": 0, "gamma": 3},
                                    "flow_class": "long"}}}
    r = ctl.profiler_answer(bad, {"servers": {}}, NOW + 9)
    assert r.warnings and ctl.status()["microservices"] == applied


def test_the_next_exchange_follows_the_profilers_steps():
    cfg, ctl, net = make()
    period = cfg.controller.monitoring_period_s
    ready = PROFILER_READY_S
    # an answer from the profiler's step 1.0 s ago: its next one is 2 s away
    r = ctl.profiler_answer({"microservices": {}}, {"time": NOW - 1.0, "servers": {}}, NOW)
    assert r.next_in_s == pytest.approx(period - 1.0 + ready)
    # its step was just now: the next exchange a period from it, not within a moment
    assert next_exchange_in(NOW - ready + 0.1, NOW, period) == pytest.approx(period + 0.1)
    # steps long ago and in the future (another host's clock) fall on the same grid
    assert next_exchange_in(NOW - 10 * period - 1.0, NOW, period) == \
        pytest.approx(period - 1.0 + ready)
    assert next_exchange_in(NOW + 7 * period - 1.0, NOW, period) == \
        pytest.approx(period - 1.0 + ready)
    for bad in (None, "soon", True, float("nan"), float("inf")):
        assert next_exchange_in(bad, NOW, period) is None
    # a failed exchange says nothing of the profiler's steps: the loop waits a period
    assert ctl.profiler_answer([1], {"servers": {}}, NOW).next_in_s is None


# ---------------------------------------------------------------- health
def test_an_instance_that_stops_answering_probes_gets_no_new_flows_until_it_answers():
    cfg, ctl, net = make(health="tcp")
    down = cfg.instances_of("ui")[0]
    t = NOW
    for _ in range(2):               # two rounds: every instance but one answers
        r = ctl.probe_health(t)
        net.apply(r.sends)
        probes = net.delivered[-len(cfg.instances):]
        assert {(d, p) for d, p, _ in probes} == {(i.dpid, i.switch_port) for i in cfg.instances}
        for _dpid, _port, syn in probes:
            inst = instance_at(cfg, syn["ipv4_dst"])
            assert syn["tcp_flags"] == ofwire.TCP_SYN and syn["ipv4_src"] == VIP
            if inst != down:
                _, (a,) = from_instance(cfg, ctl, net, inst, answer_of(syn), t + 0.1)
                assert a.kinds == ["health"]
                assert net.delivered[-1][2]["tcp_flags"] & ofwire.TCP_RST   # half-open closed
        t += 2
        judge(ctl, net, t - 0.5, t - 0.4)
    assert ctl.instances_view()[down.name]["healthy"] is False
    for sport in range(42000, 42040):
        assert new_flow(cfg, ctl, net, sport)[0] != down
    # it answers again: back in the pool
    net.apply(ctl.probe_health(t).sends)
    syn = next(p for d, port, p in reversed(net.delivered) if p.get("ipv4_dst") == down.ip)
    from_instance(cfg, ctl, net, down, answer_of(syn), t + 0.1)
    assert ctl.instances_view()[down.name]["healthy"] is True
    r = ctl.health_result(down.name, False, "refused", t + 1)
    r = ctl.health_result(down.name, False, "refused", t + 1)
    assert ("set", "malb_instance_healthy", (down.name,), 0) in r.metrics


def judge(ctl, net, sent: float, back: float) -> list:
    """The health loop's marker: echo requests sent at `sent`, their replies handled at
    `back` (after whatever the test handled before); the replies' results."""
    net.apply(ctl.health_marker(sent).sends)
    return [ctl.echo_reply(dpid, xid, back) for dpid, sw in net.switches.items()
            for xid in sw.answer_echoes()]


def test_answers_queued_behind_a_flood_are_not_missing_answers():
    """The controller is 3 s behind its switch (a flood of packet-ins): the probe answers
    arrive long after the timeout by its clock, but before the marker sent after the
    timeout comes back, so nobody is taken out. A probe with no answer at all is a
    failure once the marker returns; unhealthy_after of them take the instance out."""
    cfg, ctl, net = make(health="tcp")
    silent = cfg.instances[-1]
    t, lag = NOW, 3.0
    for _ in range(3):
        net.apply(ctl.probe_health(t).sends)
        probes = net.delivered[-len(cfg.instances):]
        # by the controller's clock the timeout is long past when the answers are handled
        for _dpid, _port, syn in probes:
            inst = instance_at(cfg, syn["ipv4_dst"])
            if inst != silent:
                from_instance(cfg, ctl, net, inst, answer_of(syn), t + 0.1 + lag)
        replies = judge(ctl, net, t + 2, t + 2 + lag)   # interval 2 s, timeout 1 s
        assert ctl.status()["channel_lag_s"] == {f"{d:016x}": lag for d in net.switches}
        assert ("set", "malb_switch_channel_lag_seconds", (f"{1:016x}",), lag) in \
            replies[0].metrics
        t += 2 + lag
    view = ctl.instances_view()
    assert [n for n, v in view.items() if not v["healthy"]] == [silent.name]
    assert ctl.health.status()[silent.name]["last_result"].startswith("no answer within")


def test_a_probe_still_out_is_not_sent_again_and_a_late_marker_judges_it():
    cfg, ctl, net = make(health="arp")
    inst = cfg.instances_of("ui")[0]
    net.apply(ctl.probe_health(NOW).sends)
    first = len(net.delivered)
    # the next round comes before any answer or marker: nothing is sent twice, and the
    # earlier probe is not counted as failed for it
    net.apply(ctl.probe_health(NOW + 1).sends)
    assert len(net.delivered) == first
    assert ctl.health.status()[inst.name]["consecutive_failures"] == 0
    # a marker sent within the timeout fails nothing; one sent after it fails them all
    assert not any(r.warnings for r in judge(ctl, net, NOW + 0.2, NOW + 0.3))
    assert ctl.health.status()[inst.name]["consecutive_failures"] == 0
    judge(ctl, net, NOW + 1.5, NOW + 1.6)
    assert ctl.health.status()[inst.name]["consecutive_failures"] == 1
    # one marker out per switch: a round while it is out sends none
    net.apply(ctl.health_marker(NOW + 3).sends)
    net.apply(ctl.health_marker(NOW + 5).sends)
    assert len(net.switches[1].echoes) == 1 and len(ctl.health_checks.markers) == 1
    # an echo reply that is not a marker (Ryu's keep-alive) changes nothing
    assert ctl.echo_reply(1, 999_999, NOW + 2) == CoreResult()
    assert len(ctl.health_checks.markers) == 1


def test_a_switch_gone_leaves_no_probe_or_marker_to_judge():
    cfg, ctl, net = make(health="tcp")
    net.apply(ctl.probe_health(NOW).sends)
    net.apply(ctl.health_marker(NOW + 2).sends)
    ctl.switch_gone(1, NOW + 2.1)
    assert not ctl.health.outstanding and not ctl.health_checks.markers
    assert "0000000000000001" not in ctl.status()["channel_lag_s"]
    assert all(v["healthy"] for v in ctl.instances_view().values())


def test_a_port_going_down_takes_its_instance_out_at_once():
    cfg, ctl, net = make(health="arp")
    inst = cfg.instances_of("ui")[1]
    r = ctl.port_status(inst.dpid, inst.switch_port, 2, ofwire.OFPPS_LINK_DOWN, NOW)
    assert r.warnings and ctl.instances_view()[inst.name]["healthy"] is False
    assert not ctl.port_status(1, 99, 2, ofwire.OFPPS_LINK_DOWN, NOW).warnings
    # ARP probes bring it back
    net.apply(ctl.probe_health(NOW + 1).sends)
    req = next(p for d, port, p in net.delivered if p.get("arp_tpa") == inst.ip)
    reply = fields_of(ofwire.arp_frame(ofwire.ARP_REPLY, inst.mac, inst.ip, req["eth_src"],
                                       req["arp_spa"]))
    _, (r,) = from_instance(cfg, ctl, net, inst, reply, NOW + 1.1)
    assert r.kinds == ["health"] and ctl.instances_view()[inst.name]["healthy"] is True


# ---------------------------------------------------------------- pools and policy
def test_draining_removing_and_adding_instances():
    cfg, ctl, net = make()
    a, b = cfg.instances_of("ui")[:2]
    ctl.set_draining(a.name, True, NOW)
    assert all(new_flow(cfg, ctl, net, s)[0] != a for s in range(43000, 43012))
    ctl.remove_instance(b.name, NOW)
    assert b.name not in ctl.policy_core.healthy
    assert all(new_flow(cfg, ctl, net, s)[0] not in (a, b) for s in range(43100, 43112))
    r = ctl.add_instance(b.name, NOW)
    assert ("set", "malb_instance_healthy", (b.name,), 0) in r.metrics
    with pytest.raises(KeyError):
        ctl.add_instance("nope", NOW)
    ctl.set_policy("ln", NOW)
    assert new_flow(cfg, ctl, net, 43200)[0] and ctl.decisions[-1]["policy"] == "ln"


# ---------------------------------------------------------------- data-plane mode
def _dp_make(select=True, switches=1, proxy=False, policy="maglev", servers=None,
             transitions="switch"):
    cfg, ctl, net = make(policy=policy, switches=switches, health="tcp", proxy=proxy,
                         servers=servers,
                         dataplane={"short_flows": "switch", "table_size": 257,
                                    "transitions": transitions})
    for s in cfg.testbed.switches:
        assert ofwire.OFPMP_GROUP_FEATURES in [r.mp_type for r in net.switches[s.dpid].requests]
        net.apply(ctl.group_features(s.dpid, (1 << ofwire.OFPGT_SELECT) if select else 1,
                                     8 if select else 0, NOW).sends)
    return cfg, ctl, net


def _reached(cfg, ctl, net, sports):
    """Where the SYNs of new short flows end up, without the controller."""
    hit = {}
    for sport in sports:
        (leave,), results = from_client(cfg, ctl, net, client_pkt(cfg, sport))
        assert not results
        inst = instance_at(cfg, leave[2]["ipv4_dst"])
        assert leave[:2] == (inst.dpid, inst.switch_port) and leave[2]["eth_dst"] == inst.mac
        hit[inst.name] = hit.get(inst.name, 0) + 1
    return hit


@pytest.mark.parametrize("switches", [1, 2])
def test_short_flows_are_balanced_by_select_groups_and_a_down_instance_loses_its_buckets(
        switches):
    cfg, ctl, net = _dp_make(switches=switches)
    c = cfg.testbed.clients[0]
    hit = _reached(cfg, ctl, net, range(44000, 44200))
    assert set(hit) == {i.name for i in cfg.instances_of("ui")}
    # the policy core knows it does not see these flows
    assert ctl.policy_core.switch_balanced == {"ui"}
    # answers come back as the VIP through the stateless reverse rule and the host table
    inst = cfg.instances_of("ui")[0]
    ans = answer_of(client_pkt(cfg, 44000) | {"ipv4_dst": inst.ip, "eth_dst": inst.mac})
    (back,), results = from_instance(cfg, ctl, net, inst, ans)
    assert not results and back[:2] == (c.dpid, c.switch_port) and back[2]["ipv4_src"] == VIP
    # long-flow services stay under per-flow control
    new_flow(cfg, ctl, net, 44500, port=8003)
    # the instance's port goes down: the buckets move, no new flow reaches it
    r = ctl.port_status(inst.dpid, inst.switch_port, 2, ofwire.OFPPS_LINK_DOWN, NOW + 1)
    net.apply(r.sends)
    assert any(op == "inc" and name == "malb_dataplane_slots_moved_total"
               for op, name, _, _ in r.metrics)
    hit = _reached(cfg, ctl, net, range(45000, 45200))
    assert inst.name not in hit and len(hit) == 3
    assert ctl.status()["dataplane"]["microservices"]["ui"]["switches"] == \
        [f"{s.dpid:016x}" for s in cfg.testbed.switches]


@pytest.mark.parametrize("switches", [1, 2])
def test_an_instance_calling_its_own_vip_in_data_plane_mode_is_never_given_itself(switches):
    cfg, ctl, net = _dp_make(switches=switches)
    for me in cfg.instances_of("ui"):
        for sport in range(46000, 46008):
            syn = client_pkt(cfg, sport) | {"ipv4_src": me.ip, "eth_src": me.mac}
            before = len(net.delivered)
            leaves, results = from_instance(cfg, ctl, net, me, syn)
            # not through the group: a decision, which leaves the caller out
            assert not leaves and [r.kinds for r in results] == [["new_flow"]]
            (dpid, port, pkt), = net.delivered[before:]
            got = instance_at(cfg, pkt["ipv4_dst"])
            assert got.name != me.name and (dpid, port) == (got.dpid, got.switch_port)
    # a client's calls still go by the group
    assert len(_reached(cfg, ctl, net, range(47000, 47050))) == 4


@pytest.mark.parametrize("switches, dataplane", [(1, False), (2, False), (1, True), (2, True)])
def test_the_proxy_and_the_instances_reach_each_other_by_plain_l2(switches, dataplane):
    """The outside balancer's host (testbed.proxy) talks to the instances' own addresses:
    the ARP that resolves them is flooded as any broadcast, and segments both ways go by
    the host rules, unchanged (no NAT, no orphan, no reverse rule), across trunks too."""
    cfg, ctl, net = (_dp_make if dataplane else make)(switches=switches, proxy=True)
    p = cfg.testbed.proxy
    anyone = "00:00:00:00:00:00"
    for inst in cfg.instances:
        port = cfg.microservice(inst.microservice).port
        who_has = fields_of(ofwire.arp_frame(ofwire.ARP_REQUEST, p.mac, p.ip, anyone, inst.ip,
                                             eth_dst="ff:ff:ff:ff:ff:ff"))
        _, (r,) = inject(ctl, net, p.dpid, p.switch_port, who_has)
        assert r.kinds == ["l2_broadcast"] and net.delivered[-1][1] == ofwire.OFPP_FLOOD
        reply = fields_of(ofwire.arp_frame(ofwire.ARP_REPLY, inst.mac, inst.ip, p.mac, p.ip,
                                           eth_dst=p.mac))
        (leave,), results = from_instance(cfg, ctl, net, inst, reply)
        assert not results and leave[:2] == (p.dpid, p.switch_port)
        syn = fields_of(ofwire.tcp_frame(inst.mac, p.mac, p.ip, inst.ip, 40000, port, 1000,
                                         flags=ofwire.TCP_SYN))
        (leave,), results = inject(ctl, net, p.dpid, p.switch_port, syn)
        assert not results and leave[:2] == (inst.dpid, inst.switch_port)
        assert leave[2]["ipv4_dst"] == inst.ip and leave[2]["eth_dst"] == inst.mac
        (back,), results = from_instance(cfg, ctl, net, inst, answer_of(syn))
        assert not results and back[:2] == (p.dpid, p.switch_port)
        assert (back[2]["ipv4_src"], back[2]["tcp_src"]) == (inst.ip, port)
    # a client's un-NATed answer still goes to the controller, as before
    inst = cfg.instances_of("backend")[0]
    orphan = answer_of(client_pkt(cfg, 40000, port=8003) | {"ipv4_dst": inst.ip,
                                                            "eth_dst": inst.mac})
    assert net.send(inst.dpid, inst.switch_port, orphan)[0][1] == CONTROLLER


def test_without_select_groups_short_flows_stay_under_per_flow_control():
    cfg, ctl, net = _dp_make(select=False)
    assert not net.switches[1].groups
    new_flow(cfg, ctl, net, 46000)
    assert ctl.status()["dataplane"]["switches_without_select_groups"] == ["0000000000000001"]


def test_a_policy_without_data_plane_mode_takes_the_groups_away():
    cfg, ctl, net = _dp_make()
    assert net.switches[1].groups
    net.apply(ctl.set_policy("srr", NOW + 1).sends)
    assert not net.switches[1].groups
    assert not [r for r in net.switches[1].rules if r.cookie >> 48 == 0x4D44]
    new_flow(cfg, ctl, net, 46100)                 # the controller decides again


def test_weights_set_over_rest_move_the_groups_at_once():
    """On unequal servers malb's select groups share new flows by capacity in the weights
    of the microservice: new weights reach the switches with the call, not a period later."""
    cfg, ctl, net = _dp_make(policy="malb", servers=[{"cpu": c} for c in (0.6, 0.3, 0.3, 0.2)])
    net.apply(ctl.set_weights({"ui": (0.0, 1.0, 0.0)}, NOW + 1).sends)   # memory: all equal
    # moved slots pass through the controller for a grace period (flows under way keep
    # their instance); then the group alone decides
    net.apply(ctl.sync_dataplane(NOW + 100).sends)
    equal = _reached(cfg, ctl, net, range(47000, 47400))
    r = ctl.set_weights({"ui": (1.0, 0.0, 0.0)}, NOW + 101)               # CPU: 0.6 vs 0.2
    assert any(isinstance(m, GroupMod) for _, buf in r.sends for m in decode(buf))  # now
    net.apply(r.sends)
    net.apply(ctl.sync_dataplane(NOW + 200).sends)
    by_cpu = _reached(cfg, ctl, net, range(47000, 47400))
    assert by_cpu["srv1-ui"] > 2 * by_cpu["srv4-ui"]
    assert abs(equal["srv1-ui"] - equal["srv4-ui"]) < 0.5 * equal["srv4-ui"]
    # all or nothing: one bad entry, and nothing changes
    with pytest.raises(KeyError):
        ctl.set_weights({"ui": (0.0, 1.0, 0.0), "nosuch": None}, NOW + 3)
    assert ctl.policy_core.profiles.weights("ui")[0] == (1.0, 0.0, 0.0)


def test_malb_in_the_switch_the_groups_follow_the_servers_measured_loads():
    """Data-plane mode runs MALB's rule at switch speed: each profiler answer moves the ui's
    select-group shares away from the busier servers (network-bound objects here)."""
    cfg, ctl, net = _dp_make(policy="malb")
    net.apply(ctl.set_weights({"ui": (0.0, 0.0, 1.0)}, NOW).sends)
    before = ctl.status()["dataplane"]["microservices"]["ui"]["slots"]
    assert max(before.values()) - min(before.values()) <= 1          # equal servers: equal
    servers = {"time": NOW - 0.3, "servers": {
        s.name: {"cpu": 20.0, "mem": 10.0, "net": 80.0 if s.name == "srv1" else 20.0,
                 "sample_time": NOW - 1, "stale": False} for s in cfg.servers}}
    net.apply(ctl.profiler_answer({"microservices": {}}, servers, NOW).sends)
    net.apply(ctl.sync_dataplane(NOW + 100).sends)         # the shell syncs after an answer
    net.apply(ctl.sync_dataplane(NOW + 200).sends)         # the moved slots' grace is over
    after = ctl.status()["dataplane"]["microservices"]["ui"]["slots"]
    # the first sample: srv1 45 points above the mean, the others 15 below (malb's
    # BALANCE_GAIN), rounded to the slot table's 5 % steps
    assert after["srv1-ui"] == pytest.approx(after["srv2-ui"] * math.exp(-0.6), abs=2)
    hit = _reached(cfg, ctl, net, range(48000, 48400))
    assert hit["srv1-ui"] < 0.75 * min(hit[f"srv{k}-ui"] for k in (2, 3, 4))


def test_flow_records_carry_both_directions_cookies():
    # the cookies the switch reports are the flow's id with the direction in bit 44
    cfg, ctl, net = make()
    new_flow(cfg, ctl, net, 40030)
    cookies = {r.cookie for r in net.switches[1].nat_rules()}
    fid = next(iter(ctl.flows.flows))
    assert cookies == {fid | DIR_FORWARD << 44, fid | DIR_REVERSE << 44}


@pytest.mark.parametrize("transitions", ["switch", "controller"])
def test_a_drained_instances_slots_keep_its_flows_for_a_grace_period(transitions):
    cfg, ctl, net = _dp_make(transitions=transitions)
    a = cfg.instances_of("ui")[0]
    net.apply(ctl.set_draining(a.name, True, NOW).sends)
    # segments of connections under way in a moving slot stay with their old owner, through
    # the controller...
    kept = 0
    for sport in range(47000, 47100):
        leaves, results = from_client(cfg, ctl, net, client_pkt(cfg, sport, flags=ofwire.TCP_ACK))
        if results:
            assert results[0].kinds == ["dp_transition"] and not leaves
            assert net.delivered[-1][2]["ipv4_dst"] == a.ip
            kept += 1
        else:
            assert instance_at(cfg, leaves[0][2]["ipv4_dst"]) != a
    assert 10 < kept < 45           # about a quarter of the slots were a's
    # ...and new connections there never reach the drained instance: in the switch with no
    # packet-in, their next segments after them; else each on a decision of the controller
    moving = 0
    for sport in range(47100, 47200):
        leaves, results = from_client(cfg, ctl, net, client_pkt(cfg, sport))
        if transitions == "switch":
            assert not results and instance_at(cfg, leaves[0][2]["ipv4_dst"]) != a
            (again,), results = from_client(cfg, ctl, net,
                                            client_pkt(cfg, sport, flags=ofwire.TCP_ACK))
            assert not results and again[2]["ipv4_dst"] == leaves[0][2]["ipv4_dst"]
            moving += "reg0" in again[2]           # went through the transition table
        else:
            ends = [net.delivered[-1][2]] if results else [leaves[0][2]]
            assert instance_at(cfg, ends[0]["ipv4_dst"]) != a
    assert transitions == "controller" or 10 < moving < 45
    # after the grace period no bucket goes to the controller any more
    net.apply(ctl.sync_dataplane(NOW + cfg.controller.idle_timeout_s + 1).sends)
    assert _reached(cfg, ctl, net, range(48000, 48100)).keys() == \
        {i.name for i in cfg.instances_of("ui")} - {a.name}


def _committed(cfg, ctl, net, sports) -> dict[int, str]:
    """New connections opened in the switch, those that the connection tracker committed
    (in a moving slot): sport -> the instance's address."""
    out = {}
    for sport in sports:
        (leave,), results = from_client(cfg, ctl, net, client_pkt(cfg, sport))
        assert not results
        if "ct_mark" in leave[2]:
            out[sport] = leave[2]["ipv4_dst"]
    return out


def _now_at(cfg, ctl, net, conns: dict[int, str], now=NOW) -> tuple[dict[int, str], int]:
    """Where each connection's next segment ends up, in the switch or sent on by the
    controller; and how many went through the controller."""
    out, punted = {}, 0
    for sport in conns:
        leaves, results = from_client(cfg, ctl, net,
                                      client_pkt(cfg, sport, flags=ofwire.TCP_ACK), now)
        if results:
            assert results[0].kinds == ["dp_transition"] and not leaves
            punted += 1
            out[sport] = net.delivered[-1][2]["ipv4_dst"]
        else:
            out[sport] = leaves[0][2]["ipv4_dst"]
    return out, punted


def test_connections_the_switch_committed_keep_their_instance_when_their_slot_moves_on():
    cfg, ctl, net = _dp_make()
    a, b = cfg.instances_of("ui")[:2]
    net.apply(ctl.set_draining(a.name, True, NOW).sends)
    conns = _committed(cfg, ctl, net, range(47100, 47400))
    on_b = {p: ip for p, ip in conns.items() if ip == b.ip}
    assert 40 < len(conns) < 120 and on_b and a.ip not in conns.values()
    assert _now_at(cfg, ctl, net, conns) == (conns, 0)          # all in the switch
    # b drains too: the slots it had taken from a move on, and the connections the switch
    # committed to b reach the controller once (their mark is not the slot's new owner's),
    # which keeps each on b with a rule pair of its own
    net.apply(ctl.set_draining(b.name, True, NOW + 1).sends)
    assert _now_at(cfg, ctl, net, on_b, NOW + 1) == (on_b, len(on_b))
    assert _now_at(cfg, ctl, net, on_b, NOW + 1) == (on_b, 0)
    # both come back: a's slots are a's again, in transition, and the connections committed
    # to the others go the same way; long after, every connection is still where it was
    net.apply(ctl.set_draining(a.name, False, NOW + 2).sends)
    net.apply(ctl.set_draining(b.name, False, NOW + 2).sends)
    assert _now_at(cfg, ctl, net, conns, NOW + 2)[0] == conns
    net.apply(ctl.sync_dataplane(NOW + cfg.controller.idle_timeout_s + 3).sends)
    assert not ctl.status()["dataplane"]["microservices"]["ui"]["slots_in_transition"]
    assert _now_at(cfg, ctl, net, conns, NOW + 3)[0] == conns
    # the switch's transition table: three rules per instance that took slots, and the
    # catch-all
    table = [r for r in net.switches[1].rules if r.table == dataplane.TRANSITION_TABLE]
    assert sum(r.priority == 0 for r in table) == 1 and len(table) % 3 == 1


@pytest.mark.parametrize("policy", policies.names())
def test_every_registered_policy_balances_through_the_fake_switch(policy):
    """Every policy of the registry, as the controller runs it: new TCP flows to two VIPs
    reach instances over the NAT rules it installs, each microservice's flows spread over
    more than one instance, and the FINs of the flows it follows end them for the policy
    (open connections back to none)."""
    cfg, ctl, net = make(policy)
    probes = {"server": None, "time": NOW, "instances": {}}
    for srv in cfg.servers:       # a policy that reads probes gets every instance's
        body = {**probes, "server": srv.name, "instances": {
            i.name: {"in_flight": 0, "p50_ms": 5.0, "p99_ms": 9.0, "error": None,
                     "age_s": 0.0} for i in cfg.instances_on(srv.name)}}
        assert not ctl.probe_answer(srv.name, body, NOW).warnings
    opened = []
    for k in range(8):
        for port in (8002, 8003):
            inst, pkt = new_flow(cfg, ctl, net, 41000 + 2 * k + (port == 8003), port=port,
                                 now=NOW + 0.01 * k)
            opened.append((inst, pkt, port))
    for port in (8002, 8003):
        assert len({i.name for i, _, p in opened if p == port}) > 1, (policy, port)
    if ctl.policy_core.strategy.uses_probes:            # decided on the probes it was given
        assert not any("no fresh probe" in d["reason"] for d in ctl.decisions), policy
    for inst, pkt, _ in opened:
        from_instance(cfg, ctl, net, inst, answer_of(pkt, ofwire.TCP_FIN | ofwire.TCP_ACK),
                      NOW + 1)
    assert ctl.policy_core.watches("backend"), policy   # long flows at least are followed
    assert all(ctl.policy_core.connections.open_count(i.name) == 0 for i, _, _ in opened), policy


def _count_reply(ctl, net, now):
    """The shell's connection poll and every switch's answer to it: the counter rules that
    the poll's cookie names, with the packets each matched. The results of the answers."""
    r = ctl.poll_connections(now)
    net.apply(r.sends)
    results = []
    for dpid, sw in net.switches.items():
        req = [q for q in sw.requests if q.mp_type == ofwire.OFPMP_FLOW][-1]
        cookie, mask = struct.unpack_from("!QQ", req.body, 16)
        entries = [FlowStat(rule.cookie, 1.0, 0, n, rule.match)
                   for rule, n in sw.rules_of(cookie, mask)]
        results.append(ctl.flow_stats(dpid, entries, now, req.xid))
        net.apply(results[-1].sends)
    return results


def _answers(cfg, ctl, net, inst, sports, flags):
    """The instance's answers, with these TCP flags, to client connections from sports."""
    for sport in sports:
        pkt = answer_of(client_pkt(cfg, sport) | {"ipv4_dst": inst.ip, "eth_dst": inst.mac},
                        flags)
        (back,), results = from_instance(cfg, ctl, net, inst, pkt)
        assert not results and back[2]["ipv4_src"] == VIP     # translated as ever


@pytest.mark.parametrize("switches", [1, 2])
def test_malb_in_the_switch_sends_fewer_new_connections_to_an_instance_holding_more_open(
        switches):
    """The switches count each instance's open connections (its SYN-ACKs less its FINs and
    resets) with no packet-in; each complete count moves malb's shares away from an
    instance holding more than its part, and back once they end."""
    cfg, ctl, net = _dp_make(policy="malb", switches=switches)
    busy = cfg.instances_of("ui")[0]
    _answers(cfg, ctl, net, busy, range(50000, 50006), ofwire.TCP_SYN | ofwire.TCP_ACK)
    _answers(cfg, ctl, net, busy, range(50000, 50006), ofwire.TCP_ACK)     # not counted
    _answers(cfg, ctl, net, busy, [50000], ofwire.TCP_FIN | ofwire.TCP_ACK)
    _answers(cfg, ctl, net, busy, [50001], ofwire.TCP_RST)
    for r in _count_reply(ctl, net, NOW + 1):
        assert not r.warnings
    assert ctl.status()["dataplane"]["open_connections"]["open"][busy.name] == 4
    net.apply(ctl.sync_dataplane(NOW + 100).sends)        # the moved slots' grace is over
    slots = ctl.status()["dataplane"]["microservices"]["ui"]["slots"]
    others = [n for n in slots if n != busy.name]
    # 4 open against a part of 1: about a fifth of an idle instance's share
    assert slots[busy.name] < 0.3 * min(slots[n] for n in others)
    hit = _reached(cfg, ctl, net, range(51000, 51400))
    assert hit.get(busy.name, 0) < 0.4 * min(hit[n] for n in others)
    # they end: the shares are equal again at the next count
    _answers(cfg, ctl, net, busy, range(50002, 50006), ofwire.TCP_FIN | ofwire.TCP_ACK)
    _count_reply(ctl, net, NOW + 101)
    net.apply(ctl.sync_dataplane(NOW + 200).sends)
    slots = ctl.status()["dataplane"]["microservices"]["ui"]["slots"]
    assert max(slots.values()) - min(slots.values()) <= 1
    # a count older than a few polls is not used: a switch that stopped answering
    assert ctl.policy_core.switch_connections.fresh_counts([busy.name], NOW + 200) is None


def test_connections_are_not_counted_when_the_poll_is_off_or_the_policy_ignores_them():
    cfg, ctl, net = make(policy="malb", health="tcp", dataplane={
        "short_flows": "switch", "connection_poll_s": 0})
    for s in cfg.testbed.switches:
        net.apply(ctl.group_features(s.dpid, 1 << ofwire.OFPGT_SELECT, 8, NOW).sends)
    assert net.switches[1].groups and not ctl.poll_connections(NOW).sends
    assert not net.switches[1].rules_of(DP_OPENED_COOKIE, 0xFFFFFFFE << 32)
    # malb-paper has the counters installed but keeps its shares
    cfg, ctl, net = _dp_make(policy="malb-paper")
    busy = cfg.instances_of("ui")[0]
    _answers(cfg, ctl, net, busy, range(50000, 50006), ofwire.TCP_SYN | ofwire.TCP_ACK)
    _count_reply(ctl, net, NOW + 1)
    net.apply(ctl.sync_dataplane(NOW + 100).sends)
    slots = ctl.status()["dataplane"]["microservices"]["ui"]["slots"]
    assert max(slots.values()) - min(slots.values()) <= 1
