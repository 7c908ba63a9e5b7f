"""Tracker mode on the real testbed (controller.dataplane.short_flows: tracker): each ui
connection is decided by the controller and translated by Open vSwitch's connection
tracker, with no rule per connection; its FIN, or the client's reset, ends the flow; the
switch counts its bytes per client port and instance for the communication graph; long
flows keep their rule pairs."""
from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from experiments.stack import Stack
from ryu_apps.tracker import Tracker
from tests.integration.helpers import FAST_CONFIG, download, packet_in_count, served_by
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration
VIP = "10.0.0.100"
UI = f"http://{VIP}:8002/object?size=20000"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    clean_testbed(quiet=True)
    data = json.loads(json.dumps(FAST_CONFIG))
    data["controller"]["dataplane"] = {"short_flows": "tracker"}
    st = Stack(data, str(tmp_path_factory.mktemp("tracker")), policy="srr")
    with st:
        st.wait_for(lambda: st.controller_get("/malb/status")["profiler"]["reachable"], 20,
                    "controller reaches the profiler")
        yield st
    clean_testbed(quiet=True)


def rules(stack) -> int:
    switch = stack.cfg.testbed.switches[0].name
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", switch],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return len(out.splitlines()) - 1


def ui_flows(stack, query: str = "") -> list[dict]:
    return [f for f in stack.controller_get(f"/malb/flows{query}")["flows"]
            if f["microservice"] == "ui"]


def ui_bytes(stack) -> int:
    """What the clients exchanged with ui, in the profiler's communication graph."""
    return sum(e["total_bytes"] for e in stack.profiler_get("/graph")["edges"]
               if e["caller"].startswith("clients@") and e["callee"] == "ui")


def tracked(stack, dpid: int) -> str:
    """The connections in the switch's own zone of Open vSwitch's tracker."""
    cfg = stack.cfg
    zone = Tracker.of(cfg).zone(dpid)
    return subprocess.run(["ovs-appctl", "dpctl/dump-conntrack", f"zone={zone}"],
                          capture_output=True, text=True, timeout=10, check=True).stdout


@pytest.mark.parametrize("policy", ["srr", "malb"])
def test_ui_connections_go_through_the_tracker_with_no_rule_each_and_end_at_their_fin(
        stack, policy):
    code, body = stack.controller_put("/malb/policy", {"policy": policy})
    assert code == 200
    cli = stack.testbed.node("cli1")
    graphed = ui_bytes(stack)
    # the first round brings the rules towards each instance and for cli1's port
    who = served_by(cli, UI, 8)
    assert len(who) == 8 and not [w for w in who if w.startswith("FAIL")], who
    before, decided = rules(stack), packet_in_count(stack, "new_flow")
    who = served_by(cli, UI, 40)
    assert len(who) == 40 and not [w for w in who if w.startswith("FAIL")], who
    assert Counter(w.split("-")[0] for w in who) == {f"srv{i}": 10 for i in range(1, 5)}
    assert packet_in_count(stack, "new_flow") == decided + 40     # a decision each
    assert rules(stack) <= before                       # and no rule left behind by one
    stack.wait_for(lambda: not ui_flows(stack, "?active=1"), 5,
                   "each ui flow ended at its FIN")
    assert {f["end_reason"] for f in ui_flows(stack)} == {"fin"}
    dpid = stack.cfg.testbed.switches[0].dpid
    assert "dst=10.0.0.100,sport=" in tracked(stack, dpid), "no connection in the tracker"
    # and the switch counted their bytes per client port and instance, for the graph
    stack.wait_for(lambda: ui_bytes(stack) - graphed >= 48 * 20_000, 15,
                   "the graph's clients > ui edge carries the objects' bytes")


def test_a_long_flow_keeps_its_rule_pair_and_answers_outside_the_tracker_still_work(stack):
    cli = stack.testbed.node("cli2")
    code, size, who = download(cli, f"http://{VIP}:8003/job?seconds=0.2&cpu=0.1")
    assert code == 200 and who.endswith("-be")
    code, size, who = download(cli, f"http://{VIP}:8001/stream?rate=300&seconds=2")
    assert code == 200 and 550_000 <= size <= 650_000 and who.endswith("-vid")
    # an instance reached by its own address (the testbed's connectivity check) goes by L2
    inst = stack.cfg.instances_of("ui")[0]
    assert "1 received" in cli.cmd(f"ping -c 1 -W 2 {inst.ip}")


def test_a_clients_reset_ends_its_tracked_flow(stack):
    cli = stack.testbed.node("cli2")
    fins = packet_in_count(stack, "fin")
    # connect, send half a request, then reset (SO_LINGER 0): the instance never sends a
    # FIN, so only the copy of the client's reset can end the flow
    out = cli.cmd(
        "python3 -c 'import socket, struct, time; s = socket.create_connection("
        f"(\"{VIP}\", 8002), timeout=5); s.sendall(b\"GET /object?size=10 HTTP/1.1\\r\\n\"); "
        "time.sleep(0.3); s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, "
        "struct.pack(\"ii\", 1, 0)); s.close(); print(\"reset\")'")
    assert out.strip().endswith("reset"), out
    stack.wait_for(lambda: not ui_flows(stack, "?active=1"), 5, "the reset ended the flow")
    assert packet_in_count(stack, "fin") == fins + 1
    (flow,) = [f for f in ui_flows(stack) if f["client"].startswith(
        stack.testbed.node("cli2").IP() + ":")]
    assert flow["end_reason"] == "fin" and 0.2 <= flow["duration_s"] < 2
