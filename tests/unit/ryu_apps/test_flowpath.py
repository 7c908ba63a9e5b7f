"""The new-flow path (ryu_apps/flowpath.py) against a fake flow table: the OpenFlow messages
it emits are decoded (Ryu's parser, as a switch would) and applied to a table that answers
"where does this packet go, rewritten how" (in the spirit of faucet's FakeOFTable). The
whole controller core runs against a fuller fake network in test_core.py."""
from __future__ import annotations

import copy
import itertools

import pytest

from common.config import DEFAULT_MICROSERVICES, parse_config_file_data
from ryu_apps import ofwire
from ryu_apps.flowpath import FlowPath
from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FlowTable
from ryu_apps.framework import ofproto_v1_3_parser as parser
from ryu_apps.policies import Backend
from ryu_apps.policy_core import PolicyCore, controller_settings
from tests.lib.fakeswitch import PacketOut, decode

NOW = 1_700_000_000.0
VIP = "10.0.0.100"


def _fields(frame: bytes) -> dict:
    f = ofwire.parse_frame(frame)
    l4 = "tcp" if f.ip_proto == 6 else "udp"
    return {"eth_src": f.eth_src, "eth_dst": f.eth_dst, "eth_type": f.eth_type,
            "ip_proto": f.ip_proto, "ipv4_src": f.ip_src, "ipv4_dst": f.ip_dst,
            f"{l4}_src": f.src_port, f"{l4}_dst": f.dst_port, "tcp_flags": f.tcp_flags}


class FakeSwitch:
    """One switch's table 0: flow mods added by priority; packet-outs applied."""

    def __init__(self, dpid: int):
        self.dpid = dpid
        self.rules: list = []          # (priority, match dict, actions, cookie)
        self.delivered: list = []      # (out port, packet fields) of packet-outs

    def apply(self, buf: bytes) -> list:
        msgs = decode(buf)
        for m in msgs:
            if isinstance(m, parser.OFPFlowMod):
                match = dict(m.match.items())
                actions = [a for i in m.instructions for a in i.actions]
                self.rules = [r for r in self.rules if (r[0], r[1]) != (m.priority, match)]
                self.rules.append((m.priority, match, actions, m.cookie))
            elif isinstance(m, PacketOut):
                self.delivered.append(self.run(m.actions, _fields(m.data)))
        return msgs

    @staticmethod
    def run(actions, pkt: dict) -> tuple[int, dict]:
        pkt, port = dict(pkt), None
        for a in actions:
            if isinstance(a, parser.OFPActionSetField):
                pkt[a.key] = a.value
            elif isinstance(a, parser.OFPActionOutput):
                port = a.port
        return port, pkt

    def forward(self, pkt: dict) -> tuple[int, dict] | None:
        """The highest-priority NAT rule that matches, applied; None: a table miss here."""
        best = max((r for r in self.rules if all(pkt.get(k) == v for k, v in r[1].items())),
                   key=lambda r: r[0], default=None)
        return None if best is None else self.run(best[2], pkt)


def make(policy="srr", switches=1, microservices=None, **controller):
    data = {"testbed": {"clients": 1, "switches": switches},
            "microservices": microservices or copy.deepcopy(DEFAULT_MICROSERVICES),
            "controller": {"health": {"method": "none"}, **controller}}
    cfg = parse_config_file_data(data, "test.yaml")
    backends = {i.name: Backend(i.name, i.microservice, i.server, i.ip, i.mac,
                                cfg.microservice(i.microservice).port, i.slot)
                for i in cfg.slots}
    pools = {m.name: [backends[i.name] for i in cfg.instances_of(m.name)]
             for m in cfg.microservices}
    core = PolicyCore(pools, {m.name: m.flow_class for m in cfg.microservices}, policy=policy,
                      servers=[s.name for s in cfg.servers], clock=lambda: NOW,
                      **controller_settings(cfg.controller))
    flows = FlowTable(idle_timeout=cfg.controller.idle_timeout_s, threshold_s=3, refresh_s=9)
    xids = itertools.count(1)
    path = FlowPath(cfg, core, flows, backends, xid=lambda dpid: next(xids))
    switches = {s.dpid: FakeSwitch(s.dpid) for s in cfg.testbed.switches}
    return cfg, path, switches


def client_frame(cfg, sport, port=8002, flags=ofwire.TCP_SYN, proto="tcp", ack=0) -> bytes:
    c = cfg.testbed.clients[0]
    if proto == "udp":
        return ofwire.ethernet(cfg.controller.vip_mac, c.mac, ofwire.ETH_TYPE_IP,
                               ofwire.udp_datagram(c.ip, VIP, sport, port, b"x"))
    return ofwire.tcp_frame(cfg.controller.vip_mac, c.mac, c.ip, VIP, sport, port, 1000,
                            ack=ack, flags=flags)


def packet_in(cfg, path, switches, frame: bytes, now=NOW, dpid=None):
    c = cfg.testbed.clients[0]
    dpid = c.dpid if dpid is None else dpid
    result = path.vip_packet(dpid, c.switch_port, frame, ofwire.parse_frame(frame), now)
    for target, buf in result.sends:
        switches[target].apply(buf)
    return result


def expire(path, rec, now):
    """Both rules of a flow idle out: the switch's flow-removed messages."""
    for direction in (DIR_FORWARD, DIR_REVERSE):
        path.flows.on_removed(rec.flow_id | direction << 44, 12.0, 100, 2, "idle_timeout",
                              now)


def answer_of(pkt: dict) -> dict:
    l4 = "tcp" if pkt["ip_proto"] == 6 else "udp"
    return {"eth_type": 0x0800, "ip_proto": pkt["ip_proto"], "eth_src": pkt["eth_dst"],
            "eth_dst": pkt["eth_src"], "ipv4_src": pkt["ipv4_dst"], "ipv4_dst": pkt["ipv4_src"],
            f"{l4}_src": pkt[f"{l4}_dst"], f"{l4}_dst": pkt[f"{l4}_src"]}


@pytest.mark.parametrize("policy", ["srr", "ln", "malb", "malb-paper", "maglev"])
def test_a_new_flow_under_every_policy_reaches_one_instance_and_comes_back_from_the_vip(policy):
    cfg, path, sw = make(policy)
    s = sw[cfg.testbed.clients[0].dpid]
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40000, port=8003))   # backend: long flows
    assert r.kinds == ["new_flow"] and r.decision.policy == policy
    inst = path.instances[r.decision.instance]
    # the first packet went out rewritten, towards the chosen instance
    port, pkt = s.delivered[-1]
    assert (port, pkt["ipv4_dst"], pkt["eth_dst"], pkt["tcp_dst"]) == \
        (inst.switch_port, inst.ip, inst.mac, 8003)
    # later packets of the flow match the forward rule, answers the reverse rule
    nxt = dict(_fields(client_frame(cfg, 40000, port=8003, flags=ofwire.TCP_ACK)))
    assert s.forward(nxt) == (inst.switch_port, {**nxt, "ipv4_dst": inst.ip,
                                                 "eth_dst": inst.mac})
    port, back = s.forward(answer_of(pkt))
    assert (port, back["ipv4_src"], back["eth_src"], back["tcp_src"]) == \
        (c.switch_port, VIP, cfg.controller.vip_mac, 8003)
    assert path.flows.active_count() == 1


def test_a_packet_that_raced_the_rules_gets_the_same_instance_and_no_new_rules():
    cfg, path, sw = make()
    first = packet_in(cfg, path, sw, client_frame(cfg, 40001))
    rules = len(sw[cfg.testbed.clients[0].dpid].rules)
    again = packet_in(cfg, path, sw, client_frame(cfg, 40001, flags=ofwire.TCP_ACK))
    assert again.kinds == ["repeat"] and again.decision is None
    assert len(sw[cfg.testbed.clients[0].dpid].rules) == rules
    inst = path.instances[first.decision.instance]
    assert sw[cfg.testbed.clients[0].dpid].delivered[-1][1]["ipv4_dst"] == inst.ip


def test_a_flow_whose_rules_expired_resumes_on_its_instance():
    cfg, path, sw = make()
    first = packet_in(cfg, path, sw, client_frame(cfg, 40002))
    rec = next(iter(path.flows.flows.values()))
    expire(path, rec, NOW + 12)
    sw[cfg.testbed.clients[0].dpid].rules.clear()         # the switch dropped them
    r = packet_in(cfg, path, sw, client_frame(cfg, 40002, flags=ofwire.TCP_ACK), now=NOW + 13)
    assert r.kinds == ["resumed"] and r.decision is None
    s = sw[cfg.testbed.clients[0].dpid]
    assert len(s.rules) == 2
    assert s.delivered[-1][1]["ipv4_dst"] == path.instances[first.decision.instance].ip


def test_a_segment_nobody_owns_gets_a_reset_from_the_vip():
    cfg, path, sw = make()
    r = packet_in(cfg, path, sw, client_frame(cfg, 40003, flags=ofwire.TCP_ACK, ack=777))
    assert r.kinds == ["tcp_not_syn"] and path.flows.active_count() == 0
    port, rst = sw[cfg.testbed.clients[0].dpid].delivered[-1]
    assert port == cfg.testbed.clients[0].switch_port
    assert rst["tcp_flags"] & ofwire.TCP_RST and rst["ipv4_src"] == VIP
    assert ofwire.parse_frame(decode(r.sends[0][1])[0].data).tcp_seq == 777


def expired_flow_answered(connected=True, lost=False):
    """A flow from port 40004 whose rules idled out, then its instance's answer (its
    instance first moved where no path leads, if `lost`); the path, the flow, the orphan
    result and the instance."""
    cfg, path, sw = make()
    c = cfg.testbed.clients[0]
    first = packet_in(cfg, path, sw, client_frame(cfg, 40004))
    inst = path.instances[first.decision.instance]
    rec = next(iter(path.flows.flows.values()))
    expire(path, rec, NOW + 12)
    if lost:
        path.locations.configured[inst.name] = (0x99, 1)      # a switch no link leads to
    frame = ofwire.tcp_frame(c.mac, inst.mac, inst.ip, c.ip, 8002, 40004, 5, flags=0x18)
    r = path.orphan(c.dpid, frame, ofwire.parse_frame(frame), NOW + 13, lambda d: connected)
    return cfg, path, sw, rec, r, inst


def test_an_orphan_answer_resumes_its_flow_and_reaches_the_client_as_the_vip():
    cfg, path, sw, rec, r, inst = expired_flow_answered()
    c = cfg.testbed.clients[0]
    assert r.handled and r.kinds == ["resumed"]
    s = sw[c.dpid]
    s.apply(r.sends[0][1])
    port, pkt = s.delivered[-1]
    assert (port, pkt["ipv4_src"], pkt["tcp_src"]) == (c.switch_port, VIP, 8002)
    # traffic to an instance's own address belongs to nobody: plain L2
    other = ofwire.tcp_frame(c.mac, inst.mac, inst.ip, c.ip, 8002, 50000, 5, flags=0x18)
    assert not path.orphan(c.dpid, other, ofwire.parse_frame(other), NOW, lambda d: True).handled


def test_an_orphan_answer_for_a_switch_away_resumes_its_flow_with_nothing_sent():
    # the flow's edge switch is disconnected: no path is checked and nothing is sent; its
    # reconnection restores the flow's rules
    # (and no path to its instance)
    _, _, _, rec, r, _ = expired_flow_answered(connected=False, lost=True)
    assert r.kinds == ["resumed"] and not r.sends and rec.ended is None


def test_udp_flows_and_an_instance_port_other_than_the_vip_port():
    ms = copy.deepcopy(DEFAULT_MICROSERVICES) + [
        {"name": "dns", "abbrev": "dns", "port": 5353, "protocol": "udp", "flow_class": "short"}]
    cfg, path, sw = make(microservices=ms)
    # the instances of ui listen on 9002 behind VIP port 8002
    for name, b in list(path.backends.items()):
        if b.microservice == "ui":
            path.backends[name] = Backend(b.name, b.microservice, b.server, b.ip, b.mac, 9002,
                                          b.order)
    c = cfg.testbed.clients[0]
    r = packet_in(cfg, path, sw, client_frame(cfg, 40005, port=8002))
    port, pkt = sw[c.dpid].delivered[-1]
    assert pkt["tcp_dst"] == 9002
    _, back = sw[c.dpid].forward({**answer_of(pkt), "tcp_src": 9002})
    assert back["tcp_src"] == 8002 and back["ipv4_src"] == VIP
    r = packet_in(cfg, path, sw, client_frame(cfg, 40006, port=5353, proto="udp"))
    assert r.kinds == ["new_flow"] and r.decision.microservice == "dns"
    assert sw[c.dpid].delivered[-1][1]["udp_dst"] == 5353
    again = packet_in(cfg, path, sw, client_frame(cfg, 40006, port=5353, proto="udp"))
    assert again.kinds == ["repeat"]


def test_an_instance_on_another_switch_is_reached_over_the_trunk():
    cfg, path, sw = make(switches=2)
    c = cfg.testbed.clients[0]
    far = next(i for i in cfg.instances_of("ui") if i.dpid != c.dpid)
    for b in path.policy_core.pools["ui"]:
        path.policy_core.set_health(b.name, b.name == far.name)
    packet_in(cfg, path, sw, client_frame(cfg, 40007))
    port, pkt = sw[c.dpid].delivered[-1]
    assert pkt["ipv4_dst"] == far.ip and port == path.next_hop[(c.dpid, far.dpid)]


def test_a_moving_slot_keeps_flows_under_way_on_their_old_owner():
    cfg, path, sw = make(policy="malb")
    old = cfg.instances_of("ui")[2]
    c = cfg.testbed.clients[0]
    frame = ofwire.tcp_frame(old.mac, c.mac, c.ip, VIP, 40008, 8002, 9, flags=ofwire.TCP_ACK)
    r = path.vip_packet(c.dpid, c.switch_port, frame, ofwire.parse_frame(frame), NOW)
    assert r.kinds == ["dp_transition"] and r.decision is None
    sw[c.dpid].apply(r.sends[0][1])
    assert sw[c.dpid].delivered[-1][1]["ipv4_dst"] == old.ip
    syn = ofwire.tcp_frame(old.mac, c.mac, c.ip, VIP, 40009, 8002, 9, flags=ofwire.TCP_SYN)
    r = path.vip_packet(c.dpid, c.switch_port, syn, ofwire.parse_frame(syn), NOW)
    assert r.kinds == ["dp_transition", "new_flow"] and r.decision is not None


def test_the_flow_cap_a_foreign_switch_and_no_healthy_instance_drop_and_say_so():
    cfg, path, sw = make(max_active_flows=2)
    for sport in (41000, 41001):
        assert packet_in(cfg, path, sw, client_frame(cfg, sport)).kinds == ["new_flow"]
    r = packet_in(cfg, path, sw, client_frame(cfg, 41002))
    assert r.kinds == ["flow_cap"] and not r.sends and r.warnings
    assert not packet_in(cfg, path, sw, client_frame(cfg, 41003), now=NOW + 1).warnings
    frame = client_frame(cfg, 41004)
    r = path.vip_packet(99, 1, frame, ofwire.parse_frame(frame), NOW)
    assert r.kinds == ["foreign_switch"] and r.warnings and not r.sends
    assert not path.vip_packet(99, 1, frame, ofwire.parse_frame(frame), NOW).warnings
    cfg, path, sw = make()
    for b in path.policy_core.pools["ui"]:
        path.policy_core.set_health(b.name, False)
    r = packet_in(cfg, path, sw, client_frame(cfg, 41005))
    assert r.no_backend == "ui" and not r.sends and path.flows.active_count() == 0
