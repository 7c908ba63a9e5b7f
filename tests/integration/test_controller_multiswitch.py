"""The controller on the multi-switch topology: NAT at the caller's edge switch, answers of
live flows back through plain L2 over a bandwidth-limited trunk, direct traffic untouched,
malb-near keeping an instance's calls on its switch; with rule pairs, and in tracker mode
(each switch its own zone of the shared tracker)."""
from __future__ import annotations

import copy
import subprocess
from collections import Counter

import pytest

from experiments.stack import Stack
from tests.integration.helpers import FAST_CONFIG, download, packet_in_count, served_by
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration
VIP = "10.0.0.100"


@pytest.fixture(scope="module", params=["controller", "tracker"])
def stack(tmp_path_factory, request):
    clean_testbed(quiet=True)
    data = copy.deepcopy(FAST_CONFIG)
    data["testbed"] = {"clients": 1, "switches": 2, "trunk_bw_mbit": 50}
    data["controller"]["dataplane"] = {"short_flows": request.param}
    with Stack(data, str(tmp_path_factory.mktemp("multiswitch")), policy="srr",
               agents=False, profiler=False) as st:
        st.wait_for(lambda: len(st.controller_get("/malb/status")["switches"]) == 2, 20,
                    "both switches connected")
        yield st
    clean_testbed(quiet=True)


def _rules(switch: str, priority: int) -> int:
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", switch],
                         capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if f"priority={priority}," in line)


def test_flows_cross_the_trunk_and_their_answers_skip_the_controller(stack):
    cli = stack.testbed.node("cli1")
    resumed = packet_in_count(stack, "resumed")
    who = served_by(cli, f"http://{VIP}:8002/object?size=20000", 8)
    # round robin over srv1, srv3 (on s1) and srv2, srv4 (on s2, behind the trunk)
    assert Counter(w.split("-")[0] for w in who) == {f"srv{i}": 2 for i in range(1, 5)}, who
    code, size, who = download(cli, f"http://{VIP}:8002/object?size=3000000")
    assert (code, size) == (200, 3_000_000), (code, size, who)
    # answers of live flows never went to the controller: no orphan rule away from the edge
    assert packet_in_count(stack, "resumed") == resumed
    # orphan rules only for callers on the switch: s1 has srv1, srv3 and the clients, s2 has
    # srv2 and srv4
    slots = len(stack.cfg.slots)
    assert (_rules("s1", 150), _rules("s2", 150)) == (3 * slots, 2 * slots)
    assert _rules("s2", 200) == 0           # NAT happens only on the callers' edge switch


def test_an_instance_calling_across_the_trunk_never_goes_through_the_controller(stack):
    """A caller on s2 reaches a VIP served on s1: its NAT is on s2, and the answers cross s1
    and the trunk by the host rules, never one packet at a time through the controller."""
    caller = stack.testbed.node("srv2-ui")
    kinds = ("resumed", "repeat", "l2")       # unicast only: broadcasts (ARP) may come
    before = {k: packet_in_count(stack, k) for k in kinds}
    served_on_s1 = 0
    downloads = 4           # round robin over four servers: two of them on s1
    for _ in range(downloads):
        code, size, who = download(caller, f"http://{VIP}:8002/object?size=2000000")
        assert (code, size) == (200, 2_000_000), (code, size, who)
        served_on_s1 += who.split("-")[0] in ("srv1", "srv3")
    assert served_on_s1 >= 1
    after = {k: packet_in_count(stack, k) for k in kinds}
    assert (after["resumed"], after["l2"]) == (before["resumed"], before["l2"])
    # A connection's first packets may race its new rules ("repeat", seen 0-3 per connection
    # on a slow machine); a 2 MB answer through the controller would be ~1400 of them.
    assert after["repeat"] - before["repeat"] <= 3 * downloads, (before, after)
    if stack.cfg.controller.dataplane.short_flows == "tracker":
        # the caller's connections in s2's zone of the tracker, none in s1's
        s1, s2 = (s.tracker_zone for s in stack.cfg.testbed.switches)
        caller_ip = stack.testbed.node("srv2-ui").IP()
        mine = f"orig=(src={caller_ip},"
        assert mine in _conntrack(s2) and mine not in _conntrack(s1)
    else:
        assert _rules("s2", 200) > 0        # the caller's NAT rules are on its own switch


def test_malb_near_keeps_an_instances_calls_on_its_own_switch(stack):
    """malb-near, the balancing half of placement's joint rule: an instance's calls go to the
    instances on its own switch (no load data here: nothing says they cannot take them),
    never to itself; a client host is no instance, and its requests cross the trunk."""
    code, body = stack.controller_put("/malb/policy", {"policy": "malb-near"})
    assert code == 200, body
    try:
        url = f"http://{VIP}:8002/object?size=20000"
        for caller, near in (("srv2-ui", {"srv4"}), ("srv1-ui", {"srv3"})):
            who = served_by(stack.testbed.node(caller), url, 4)
            assert {w.split("-")[0] for w in who} == near, (caller, who)
        who = {w.split("-")[0] for w in served_by(stack.testbed.node("cli1"), url, 8)}
        assert who & {"srv1", "srv3"} and who & {"srv2", "srv4"}, who
    finally:
        stack.controller_put("/malb/policy", {"policy": "srr"})


def _conntrack(zone: int) -> str:
    return subprocess.run(["ovs-appctl", "dpctl/dump-conntrack", f"zone={zone}"],
                          capture_output=True, text=True, timeout=10, check=True).stdout


def test_a_client_still_reaches_instance_addresses_directly(stack):
    cli = stack.testbed.node("cli1")
    for ip, name in (("10.0.1.2", "srv1-ui"), ("10.0.2.2", "srv2-ui")):
        code, size, who = download(cli, f"http://{ip}:8002/object?size=100000")
        assert (code, size, who) == (200, 100_000, name)
