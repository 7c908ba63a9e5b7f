"""The MALB controller with real parts: ryu-manager, userspace OVS, the testbed's
containers, host agents, the profiler, and real TCP from Mininet clients."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from collections import Counter
from urllib.parse import quote

import pytest
import yaml

from common.config import POLICIES
from common.config.model import CONTAINER_PREFIX
from common.httpjson import HttpError, auth_headers, get_json
from common.procs import ROOT
from deploy import monitoring
from experiments.stack import Stack
from tests.integration.helpers import FAST_CONFIG, burn, download, finish_download, \
    packet_in_count, served_by, start_download
from tests.lib.browser import chromium
from tests.lib.metrics import convention_problems, families, value
from tests.lib.services import free_port
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration
VIP = "10.0.0.100"
UI = f"http://{VIP}:8002/object?size=20000"
BACKEND = f"http://{VIP}:8003/job?seconds=0.2&cpu=0.1"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    clean_testbed(quiet=True)
    st = Stack(FAST_CONFIG, str(tmp_path_factory.mktemp("controller")), policy="malb")
    with st:
        st.wait_for(lambda: st.controller_get("/malb/status")["profiler"]["reachable"], 20,
                    "controller reaches the profiler")
        yield st
    clean_testbed(quiet=True)


@pytest.fixture
def cli(stack):
    stack.controller_put("/malb/policy", {"policy": "malb"})
    return stack.testbed.node("cli1")


def status(stack):
    return stack.controller_get("/malb/status")


def test_40_short_flows_one_at_a_time_land_10_per_server_and_each_fin_ends_its_flow(stack,
                                                                                   cli):
    # malb: a ui object goes where the least flow time is left; one at a time, each has
    # ended (its FIN seen) before the next, so all are equal and the turn decides
    before = {s: v["flows_assigned"].get("ui", 0) for s, v in status(stack)["servers"].items()}
    who = served_by(cli, UI, 40)
    assert len(who) == 40 and not [w for w in who if w.startswith("FAIL")], who
    assert Counter(w.split("-")[0] for w in who) == {f"srv{i}": 10 for i in range(1, 5)}
    after = {s: v["flows_assigned"].get("ui", 0) for s, v in status(stack)["servers"].items()}
    assert {s: after[s] - before[s] for s in after} == {f"srv{i}": 10 for i in range(1, 5)}
    last = stack.controller_get("/malb/decisions?limit=40&microservice=ui")["decisions"]
    assert {d["algorithm"] for d in last} == {"least-remaining"}
    stack.wait_for(lambda: not any(i.get("open_short_flows") for v in status(stack)["servers"]
                                   .values() for i in v["instances"].values()),
                   5, "every ui object's FIN seen")


# every registered policy, switched over REST on this one stack (the comparison with each on
# a testbed of its own is `make test-e2e`'s)
@pytest.mark.parametrize("policy", POLICIES)
def test_tcp_transfers_through_the_vip_succeed_for_every_policy(stack, cli, policy):
    code, body = stack.controller_put("/malb/policy", {"policy": policy})
    assert code == 200 and body["policy"] == policy
    code, size, who = download(cli, f"http://{VIP}:8002/object?size=2000000")
    assert (code, size) == (200, 2_000_000) and who.endswith("-ui")
    # 10 ticks of 30 kB, give or take one
    code, size, who = download(cli, f"http://{VIP}:8001/stream?rate=300&seconds=1")
    assert code == 200 and 270_000 <= size <= 330_000 and who.endswith("-vid")
    code, size, who = download(cli, f"http://{VIP}:8003/job?seconds=0.5&cpu=0.2")
    assert code == 200 and size > 0 and who.endswith("-be")
    assert status(stack)["policy"] == policy


def test_long_flows_avoid_a_busy_server_under_malb_and_not_under_srr(stack, cli):
    busy = [stack.testbed.node(f"srv2-{a}") for a in ("vid", "ui", "be")]
    for node in busy:
        burn(node, True)
    try:
        def srv2_is_busiest():
            servers = stack.profiler_get("/servers")["servers"]
            pred = {s: v["predicted"]["cpu"] for s, v in servers.items() if v["predicted"]}
            return len(pred) == 4 and max(pred, key=pred.get) == "srv2" and pred["srv2"] > 60
        stack.wait_for(srv2_is_busiest, 30, "profiler sees srv2 busiest")
        time.sleep(2)  # the controller pulls once per period
        malb = [w.split("-")[0] for w in served_by(cli, BACKEND, 8)]
        assert len(malb) == 8 and "srv2" not in malb, malb
        decisions = stack.controller_get("/malb/decisions?limit=8&microservice=backend")
        assert {d["algorithm"] for d in decisions["decisions"]} == {"weighted-least-load"}
        stack.controller_put("/malb/policy", {"policy": "srr"})
        srr = [w.split("-")[0] for w in served_by(cli, BACKEND, 8)]
        assert Counter(srr)["srv2"] == 2, srr
    finally:
        for node in busy:
            burn(node, False)


def test_a_connection_quiet_for_longer_than_the_idle_timeout_still_gets_its_answer(stack, cli):
    # a back-end job computing for 8 s sends nothing: its rules (idle timeout 5 s) expire
    resumed = packet_in_count(stack, "resumed")
    code, size, who = download(cli, f"http://{VIP}:8003/job?seconds=8&cpu=0.05", max_time=30)
    assert code == 200 and size > 0 and who.endswith("-be"), (code, size, who)
    # the answer came back to the controller once and the flow went on with new rules
    assert packet_in_count(stack, "resumed") >= resumed + 1


def test_a_long_flow_ends_for_the_policy_core_when_its_fin_passes(stack, cli):
    # the FIN watch (priority 201, tcp_flags) must be accepted by the real OVS: the job's
    # FIN reaches the controller as a copy, the client gets its answer
    fins = packet_in_count(stack, "fin")
    code, size, who = download(cli, BACKEND)
    assert code == 200 and size > 0 and who.endswith("-be"), (code, size, who)
    stack.wait_for(lambda: packet_in_count(stack, "fin") >= fins + 1, 5,
                   "the back-end flow's FIN reaches the controller")
    stack.wait_for(lambda: not any(s["watched_flows"] for s in status(stack)["servers"].values()),
                   5, "no watched flow left running")
    # under malb short flows are watched too (its short-flow choice counts them) ...
    fins = packet_in_count(stack, "fin")
    served_by(cli, UI, 2)
    stack.wait_for(lambda: packet_in_count(stack, "fin") >= fins + 2, 5,
                   "the ui objects' FINs reach the controller")
    # ... under the other policies they are not
    stack.controller_put("/malb/policy", {"policy": "srr"})
    try:
        fins = packet_in_count(stack, "fin")
        served_by(cli, UI, 2)
        time.sleep(0.5)
        assert packet_in_count(stack, "fin") == fins
    finally:
        stack.controller_put("/malb/policy", {"policy": "malb"})


def test_a_segment_of_a_connection_nobody_knows_is_reset_not_made_a_flow(stack, cli):
    flows = len(stack.controller_get("/malb/flows")["flows"])
    not_syn = packet_in_count(stack, "tcp_not_syn")
    script = os.path.join(os.path.dirname(__file__), "rawtcp.py")
    out = cli.cmd(f"python3 {script} {cli.IP()} {VIP} 8002 0x10")    # a bare ACK
    assert "answer flags=0x04" in out, out                           # RST
    seq, expected = (int(x.split("=")[1]) for x in out.split()[2:4])
    assert seq == expected                                           # RFC 9293: seq = ACK
    assert packet_in_count(stack, "tcp_not_syn") == not_syn + 1
    assert len(stack.controller_get("/malb/flows")["flows"]) == flows


def test_a_new_flow_from_a_switch_outside_the_configuration_leaves_no_ghost(stack):
    """A stray switch (dpid 0x99, not configured) connects and a host behind it opens a
    connection to a VIP. No path from there to any instance is known: nothing may be
    recorded or counted. (It used to leave an active flow without rules that the policy
    had counted, and every later packet of it raised again.)"""
    def sh(*cmd):
        return subprocess.run(cmd, check=True, capture_output=True, text=True)
    br, ns, near, far = "malbx99", "malbx99ns", "malbx99-a", "malbx99-b"
    assigned = sum(n for v in status(stack)["servers"].values()
                   for n in v["flows_assigned"].values())
    seen = packet_in_count(stack, "foreign_switch") + packet_in_count(stack, "new_flow")
    script = os.path.join(os.path.dirname(__file__), "rawtcp.py")
    try:
        sh("ovs-vsctl", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
           "other-config:datapath-id=0000000000000099", "fail_mode=secure",
           "protocols=OpenFlow13", "external-ids:malb=1")
        sh("ovs-vsctl", "set-controller", br, "tcp:127.0.0.1:6653")
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", near, "type", "veth", "peer", "name", far)
        sh("ip", "link", "set", far, "netns", ns)
        sh("ovs-vsctl", "add-port", br, near)
        sh("ip", "link", "set", near, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", "10.0.250.1/16", "dev", far)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", far, "up")
        sh("ip", "netns", "exec", ns, "ip", "neigh", "add", VIP, "lladdr",
           stack.cfg.controller.vip_mac, "dev", far)
        stack.wait_for(lambda: sh("ovs-vsctl", "get", "controller", br,
                                  "is_connected").stdout.strip() == "true", 15,
                       "stray switch connected")
        time.sleep(0.5)   # its base rules (VIP traffic to the controller)
        for _ in range(3):
            subprocess.run(["ip", "netns", "exec", ns, "python3", script, "10.0.250.1", VIP,
                            "8002", "0x02"], capture_output=True, timeout=10)
        stack.wait_for(lambda: packet_in_count(stack, "foreign_switch") +
                       packet_in_count(stack, "new_flow") > seen, 10,
                       "the controller saw the stray switch's SYN")
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", br], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", near], capture_output=True)
    active = stack.controller_get("/malb/flows?active=1")["flows"]
    assert not [f for f in active if f["client"].startswith("10.0.250.1:")], active
    assert sum(n for v in status(stack)["servers"].values()
               for n in v["flows_assigned"].values()) == assigned
    with open(stack.controller.log_path) as fh:
        log = fh.read()
    assert "0000000000000099 is not in the configuration" in log
    assert "LookupError" not in log


def test_a_killed_instance_gets_no_new_flows_after_the_health_interval(stack, cli):
    node = stack.testbed.node("srv3-ui")
    node.cmd("pkill -f 'services.rom ui'")
    try:
        stack.wait_for(lambda: not status(stack)["servers"]["srv3"]["instances"]["srv3-ui"]
                       ["healthy"], 10, "srv3-ui marked down")
        inst = status(stack)["servers"]["srv3"]["instances"]["srv3-ui"]
        # whichever verdict came first took it out: the probes' (a reset, or silence) or
        # its host agent's reading of a process gone (the last probe may still be answered)
        probe_failed = "reset" in inst["health"] or "no answer" in inst["health"]
        assert probe_failed or not inst["service_check"]["ok"], inst
        who = served_by(cli, UI, 12)
        assert len(who) == 12 and "srv3-ui" not in who and not any(w.startswith("FAIL")
                                                                    for w in who), who
    finally:
        stack.testbed.start_service(stack.cfg.instances_of("ui")[2])
    # back once its service's readings have been good for service_readmit_s
    stack.wait_for(lambda: status(stack)["servers"]["srv3"]["instances"]["srv3-ui"]["healthy"],
                   10 + stack.cfg.controller.health.service_readmit_s, "srv3-ui healthy again")
    assert "srv3-ui" in served_by(cli, UI, 8)


def test_stale_server_is_left_out_of_least_load_but_served_by_round_robin(stack, cli):
    stack.agents["srv1"].stop()
    try:
        stack.wait_for(lambda: stack.profiler_get("/servers")["servers"]["srv1"]["stale"], 10,
                       "profiler marks srv1 stale")
        prof = stack.profiler_get("/servers")["servers"]["srv1"]
        assert prof["error"] and prof["predicted"] is None and prof["age_s"] > 0
        stack.wait_for(lambda: not status(stack)["servers"]["srv1"]["fresh"] or
                       status(stack)["servers"]["srv1"]["sample_age_s"] > 4, 10,
                       "controller sees srv1's data age")
        long_flows = [w.split("-")[0] for w in served_by(cli, BACKEND, 6)]
        assert "srv1" not in long_flows, long_flows
        reasons = [d["reason"] for d in stack.controller_get(
            "/malb/decisions?limit=6&microservice=backend")["decisions"]]
        assert all("left out" in r for r in reasons), reasons
        short_flows = [w.split("-")[0] for w in served_by(cli, UI, 8)]
        assert Counter(short_flows)["srv1"] == 2, short_flows
    finally:
        stack.start_agent("srv1")


def test_profiler_unreachable_keeps_last_weights_then_equal(stack, cli):
    stack.wait_for(lambda: status(stack)["microservices"]["video"]["weights_source"] ==
                   "profiler", 15, "weights from the profiler")
    stack.profiler.stop()
    try:
        stack.wait_for(lambda: status(stack)["profiler"]["reachable"] is False, 10,
                       "controller notices the profiler is gone")
        st = status(stack)
        assert st["profiler"]["last_error"]
        # the last the profiler sent (an answer in flight as it stopped may still land)
        kept = st["microservices"]["video"]["weights"]
        stack.wait_for(lambda: "stale" in status(stack)["microservices"]["video"]
                       ["weights_source"], 10, "weights marked stale")
        assert status(stack)["microservices"]["video"]["weights"] == kept
        with open(stack.controller.log_path) as fh:
            assert "profiler unreachable" in fh.read()
        stack.wait_for(lambda: status(stack)["microservices"]["video"]["weights_source"]
                       .startswith("equal"), 15, "equal weights after the staleness limit")
        w = status(stack)["microservices"]["video"]["weights"]
        assert w["alpha"] == pytest.approx(1 / 3, abs=1e-4)
        # flows are still served meanwhile
        assert all(x.endswith("-be") for x in served_by(cli, BACKEND, 4))
    finally:
        stack.start_profiler()
    stack.wait_for(lambda: status(stack)["microservices"]["video"]["weights_source"] ==
                   "profiler", 20, "profiler weights back")


def _stream_survives(stack, cli, interrupt) -> None:
    url = f"http://{VIP}:8001/stream?rate=200&seconds=10"
    start_download(cli, url, "stream")
    time.sleep(2)
    interrupt()
    code, size = finish_download(cli, "stream", 60)
    assert code == 200 and size == 2_000_000, (code, size)


def test_switch_reconnect_restores_rules_and_connections_continue(stack, cli):
    def drop_switch():
        active = stack.controller_get("/malb/flows?active=1")["flows"]
        assert any(f["microservice"] == "video" for f in active)
        subprocess.run(["ovs-vsctl", "del-controller", "s1"], check=True)
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", "s1"], check=True)
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "s1"],
                             capture_output=True, text=True).stdout
        assert "nw_dst=10.0.0.100" not in out and "set_field" not in out
        time.sleep(1)
        subprocess.run(["ovs-vsctl", "set-controller", "s1", "tcp:127.0.0.1:6653"], check=True)
        stack.wait_switches(15)
        # the reverse NAT rule is back
        stack.wait_for(lambda: "set_field:10.0.0.100->ip_src" in subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "s1"], capture_output=True,
            text=True).stdout, 15, "the reverse NAT rule restored", interval_s=0.2)
    _stream_survives(stack, cli, drop_switch)
    with open(stack.controller.log_path) as fh:
        assert "NAT flows restored" in fh.read()


def test_controller_restart_keeps_existing_connections(stack, cli):
    def restart():
        stack.controller.stop()
        stack.start_controller()
        stack.wait_switches(15)
    _stream_survives(stack, cli, restart)
    stack.wait_for(lambda: status(stack)["profiler"]["reachable"], 10, "profiler reachable")
    with open(stack.controller.log_path) as fh:
        assert "adopted NAT flow" in fh.read()
    # and the new controller serves new flows
    assert len([w for w in served_by(cli, UI, 4) if w.endswith("-ui")]) == 4


# ------------------------------------------------------------------ REST
def _req(stack, method, path, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(stack.controller_url(path), data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          **auth_headers(stack.cfg.security.token)})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read()


def _what_requests_store(stack) -> tuple:
    """The policy and the weights that requests set (source "manual"). The others come
    from the profiler, whose next exchange may change them between two reads."""
    manual = {ms: w for ms, w in stack.controller_get("/malb/weights").items()
              if w["source"] == "manual"}
    return manual, status(stack)["policy"]


@pytest.mark.parametrize("method, path, body, raw, field", [
    ("PUT", "/malb/policy", {"policy": "fastest"}, None, "policy"),
    ("PUT", "/malb/policy", {}, None, "policy"),
    ("PUT", "/malb/policy", None, b"{not json", "body"),
    ("PUT", "/malb/weights", {"video": {"alpha": -1, "beta": 0, "gamma": 1}}, None, "alpha"),
    ("PUT", "/malb/weights", {"video": {"alpha": "x", "beta": 0, "gamma": 1}}, None,
     "video.alpha"),
    ("PUT", "/malb/weights", {"nosuch": None}, None, "nosuch"),
    ("PUT", "/malb/weights", {"video": {"alpha": 1, "beta": 0, "gamma": 0, "delta": 1}}, None,
     "video.delta"),
    ("GET", "/malb/decisions?limit=abc", None, None, "limit"),
    ("POST", "/malb/instances", {}, None, "instance"),
    ("POST", "/malb/instances", {"instance": "srv9-zz"}, None, "instance: no slot"),
    ("PUT", "/malb/instances/srv1-ui", {"draining": "yes"}, None, "draining"),
])
def test_bad_requests_get_400_naming_the_field_and_change_nothing(stack, method, path, body,
                                                                  raw, field):
    before = _what_requests_store(stack)
    code, ctype, payload = _req(stack, method, path, body, raw)
    assert code == 400 and ctype.startswith("application/json")
    assert field in json.loads(payload)["error"]
    assert _what_requests_store(stack) == before


def test_instances_join_drain_and_leave_their_pool_over_rest(stack, cli):
    code, _, payload = _req(stack, "POST", "/malb/instances", {"instance": "srv1-ui"})
    assert code == 409 and "already" in json.loads(payload)["error"]
    code, _, payload = _req(stack, "DELETE", "/malb/instances/srv9-zz")
    assert code == 404
    code, _, _ = _req(stack, "PUT", "/malb/instances/srv2-ui", {"draining": True})
    assert code == 200
    try:
        who = served_by(cli, UI, 6)
        assert len(who) == 6 and "srv2-ui" not in who, who      # draining: no new flows
        # it still carries the flows it had: leaving is refused unless forced
        listing = stack.controller_get("/malb/instances")["instances"]
        if listing["srv2-ui"]["active_flows"]:
            code, _, _ = _req(stack, "DELETE", "/malb/instances/srv2-ui")
            assert code == 409
    finally:
        _req(stack, "PUT", "/malb/instances/srv2-ui", {"draining": False})
    assert "srv2-ui" in served_by(cli, UI, 8)


def test_unknown_routes_get_404_json(stack):
    code, ctype, payload = _req(stack, "GET", "/malb/nothing")
    assert code == 404 and ctype.startswith("application/json") and "error" in json.loads(payload)
    code, _, payload = _req(stack, "DELETE", "/malb/status")
    assert code == 405


def test_manual_weights_override_and_release(stack):
    code, body = stack.controller_put("/malb/weights", {"video": {"alpha": 0, "beta": 0,
                                                                  "gamma": 2}})
    assert code == 200 and body["video"]["source"] == "manual" and body["video"]["gamma"] == 1.0
    assert status(stack)["microservices"]["video"]["weights_source"] == "manual"
    code, body = stack.controller_put("/malb/weights", {"video": None})
    assert code == 200 and body["video"]["source"] != "manual"


def test_prometheus_metrics(stack, cli):
    served_by(cli, UI, 2)
    code, ctype, payload = _req(stack, "GET", "/metrics")
    text = payload.decode()
    assert code == 200 and ctype.startswith("text/plain")
    assert value(text, "malb_decisions_total", microservice="ui") >= 1
    assert value(text, "malb_decision_latency_seconds_count") >= 1
    assert value(text, "malb_packet_in_total", kind="new_flow") >= 2
    # the event loop's lag timer runs, and every kind of event the switch sent was handled
    # (flow statistics and removals parsed by ryu_apps/lazy_parse.py)
    lag = re.search(r"^malb_event_loop_lag_seconds_count (\S+)$", text, re.M)
    assert lag and float(lag.group(1)) > 0
    for event in ("packet_in", "flow_stats", "port_stats", "poll_stats"):
        m = re.search(r'^malb_handler_seconds_count\{event="%s"\} (\S+)$' % event, text, re.M)
        assert m and float(m.group(1)) > 0, event


def test_every_process_serves_conventional_metrics(stack, cli):
    """What `curl /metrics` shows of each running process, the services in their image
    (Debian's prometheus_client) included, names and types by Prometheus's conventions."""
    served_by(cli, UI, 2)
    texts = {"controller": urllib.request.urlopen(stack.controller_url("/metrics"),
                                                  timeout=5).read().decode(),
             "profiler": urllib.request.urlopen(f"{stack.cfg.profiler.url}/metrics",
                                                timeout=5).read().decode()}
    for srv in stack.cfg.servers:
        texts[srv.name] = urllib.request.urlopen(f"{srv.agent_url}/metrics",
                                                 timeout=5).read().decode()
    ms = stack.cfg.microservice("ui")
    inst = stack.cfg.instances_of("ui")[0]
    texts[inst.name] = subprocess.run(
        ["docker", "exec", CONTAINER_PREFIX + inst.name, "curl", "-s", "-m", "5",
         f"http://127.0.0.1:{ms.port}/metrics"], capture_output=True, text=True,
        timeout=15).stdout
    for name, text in texts.items():
        assert convention_problems(text) == [], name
        assert value(text, "malb_build_info") == 1, name
    assert {"rom_requests_total", "rom_request_duration_seconds"} <= set(families(texts[inst.name]))
    srv1 = stack.cfg.servers[0].name
    assert 0 <= value(texts[srv1], "malb_agent_server_utilization_ratio", resource="cpu") <= 1


def test_prometheus_scrapes_the_stack_with_the_shipped_configuration(stack, cli, tmp_path):
    """Debian's Prometheus with deploy.monitoring's scrape configuration for this stack:
    every target up, and every query of the Grafana dashboard evaluates; the figures
    balancing turns on have data."""
    served_by(cli, UI, 4)
    doc = monitoring.scrape_config(stack.cfg)
    doc["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(doc))
    port = free_port()
    api = f"http://127.0.0.1:{port}/api/v1"
    prom = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "log", "w"))
    try:
        def targets_up():
            try:
                active = get_json(f"{api}/targets", 2)["data"]["activeTargets"]
            except HttpError:
                return False
            return len(active) == 2 + len(stack.cfg.servers) and \
                all(t["health"] == "up" for t in active)
        stack.wait_for(targets_up, 30, "Prometheus scraping every process")
        time.sleep(3)           # a few scrapes: rate() needs two
        for panel in monitoring.dashboard()["panels"]:
            for target in panel.get("targets", []):
                answer = get_json(f"{api}/query?query={quote(target['expr'])}", 5)
                assert answer["status"] == "success", (panel["title"], answer)
        names = set(get_json(f"{api}/label/__name__/values", 5)["data"])
        assert {"malb_decisions_total", "malb_packet_in_total", "malb_build_info",
                "malb_agent_server_utilization_ratio", "malb_agent_container_cpu_seconds_total",
                "malb_profiler_weight_ratio", "process_resident_memory_bytes"} <= names
    finally:
        prom.terminate()
        prom.wait(timeout=20)


# what the live view shows, read in one go: the page redraws every period, so elements read
# one by one from Python could belong to two different drawings
SHOWN_JS = """
const text = (root, sel) => { const e = root.querySelector(sel); return e ? e.textContent : null; };
const rows = sel => Array.from(document.querySelectorAll(sel));
return {
  updated: text(document, "#updated"), error: text(document, "#error"),
  policy: text(document, "#policy"),
  microservices: Object.fromEntries(rows("tr[data-microservice]").map(r =>
    [r.dataset.microservice, {vip: text(r, ".vip"), flow_class: text(r, ".flow-class")}])),
  instances: Object.fromEntries(rows("tr[data-instance]").map(r =>
    [r.dataset.instance, text(r, ".health")])),
  servers: rows("div[data-server]").map(c => [c.dataset.server, c.querySelectorAll("svg").length]),
  decisions: rows("#decisions .instance").map(e => e.textContent),
};
"""


def test_the_live_view_shows_what_the_rest_api_says(stack, cli):
    """Headless Chromium loads GET /malb/view from the running controller, waits for its
    data, checks it against the REST answers, and keeps a screenshot (results/)."""
    from selenium.webdriver.support.ui import WebDriverWait
    served_by(cli, UI, 6)
    with chromium() as browser:
        browser.get(stack.controller_url("/malb/view"))
        WebDriverWait(browser, 20).until(
            lambda b: b.execute_script(SHOWN_JS)["decisions"])
        shown = browser.execute_script(SHOWN_JS)
        status = stack.controller_get("/malb/status")
        assert shown["updated"] and shown["error"] == "", shown
        assert shown["policy"] == status["policy"]
        assert shown["microservices"] == {
            name: {"vip": f"{m['vip']}:{m['port']}", "flow_class": m["flow_class"]}
            for name, m in status["microservices"].items()}
        assert shown["instances"] == {
            name: "draining" if i["draining"] else "healthy" if i["healthy"] else "unhealthy"
            for s in status["servers"].values() for name, i in s["instances"].items()}
        assert shown["servers"] == [[name, 3] for name in status["servers"]]
        decided = {d["instance"] for d in stack.controller_get("/malb/decisions")["decisions"]}
        assert set(shown["decisions"]) <= decided
        # the browser met no error of its own on the page (a blocked asset, a script error)
        assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        os.makedirs(os.path.join(ROOT, "results"), exist_ok=True)
        assert browser.save_screenshot(os.path.join(ROOT, "results", "live-view.png"))
