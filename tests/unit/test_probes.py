"""The probe data path inside the controller: the policy core's probes (PolicyCore.probes,
update_probe, the status view) and the configuration's fields."""
from __future__ import annotations

import math

import pytest

from common.config import ConfigError, parse_config
from ryu_apps.policy import Probe, core_from_config

NOW = 1_700_000_000.0


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
            ({"controller": {"probe_period_s": 0.01}}, "controller.probe_period_s: must be >= 0.05"),
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
