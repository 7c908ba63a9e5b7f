"""Probes end to end: real services in the testbed's containers, real agents reading them
inside the containers' network namespaces (GET /probes), and the real controller polling
them four times a second while its policy reads probes (prequal, set over REST), and at the
health checks' pace (once a second) otherwise."""
from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from experiments.stack import Stack
from tests.integration.helpers import FAST_CONFIG
from tests.lib.metrics import value
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration
VIP = "10.0.0.100"
JOB_S = 12
CONFIG = {**FAST_CONFIG, "servers": {"count": 2}, "testbed": {"clients": 1}}


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def metric(stack, name: str, server: str) -> float:
    text = urllib.request.urlopen(stack.controller_url("/metrics"), timeout=5).read().decode()
    m = re.search(rf'^{name}{{server="{server}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def instance_probes(stack) -> dict:
    return {name: inst["probe"] for s in stack.controller_get("/malb/status")["servers"]
            .values() for name, inst in s["instances"].items()}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    clean_testbed(quiet=True)
    st = Stack(CONFIG, str(tmp_path_factory.mktemp("probes")), policy="srr")
    with st:
        yield st
    clean_testbed(quiet=True)


def answers_in(stack, seconds: float) -> float:
    """How many /probes answers of srv1 the controller counted over the next seconds."""
    before = metric(stack, "malb_probe_answers_total", "srv1")
    time.sleep(seconds)
    return metric(stack, "malb_probe_answers_total", "srv1") - before


def test_probes_show_jobs_in_flight_and_the_controller_polls_faster_under_a_probe_policy(
        stack):
    agents = {s.name: f"{s.agent_url}/probes" for s in stack.cfg.servers}
    # srr reads no probes: the controller asks only for the services' health, twice per
    # health interval
    health_period = stack.cfg.controller.health.interval_s / 2
    st = stack.controller_get("/malb/status")
    assert st["probes"]["polling"] is False and st["policy"] == "srr"
    assert st["probes"]["polling_for_health"] is True
    assert st["probes"]["period_s"] == health_period
    assert 3.0 / health_period - 2 <= answers_in(stack, 3.0) <= 3.0 / health_period + 1

    # the agents answer on demand: every instance, idle
    for server, url in agents.items():
        answer = get(url)
        assert answer["server"] == server and answer["failed"] == 0, answer
        assert set(answer["instances"]) == {f"{server}-{a}" for a in ("vid", "ui", "be")}
        assert all(e["in_flight"] == 0 and e["error"] is None
                   for e in answer["instances"].values()), answer

    # four back-end jobs through the VIP: round robin puts two on each back-end instance
    cli = stack.testbed.node("cli1")
    for k in range(4):
        cli.cmd(f"curl -s -o /dev/null --max-time 60 "
                f"'http://{VIP}:8003/job?seconds={JOB_S}&cpu=0.05' > /tmp/probe-job-{k} 2>&1 &")
    started = time.time()

    def backend_in_flight():
        answers = {s: get(url) for s, url in agents.items()}
        return {f"{s}-be": a["instances"][f"{s}-be"]["in_flight"] for s, a in answers.items()}
    stack.wait_for(lambda: backend_in_flight() == {"srv1-be": 2, "srv2-be": 2}, 5,
                   "two jobs in flight on each back-end instance")
    seen = time.time()
    for url in agents.values():
        answer = get(url)
        e = answer["instances"]
        assert e[f"{answer['server']}-vid"]["in_flight"] == 0
        assert e[f"{answer['server']}-ui"]["in_flight"] == 0
        assert answer["took_ms"] < 250, answer           # within the per-instance timeout

    # a policy that reads probes, set over REST: the controller polls, every probe fresh
    code, _ = stack.controller_put("/malb/policy", {"policy": "prequal"})
    assert code == 200

    def fresh_probes():
        # fresh, and read after the jobs were seen in flight: the health checks' last
        # reading can be a fraction of a second old and still predate the jobs
        asked = time.time()
        probes = instance_probes(stack)
        return all(p is not None and p["age_s"] < min(1.0, asked - seen)
                   for p in probes.values()) and probes
    probes = stack.wait_for(fresh_probes, 3, "fresh probes of every instance", 0.1)
    assert time.time() - started < JOB_S - 2, "the jobs ended before the check"
    assert probes["srv1-be"]["in_flight"] == 2 and probes["srv2-be"]["in_flight"] == 2, probes
    assert probes["srv1-ui"]["in_flight"] == 0 and probes["srv1-ui"]["latency_s"] is None
    st = stack.controller_get("/malb/status")
    assert st["probes"]["polling"] is True
    assert all(a["last_error"] is None and a["last_answer_age_s"] < 1
               for a in st["probes"]["agents"].values()), st["probes"]
    # prequal decides a new ui object on the probes (every instance idle: all cold)
    cli.cmd(f"curl -s -o /dev/null --max-time 20 'http://{VIP}:8002/object?size=1000'")
    last = stack.controller_get("/malb/decisions?limit=1")["decisions"][-1]
    assert (last["policy"], last["algorithm"], last["microservice"]) == (
        "prequal", "hot-cold-lexicographic", "ui"), last
    probe_period = stack.cfg.controller.probe_period_s
    assert answers_in(stack, 3.0) >= 3.0 / probe_period - 2   # 0.25 s apart
    assert metric(stack, "malb_probe_failures_total", "srv1") == 0

    # back to srr: the polling slows to the health checks' pace
    code, _ = stack.controller_put("/malb/policy", {"policy": "srr"})
    assert code == 200
    time.sleep(1.1)                   # a poll under way may still land
    assert answers_in(stack, 3.0) <= 3.0 / health_period + 1
    assert stack.controller_get("/malb/status")["probes"]["polling"] is False

    # the jobs end: nothing in flight, their latencies in the window
    stack.wait_for(lambda: backend_in_flight() == {"srv1-be": 0, "srv2-be": 0},
                   JOB_S + 10, "the jobs done")
    for server, url in agents.items():
        be = get(f"{url}?window_s=30")["instances"][f"{server}-be"]
        assert be["count"] == 2 and be["p50_ms"] >= 1000 * JOB_S and be["error"] is None, be


def test_an_instance_whose_service_is_down_is_reported_with_its_error(stack):
    node = stack.testbed.node("srv2-vid")
    node.cmd("pkill -f 'services.rom video'")
    try:
        url = f"{stack.cfg.server('srv2').agent_url}/probes"
        stack.wait_for(lambda: get(url)["instances"]["srv2-vid"]["error"], 5,
                       "srv2-vid's reading failing")
        failing = time.time()
        answer = get(url)
        vid = answer["instances"]["srv2-vid"]
        assert "Connection refused" in vid["error"], vid
        assert vid["in_flight"] is None and vid["p50_ms"] is None and vid["count"] is None
        assert answer["failed"] == 1 and answer["instances"]["srv2-ui"]["error"] is None
        # the controller keeps the last probe it had and counts the failures
        code, _ = stack.controller_put("/malb/policy", {"policy": "prequal"})
        assert code == 200
        stack.wait_for(lambda: metric(stack, "malb_probe_readings_total", "srv2") > 0 and
                       value(urllib.request.urlopen(stack.controller_url("/metrics")).read()
                             .decode(), "malb_probe_failures_total", server="srv2",
                             kind="instance"), 3, "srv2's failed reading counted")
        asked = time.time()
        probes = instance_probes(stack)
        assert probes["srv2-ui"]["age_s"] < 1.0
        # no reading of it since its readings fail (the agent holds one reading of an
        # instance at a time: every one that succeeded ended before the failing one);
        # asked - age_s is at most the probe's time on the controller's clock
        assert probes["srv2-vid"] is None or \
            asked - probes["srv2-vid"]["age_s"] <= failing, (probes["srv2-vid"], asked - failing)
        # the health checks see its service refuse: out of its pool
        stack.wait_for(lambda: not stack.controller_get("/malb/status")["servers"]["srv2"]
                       ["instances"]["srv2-vid"]["healthy"], 6, "srv2-vid out of its pool")
    finally:
        stack.controller_put("/malb/policy", {"policy": "srr"})
        stack.testbed.start_service(stack.cfg.instances_of("video")[1])
