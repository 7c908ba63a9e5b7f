"""Data-plane mode (ryu_apps/dataplane.py): the slot table's balance and disruption, and the
rules and buckets it renders run through a small fake switch that applies them to packets."""
from __future__ import annotations

import ipaddress
import random

import pytest

from ryu_apps import dataplane, maglev
from ryu_apps.dataplane import SlotTable, Target

NAMES = [f"srv{i}-ui" for i in range(1, 5)]


def test_equal_instances_get_equal_slots():
    t = SlotTable(257)
    moved = t.update({n: 1.0 for n in NAMES})
    assert len(moved) == 257
    assert sorted(maglev.slot_counts(t.table).values()) == [64, 64, 64, 65]


@pytest.mark.parametrize("size", [257, 509])
def test_removing_one_of_n_moves_only_its_slots(size):
    t = SlotTable(size)
    t.update({n: 1.0 for n in NAMES})
    before = t.table
    moved = t.update({n: 1.0 for n in NAMES if n != "srv2-ui"})
    assert {before[k] for k in moved} == {"srv2-ui"}            # no healthy slot moves
    assert len(moved) == maglev.slot_counts(before)["srv2-ui"]
    assert len(moved) / size <= 1 / 4 + 0.02
    counts = maglev.slot_counts(t.table)
    assert "srv2-ui" not in counts and max(counts.values()) - min(counts.values()) <= 0.04 * size
    # it comes back: exactly its old slots return, the table is the original again
    back = t.update({n: 1.0 for n in NAMES})
    assert t.table == before and sorted(back) == sorted(moved)


def test_when_the_heaviest_leaves_only_its_slots_move():
    t = SlotTable(257)
    t.update({"srv1-ui": 0.4, "srv2-ui": 0.3, "srv3-ui": 0.17, "srv4-ui": 0.13})
    before = t.table
    # the same proportions, relative to a new largest, round differently after quantising
    moved = t.update({"srv2-ui": 0.5, "srv3-ui": 0.2833, "srv4-ui": 0.2167})
    assert {before[k] for k in moved} == {"srv1-ui"}


def test_a_new_instance_moves_about_one_nth():
    t = SlotTable(257)
    t.update({n: 1.0 for n in NAMES})
    moved = t.update({**{n: 1.0 for n in NAMES}, "srv5-ui": 1.0})
    # Maglev moves a little more than the newcomer takes (the others swap a few slots)
    assert 0 < len(moved) / 257 <= 1 / 5 + 0.05


def test_weights_set_the_shares_and_small_drift_changes_nothing():
    t = SlotTable(509)
    t.update({"a": 2.0, "b": 1.0, "c": 1.0})
    counts = maglev.slot_counts(t.table)
    assert abs(counts["a"] / 509 - 0.5) < 0.03 and abs(counts["b"] / 509 - 0.25) < 0.03
    assert t.update({"a": 2.01, "b": 1.0, "c": 0.99}) == []
    assert t.update({}) == list(range(509)) and t.table is None
    assert t.update({}) == []


def test_table_size_must_be_a_prime_within_the_bounds():
    SlotTable(127)                       # at most 256 buckets: Open vSwitch's dp_hash
    for bad in (59, 128, 256, 300, 521):
        with pytest.raises(ValueError, match="table_size"):
            SlotTable(bad)


# ---------------------------------------------------------------- a fake switch
VIP, VMAC, VPORT = "10.0.0.100", "02:00:00:00:00:64", 8002
CONTROLLER = 0xFFFFFFFD
CLIENT = {"eth_src": "02:00:00:00:c8:01", "ipv4_src": "10.0.200.1", "port": 9}


def _matches(match: dict, pkt: dict) -> bool:
    for k, v in match.items():
        if isinstance(v, tuple):
            net = ipaddress.ip_network(f"{v[0]}/{v[1]}", strict=False)
            if ipaddress.ip_address(pkt[k]) not in net:
                return False
        elif pkt.get(k) != v:
            return False
    return True


class FakeSwitch:
    """Rules as (table, priority, match, set fields, then: ("group", id) | ("goto", table)
    | ("output", port)); select groups pick a live bucket by highest random weight over
    bucket positions with the flow's hash, as Open vSwitch's default method does."""

    def __init__(self, live_ports=None):
        self.rules: list = []
        self.groups: dict[int, list[dataplane.Bucket]] = {}
        self.live = live_ports

    def forward(self, pkt: dict, table: int = 0) -> tuple[dict, int]:
        rules = sorted((r for r in self.rules if r[0] == table and _matches(r[2], pkt)),
                       key=lambda r: -r[1])
        assert rules, f"no rule in table {table} for {pkt}"
        _, _, _, fields, (kind, arg) = rules[0]
        pkt = {**pkt, **dict(fields)}
        if kind == "goto":
            return self.forward(pkt, arg)
        if kind == "output":
            return pkt, arg
        bucket = self.pick(self.groups[arg], pkt)
        return {**pkt, **dict(bucket.set_fields)}, bucket.out_port

    def pick(self, buckets, pkt) -> dataplane.Bucket:
        proto = pkt["ip_proto"]
        l4 = "tcp" if proto == 6 else "udp"
        flow = maglev.flow_hash((pkt["ipv4_src"], pkt[f"{l4}_src"], pkt["ipv4_dst"],
                                 pkt[f"{l4}_dst"]))
        live = [(k, b) for k, b in enumerate(buckets)
                if self.live is None or b.watch_port is None or b.watch_port in self.live]
        return max(live, key=lambda kb: maglev.flow_hash((kb[0], flow)))[1]


def render(sw: FakeSwitch, view, protocol="tcp", inst_port=VPORT):
    targets = {n: Target(n, f"02:00:00:00:0{i}:02", f"10.0.{i}.2", inst_port, i, i)
               for i, n in enumerate(NAMES, 1)}
    sw.groups[1] = dataplane.buckets(view, protocol, VPORT, targets.__getitem__, CONTROLLER)
    sw.rules = [(0, 120, dataplane.vip_match(protocol, VIP, VPORT), (), ("group", 1))]
    for t in targets.values():
        match, fields = dataplane.reverse_rule(protocol, t.ip, inst_port, "10.0.200.0", VMAC,
                                               VIP, VPORT)
        sw.rules.append((0, 170, match, fields, ("goto", 1)))
    sw.rules.append((1, 20, {"eth_dst": CLIENT["eth_src"]}, (), ("output", CLIENT["port"])))
    return targets


def client_packet(sport: int, protocol="tcp") -> dict:
    l4 = protocol
    return {"eth_type": 0x0800, "ip_proto": 6 if l4 == "tcp" else 17,
            "eth_src": CLIENT["eth_src"], "eth_dst": VMAC, "ipv4_src": CLIENT["ipv4_src"],
            "ipv4_dst": VIP, f"{l4}_src": sport, f"{l4}_dst": VPORT}


def answer(pkt: dict, protocol="tcp") -> dict:
    l4 = protocol
    return {"eth_type": 0x0800, "ip_proto": pkt["ip_proto"], "eth_src": pkt["eth_dst"],
            "eth_dst": pkt["eth_src"], "ipv4_src": pkt["ipv4_dst"], "ipv4_dst": pkt["ipv4_src"],
            f"{l4}_src": pkt[f"{l4}_dst"], f"{l4}_dst": pkt[f"{l4}_src"]}


@pytest.mark.parametrize("protocol,inst_port", [("tcp", VPORT), ("tcp", 9002), ("udp", VPORT)])
def test_flows_through_the_group_reach_their_slot_owner_and_answers_come_from_the_vip(
        protocol, inst_port):
    t = SlotTable(257)
    t.update({n: 1.0 for n in NAMES})
    sw = FakeSwitch()
    targets = render(sw, t.view(), protocol, inst_port)
    seen = {}
    for sport in range(40000, 44000):
        out, port = sw.forward(client_packet(sport, protocol))
        owner = next(n for n, tg in targets.items() if tg.ip == out["ipv4_dst"])
        assert (out["eth_dst"], port, out[f"{protocol}_dst"]) == \
            (targets[owner].mac, targets[owner].out_port, inst_port)
        seen[owner] = seen.get(owner, 0) + 1
        back, bport = sw.forward(answer(out, protocol))
        assert (back["ipv4_src"], back["eth_src"], back[f"{protocol}_src"], bport) == \
            (VIP, VMAC, VPORT, CLIENT["port"])
    # every instance gets a quarter of the flows, give or take sampling noise
    assert all(abs(n / 4000 - 0.25) < 0.04 for n in seen.values()), seen


def test_removing_an_instance_moves_no_flow_of_a_healthy_one():
    t = SlotTable(257)
    t.update({n: 1.0 for n in NAMES})
    sw = FakeSwitch()
    render(sw, t.view())
    flows = [client_packet(p) for p in random.Random(1).sample(range(1024, 65535), 3000)]
    before = [sw.forward(p)[0]["ipv4_dst"] for p in flows]
    t.update({n: 1.0 for n in NAMES if n != "srv3-ui"})
    render(sw, t.view())
    after = [sw.forward(p)[0]["ipv4_dst"] for p in flows]
    moved = [(b, a) for b, a in zip(before, after) if b != a]
    assert moved and all(b == "10.0.3.2" for b, _ in moved)
    assert "10.0.3.2" not in after


def test_a_dead_local_port_is_skipped_by_the_switch_before_the_controller_knows():
    t = SlotTable(257)
    t.update({n: 1.0 for n in NAMES})
    sw = FakeSwitch(live_ports={1, 2, 4})       # srv3-ui's port (3) is down
    render(sw, t.view())
    dsts = {sw.forward(client_packet(p))[0]["ipv4_dst"] for p in range(50000, 50400)}
    assert dsts == {"10.0.1.2", "10.0.2.2", "10.0.4.2"}


def test_disruption_share():
    a = SlotTable(257)
    a.update({n: 1.0 for n in NAMES})
    old = a.table
    a.update({n: 1.0 for n in NAMES[:3]})
    assert dataplane.disruption(old, a.table) == pytest.approx(
        maglev.slot_counts(old)["srv4-ui"] / 257)
    assert dataplane.disruption(None, None) == 0.0 and dataplane.disruption(old, None) == 1.0


def test_a_draining_instance_keeps_its_flows_through_the_controller_for_the_grace_period():
    t = SlotTable(257)
    t.update({n: 1.0 for n in NAMES}, now=0.0)
    sw = FakeSwitch()
    targets = render(sw, t.view())
    flows = [client_packet(p) for p in range(30000, 32000)]
    before = [sw.forward(p) for p in flows]
    # srv3 drains (still alive): its slots pass through the controller, marked with its MAC
    moved = t.update({n: 1.0 for n in NAMES if n != "srv3-ui"}, now=100.0, alive=set(NAMES),
                     grace_s=10.0)
    assert len(t.transitions) == len(moved) > 0
    render(sw, t.view())
    for (old, _), p in zip(before, flows):
        pkt, port = sw.forward(p)
        if old["ipv4_dst"] == targets["srv3-ui"].ip:
            assert port == CONTROLLER and pkt["eth_dst"] == targets["srv3-ui"].mac
            assert pkt["ipv4_dst"] == VIP                    # not rewritten yet
        else:
            assert pkt["ipv4_dst"] == old["ipv4_dst"]        # the others untouched
    assert not t.expire(109.9) and t.expire(110.0) and not t.transitions
    render(sw, t.view())
    assert all(sw.forward(p)[1] != CONTROLLER for p in flows)
    assert targets["srv3-ui"].ip not in {sw.forward(p)[0]["ipv4_dst"] for p in flows}


def test_slots_of_a_dead_instance_move_at_once_and_a_drain_undone_clears_transitions():
    t = SlotTable(257)
    t.update({n: 1.0 for n in NAMES})
    original = t.table
    t.update({n: 1.0 for n in NAMES if n != "srv1-ui"}, now=5.0,
             alive={"srv2-ui", "srv3-ui", "srv4-ui"}, grace_s=10.0)
    assert not t.transitions                              # srv1 is down: nothing to keep
    # srv1 back: it takes its slots from the others, whose flows there are kept a while
    moved = t.update({n: 1.0 for n in NAMES}, now=6.0, alive=set(NAMES), grace_s=10.0)
    assert t.table == original and sorted(t.transitions) == sorted(moved)
    assert {o for o, _ in t.transitions.values()} <= {"srv2-ui", "srv3-ui", "srv4-ui"}
    t.expire(16.0)
    # srv2 drains, then takes flows again before the grace period ends
    t.update({n: 1.0 for n in NAMES if n != "srv2-ui"}, now=20.0, alive=set(NAMES),
             grace_s=10.0)
    assert t.transitions
    t.update({n: 1.0 for n in NAMES}, now=21.0, alive=set(NAMES), grace_s=10.0)
    assert t.table == original and not t.transitions


def test_in_switch_transitions_render_both_owners_and_a_slot_returned_stays_in_one():
    t = SlotTable(257, in_switch=True)
    t.update({n: 1.0 for n in NAMES}, now=0.0)
    original = t.table
    moved = t.update({n: 1.0 for n in NAMES if n != "srv3-ui"}, now=1.0, alive=set(NAMES),
                     grace_s=10.0)
    view = t.view()
    assert {view[k] for k in moved} == {("srv3-ui", t.table[k]) for k in moved}
    targets = {n: Target(n, f"02:00:00:00:0{i}:02", f"10.0.{i}.2", VPORT, i, i, mark=i)
               for i, n in enumerate(NAMES, 1)}
    bks = dataplane.buckets(view, "tcp", VPORT, targets.__getitem__, CONTROLLER)
    k = moved[0]
    assert bks[k].track and bks[k].set_fields == (
        ("eth_dst", targets["srv3-ui"].mac), ("reg0", targets[t.table[k]].mark))
    # srv3 back within the grace period: its slots are its own again, still in transition
    # (connections committed meanwhile to another instance need the transition table) ...
    t.update({n: 1.0 for n in NAMES}, now=2.0, alive=set(NAMES), grace_s=10.0)
    assert t.table == original and {t.view()[k] for k in moved} == {("srv3-ui", "srv3-ui")}
    # ... for a full grace period from that move
    assert not t.expire(11.0) and t.expire(12.0) and t.view() == t.table


def test_transition_rules_are_packed_as_ryu_reads_them():
    from ryu_apps import ofwire
    from ryu_apps.framework import module, ofproto_v1_3_parser as parser
    nicira_ext = module("ofproto.nicira_ext")
    t = Target("srv2-ui", "02:00:00:00:02:02", "10.0.2.2", 9002, 5, None, mark=7)
    start, keep, handover = dataplane.transition_rules(t, "tcp", VPORT)
    assert start.commit_mark == 7 and keep.commit_mark is handover.commit_mark is None
    forward = (("eth_dst", t.mac), ("ipv4_dst", t.ip), ("tcp_dst", 9002))
    for rule, ryus, fields, out in (
            (start, dict(eth_type=0x0800, ip_proto=6, reg0=7, ct_state=(0x21, 0x21),
                         tcp_flags=(0x02, 0x12)), forward, 5),
            (keep, dict(eth_type=0x0800, ip_proto=6, reg0=7, ct_state=(0x20, 0x20),
                        ct_mark=7), forward, 5),
            (handover, dict(eth_type=0x0800, ip_proto=6, ct_state=(0x20, 0x20), ct_mark=7),
             (("eth_dst", t.mac),), None)):
        buf = bytearray()
        parser.OFPMatch(**ryus).serialize(buf, 0)
        assert ofwire.match(rule.match) == buf
        assert (rule.set_fields, rule.out_port) == (fields, out)
    assert start.priority > keep.priority > handover.priority > 0
    buf = bytearray()
    parser.OFPActionSetField(reg0=7).serialize(buf, 0)
    assert ofwire.action_set_field("reg0", 7) == buf
    buf = bytearray()
    parser.NXActionCT(flags=nicira_ext.NX_CT_F_COMMIT, zone_src="",
                      zone_ofs_nbits=dataplane.TRANSITION_ZONE, recirc_table=255, alg=0,
                      actions=[parser.OFPActionSetField(ct_mark=7)]).serialize(buf, 0)
    assert ofwire.action_ct(dataplane.TRANSITION_ZONE, commit=True,
                            actions=ofwire.action_set_field("ct_mark", 7)) == buf


def test_an_in_switch_transition_ends_before_the_tracker_may_forget_its_first_connections():
    t = SlotTable(257, in_switch=True)
    t.update({n: 1.0 for n in NAMES}, now=0.0)
    moved = t.update({n: 1.0 for n in NAMES if n != "srv3-ui"}, now=1.0, alive=set(NAMES),
                     grace_s=10.0)
    # the slots keep moving (srv3 back, out again, ...): each move starts the grace period
    # again, but never past 25 s from the transition's start
    without = {n: 1.0 for n in NAMES if n != "srv3-ui"}
    for now, members in ((9.0, dict.fromkeys(NAMES, 1.0)), (17.0, without),
                         (24.0, dict.fromkeys(NAMES, 1.0))):
        assert sorted(t.update(members, now=now, alive=set(NAMES), grace_s=10.0)) == moved
    assert {t.transitions[k][1] for k in moved} == {1.0 + dataplane.TRACKER_HOLDS_S}
    assert not t.expire(25.9) and t.expire(26.0) and not t.transitions
