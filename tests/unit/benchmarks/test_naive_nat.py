"""benchmarks/naive_nat.py, the per-flow baseline: an instance's frames get no L2 rule (one
would carry an answer past its flow's reverse rule to the client un-NATed), other hosts'
frames do, as in ryu.app.simple_switch_13. Ryu's own OpenFlow 1.3 classes build and parse
what the app sends."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from common.config import load_config
from common.procs import ROOT
from ryu_apps.framework import module, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

arp, ethernet, packet = (module(f"lib.packet.{name}") for name in ("arp", "ethernet", "packet"))

PAPER = os.path.join(ROOT, "configs", "paper.yaml")


class _Datapath:
    """What the app reads of a datapath, keeping what it sends."""
    ofproto, ofproto_parser, id = ofp, parser, 1

    def __init__(self):
        self.sent = []

    def send_msg(self, msg) -> None:
        self.sent.append(msg)


def arp_frame(opcode: int, src_mac: str, src_ip: str, dst_mac: str, dst_ip: str) -> bytes:
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(ethertype=0x0806, dst=dst_mac, src=src_mac))
    p.add_protocol(arp.arp(opcode=opcode, src_mac=src_mac, src_ip=src_ip,
                           dst_mac=dst_mac if opcode == arp.ARP_REPLY else "00:00:00:00:00:00",
                           dst_ip=dst_ip))
    p.serialize()
    return bytes(p.data)


@pytest.fixture
def app(monkeypatch):
    monkeypatch.setenv("MALB_CONFIG", PAPER)
    from benchmarks.naive_nat import NaiveNat
    return NaiveNat()


def packet_in(app, dp, in_port: int, frame: bytes) -> list:
    dp.sent.clear()
    msg = parser.OFPPacketIn(dp, match=parser.OFPMatch(in_port=in_port), data=frame)
    app.packet_in(SimpleNamespace(msg=msg))
    return [type(m).__name__ for m in dp.sent]


def test_an_instances_arp_gets_no_l2_rule_and_a_clients_does(app):
    cfg = load_config(PAPER)
    inst, client = cfg.instances_of("ui")[0], cfg.testbed.clients[0]
    dp = _Datapath()
    # each learns where the other is
    packet_in(app, dp, client.switch_port, arp_frame(arp.ARP_REQUEST, client.mac, client.ip,
                                                     "ff:ff:ff:ff:ff:ff", inst.ip))
    packet_in(app, dp, inst.switch_port, arp_frame(arp.ARP_REQUEST, inst.mac, inst.ip,
                                                   "ff:ff:ff:ff:ff:ff", client.ip))
    # the instance's unicast ARP to the client: sent on, no rule
    assert packet_in(app, dp, inst.switch_port, arp_frame(
        arp.ARP_REPLY, inst.mac, inst.ip, client.mac, client.ip)) == ["OFPPacketOut"]
    # the client's to the instance: a learning switch's rule
    assert packet_in(app, dp, client.switch_port, arp_frame(
        arp.ARP_REPLY, client.mac, client.ip, inst.mac, inst.ip)) == ["OFPFlowMod",
                                                                       "OFPPacketOut"]
