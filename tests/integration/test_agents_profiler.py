"""Host agents and the profiler against real containers (Docker SDK), real agents over
HTTP, and the real controller for flow records."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
import urllib.request

import docker
import pytest

from common.httpjson import auth_headers
from common.procs import python_service
from experiments.stack import Stack
from tests.integration.helpers import FAST_CONFIG, download, served_by

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("clean_machine")]
SOLO_PORT = 9150


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def post(url, body, raw=None, token=None):
    req = urllib.request.Request(url, data=raw if raw is not None else json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json",
                                                         **auth_headers(token)})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())



def wait_until(predicate, what: str, timeout_s: float = 30.0):
    """predicate()'s first true value, asked every 0.2 s; TimeoutError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")


def _run(client, name, command, **kw):
    return client.containers.run("malb/service:latest", command, name=name, detach=True,
                                 network_mode="none", labels={"malb": "1",
                                                              "malb.server": "solo"}, **kw)


def test_agent_reads_a_half_cpu_busy_container_at_45_to_55_percent(tmp_path):
    client = docker.from_env()
    busy = _run(client, "malb-test-busy", ["python3", "-c", "while True: pass"],
                cpu_period=100000, cpu_quota=50000)
    agent = python_service("agent-solo", ["agents", "--server", "solo", "--label",
                                          "malb.server=solo", "--port", str(SOLO_PORT),
                                          "--capacity", "host"],
                           f"http://127.0.0.1:{SOLO_PORT}/health", str(tmp_path / "agent.log"))
    with agent:
        readings = []
        for _ in range(6):
            time.sleep(1.1)
            s = get(f"http://127.0.0.1:{SOLO_PORT}/stats")
            c = next(c for c in s["containers"] if c["name"] == "malb-test-busy")
            if c["cpu_percent"] is not None:
                readings.append(c["cpu_percent"])
        # One reading spans ~1 s of 100 ms CFS periods that the sample times do not align
        # with, so single readings wander a few points; their mean must sit at the quota.
        assert len(readings) >= 3 and all(40 <= r <= 62 for r in readings), readings
        assert 45 <= sum(readings) / len(readings) <= 55, readings
        # over a window of its last 3 s (what the profiler asks for): the same quota, and
        # the seconds measured are the window's
        s = get(f"http://127.0.0.1:{SOLO_PORT}/stats?window_s=3")
        c = next(c for c in s["containers"] if c["name"] == "malb-test-busy")
        assert 45 <= c["cpu_percent"] <= 55 and 2.5 <= s["period_s"] <= 3.6, s

        # a container that appears is followed; one that is not running is reported as
        # such, never as zero
        idle = _run(client, "malb-test-idle", ["sleep", "600"])
        created = client.containers.create("malb/service:latest", ["sleep", "1"],
                                           name="malb-test-created", network_mode="none",
                                           labels={"malb": "1", "malb.server": "solo"})

        def containers_when(condition):
            def check():
                by_name = {c["name"]: c for c in get(f"http://127.0.0.1:{SOLO_PORT}/stats")[
                    "containers"]}
                return condition(by_name) and by_name
            return check
        by_name = wait_until(containers_when(
            lambda c: "malb-test-created" in c and (c.get("malb-test-idle") or {}).get(
                "memory_bytes")), "the agent follows the two new containers")
        assert by_name["malb-test-idle"]["readable"] and \
            by_name["malb-test-idle"]["memory_bytes"] > 0
        gone = by_name["malb-test-created"]
        assert gone["readable"] is False and gone["state"] == "created"
        assert gone["cpu_percent"] is None and gone["memory_bytes"] is None
        assert "created" in gone["error"]
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{SOLO_PORT}/metrics").read().decode()
        assert 'container="malb-test-busy"' in metrics
        # one that disappears is dropped
        idle.remove(force=True)
        names = wait_until(containers_when(lambda c: "malb-test-idle" not in c),
                           "the agent drops the removed container")
        assert "malb-test-busy" in names
        created.remove(force=True)
    busy.remove(force=True)


def test_profiler_collects_two_agents_marks_a_dead_one_stale_and_recovers(tmp_path):
    data = {**FAST_CONFIG, "servers": {"count": 2}, "testbed": {"clients": 1},
            "profiler": {**FAST_CONFIG["profiler"], "agent_window_s": 2.5}}
    with Stack(data, str(tmp_path), controller=False) as st:
        def both_fresh():
            servers = st.profiler_get("/servers")["servers"]
            return all(not v["stale"] and v["complete"] for v in servers.values())
        st.wait_for(both_fresh, 30, "profiler has a complete sample of both servers")
        # each sample measures the agent's last 2.5 s (its nearest: 2 or 3 one-second
        # samples back), not its last second, once the agent has sampled that long
        st.wait_for(lambda: all((v["sample_window_s"] or 0) >= 1.8 for v in
                                st.profiler_get("/servers")["servers"].values()), 15,
                    "samples over the window")
        assert all(v["sample_window_s"] <= 3.6
                   for v in st.profiler_get("/servers")["servers"].values())
        profiles = st.profiler_get("/profiles")["microservices"]
        assert set(profiles) == {"video", "ui", "backend"}
        assert profiles["video"]["instances"] == 2 and profiles["video"]["samples"] > 0
        w = profiles["video"]["weights"]
        assert w["alpha"] + w["beta"] + w["gamma"] == pytest.approx(1.0, abs=1e-4)

        st.agents["srv2"].kill()
        st.wait_for(lambda: st.profiler_get("/servers")["servers"]["srv2"]["stale"], 10,
                    "srv2 stale")
        time.sleep(1.5)
        srv2 = st.profiler_get("/servers")["servers"]["srv2"]
        assert srv2["stale"] and srv2["predicted"] is None
        assert srv2["age_s"] > 3 and srv2["error"]
        # the last reading is kept (not refreshed into zeros): it is the last fresh sample
        db = sqlite3.connect(os.path.join(str(tmp_path), "history.sqlite"))
        last = db.execute("SELECT cpu, mem FROM server_samples WHERE server = 'srv2' AND "
                          "stale = 0 ORDER BY t DESC LIMIT 1").fetchone()
        db.close()
        assert srv2["cpu"] is not None and srv2["mem"] > 0
        assert (srv2["cpu"], srv2["mem"]) == pytest.approx(last, abs=1e-3)
        assert not st.profiler_get("/servers")["servers"]["srv1"]["stale"]

        st.start_agent("srv2")
        st.wait_for(lambda: not st.profiler_get("/servers")["servers"]["srv2"]["stale"], 15,
                    "srv2 recovered")


def test_profiler_killed_with_sigkill_keeps_its_history(tmp_path):
    data = {**FAST_CONFIG, "servers": {"count": 1}, "testbed": {"clients": 1}}
    with Stack(data, str(tmp_path), controller=False) as st:
        st.wait_for(lambda: st.profiler_get("/health")["history"]["server_samples"] >= 4, 20,
                    "some history")
        committed = st.profiler_get("/health")["history"]
        st.profiler.kill(signal.SIGKILL)
        db = sqlite3.connect(os.path.join(str(tmp_path), "history.sqlite"))
        for table, n in committed.items():
            assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] >= n, table
        # a restarted profiler appends to the same history
        st.start_profiler()
        st.wait_for(lambda: st.profiler_get("/health")["history"]["server_samples"] >
                    committed["server_samples"], 10, "history grows again")


def test_profiler_rejects_bad_input_with_400_naming_the_field(tmp_path):
    data = {**FAST_CONFIG, "servers": {"count": 1}, "testbed": {"clients": 1}}
    with Stack(data, str(tmp_path), controller=False, agents=False) as st:
        url = st.cfg.profiler.url
        cases = [
            ({"flows": [{"flow_id": "a", "microservice": "ui", "duration_s": -1,
                         "active": False}]}, "flows[0].duration_s"),
            ({"flows": [{"flow_id": "a", "microservice": "ui", "duration_s": 1}]},
             "flows[0].active"),
            ({"flows": "x"}, "flows"),
            ([], "body"),
        ]
        for body, field in cases:
            code, payload = post(f"{url}/flows", body, token=st.cfg.security.token)
            assert code == 400 and payload["error"].startswith(field), payload
        code, payload = post(f"{url}/flows", None, raw=b"{oops", token=st.cfg.security.token)
        assert code == 400 and "JSON" in payload["error"]
        assert get(f"{url}/health")["history"]["flows"] == 0      # nothing stored
        ok = {"flows": [{"flow_id": "f1", "microservice": "ui", "duration_s": 0.4,
                         "bytes": 10, "active": False}]}
        assert post(f"{url}/flows", ok, token=st.cfg.security.token)[0] == 200
        assert get(f"{url}/health")["history"]["flows"] == 1
        with pytest.raises(urllib.error.HTTPError) as err:
            get(f"{url}/history?kind=server&key=srv1&column=nope")
        assert err.value.code == 400
        with pytest.raises(urllib.error.HTTPError) as err:
            get(f"{url}/nothing")
        assert err.value.code == 404


def test_flow_classes_from_real_flows_reach_the_controller(tmp_path):
    data = json.loads(json.dumps(FAST_CONFIG))
    data["microservices"] = [
        {"name": "video", "abbrev": "vid", "port": 8001, "flow_class": "auto"},
        {"name": "ui", "abbrev": "ui", "port": 8002, "flow_class": "auto"},
        {"name": "backend", "abbrev": "be", "port": 8003, "flow_class": "long"},
    ]
    data["servers"] = {"count": 2}
    with Stack(data, str(tmp_path), policy="malb") as st:
        cli = st.testbed.node("cli1")
        assert len(served_by(cli, "http://10.0.0.100:8002/object?size=10000", 6)) == 6
        for _ in range(5):   # streams of 3 s: longer than the 2 s threshold
            cli.cmd("curl -s -o /dev/null --max-time 10 "
                    "'http://10.0.0.100:8001/stream?rate=100&seconds=3' &")
        time.sleep(4)

        def classified():
            p = st.profiler_get("/profiles")["microservices"]
            return p["ui"]["flow_class"] == "short" and p["video"]["flow_class"] == "long" and p
        # rules expire after the idle timeout (5 s); flow records follow within a period
        profiles = st.wait_for(classified, 30, "profiler classifies ui short, video long")
        assert profiles["ui"]["flows"]["count"] >= 5
        assert profiles["ui"]["flows"]["median_s"] < 2 <= profiles["video"]["flows"]["median_s"]
        st.wait_for(lambda: st.controller_get("/malb/status")["microservices"]["ui"]
                    ["flow_class_source"] == "profiler", 10, "controller uses the class")
        ms = st.controller_get("/malb/status")["microservices"]
        assert ms["ui"]["flow_class"] == "short" and ms["video"]["flow_class"] == "long"
        code, size, who = download(cli, "http://10.0.0.100:8002/object?size=1000")
        assert code == 200
        last = st.controller_get("/malb/decisions?limit=1&microservice=ui")["decisions"][-1]
        assert last["algorithm"] == "least-remaining"       # malb's short-flow choice


def test_an_experiment_whose_monitoring_sees_no_container_of_a_server_stops_and_says_so(
        tmp_path):
    data = {**FAST_CONFIG, "servers": {"count": 2}, "testbed": {"clients": 1}}
    with Stack(data, str(tmp_path), controller=False, start_services=False) as st:
        # which testbed ran is beside the run's configuration, whatever the entry point
        assert json.loads((tmp_path / "testbed.json").read_text()) == st.testbed.describe()
        assert st.testbed.describe()["backend"] in ("mininet", "containernet")
        for inst in st.cfg.instances_on("srv2"):
            docker.from_env().containers.get(inst.container).remove(force=True)
        time.sleep(4)     # its last complete sample, from before, is over 3 periods old
        with pytest.raises(RuntimeError, match="no reading of the instance.*srv2-be"):
            st.wait_monitoring(3)       # it never completes: the message is the test
