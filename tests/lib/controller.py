"""The controller core's harness for unit tests: a ControllerCore built from a small
configuration beside a fake network (fakeswitch.py) whose switches got its base rules, and
packets played through both as a client or an instance would send them.

Holds NOW, VIP, UDP_MS (a UDP microservice), make and new_core (build), client_pkt and
answer_of (packets), inject, from_client and from_instance (play one through switches and
controller), instance_at, new_flow (a SYN to a VIP, carried both ways), expire_flow."""
from __future__ import annotations

import copy
import itertools
import random

from common.config import DEFAULT_MICROSERVICES, parse_config_file_data
from ryu_apps import ofwire
from ryu_apps.core import ControllerCore
from tests.lib.fakeswitch import CONTROLLER, FakeNetwork, fields_of, frame_of

NOW = 1_700_000_000.0
VIP = "10.0.0.100"
UDP_MS = {"name": "dns", "abbrev": "dns", "port": 5353, "protocol": "udp", "flow_class": "short"}


def make(policy="srr", switches=1, microservices=None, health="none", connect=True,
         proxy=False, servers=None, **controller):
    data = {"testbed": {"clients": 1, "switches": switches, "proxy": proxy},
            "microservices": microservices or copy.deepcopy(DEFAULT_MICROSERVICES),
            "controller": {"health": health if isinstance(health, dict)
                           else {"method": health}, **controller},
            **({"servers": servers} if servers else {})}
    cfg = parse_config_file_data(data, "test.yaml")
    ctl = new_core(cfg, policy)
    net = FakeNetwork(cfg)
    if connect:
        for s in cfg.testbed.switches:
            net.apply(ctl.switch_connected(s.dpid, NOW).sends)
    return cfg, ctl, net


def new_core(cfg, policy="srr"):
    xids = itertools.count(1)
    return ControllerCore(cfg, policy, xid=lambda dpid: next(xids), started=NOW,
                          clock=lambda: NOW, rng=random.Random(1))


def client_pkt(cfg, sport, port=8002, flags=ofwire.TCP_SYN, proto="tcp", ack=0) -> dict:
    c = cfg.testbed.clients[0]
    if proto == "udp":
        return fields_of(ofwire.ethernet(cfg.controller.vip_mac, c.mac, ofwire.ETH_TYPE_IP,
                                         ofwire.udp_datagram(c.ip, VIP, sport, port, b"x")))
    return fields_of(ofwire.tcp_frame(cfg.controller.vip_mac, c.mac, c.ip, VIP, sport, port,
                                      1000, ack=ack, flags=flags))


def answer_of(pkt: dict, flags=ofwire.TCP_ACK | ofwire.TCP_SYN) -> dict:
    l4 = "tcp" if pkt["ip_proto"] == 6 else "udp"
    out = {"eth_type": 0x0800, "ip_proto": pkt["ip_proto"], "eth_src": pkt["eth_dst"],
           "eth_dst": pkt["eth_src"], "ipv4_src": pkt["ipv4_dst"], "ipv4_dst": pkt["ipv4_src"],
           f"{l4}_src": pkt[f"{l4}_dst"], f"{l4}_dst": pkt[f"{l4}_src"]}
    if l4 == "tcp":
        out.update(tcp_flags=flags, tcp_seq=5, tcp_ack=0)
    return out


def inject(ctl, net, dpid, in_port, pkt, now=NOW):
    """A packet enters the network: where it leaves (dpid, port, packet), the controller's
    results for the packet-ins it caused (their messages applied)."""
    leaves, results = [], []
    for d, port, out, rule, at in net.send(dpid, in_port, pkt):
        if port == CONTROLLER:
            r = ctl.packet_in(d, at, frame_of(out), now, rule.cookie if rule else 0)
            net.apply(r.sends)
            results.append(r)
        else:
            leaves.append((d, port, out))
    return leaves, results


def from_client(cfg, ctl, net, pkt, now=NOW):
    c = cfg.testbed.clients[0]
    return inject(ctl, net, c.dpid, c.switch_port, pkt, now)


def from_instance(cfg, ctl, net, inst, pkt, now=NOW):
    return inject(ctl, net, inst.dpid, inst.switch_port, pkt, now)


def instance_at(cfg, ip):
    return next(i for i in cfg.slots if i.ip == ip)


def new_flow(cfg, ctl, net, sport, port=8002, proto="tcp", now=NOW):
    """A connection opens: its first packet reaches an instance through the controller.
    Returns (the instance, the packet as the instance got it)."""
    before = len(net.delivered)
    leaves, results = from_client(cfg, ctl, net, client_pkt(cfg, sport, port, proto=proto), now)
    assert not leaves and [r.kinds for r in results] == [["new_flow"]]
    (dpid, out_port, pkt), = net.delivered[before:]
    inst = instance_at(cfg, pkt["ipv4_dst"])
    assert (dpid, out_port, pkt["eth_dst"]) == (inst.dpid, inst.switch_port, inst.mac)
    return inst, pkt


def expire_flow(cfg, ctl, net, now):
    """Every NAT rule idles out on the switch, which says so (flow-removed)."""
    for sw in net.switches.values():
        for rule in sw.nat_rules():
            sw.remove(rule.cookie)
            net.apply(ctl.flow_removed(sw.dpid, rule.cookie, 12.0, 100, 2,
                                       ofwire.OFPRR_IDLE_TIMEOUT, now).sends)
