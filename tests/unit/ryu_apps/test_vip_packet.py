"""The cases of FlowPath.vip_packet (ryu_apps/flowpath.py) in one table: the state the
controller is in, the packet that reaches it, and what it answers: the packet-in kinds it
counts, the OpenFlow messages it sends (in order, barriers included), whether it warns, and
the flows it then holds. The details of each case (where the rules send a packet, what the
answer looks like) are in test_flowpath.py and test_tracker.py."""
from __future__ import annotations

import copy
import struct
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from common.config import DEFAULT_MICROSERVICES
from ryu_apps import ofwire
from ryu_apps.framework import ofproto_v1_3 as ofp
from tests.unit.ryu_apps.test_flowpath import NOW, VIP, client_frame, expire, make, packet_in

SYN, ACK, RST = ofwire.TCP_SYN, ofwire.TCP_ACK, ofwire.TCP_RST
NAMES = {ofp.OFPT_FLOW_MOD: "flow", ofp.OFPT_BARRIER_REQUEST: "barrier",
         ofp.OFPT_PACKET_OUT: "packet"}
NEW_PAIR = ["flow", "flow", "barrier", "packet"]     # the rule pair, a barrier, the packet


def messages(result) -> list[str]:
    """The OpenFlow messages of a result's sends, by type, in the order they go."""
    out = []
    for _dpid, buf in result.sends:
        off = 0
        while off < len(buf):
            _version, kind, length, _xid = struct.unpack_from("!BBHI", buf, off)
            out.append(NAMES.get(kind, str(kind)))
            off += length
    return out


@dataclass
class Case:
    name: str
    kinds: list[str]
    sends: list[str]
    active_after: int                        # active flows once the packet is handled
    warns: bool = False
    flags: int = SYN
    port: int = 8002                         # the VIP port the client sends to
    dpid: int | None = None                  # the switch it comes from (None: the client's)
    udp: bool = False                        # a datagram to the dns service (its port;
                                             # flags and port then unused)
    options: dict | None = None              # make()'s: the controller's settings
    before: Callable | None = None           # the state: (cfg, path, switches) -> eth_dst


def first_flow(flags=SYN, now=NOW):
    """The state in which the client's flow from port 40000 already exists."""
    def prepare(cfg, path, sw):
        packet_in(cfg, path, sw, client_frame(cfg, 40000, flags=flags), now=now)
    return prepare


def expired(cfg, path, sw):
    first_flow()(cfg, path, sw)
    expire(path, next(iter(path.flows.flows.values())), NOW + 12)


def adopted(cfg, path, sw):
    """A flow whose rules this process never sent (adopted after a restart)."""
    first_flow()(cfg, path, sw)
    next(iter(path.flows.flows.values())).rules_sent = False


def moving_slot(cfg, path, sw):
    """The packet comes from a select-group slot in transition, marked with its old owner."""
    return cfg.instances_of("ui")[2].mac


def none_healthy(cfg, path, sw):
    for b in path.policy_core.pools["ui"]:
        path.policy_core.set_health(b.name, False)


def unreachable(cfg, path, sw):
    """Every ui instance where no link leads (the user's network, links not found yet)."""
    for inst in cfg.instances_of("ui"):
        path.locations.configured[inst.name] = (0x99, 1)


def flow_then_unreachable(cfg, path, sw):
    first_flow()(cfg, path, sw)
    unreachable(cfg, path, sw)


def other_flow(cfg, path, sw):
    packet_in(cfg, path, sw, client_frame(cfg, 39999))


def tracked_twice(cfg, path, sw):
    first_flow()(cfg, path, sw)
    first_flow()(cfg, path, sw)


def from_foreign_switch(cfg, path, sw):
    frame = client_frame(cfg, 39998)
    path.vip_packet(99, 1, frame, ofwire.parse_frame(frame), NOW)


def expired_then_unreachable(cfg, path, sw):
    expired(cfg, path, sw)
    unreachable(cfg, path, sw)


def moving_slot_owner_down(cfg, path, sw):
    path.policy_core.set_health(cfg.instances_of("ui")[2].name, False)
    return moving_slot(cfg, path, sw)


def moving_slot_unreachable(cfg, path, sw):
    unreachable(cfg, path, sw)
    return moving_slot(cfg, path, sw)


def first_datagram(cfg, path, sw):
    packet_in(cfg, path, sw, client_frame(cfg, 40000, port=5353, proto="udp"))


TRACKER = {"dataplane": {"short_flows": "tracker"}}
WITH_UDP = {"microservices": copy.deepcopy(DEFAULT_MICROSERVICES) + [
    {"name": "dns", "abbrev": "dns", "port": 5353, "protocol": "udp", "flow_class": "short"}]}
CASES = [
    Case("no service on that VIP port", [], [], 0, port=9999),
    Case("a switch outside the configuration", ["foreign_switch"], [], 0, warns=True,
         dpid=99),
    Case("that switch again: said once", ["foreign_switch"], [], 0, dpid=99,
         before=from_foreign_switch),
    Case("a SYN: a decision and the rule pair", ["new_flow"], NEW_PAIR, 1),
    Case("a segment of a flow whose rules are there", ["repeat"], ["packet"], 1, flags=ACK,
         before=first_flow()),
    Case("a segment of an adopted flow without rules", ["repeat"], NEW_PAIR, 1, flags=ACK,
         before=adopted),
    Case("a segment of a flow whose rules idled out", ["resumed"], NEW_PAIR, 1, flags=ACK,
         before=expired),
    Case("a first datagram: a decision and the rule pair", ["new_flow"], NEW_PAIR, 1,
         udp=True, options=WITH_UDP),
    Case("a datagram of a flow whose rules are there", ["repeat"], ["packet"], 1, udp=True,
         options=WITH_UDP, before=first_datagram),
    Case("a segment of an idled-out flow no path leads to: dropped", ["no_path"], [], 0,
         warns=True, flags=ACK, before=expired_then_unreachable),
    Case("a segment nobody owns: a reset from the VIP", ["tcp_not_syn"], ["packet"], 0,
         flags=ACK),
    Case("a reset nobody owns: nothing", ["tcp_not_syn"], [], 0, flags=RST | ACK),
    Case("a SYN-ACK towards a VIP: nothing", ["tcp_not_syn"], [], 0, flags=SYN | ACK),
    Case("a segment from a moving slot stays with its old owner", ["dp_transition"],
         NEW_PAIR, 1, flags=ACK, before=moving_slot),
    Case("a segment from a moving slot whose old owner is down: a reset",
         ["dp_transition", "tcp_not_syn"], ["packet"], 0, flags=ACK,
         before=moving_slot_owner_down),
    Case("a segment from a moving slot with no path to its old owner: dropped",
         ["dp_transition", "no_path"], [], 0, warns=True, flags=ACK,
         before=moving_slot_unreachable),
    Case("a SYN from a moving slot gets a decision", ["dp_transition", "new_flow"], NEW_PAIR,
         1, before=moving_slot),
    Case("a SYN towards instances no path leads to: dropped", ["new_flow", "no_path"], [], 0,
         warns=True, before=unreachable),
    Case("a segment of a flow no path leads to any more: dropped, the flow kept",
         ["repeat", "no_path"], [], 1, warns=True, flags=ACK, before=flow_then_unreachable),
    Case("beyond max_active_flows: dropped", ["flow_cap"], [], 1, warns=True,
         options={"max_active_flows": 1}, before=other_flow),
    Case("no healthy instance: counted, then dropped", ["new_flow"], [], 0, warns=True,
         before=none_healthy),
    # the first connection to an instance brings the tracker's table rules the switch lacks
    # (towards it, a watch of the client's reset; the answer rule and two watches of this
    # client port; the pair's two counting rules), then the packet-out that commits it,
    # with no barrier between: OpenFlow
    # lets a switch reorder messages without one; Open vSwitch applies a connection's in
    # order, which this path relies on (the per-flow path sends a barrier)
    Case("tracker: a SYN, committed by the switch's tracker", ["new_flow"],
         ["flow"] * 7 + ["packet"], 1, options=TRACKER),
    Case("tracker: the SYN again, committed once more", ["repeat"], ["packet"], 1,
         options=TRACKER, before=first_flow()),
    Case("tracker: a third time, on a rule pair", ["repeat"], NEW_PAIR, 1, options=TRACKER,
         before=tracked_twice),
    Case("tracker: a segment of a connection the tracker let go, on a rule pair",
         ["resumed"], NEW_PAIR, 1, flags=ACK, options=TRACKER, before=expired),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_of_a_packet_to_a_vip(case):
    cfg, path, sw = make(**(case.options or {}))
    eth_dst = case.before(cfg, path, sw) if case.before else None
    c = cfg.testbed.clients[0]
    if case.udp:
        frame = client_frame(cfg, 40000, port=5353, proto="udp")
    else:
        frame = ofwire.tcp_frame(eth_dst or cfg.controller.vip_mac, c.mac, c.ip, VIP, 40000,
                                 case.port, 1000, flags=case.flags)
    dpid = c.dpid if case.dpid is None else case.dpid
    r = path.vip_packet(dpid, c.switch_port, frame, ofwire.parse_frame(frame), NOW + 13)
    assert (r.kinds, messages(r), bool(r.warnings), path.flows.active_count()) == \
        (case.kinds, case.sends, case.warns, case.active_after)
    assert all(target == dpid for target, _ in r.sends)
    # a decision only where a flow starts, and only when an instance took it
    assert (r.decision is not None) == ("new_flow" in r.kinds and bool(r.sends))
