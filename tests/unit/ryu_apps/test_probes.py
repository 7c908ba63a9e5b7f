"""The probe data path inside the controller: the policy core's probes (PolicyCore.probes,
update_probe, the status view), the controller core's handling of an agent's GET /probes
answer (probe_answer, probe_failed, probing, one log line a minute), the Ryu shell's poll
with a stubbed HTTP call, and the configuration's fields."""
from __future__ import annotations

import math

import pytest

from common.config import ConfigError, parse_config
from common.httpjson import HttpError
from common.metrics import render
from ryu_apps.policies.round_robin import RoundRobin
from ryu_apps.instance_pools import Probe
from ryu_apps.managers.agent_probes import PollPlan
from ryu_apps.policy_core import core_from_config
from tests.lib.controller import NOW, make
from tests.lib.metrics import value


class ProbeUser(RoundRobin):
    """A policy that reads probes; not registered (the registry is global to the session)."""
    uses_probes = True


def reads_probes(core):
    core.strategy = ProbeUser()
    core.strategy.name = "probe-user"


def entry(in_flight=2, count=10, p50_ms=12.5, p99_ms=80.0, age_s=0.01, error=None, **kw):
    return {"container": "x", "microservice": "ui", "port": 8002, "in_flight": in_flight,
            "count": count, "p50_ms": p50_ms, "p99_ms": p99_ms, "time": NOW - age_s,
            "age_s": age_s, "error": error, **kw}


# ---------------------------------------------------------------- the policy core
@pytest.fixture
def core():
    return core_from_config(parse_config({"servers": {"count": 2}}), "srr", clock=lambda: NOW)


def test_update_probe_keeps_the_latest_reading_and_ignores_an_older_one(core):
    assert core.probes == {}
    assert core.update_probe("srv1-ui", 3, 0.012, 0.08, NOW - 1.0) is True
    assert core.probes["srv1-ui"] == Probe(3.0, 0.012, 0.08, NOW - 1.0)
    assert core.update_probe("srv1-ui", 5, None, None, NOW - 2.0) is False    # older
    assert core.probes["srv1-ui"] == Probe(3.0, 0.012, 0.08, NOW - 1.0)
    assert core.update_probe("srv1-ui", 0, None, None, NOW - 0.5) is True     # newer
    assert core.probes["srv1-ui"] == Probe(0.0, None, None, NOW - 0.5)
    assert set(core.probes) == {"srv1-ui"}
    with pytest.raises(AttributeError):      # frozen: a policy cannot change what it reads
        core.probes["srv1-ui"].in_flight = 1


def test_update_probe_refuses_an_unknown_instance_and_bad_values_changing_nothing(core):
    core.update_probe("srv1-ui", 1, 0.01, 0.02, NOW - 1)
    before = dict(core.probes)
    with pytest.raises(KeyError, match="srv9-ui"):
        core.update_probe("srv9-ui", 1, 0.01, 0.02, NOW)
    for args, field in [((-1, 0.01, 0.02, NOW), "in_flight"),
                        ((math.nan, 0.01, 0.02, NOW), "in_flight"),
                        ((None, 0.01, 0.02, NOW), "in_flight"),
                        ((True, 0.01, 0.02, NOW), "in_flight"),
                        ((1, -0.5, 0.02, NOW), "latency_s"),
                        ((1, "12", 0.02, NOW), "latency_s"),
                        ((1, 0.01, math.inf, NOW), "latency_p99_s"),
                        ((1, 0.01, 0.02, math.nan), "sample_time"),
                        ((1, 0.01, 0.02, None), "sample_time")]:
        with pytest.raises(ValueError, match=f"srv1-ui: {field}:"):
            core.update_probe("srv1-ui", *args)
    assert core.probes == before


def test_the_status_shows_each_instances_probe_with_its_age(core):
    core.update_probe("srv2-be", 4, 2.5, 9.75, NOW - 0.3)
    instances = core.status(NOW)["servers"]["srv2"]["instances"]
    assert instances["srv2-be"]["probe"] == {"in_flight": 4.0, "latency_s": 2.5,
                                             "latency_p99_s": 9.75, "age_s": 0.3}
    assert instances["srv2-ui"]["probe"] is None          # never probed: not a zero


# ---------------------------------------------------------------- the controller core
def test_probing_follows_the_policys_flag_as_it_changes():
    _, ctl, _ = make("srr")
    assert ctl.probing() is False
    reads_probes(ctl.policy_core)
    assert ctl.probing() is True
    ctl.set_policy("malb", NOW)
    assert ctl.probing() is False
    assert ctl.status()["probes"]["polling"] is False


def test_an_answer_goes_to_the_policy_core_at_its_age_on_the_controllers_clock():
    cfg, ctl, _ = make("srr")
    body = {"server": "srv1", "time": NOW + 500.0,          # the agent's clock: ignored
            "instances": {"srv1-ui": entry(in_flight=2, p50_ms=12.5, p99_ms=80.0, age_s=0.25),
                          "srv1-be": entry(in_flight=0, count=0, p50_ms=None, p99_ms=None),
                          "srv1-vid": entry(in_flight=None, error="no answer within 0.25 s")}}
    r = ctl.probe_answer("srv1", body, NOW)
    probes = ctl.policy_core.probes
    assert probes["srv1-ui"] == Probe(2.0, 0.0125, 0.08, NOW - 0.25)
    assert probes["srv1-be"] == Probe(0.0, None, None, NOW - 0.01)
    assert "srv1-vid" not in probes                     # a failed reading is not a zero
    assert ("inc", "malb_probe_answers_total", ("srv1",), 1) in r.metrics
    assert ("inc", "malb_probe_readings_total", ("srv1",), 2) in r.metrics
    assert ("inc", "malb_probe_failures_total", ("srv1", "instance"), 1) in r.metrics
    assert len(r.warnings) == 1 and "srv1-vid: no answer within 0.25 s" in r.warnings[0]
    st = ctl.status()
    assert st["servers"]["srv1"]["instances"]["srv1-ui"]["probe"]["in_flight"] == 2.0
    assert st["probes"]["agents"]["srv1"]["last_answer_age_s"] == 0.0
    assert st["probes"]["agents"]["srv1"]["last_error"] is None
    # a failed reading keeps the last good probe, which ages
    ctl.probe_answer("srv1", {"instances": {"srv1-ui": entry(error="refused")}}, NOW + 5)
    assert ctl.policy_core.probes["srv1-ui"].time == NOW - 0.25


def test_malformed_parts_are_warnings_and_the_rest_is_applied():
    _, ctl, _ = make("srr")
    body = {"instances": {
        "srv1-ui": entry(in_flight=1),
        "srv1-be": entry(in_flight=-3),                  # bad value
        "srv1-vid": entry(p50_ms="fast"),                # bad value
        "srv2-ui": entry(),                              # another server's instance
        "ghost": entry(),                                # no such instance
        "srv1-x": "not an object",
    }}
    r = ctl.probe_answer("srv1", body, NOW)
    assert set(ctl.policy_core.probes) == {"srv1-ui"}
    assert ("inc", "malb_probe_failures_total", ("srv1", "malformed"), 5) in r.metrics
    assert len(r.warnings) == 1
    text = r.warnings[0]
    assert "instances.srv1-be.in_flight: expected a finite number >= 0, got -3" in text
    assert "(and 2 more)" in text and "the rest applied" in text
    # whole answers that are not what an agent sends: a failure, never an exception
    for bad in (None, [], "x", {"instances": []}, {"server": "srv1"}):
        r = ctl.probe_answer("srv1", bad, NOW + 1)
        assert ("inc", "malb_probe_failures_total", ("srv1", "malformed"), 1) in r.metrics
    assert ctl.status()["probes"]["agents"]["srv1"]["last_error"] == \
        "its /probes answer has no 'instances' object"
    assert ctl.probe_answer("srv7", {"instances": {}}, NOW).warnings     # not a server
    assert ctl.probe_answer("srv7", {"instances": {}}, NOW).metrics == []


def test_an_instance_in_no_pool_is_skipped_quietly():
    _, ctl, _ = make("srr")
    ctl.remove_instance("srv1-ui", NOW)
    r = ctl.probe_answer("srv1", {"instances": {"srv1-ui": entry()}}, NOW)
    assert ctl.policy_core.probes == {} and r.warnings == []
    ctl.add_instance("srv1-ui", NOW)
    ctl.probe_answer("srv1", {"instances": {"srv1-ui": entry()}}, NOW + 1)
    assert "srv1-ui" in ctl.policy_core.probes


def test_a_failing_agent_is_logged_once_a_minute_and_its_recovery_once():
    _, ctl, _ = make("srr")
    lines = []
    for k in range(4 * 90):                 # 90 s of polls every 0.25 s, all failing
        r = ctl.probe_failed("srv2", "http://127.0.0.1:9102/probes: Connection refused",
                             NOW + k * 0.25)
        assert r.metrics == [("inc", "malb_probe_failures_total", ("srv2", "poll"), 1)]
        lines += r.warnings
    assert len(lines) == 2 and "Connection refused" in lines[0]
    assert "239 more such problems" in lines[1]
    r = ctl.probe_answer("srv2", {"instances": {}}, NOW + 91)
    assert r.infos == ["agent srv2: /probes answers again"] and r.warnings == []
    assert ctl.probe_answer("srv2", {"instances": {}}, NOW + 92).infos == []
    # another agent has its own allowance
    assert ctl.probe_failed("srv1", "timed out", NOW + 1).warnings


# ---------------------------------------------------------------- the Ryu shell
def test_the_shell_polls_an_agent_and_counts_answers_and_failures(app, monkeypatch):
    # deferred: the controller's shell (the framework, eventlet); the rest of this file needs none
    from ryu_apps import peers
    reads_probes(app.policy_core)
    asked = []

    def agent(url, timeout):
        asked.append((url, timeout))
        if len(asked) == 2:
            raise HttpError(f"{url}: timed out")
        return {"instances": {"srv1-ui": entry(in_flight=3)}}
    monkeypatch.setattr(peers, "get_json", agent)
    url = app.core.probes.agents["srv1"]["url"]
    app.peers.probe_poll("srv1", url, 0.75)
    app.peers.probe_poll("srv1", url, 0.75)
    assert asked == [("http://127.0.0.1:9101/probes", 0.75)] * 2
    assert app.policy_core.probes["srv1-ui"].in_flight == 3.0
    text = render(app.metrics)
    assert value(text, "malb_probe_answers_total", server="srv1") == 1
    assert value(text, "malb_probe_readings_total", server="srv1") == 1
    assert value(text, "malb_probe_failures_total", server="srv1", kind="poll") == 1
    assert value(text, "malb_probe_poll_seconds_count", server="srv1") == 2


# ---------------------------------------------------------------- configuration
def test_the_probe_settings_have_defaults_and_are_checked():
    cfg = parse_config({})
    assert cfg.controller.probe_period_s == 0.25
    assert (cfg.agents.probe_window_s, cfg.agents.probe_timeout_s) == (1.0, 0.25)
    cfg = parse_config({"controller": {"probe_period_s": 1},
                        "agents": {"probe_window_s": 5, "probe_timeout_s": 0.1}})
    assert (cfg.controller.probe_period_s, cfg.agents.probe_window_s,
            cfg.agents.probe_timeout_s) == (1.0, 5.0, 0.1)
    for data, message in [
            ({"controller": {"probe_period_s": 0.01}},
             "controller.probe_period_s: must be >= 0.05"),
            ({"controller": {"probe_period_s": "fast"}},
             "controller.probe_period_s: expected a number"),
            ({"controller": {"probe_period_s": float("inf")}},
             "controller.probe_period_s: expected a finite number"),
            ({"agents": {"probe_window_s": 0.05}}, "agents.probe_window_s: must be >= 0.1"),
            ({"agents": {"probe_window_s": 61}}, "agents.probe_window_s: must be <= 60"),
            ({"agents": {"probe_timeout_s": 0}}, "agents.probe_timeout_s: must be >= 0.01"),
            ({"agents": {"probe_timeout_s": True}}, "agents.probe_timeout_s: expected a number"),
            ({"agents": {"probe_timeot_s": 1}}, "agents.probe_timeot_s: unknown field")]:
        with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
            parse_config(data)


# ---------------------------------------------------------------- the services' own answers
def rounds(ctl, server, readings, start, n):
    """n health rounds 2 s apart, each after an agent answer carrying `readings`; the
    warnings they gave."""
    warnings = []
    for k in range(1, n + 1):
        if readings is not None:
            warnings += ctl.probe_answer(server, {"instances": readings, "timeout_s": 1.0},
                                         start + 2 * k - 1).warnings
        warnings += ctl.probe_health(start + 2 * k).warnings
    return warnings


def test_a_service_that_stops_answering_is_out_though_its_kernel_answers_the_syn():
    cfg, ctl, _ = make("srr", health="tcp")
    h = cfg.controller.health
    assert h.service and ctl.probe_poll_plan() == PollPlan(h.interval_s / 2, h.interval_s / 2,
                                                            h.timeout_s)
    assert ctl.status()["probes"]["polling_for_health"] is True
    ctl.probe_health(NOW)
    hung = {"srv1-ui": entry(in_flight=None, error="no answer within 1 s",
                             error_kind="timeout")}
    first = rounds(ctl, "srv1", hung, NOW, 1)                     # one round: not yet
    assert ctl.policy_core.healthy["srv1-ui"] and not any("DOWN" in w for w in first)
    warnings = rounds(ctl, "srv1", hung, NOW + 2, 1)               # the second round
    assert not ctl.policy_core.healthy["srv1-ui"]
    assert any("srv1-ui is DOWN" in w and "its service: no answer within 1 s" in w
               for w in warnings), warnings
    check = ctl.status()["servers"]["srv1"]["instances"]["srv1-ui"]["service_check"]
    assert check["ok"] is False and check["consecutive_failures"] == 2
    # rounds without a reading (the agent itself down) change nothing; answering brings it
    # back once its answers have lasted service_readmit_s, not at the first
    rounds(ctl, "srv1", None, NOW + 4, 3)
    assert not ctl.policy_core.healthy["srv1-ui"]
    held = int(h.service_readmit_s // 2)            # rounds 2 s apart, the first at NOW + 11
    rounds(ctl, "srv1", {"srv1-ui": entry()}, NOW + 10, held)
    assert not ctl.policy_core.healthy["srv1-ui"]
    back = ctl.probe_answer("srv1", {"instances": {"srv1-ui": entry()}, "timeout_s": 1.0},
                            NOW + 11 + 2 * held)
    assert ctl.policy_core.healthy["srv1-ui"]
    assert any("srv1-ui is healthy again" in i and "its service: answered for 10.0 s in a row"
               in i for i in back.infos), back.infos


def test_a_service_that_stops_answering_is_out_after_two_readings_not_two_rounds():
    # readings come twice per health interval: two in a row that waited out the health
    # timeout take it out within the interval, not after two rounds
    cfg, ctl, _ = make("srr", health="tcp")
    ctl.probe_health(NOW)
    hung = {"srv1-ui": entry(in_flight=None, error="no answer within 1 s",
                             error_kind="timeout")}
    ctl.probe_answer("srv1", {"instances": hung, "timeout_s": 1.0}, NOW + 0.5)
    assert ctl.policy_core.healthy["srv1-ui"]
    r = ctl.probe_answer("srv1", {"instances": hung, "timeout_s": 1.0}, NOW + 1.5)
    assert not ctl.policy_core.healthy["srv1-ui"] and any("srv1-ui is DOWN" in w
                                                          for w in r.warnings)
    # one answer does not put it back (service_readmit_s); one between two failures of
    # an instance still in starts the count again
    ctl.probe_answer("srv1", {"instances": {"srv1-ui": entry()}}, NOW + 2.5)
    assert not ctl.policy_core.healthy["srv1-ui"]
    for k, reading in enumerate((hung, {"srv1-be": entry()}, hung)):
        stuck = {"srv1-be": reading["srv1-ui"]} if "srv1-ui" in reading else reading
        ctl.probe_answer("srv1", {"instances": stuck, "timeout_s": 1.0}, NOW + 3.5 + k)
    assert ctl.policy_core.healthy["srv1-be"]


def test_a_stopped_process_is_out_at_once_and_a_bad_answer_still_counts_as_alive():
    cfg, ctl, _ = make("srr", health="tcp")
    ctl.probe_health(NOW)
    r = ctl.probe_answer("srv1", {"instances": {
        "srv1-ui": entry(in_flight=None, error="container is paused", error_kind="stopped"),
        "srv1-be": entry(in_flight=None, error="GET /latency: HTTP 404 ''",
                         error_kind="answer"),
        "srv1-vid": entry(in_flight=None, error="its network namespace: denied",
                          error_kind="unavailable")}}, NOW + 0.5)
    assert not ctl.policy_core.healthy["srv1-ui"]
    assert any("srv1-ui is DOWN" in w for w in r.warnings)
    for k in range(cfg.controller.health.unhealthy_after + 1):
        rounds(ctl, "srv1", {"srv1-be": entry(in_flight=None, error="HTTP 404",
                                              error_kind="answer"),
                             "srv1-vid": entry(in_flight=None, error="denied",
                                               error_kind=["not", "a", "kind"]),
                             "srv1-ui": entry(in_flight=None, error="denied",
                                              error_kind="unavailable")}, NOW + 2 * k, 1)
    assert ctl.policy_core.healthy["srv1-be"] and ctl.policy_core.healthy["srv1-vid"]


def test_the_services_answers_judge_nothing_when_switched_off():
    _, off, _ = make("srr", health="none")
    assert off.probe_poll_plan() is None                   # no probes of any kind
    _, ctl, _ = make("srr", health={"method": "tcp", "service": False})
    assert ctl.probe_poll_plan() is None
    ctl.probe_health(NOW)
    r = ctl.probe_answer("srv1", {"instances": {
        "srv1-ui": entry(in_flight=None, error="container is paused", error_kind="stopped")}},
        NOW + 0.5)
    assert ctl.policy_core.healthy["srv1-ui"] and not any("DOWN" in w for w in r.warnings)


def test_a_quick_polls_timeout_says_nothing_of_health_a_health_polls_does():
    cfg, ctl, _ = make("srr", health="tcp")
    reads_probes(ctl.policy_core)
    h = cfg.controller.health
    plan = ctl.probe_poll_plan()
    assert plan == PollPlan(cfg.controller.probe_period_s, h.interval_s / 2, h.timeout_s)
    ctl.probe_health(NOW)
    slow = {"srv1-ui": entry(in_flight=None, error="no answer within 0.25 s",
                             error_kind="timeout")}
    for k in range(1, 4):                        # the policy's polls give up at 0.25 s
        ctl.probe_answer("srv1", {"instances": slow, "timeout_s": 0.25}, NOW + 2 * k - 1)
        ctl.probe_health(NOW + 2 * k)
    assert ctl.policy_core.healthy["srv1-ui"]
    hung = {"srv1-ui": entry(in_flight=None, error="no answer within 1 s",
                             error_kind="timeout")}
    for k in range(4, 4 + h.unhealthy_after):    # a health poll's wait of 1 s: counted
        ctl.probe_answer("srv1", {"instances": hung, "timeout_s": 1.0}, NOW + 2 * k - 1)
        ctl.probe_health(NOW + 2 * k)
    assert not ctl.policy_core.healthy["srv1-ui"]
    _, off, _ = make("srr", health={"method": "tcp", "service": False})
    reads_probes(off.policy_core)
    assert off.probe_poll_plan() == PollPlan(cfg.controller.probe_period_s, None, None)


def test_a_service_whose_agent_falls_silent_is_judged_by_the_probes_again():
    cfg, ctl, _ = make("srr", health="tcp")
    ctl.probe_health(NOW)
    ctl.probe_answer("srv1", {"instances": {"srv1-ui": entry(
        in_flight=None, error="container is paused", error_kind="stopped")}}, NOW + 0.5)
    assert not ctl.policy_core.healthy["srv1-ui"]
    # its agent says nothing more (killed): after five rounds the last word is forgotten
    silent = 5 * cfg.controller.health.interval_s
    rounds(ctl, "srv1", None, NOW, 2)
    assert not ctl.policy_core.healthy["srv1-ui"]
    ctl.probe_health(NOW + 0.5 + silent + 0.1)
    assert ctl.policy_core.healthy["srv1-ui"]
    assert "the probes judge alone" in \
        ctl.status()["servers"]["srv1"]["instances"]["srv1-ui"]["service_check"]["last_result"]


def test_a_timeout_shorter_than_the_health_timeout_says_nothing_even_in_a_health_answer():
    """A health poll that joined a quick reading under way reports that reading's timeout
    per instance (agents/probes.py): the controller judges by it."""
    cfg, ctl, _ = make("srr", health="tcp")
    ctl.probe_health(NOW)
    quick = {"srv1-ui": entry(in_flight=None, error="no answer within 0.25 s",
                              error_kind="timeout", timeout_s=0.25)}
    for k in range(1, 4):
        ctl.probe_answer("srv1", {"instances": quick, "timeout_s": 1.0}, NOW + 2 * k - 1)
        ctl.probe_health(NOW + 2 * k)
    assert ctl.policy_core.healthy["srv1-ui"]
