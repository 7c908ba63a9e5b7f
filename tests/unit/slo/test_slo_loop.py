"""The SLO loop's shell against fakes: it follows the SLI, goes to the maximum when the
SLI source disappears, accounts modelled energy, restores on exit; the agent's PUT /slo
refuses bad bodies naming the field and changes nothing; the configuration's refusals."""
from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from agents.slo import SloRunner, choose_actuator
from common.config import ConfigError, parse_config
from common.httpjson import BadRequest
from common.latency_window import LatencyWindow
from common.metrics import new_registry, render
from slo.actuators import ActuatorError
from slo.frequency_controller import LoopSettings
from slo.loop import ServiceLoop
from tests.conftest import ROOT
from tests.lib.agents import SLO_CONFIG
from tests.lib.metrics import value


class FakeActuator:
    emulated = True

    def __init__(self, log):
        self.log = log

    def set_mhz(self, mhz):
        self.log.append(mhz)

    def restore(self):
        self.log.append("restored")

    def describe(self):
        return {"actuator": "fake"}


def make_loop(readings, cpu=None, settings=None):
    log, it = [], iter(readings)
    cpu_it = iter(cpu or [])
    loop = ServiceLoop("ui", settings or LoopSettings(target_ms=80.0, min_samples=10),
                       lambda: FakeActuator(log), lambda _window: next(it),
                       lambda: next(cpu_it, None))
    return loop, log


def test_the_loop_steps_down_while_fast_and_back_to_the_maximum_when_the_sli_goes():
    fast = {"count": 50, "p95_ms": 40.0}
    loop, log = make_loop([fast] * 4 + [None, RuntimeError("gone")])
    actions = [loop.step(float(t)).action for t in range(4)]
    assert actions == ["down", "dwell", "dwell", "down"] and log == [2000, 1900]
    assert loop.step(4.0).action == "no-signal" and log[-1] == 2100
    assert loop.state.freq_mhz == 2100


def test_baseline_policies_ignore_the_sli_and_ondemand_follows_the_load():
    # 0.25 cores used per second of a 0.5-core capacity: load 0.5 at the maximum
    loop, log = make_loop([{"count": 50, "p95_ms": 500.0}] * 6,
                          cpu=[0.0, 0.25, 0.5, 0.75, 1.0, 1.25])
    loop.capacity_cores = 0.5
    loop.set_objective(policy="min")
    assert loop.step(0.0).action == "min" and log == [1000]
    loop.set_objective(policy="ondemand")
    loop.step(1.0)          # at 1000 MHz (emulated: a 0.24-core quota) 0.25 s is all of it
    assert loop.state.freq_mhz == 2100
    loop.step(2.0)          # at the maximum the load is 0.5: 1000 + 0.5 x 1100
    assert loop.state.freq_mhz == 1600 and loop.status()["load"] == 0.5
    loop.set_objective(policy="max")
    assert loop.step(3.0).action == "max" and loop.state.freq_mhz == 2100
    with pytest.raises(ValueError, match="policy"):
        loop.set_objective(policy="turbo")


def test_a_frequency_is_judged_only_on_requests_served_at_it():
    windows = []

    def sli(window):
        windows.append(window)
        return {"count": 500, "p95_ms": 40.0}
    loop = ServiceLoop("ui", LoopSettings(target_ms=80.0, min_samples=10),
                       lambda: FakeActuator([]), sli, lambda: None, window_s=5.0)
    for t in (100.0, 101.0, 102.0, 103.0, 109.0):
        loop.step(t)
    # full window at the start; after the change at 100 s: 1, 2 (then 3 s dwell: a change at
    # 103 s), and 5 s again once the last change is older than the window
    assert windows == [5.0, 1.0, 2.0, 3.0, 5.0]


def test_the_predictive_rule_learns_from_the_queue_and_goes_up_before_the_sli_does():
    # half a core at the maximum; 5 ms of CPU per request; the SLI stays low throughout:
    # only the queue's arrivals and work move the frequency
    queue = iter([{"in_flight": 0, "count": 0}, {"in_flight": 0, "count": 10},
                  {"in_flight": 0, "count": 10}, {"in_flight": 0, "count": 10},
                  {"in_flight": 0, "count": 10}, {"in_flight": 30, "count": 60}])
    cpu = iter([0.0, 0.05, 0.10, 0.15, 0.20, 0.50])
    log, seconds = [], []

    def queue_fn(window):
        seconds.append(window)
        return next(queue)
    loop = ServiceLoop("ui", LoopSettings(target_ms=80.0, min_samples=10),
                       lambda: FakeActuator(log), lambda _w: {"count": 50, "p95_ms": 20.0},
                       lambda: next(cpu), capacity_cores=0.5, policy="predictive",
                       queue_fn=queue_fn)
    actions = [loop.step(float(t)).action for t in range(6)]
    assert actions[0] == "learning"                  # no period measured yet
    assert actions[1] == "predict-down" and actions[4] == "predict-down"
    assert actions[5] == "predict-up" and log[-1] == 2100    # 90 arrivals in a second
    assert seconds[1:] == [1.0] * 5                  # each period's own answers
    st = loop.status()["model"]
    assert st["work_ms"] == pytest.approx(5.0, rel=0.05) and st["in_flight"] == 30


def test_the_predictive_rule_without_a_queue_runs_at_the_maximum():
    log = []
    loop = ServiceLoop("ui", LoopSettings(target_ms=80.0, min_samples=10),
                       lambda: FakeActuator(log), lambda _w: {"count": 50, "p95_ms": 20.0},
                       lambda: 0.0, policy="predictive")
    loop.state = loop.state.__class__(freq_mhz=1200)
    assert loop.step(0.0).action == "no-signal" and log == [2100]
    with pytest.raises(ValueError, match="policy"):
        ServiceLoop("ui", LoopSettings(target_ms=80.0), lambda: None, lambda _w: None,
                    lambda: None, policy="turbo")


def test_an_unreachable_source_raising_is_no_signal_too():
    def boom(_window):
        raise OSError("connection refused")
    log = []
    loop = ServiceLoop("ui", LoopSettings(target_ms=80.0), lambda: FakeActuator(log), boom,
                       lambda: None)
    loop.state = loop.state.__class__(freq_mhz=1200)
    assert loop.step(0.0).action == "no-signal" and log == [2100]


def test_energy_is_modelled_from_cpu_time_and_frequency_and_says_so():
    fast = {"count": 50, "p95_ms": 40.0}
    loop, _ = make_loop([fast] * 3, cpu=[0.0, 0.5, 1.0])
    for t in range(3):
        loop.step(float(t))
    st = loop.status()
    assert st["energy"]["source"] == "modelled" and st["energy"]["joules"] > 0
    assert st["cpu_seconds"] == 1.0
    # the floor: the same half core of work each second at the lowest step carrying it
    # (1050 MHz of work -> 1100 MHz), never more than what the loop spent
    power, s = loop.power, loop.settings
    floor = 2 * power.energy_j(1100, 1.0, 0.5 * s.f_max_mhz / 1100)
    assert loop.floor_energy_j == pytest.approx(floor)
    assert st["last_decisions"][-1]["floor_j"] == pytest.approx(floor, abs=1e-3)
    assert floor < loop.energy_j
    loop.restore()


def test_an_actuator_that_fails_is_reported_and_made_again_next_period():
    made = []

    def factory():
        made.append(1)
        if len(made) == 1:
            raise ActuatorError("cpu.max: No such file or directory")
        return FakeActuator([])
    loop = ServiceLoop("ui", LoopSettings(target_ms=80.0, min_samples=10), factory,
                       lambda _window: {"count": 50, "p95_ms": 40.0}, lambda: None)
    loop.step(0.0)
    assert loop.status()["actuator_error"] == "cpu.max: No such file or directory"
    loop.step(1.0)
    assert loop.status()["actuator_error"] is None and len(made) == 2


def runner(registry=None):
    return SloRunner(parse_config(SLO_CONFIG), "srv1", client=None,
                     registry=registry or new_registry("agent"), actuator="emulated")


def test_the_agent_runs_a_loop_per_service_with_an_slo_and_changes_targets():
    r = runner()
    assert list(r.loops) == ["ui"] and r.loops["ui"].settings.f_min_mhz == 1200
    assert r.loops["ui"].predictive.margin is None      # the service's margin
    own = copy.deepcopy(SLO_CONFIG)
    own["agents"] = {"slo": {"predictive": {"margin": 0.3}}}
    assert SloRunner(parse_config(own), "srv1", client=None, registry=new_registry("agent"),
                     actuator="emulated").loops["ui"].predictive.margin == 0.3
    assert r.change({"service": "ui", "target_ms": 60, "percentile": 99}) == \
        (200, {"service": "ui", "policy": "slo", "sli": "service",
               "slo": {"target_ms": 60, "percentile": 99.0, "margin": 0.1,
                       "band_mode": "safe"}})
    assert r.change({"service": "ui", "policy": "ondemand"})[1]["policy"] == "ondemand"


@pytest.mark.parametrize("body, message", [
    ([], "body: expected a JSON object"),
    ({"service": "video", "target_ms": 50}, "service: 'video' has no SLO loop"),
    ({"service": "ui"}, "nothing to change"),
    ({"service": "ui", "target_ms": -5}, "target_ms: expected > 0"),
    ({"service": "ui", "target_ms": "fast"}, "target_ms: expected a number"),
    ({"service": "ui", "percentile": 42}, "percentile: expected 90, 95 or 99"),
    ({"service": "ui", "target_ms": 50, "colour": 1}, "colour: unknown field"),
    ({"service": [], "target_ms": 50}, r"service: \[\] has no SLO loop"),
    ({"service": "ui", "target_ms": 10 ** 400}, "target_ms: expected a finite number"),
    ({"service": "ui", "percentile": float("inf")}, "percentile: expected a finite"),
    ({"service": "ui", "band_mode": "wide"}, "band_mode: expected one of"),
    ({"service": "ui", "policy": "turbo"},
     "policy: expected one of slo, predictive, max, min, ondemand, schedutil"),
    ({"service": "ui", "policy": 3}, "policy: expected a string"),
    ({"service": "ui", "sli": "browser"}, "sli: expected one of service, client"),
    ({"service": "ui", "sli": "client", "margin": 2}, "margin: expected"),
])
def test_a_bad_put_is_refused_naming_the_field_and_changes_nothing(body, message):
    r = runner()
    before = r.loops["ui"].settings
    with pytest.raises(BadRequest, match=message):
        r.change(body)
    assert r.loops["ui"].settings == before and r.sli_source["ui"] == "service"


def test_the_loop_reads_what_the_clients_report_once_its_sli_is_the_clients():
    """POST /slo/observations keeps the requests the clients timed; with `sli: client` the
    loop's SLI is their window, not the service's histogram."""
    r = runner()
    loop = r.loops["ui"]
    now = time.time()
    body = {"service": "ui", "observations": [[now - 1.0 - k / 1000, 10.0 + k % 50]
                                              for k in range(200)]}
    assert r.observe(body)[1] == {"service": "ui", "kept": 200, "sli_source": "service"}
    assert r.change({"service": "ui", "sli": "client"})[1]["sli"] == "client"
    reading = loop.sli_fn(5.0)
    assert reading["count"] == 200 and 55 <= reading["p95_ms"] <= 60
    status = r.routes()[("GET", "/slo")]({}, None)[1]["services"]["ui"]
    assert status["sli_source"] == "client" and status["client_reports"]["reports"] == 1


@pytest.mark.parametrize("body, message", [
    ({"service": "ui"}, "observations: expected a list"),
    ({"service": "video", "observations": []}, "service: 'video' has no SLO loop"),
    ({"service": "ui", "observations": [[1.0, -2.0]]}, r"observations\[0\]: expected"),
    ({"service": "ui", "observations": [[1.0, 2.0], [True, 1.0]]}, r"observations\[1\]"),
    ({"service": "ui", "observations": [[1.0, float("nan")]]}, r"observations\[0\]"),
    ({"service": "ui", "observations": [], "x": 1}, "x: unknown field"),
    ({"service": "ui", "observations": [[1.0, 1.0]] * 10_001}, "at most 10000 per report"),
    ("ui", "body: expected an object"),
])
def test_a_bad_report_is_refused_naming_the_field_and_nothing_is_kept(body, message):
    r = runner()
    with pytest.raises(BadRequest, match=message):
        r.observe(body)
    assert r.client_latencies["ui"].reports == 0


def test_auto_chooses_cpufreq_only_where_every_pinned_core_has_it(tmp_path):
    (tmp_path / "cpu0" / "cpufreq").mkdir(parents=True)
    assert choose_actuator("auto", (0,), str(tmp_path)) == "cpufreq"
    assert choose_actuator("auto", (0, 1), str(tmp_path)) == "emulated"
    assert choose_actuator("auto", (), str(tmp_path)) == "emulated"
    assert choose_actuator("emulated", (0,), str(tmp_path)) == "emulated"


@pytest.mark.parametrize("change, message", [
    (lambda d: d["microservices"][0]["slo"].update(target_ms=-1),
     "microservices[0].slo.target_ms: must be >= 0.1"),
    (lambda d: d["microservices"][0]["slo"].update(percentile=42),
     "microservices[0].slo.percentile: must be 90, 95 or 99"),
    (lambda d: d["servers"][0].update(cores=[4096]), "servers[0].cores: CPU 4096 does not "
                                                     "exist here"),
    (lambda d: d["servers"][0].update(frequency={"min_mhz": 2500}),
     "servers[0].frequency: min_mhz 2500 is above max_mhz 2100"),
    (lambda d: d.update(agents={"slo": {"actuator": "magic"}}),
     "agents.slo.actuator: must be one of auto, cpufreq, emulated"),
    (lambda d: d.update(agents={"slo": {"guard": 1.5}}), "agents.slo.guard: must be <= 0.99"),
    (lambda d: d["microservices"][1].update(servers=["srv1", "srv2"]),
     "servers[0]: ui has an SLO, so it needs its server's cores alone; also placed on srv1: "
     "video"),
    (lambda d: d["servers"][1].update(cores=[1, 0]),
     "servers[0].cores: CPU 0 is also pinned to srv2; ui has an SLO and needs its cores alone"),
])
def test_a_bad_slo_configuration_is_one_clear_error(change, message):
    data = copy.deepcopy(SLO_CONFIG)
    change(data)
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert message in str(err.value)


def test_the_latency_window_gives_exact_quantiles_of_the_recent_requests():
    w = LatencyWindow(horizon_s=10.0, clock=lambda: 100.0)
    for k in range(1, 101):                     # 1..100 ms, ended at t = 95
        w.add(k / 1000.0, now=95.0)
    w.add(5.0, now=80.0)                        # 20 s old: beyond the horizon... once
    s = w.summary(window_s=6.0, now=100.0)
    assert s["count"] == 100 and s["p50_ms"] == 50.5 and s["p95_ms"] == 95.05
    assert w.summary(window_s=2.0, now=100.0) == {"window_s": 2.0, "count": 0,
                                                  "p50_ms": None, "p90_ms": None,
                                                  "p95_ms": None, "p99_ms": None}


def test_the_call_graph_service_answers_its_latency_summary():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = json.dumps({"service": "ui", "cpu_ms": 2, "response_bytes": 10})
    proc = subprocess.Popen([sys.executable, "-m", "services.callgraph", "--host", "127.0.0.1",
                             "--port", str(port),
                             "--spec", spec], cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        for _ in range(20):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/work", timeout=5).read()
        # a request is recorded just after its answer is sent: the last may lag a little
        for _ in range(40):
            doc = json.load(urllib.request.urlopen(
                f"http://127.0.0.1:{port}/latency?window=30"))
            if doc["count"] == 20:
                break
            time.sleep(0.05)
        assert doc["count"] == 20 and doc["p50_ms"] >= 2.0 and doc["p99_ms"] >= doc["p50_ms"]
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/latency?window=0")
            raise AssertionError("a bad window was accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_client_reports_keep_what_a_window_can_reach_and_say_when_none_came():
    from slo.client_sli import ClientLatencies
    c = ClientLatencies(keep_s=60.0)
    assert c.window(1000.0, 5.0) is None                # no report: no signal
    kept = c.add([(999.0, 20.0), (996.5, 40.0), (900.0, 1.0), (1001.0, 3.0)], now=1000.0)
    assert kept == 2                        # too old for any window, and a clock ahead
    w = c.window(1000.0, 5.0)
    assert w["count"] == 2 and w["p50_ms"] == pytest.approx(30.0)
    assert c.window(1000.0, 2.0)["count"] == 1
    # the window ends at the last report while it is recent: what came since is unknown
    assert c.window(1000.4, 2.0)["count"] == 1 and c.window(1003.0, 2.0)["count"] == 0
    c.add([], now=1010.0)
    assert c.window(1010.0, 5.0)["count"] == 0          # reports came, nothing in the window
    assert c.status(1012.0) == {"reports": 2, "requests_received": 4,
                                "last_report_age_s": 2.0}


def test_the_runners_metrics_are_in_base_units_and_its_energy_a_counter():
    registry = new_registry("agent")
    r = runner(registry)
    fast = {"count": 50, "p95_ms": 40.0}
    r.loops["ui"], _log = make_loop([fast] * 3, cpu=[0.0, 0.1, 0.2])
    r.step(0.0)
    r.step(1.0)
    text = render(registry)
    assert value(text, "malb_slo_sli_seconds", service="ui") == pytest.approx(0.040)
    assert value(text, "malb_slo_target_seconds", service="ui") == pytest.approx(0.080)
    assert value(text, "malb_slo_frequency_hertz", service="ui") == \
        pytest.approx(r.loops["ui"].state.freq_mhz * 1e6)
    energy = value(text, "malb_slo_energy_joules_total", service="ui")
    assert energy == pytest.approx(r.loops["ui"].energy_j) and energy > 0
