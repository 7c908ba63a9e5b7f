"""ryu_apps/profiler_answers.py: the profiler's answer as the controller applies it."""
from common.config import load_config
from ryu_apps.policy_core import core_from_config
from ryu_apps.profiler_answers import apply_profiles

NOW = 1000.0


def answer(weights=None, per_flow=None, quantiles=None, cls="long"):
    return {"prediction_lag_s": 30.0, "microservices": {"backend": {
        "weights": weights or {"alpha": 0.8, "beta": 0.1, "gamma": 0.1},
        "flow_class": cls,
        "per_flow": per_flow or {"cpu": 5.0, "mem": 0.0, "net": 1.0, "cores": 0.015,
                                 "net_bytes_per_s": 100.0},
        "flows": {"quantiles_s": quantiles or [10.0, 20.0, 30.0]}}}}


def servers(**over):
    row = {"cpu": 40.0, "mem": 10.0, "net": 5.0, "predicted": {"cpu": 35.0, "mem": 10.0,
                                                              "net": 4.0},
           "sample_time": NOW - 1, "stale": False}
    row.update(over)
    return {"servers": {"srv1": row}}


def test_a_good_answer_sets_weights_classes_costs_durations_and_server_loads():
    core = core_from_config(load_config(), "malb")
    assert apply_profiles(core, answer(), servers(), NOW) == []
    assert core.profiles.weights("backend", NOW) == ((0.8, 0.1, 0.1), "profiler")
    assert core.profiles.profiled_class["backend"] == "long"   # (the configured class still rules)
    assert core.profiles.per_flow["backend"] == (5.0, 0.0, 1.0)
    assert core.profiles.per_flow_abs["backend"] == (0.015, 100.0)
    assert core.profiles.survival["backend"].longest == 30.0
    assert core.profiles.prediction_lag_s == 30.0
    load = core.loads["srv1"]
    assert (load.cpu, load.net, load.measured) == (35.0, 4.0, (40.0, 10.0, 5.0))
    assert load.parts is None and load.window is None      # unsaid: the monitoring period
    assert load.outside_cpu is None                        # its agent did not read it
    apply_profiles(core, answer(), servers(sample_window_s=2.9, sample_time=NOW,
                                           outside_cpu=12.5), NOW)
    assert core.loads["srv1"].window == 2.9 and core.loads["srv1"].outside_cpu == 12.5
    apply_profiles(core, answer(), servers(sample_window_s="3", sample_time=NOW + 1), NOW)
    assert core.loads["srv1"].window is None


def test_each_servers_parts_by_microservice_are_kept_and_bad_ones_left_out():
    core = core_from_config(load_config(), "malb")
    ui = {"cpu": 12.0, "net": 30.0, "cpu_mean": 5.0, "net_mean": 20.0}
    apply_profiles(core, answer(), servers(by_microservice={"ui": ui, "video": "x"}), NOW)
    assert core.loads["srv1"].parts == {"ui": ui}
    apply_profiles(core, answer(), servers(by_microservice=[1], sample_time=NOW), NOW)
    assert core.loads["srv1"].parts is None


def test_wrong_types_and_stale_servers_are_left_out():
    core = core_from_config(load_config(), "malb")
    bad = answer(per_flow={"cpu": "5", "mem": 0, "net": 1}, quantiles=["x"])
    bad["microservices"]["backend"]["weights"] = {"alpha": None}
    bad["microservices"]["ghost"] = "not a dict"
    assert apply_profiles(core, bad, servers(stale=True), NOW) == []
    assert "backend" not in core.profiles.per_flow and "backend" not in core.profiles.survival
    assert core.profiles.weights("backend", NOW)[1].startswith("equal")
    assert core.loads["srv1"].sample_time is None
    apply_profiles(core, answer(), servers(sample_time="soon"), NOW)
    assert core.loads["srv1"].sample_time is None


def test_weights_the_core_refuses_come_back_as_a_warning_and_change_nothing():
    core = core_from_config(load_config(), "malb")
    apply_profiles(core, answer(), servers(), NOW)
    refused = answer(weights={"alpha": -1, "beta": 0, "gamma": 0},
                     per_flow={"cpu": 9.0, "mem": 0.0, "net": 9.0}, quantiles=[1.0, 2.0])
    refused["prediction_lag_s"] = 3.0
    warnings = apply_profiles(core, refused, servers(sample_time=NOW + 2), NOW + 3)
    assert len(warnings) == 1 and "bad weights" in warnings[0]
    assert core.profiles.weights("backend", NOW + 3)[0] == (0.8, 0.1, 0.1)
    assert core.profiles.per_flow["backend"] == (5.0, 0.0, 1.0)
    assert core.profiles.survival["backend"].longest == 30.0
    assert core.profiles.prediction_lag_s == 30.0
    assert core.loads["srv1"].sample_time == NOW - 1      # not the refused answer's NOW + 2
