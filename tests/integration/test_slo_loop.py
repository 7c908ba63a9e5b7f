"""The host SLO loop in the testbed: a real container pinned to a core, its CPU quota as the
emulated frequency, real load. The frequency follows a load step; a dead service puts it at
the maximum; stopping the agent restores the container's quota; a bad PUT changes nothing."""
from __future__ import annotations

import json
import os
import time

import docker
import pytest

from common.config import load_config_data
from common.httpjson import HttpError, get_json, put_json
from experiments.stack import Stack
from slo.actuators import cgroup_cpu_dir
from tests.conftest import ROOT
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration
PERIOD_S = 1.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    clean_testbed(quiet=True)
    data = load_config_data(os.path.join(ROOT, "configs", "slo.yaml"))
    # a target that 90 requests/s at the lower frequencies breaks, so the step shows both ways
    data["microservices"][0]["slo"]["target_ms"] = 40
    # a short window and dwell so a 20-second step shows; the rule is the default one
    data["agents"]["slo"] = {"period_s": PERIOD_S, "window_s": 3, "min_samples": 20,
                             "dwell_s": 1.5, "actuator": "emulated"}
    with Stack(data, str(tmp_path_factory.mktemp("slo")), policy="malb",
               profiler=False) as st:
        yield st
    clean_testbed(quiet=True)


def agent(stack) -> str:
    return stack.cfg.server("srv1").agent_url


def loop_status(stack) -> dict:
    return get_json(f"{agent(stack)}/slo", 5.0)["services"]["api"]


def container_quota(pid: int) -> str:
    where, version = cgroup_cpu_dir(pid)
    name = "cpu.max" if version == 2 else "cpu.cfs_quota_us"
    with open(os.path.join(where, name)) as fh:
        return fh.read().split()[0]


def container_pid() -> int:
    return docker.from_env().containers.get("mn.srv1-api").attrs["State"]["Pid"]


def play(stack, tag: str, phases: list[dict]) -> list[tuple[float, int, float | None]]:
    """Run the load; (seconds, frequency, SLI) once a period meanwhile."""
    spec = {"seed": 3, "arrivals": "poisson", "phases": phases,
            "classes": [{"name": "r", "weight": 1, "host": "10.0.0.100", "port": 9001,
                         "path": "/work"}]}
    path = os.path.join(stack.run_dir, f"spec-{tag}.json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    t0 = time.time() + 1
    stack.start_loadgen(path, t0, tag=tag, timeout_s=10)
    seen = []
    total = sum(p["seconds"] for p in phases)
    while time.time() < t0 + total:
        s = loop_status(stack)
        seen.append((round(time.time() - t0, 1), s["frequency_mhz"], s["sli_ms"]))
        time.sleep(PERIOD_S)
    stack.wait_for(lambda: stack.loadgen_summaries(tag), 60, f"load {tag}")
    return seen


def test_the_service_is_pinned_and_its_loop_runs_the_emulated_actuator(stack):
    c = docker.from_env().containers.get("mn.srv1-api")
    assert c.attrs["HostConfig"]["CpusetCpus"] == "1"
    stack.wait_for(lambda: loop_status(stack)["actuator"], 20, "the actuator")
    s = loop_status(stack)
    assert s["actuator"]["actuator"] == "cgroup-quota" and s["actuator"]["emulated"]
    assert s["energy"]["source"] == "modelled"


def test_the_frequency_follows_a_load_step(stack):
    seen = play(stack, "step", [{"name": "low", "seconds": 20, "from": 15, "to": 15},
                                {"name": "high", "seconds": 25, "from": 90, "to": 90}])
    at_low = [f for t, f, _ in seen if 15 <= t < 20]
    at_high = [f for t, f, _ in seen if t >= 38]
    assert at_low and at_high, seen
    assert max(at_low) <= 2100 - 300, seen           # light load: the loop stepped down
    assert min(at_high) > max(at_low), seen          # heavy load: back up
    # and the container's quota is what the frequency says (1 core x f / 2100, 10 ms period)
    f = loop_status(stack)["frequency_mhz"]
    q = int(container_quota(container_pid()))
    assert abs(q - 10_000 * f / 2100) <= 100, (q, f)


def test_a_bad_put_is_a_400_naming_the_field_and_changes_nothing(stack):
    before = loop_status(stack)["slo"]
    for body, field in (({"service": "api", "target_ms": -3}, "target_ms"),
                        ({"service": "api", "percentile": 42}, "percentile"),
                        ({"service": "nope", "target_ms": 30}, "service"),
                        ([1, 2], "body")):
        with pytest.raises(HttpError, match=f"HTTP 400.*{field}"):
            put_json(f"{agent(stack)}/slo", body, 5.0, token=stack.cfg.security.token)
    assert loop_status(stack)["slo"] == before


def test_a_dead_service_puts_the_core_at_the_maximum_and_a_stopped_agent_restores_it(stack):
    put_json(f"{agent(stack)}/slo", {"service": "api", "policy": "min"}, 5.0,
             token=stack.cfg.security.token)
    stack.wait_for(lambda: loop_status(stack)["frequency_mhz"] == 1000, 10, "the minimum")
    put_json(f"{agent(stack)}/slo", {"service": "api", "policy": "slo"}, 5.0,
             token=stack.cfg.security.token)
    stack.testbed.node("srv1-api").cmd("pkill -f services.callgraph")
    killed = time.monotonic()
    stack.wait_for(lambda: loop_status(stack)["state"] == "no-signal", 10, "no-signal")
    # two periods, plus the SLI read's own timeout (1 s) and this poll's interval
    assert time.monotonic() - killed <= 2 * PERIOD_S + 1.5
    assert loop_status(stack)["frequency_mhz"] == 2100
    pid = container_pid()
    assert int(container_quota(pid)) == 10_000          # the whole core: the maximum
    # what the container was made with: no quota of its own on our node (its server's
    # group has the limit), its share of the server on Containernet (no group there)
    made = docker.from_env().containers.get("mn.srv1-api").attrs["HostConfig"]["CpuQuota"]
    stack.agents["srv1"].stop()
    assert container_quota(pid) in (("-1", "max") if made in (0, -1, None) else (str(made),))
