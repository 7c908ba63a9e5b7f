"""The agent's GET /probes (agents/probes.py, agents/agent.py): parsing a service's reading,
the answer built from fake readers (parallel, a per-instance timeout, a stuck service held
once, errors never zeros), the HTTP route's checks, and readings through sockets made in
another network namespace (root only)."""
from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import threading
import time
import types

import pytest

from agents.agent import Agent, Selector, agent_routes, http_server
from agents.dockerstats import Capacity
from common.metrics import render
from agents.probes import NetnsSockets, ProbeError, Prober, Target, parse_latency_answer, \
    read_latency
from tests.lib.metrics import value
from tests.lib.services import start_service

NOW = 1_700_000_000.0


def ok_reading(in_flight=1, count=4, p50=10.0, p99=20.0):
    return {"in_flight": in_flight, "count": count, "p50_ms": p50, "p99_ms": p99}


def target(name, pid=100, port=8002, state="running"):
    return Target(f"mn.{name}", name, name.split("-")[1], port, pid, state)


# ---------------------------------------------------------------- parsing a reading
def http_answer(body, status="200 OK") -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return f"HTTP/1.0 {status}\r\nContent-Type: application/json\r\n\r\n".encode() + data


def test_a_reading_is_parsed_and_anything_else_is_a_one_line_error():
    good = {"window_s": 1, "count": 3, "p50_ms": 4.5, "p90_ms": 6, "p95_ms": 7, "p99_ms": 8.25,
            "in_flight": 2}
    assert parse_latency_answer(http_answer(good)) == {"in_flight": 2, "count": 3,
                                                       "p50_ms": 4.5, "p99_ms": 8.25}
    idle = {**good, "count": 0, "p50_ms": None, "p99_ms": None, "in_flight": 0}
    assert parse_latency_answer(http_answer(idle))["p50_ms"] is None
    for raw, message in [
            (b"HTTP/1.0 200 OK\r\nContent-Type: application/json", "incomplete HTTP answer"),
            (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP answer"),
            (http_answer(b"window: bad\n", "400 Bad Request"), "HTTP 400"),
            (http_answer(b"<html>"), "not JSON"),
            (http_answer([1, 2]), "not a JSON object"),
            (http_answer({k: v for k, v in good.items() if k != "in_flight"}),
             "no in_flight"),
            (http_answer({**good, "in_flight": -1}), "in_flight: expected a number >= 0"),
            (http_answer({**good, "in_flight": True}), "in_flight: expected a number >= 0"),
            (http_answer({**good, "count": None}), "count: expected a number >= 0"),
            (http_answer({**good, "p99_ms": "slow"}), "p99_ms: expected a number >= 0"),
            (http_answer({**good, "p50_ms": None}), "requests counted but no quantiles")]:
        with pytest.raises(ProbeError, match=message):
            parse_latency_answer(raw)


# ---------------------------------------------------------------- the answer, fake readers
def test_every_instance_is_read_in_parallel_and_reported_with_its_time_and_age():
    calls = []
    # each reading returns only once all six are under way at once: read one after
    # another, the first would wait for the others until its timeout
    all_six = threading.Barrier(6)

    def reader(pid, port, window_s, timeout_s):
        calls.append((pid, port, window_s, timeout_s))
        all_six.wait(timeout_s)
        return ok_reading(in_flight=pid - 100)
    prober = Prober(reader, timeout_s=10.0)
    targets = [target(f"srv1-s{k}", pid=100 + k, port=9000 + k) for k in range(6)]
    answer = prober.answer("srv1", targets, 2.5)
    assert sorted(calls) == [(100 + k, 9000 + k, 2.5, 10.0) for k in range(6)]
    assert answer["server"] == "srv1" and answer["window_s"] == 2.5 and answer["failed"] == 0
    for k in range(6):
        e = answer["instances"][f"srv1-s{k}"]
        assert e["error"] is None and e["in_flight"] == k and e["count"] == 4
        assert e["container"] == f"mn.srv1-s{k}" and e["port"] == 9000 + k
        # read within this answer: no older than the answer took
        assert 0 <= e["age_s"] <= answer["took_ms"] / 1000 + 1e-3
        assert e["time"] <= answer["time"]
    prober.shutdown()


def test_a_stuck_service_times_out_alone_and_holds_one_reading_until_it_answers():
    release, ended = threading.Event(), threading.Event()
    calls = {"stuck": 0, "fine": 0}

    def reader(pid, port, window_s, timeout_s):
        if pid == 1:
            calls["stuck"] += 1
            try:
                release.wait(60)        # a real reading gives up at its own deadline
                raise ProbeError(f"no answer within {timeout_s:g} s")
            finally:
                ended.set()
        calls["fine"] += 1
        return ok_reading()
    prober = Prober(reader, timeout_s=0.2)
    targets = [target("srv1-be", pid=1), target("srv1-ui", pid=2)]
    first = prober.answer("srv1", targets, 1.0)
    assert not ended.is_set()          # the answer did not wait for the stuck reading
    stuck = first["instances"]["srv1-be"]
    assert stuck["error"] == "no answer within 0.2 s" and first["failed"] == 1
    assert stuck["in_flight"] is None and stuck["count"] is None and stuck["p50_ms"] is None
    assert first["instances"]["srv1-ui"]["error"] is None
    # asked again: the stuck reading is waited for, not started again
    second = prober.answer("srv1", targets, 1.0)
    assert second["instances"]["srv1-be"]["error"] == "no answer within 0.2 s"
    other_window = prober.answer("srv1", targets, 5.0)["instances"]["srv1-be"]["error"]
    assert "a reading over another window (1 s) is under way" in other_window
    assert calls == {"stuck": 1, "fine": 3}           # no second thread for the stuck one
    release.set()
    assert ended.wait(10)
    ended.clear()
    prober.answer("srv1", targets, 1.0)
    assert calls == {"stuck": 2, "fine": 4}
    prober.shutdown()


def test_two_requests_at_once_share_the_readings_under_way():
    calls, asked = [], []
    release = threading.Event()

    def reader(pid, port, window_s, timeout_s):
        calls.append(pid)
        release.wait(timeout_s)         # held until the second request is in
        return ok_reading(in_flight=pid)

    def monotonic():
        # answer() reads it first thing: the second request is in once it has been read
        # twice (its lookup of the readings under way follows at once, so a margin of a
        # second before the readings end is more than enough on any machine)
        asked.append(1)
        if len(asked) == 2:
            threading.Timer(1.0, release.set).start()
        return time.monotonic()
    prober = Prober(reader, timeout_s=30.0, monotonic=monotonic)
    targets = [target("srv1-be", pid=1), target("srv1-ui", pid=2)]
    answers = []
    askers = [threading.Thread(target=lambda: answers.append(prober.answer("srv1", targets,
                                                                            1.0)))
              for _ in range(2)]
    for a in askers:
        a.start()
    for a in askers:
        a.join()
    assert sorted(calls) == [1, 2]                      # each instance read once
    for answer in answers:
        assert answer["failed"] == 0 and answer["instances"]["srv1-be"]["in_flight"] == 1
    prober.shutdown()


def test_failures_are_reported_with_their_error_never_as_zeros():
    def reader(pid, port, window_s, timeout_s):
        if pid == 1:
            raise ProbeError("port 8003: Connection refused")
        if pid == 2:
            raise ZeroDivisionError("a bug")
        return ok_reading(in_flight=0, count=0, p50=None, p99=None)
    prober = Prober(reader, timeout_s=0.5)
    answer = prober.answer("srv1", [target("srv1-be", pid=1), target("srv1-ui", pid=2),
                                    target("srv1-vid", pid=None, state="exited"),
                                    target("srv1-s1", pid=None, state="running"),
                                    target("srv1-s2", pid=3)], 1.0)
    e = answer["instances"]
    assert e["srv1-be"]["error"] == "port 8003: Connection refused"
    assert e["srv1-ui"]["error"] == "ZeroDivisionError: a bug"
    assert e["srv1-vid"]["error"] == "container is exited"
    assert e["srv1-s1"]["error"] == "container's process not known yet"
    for name in ("srv1-be", "srv1-ui", "srv1-vid", "srv1-s1"):
        assert all(e[name][k] is None for k in ("in_flight", "count", "p50_ms", "p99_ms",
                                                "time", "age_s"))
    assert e["srv1-s2"]["error"] is None and e["srv1-s2"]["in_flight"] == 0
    assert answer["failed"] == 4
    prober.shutdown()


def test_a_failed_reading_says_what_it_tells_of_the_service():
    """The controller's health checks read error_kind: a service that answered, however
    badly, is alive; a stopped process, a container not running, a port that refuses or no
    answer are not; the agent's own trouble says nothing."""
    stopped_pids = {5}

    def reader(pid, port, window_s, timeout_s):
        if pid == 1:
            raise ProbeError("port 8003: Connection refused", "refused")
        if pid == 2:
            raise ProbeError(f"no answer within {timeout_s:g} s", "timeout")
        if pid == 3:
            raise ProbeError("GET /latency: HTTP 404 ''")
        if pid == 4:
            raise OSError("a bug")
        return ok_reading()
    prober = Prober(reader, timeout_s=0.5, stopped=stopped_pids.__contains__)
    e = prober.answer("srv1", [target("srv1-a", pid=1), target("srv1-b", pid=2),
                               target("srv1-c", pid=3), target("srv1-d", pid=4),
                               target("srv1-e", pid=5),
                               target("srv1-f", pid=None, state="paused"),
                               target("srv1-g", pid=None, state="exited"),
                               target("srv1-h", pid=None, state="running"),
                               target("srv1-i", pid=6)], 1.0, timeout_s=0.25)["instances"]
    assert {n: v["error_kind"] for n, v in e.items()} == {
        "srv1-a": "refused", "srv1-b": "timeout", "srv1-c": "answer", "srv1-d": "unavailable",
        "srv1-e": "stopped", "srv1-f": "stopped", "srv1-g": "not-running",
        "srv1-h": "unavailable", "srv1-i": None}
    assert e["srv1-b"]["error"] == "no answer within 0.25 s"     # the timeout asked for
    assert e["srv1-e"]["error"] == "its process is stopped"
    prober.shutdown()


def test_an_answer_that_joins_a_reading_under_way_reports_that_readings_timeout():
    def reader(pid, port, window_s, timeout_s):
        time.sleep(timeout_s)
        raise ProbeError(f"no answer within {timeout_s:g} s", "timeout")
    prober = Prober(reader, timeout_s=0.25)
    quick = threading.Thread(target=prober.answer, args=("srv1", [target("srv1-ui")], 1.0))
    quick.start()
    time.sleep(0.05)
    # a health poll asks for 1 s, but the service is given only what the quick one gave
    e = prober.answer("srv1", [target("srv1-ui")], 1.0, timeout_s=1.0)["instances"]["srv1-ui"]
    quick.join()
    assert (e["error_kind"], e["timeout_s"]) == ("timeout", 0.25)
    fresh = prober.answer("srv1", [target("srv1-ui")], 1.0, timeout_s=0.5)["instances"]
    assert fresh["srv1-ui"]["timeout_s"] == 0.5
    prober.shutdown()


def test_a_process_stopped_by_sigstop_is_told_from_a_running_one():
    from agents.probes import process_stopped
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert not process_stopped(proc.pid)
        proc.send_signal(19)                   # SIGSTOP
        deadline = time.monotonic() + 5
        while not process_stopped(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process_stopped(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not process_stopped(proc.pid)       # gone: cannot be told


# ---------------------------------------------------------------- the agent's route
class FakeContainer(types.SimpleNamespace):
    pass


def make_agent(reader):
    agent = Agent("srv1", Selector(names={"mn.srv1-ui": ("srv1-ui", "ui"),
                                          "mn.srv1-be": ("srv1-be", "backend")}),
                  lambda: Capacity(1.0, 1 << 30, 1e6, "config"), client=object(),
                  probe_ports={"mn.srv1-ui": 8002, "mn.srv1-be": 8003}, probe_window_s=1.5,
                  prober=Prober(reader, timeout_s=0.3))
    return agent


@pytest.fixture
def agent_http():
    seen = []

    def reader(pid, port, window_s, timeout_s):
        seen.append((pid, port, window_s))
        return ok_reading(in_flight=port - 8000)
    agent = make_agent(reader)
    server = http_server(("127.0.0.1", 0), agent_routes(agent), name="agent-srv1")
    server.start_background()

    def call(path):
        conn = http.client.HTTPConnection(*server.server_address, timeout=5)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, json.loads(r.read())
        finally:
            conn.close()
    call.agent, call.seen = agent, seen
    yield call
    server.shutdown()
    server.server_close()
    agent.stop()
    agent.pool.shutdown()


def publish(agent):
    """What a sample sees: the ui running (pid 41), the back-end stopped, a stranger."""
    mine = [FakeContainer(name="mn.srv1-ui", status="running", labels={},
                          attrs={"State": {"Pid": 41}}),
            FakeContainer(name="mn.srv1-be", status="exited", labels={},
                          attrs={"State": {"Pid": 0}}),
            FakeContainer(name="mn.other", status="running", labels={},
                          attrs={"State": {"Pid": 7}})]
    agent._note_probe_targets(mine)
    agent._publish(time.time(), [], None, time.monotonic())


def test_get_probes_answers_every_instance_container_of_the_server(agent_http):
    status, body = agent_http("/probes")
    assert status == 503 and "no sample yet" in body["error"]
    publish(agent_http.agent)
    status, body = agent_http("/probes")
    assert status == 200, body
    assert set(body["instances"]) == {"srv1-ui", "srv1-be"}
    ui, be = body["instances"]["srv1-ui"], body["instances"]["srv1-be"]
    assert ui["in_flight"] == 2 and ui["error"] is None and ui["microservice"] == "ui"
    assert be["error"] == "container is exited" and be["in_flight"] is None
    assert agent_http.seen == [(41, 8002, 1.5)]                 # the configured default
    status, body = agent_http("/probes?window_s=10")
    assert status == 200 and body["window_s"] == 10.0 and agent_http.seen[-1] == (41, 8002, 10)
    metrics = render(agent_http.agent.metrics)
    assert value(metrics, "malb_agent_probe_answer_seconds_count", server="srv1") == 2
    assert value(metrics, "malb_agent_probe_failures_total", server="srv1",
                 container="mn.srv1-be") == 2
    # the controller's health checks ask for their own timeout
    status, body = agent_http("/probes?timeout_s=2")
    assert status == 200 and body["timeout_s"] == 2.0
    assert body["instances"]["srv1-be"]["error_kind"] == "not-running"


@pytest.mark.parametrize("query, message", [
    ("window_s=0.05", "window_s: expected seconds in [0.1, 60], got '0.05'"),
    ("window_s=61", "window_s: expected seconds in [0.1, 60], got '61'"),
    ("window_s=nan", "window_s: expected seconds in [0.1, 60], got 'nan'"),
    ("window_s=soon", "window_s: expected seconds in [0.1, 60], got 'soon'"),
    ("window=1", "window: unknown query parameter (known: window_s, timeout_s)"),
    ("timeout_s=0", "timeout_s: expected seconds in [0.01, 10], got '0'"),
    ("timeout_s=inf", "timeout_s: expected seconds in [0.01, 10], got 'inf'"),
])
def test_bad_probe_queries_are_400_naming_the_parameter(agent_http, query, message):
    publish(agent_http.agent)
    status, body = agent_http(f"/probes?{query}")
    assert status == 400 and body["error"] == message
    assert agent_http.seen == []


# ---------------------------------------------------------------- another network namespace
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="setns(2) needs root (and unshare to make a namespace)")


@pytest.mark.integration       # root: run with the integration tier
@needs_root
def test_a_reading_goes_into_the_process_network_namespace_and_the_thread_comes_back():
    proc, port = start_service(["services.rom", "ui"])       # in the agent's namespace
    other = subprocess.Popen(["unshare", "--net", "sleep", "30"])   # a namespace of its own
    ns = NetnsSockets()
    try:
        home = os.stat("/proc/thread-self/ns/net").st_ino
        # our own namespace: the service answers
        assert read_latency(ns, os.getpid(), port, 1.0, 2.0)["in_flight"] == 0
        assert os.stat("/proc/thread-self/ns/net").st_ino == home
        for _ in range(50):       # unshare has made its namespace once it differs from ours
            if os.stat(f"/proc/{other.pid}/ns/net").st_ino != home:
                break
            time.sleep(0.02)
        # the same port in the other namespace: nothing listens there (its loopback is
        # even down), so the socket was made there
        with pytest.raises(ProbeError, match=f"port {port}: "):
            read_latency(ns, other.pid, port, 1.0, 2.0)
        assert os.stat("/proc/thread-self/ns/net").st_ino == home
        with pytest.raises(ProbeError, match="its network namespace"):
            read_latency(ns, 2 ** 22 + 1, port, 1.0, 2.0)          # no such process
        # readings from a pool's threads: each thread back home after its reading
        prober = Prober(lambda pid, p, w, t: read_latency(ns, pid, p, w, t), timeout_s=2.0)
        answer = prober.answer("srv1", [Target("c1", "srv1-ui", "ui", port, os.getpid(),
                                               "running"),
                                        Target("c2", "srv2-ui", "ui", port, other.pid,
                                               "running")], 1.0)
        assert answer["instances"]["srv1-ui"]["error"] is None
        assert answer["instances"]["srv2-ui"]["error"].startswith(f"port {port}: ")
        homes = list(prober.pool.map(lambda _: os.stat("/proc/thread-self/ns/net").st_ino,
                                     range(8)))
        assert set(homes) == {home}
        prober.shutdown()
    finally:
        ns.close()
        other.kill()
        other.wait()
        proc.terminate()
        proc.wait(timeout=10)
