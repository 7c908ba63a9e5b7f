"""experiments/scenarios.py and the comparison's use of it: the presets, their flags, the
workload specs they make (the paper's unchanged to the byte), the heavy-tailed draws and the
antagonists' schedule."""
import argparse
import collections
import hashlib
import json
import random
import statistics

import pytest
import yaml

from common.config import config_path, load_config, parse_config_file_data
from experiments import lb_comparison, lb_model, loadgen, scenarios, workload
from placement.apps import entry_mix, entry_services, generate
from tests.conftest import ROOT


def opts_for(*flags):
    return lb_comparison.parser().parse_args(["--phase-seconds", "35", *flags])


def spec_for(opts, seed=2):
    cfg = parse_config_file_data(workload.config_data(opts),
                                 config_path(scenarios.base_config_path(opts)))
    return cfg, workload.workload_spec(cfg, opts, seed)


# The paper's spec and schedule as the code before the scenarios made them (digests of
# the spec's JSON and of every request's seq, offset, phase, class and path).
PAPER_DIGESTS = [
    ([], 2, "be8a7e29141876f4532f1945ac45c1d9e393967848a7d4eca5379400b425bb88"),
    (["--duration-scale", "0.1", "--video-seconds", "20"], 7,
     "64ffa878d8e169d223885d2d3be368dff73e735fd2083663349836bedee6716e"),
    (["--cpu-scale", "1", "--job-mode", "deadline", "--video-rate", "200"], 1001,
     "3da9dc53bb181096f56a62bd1047e19d384a38ee60ba2ea90c86fb6c1ee8ad84"),
]


@pytest.mark.parametrize("flags, seed, digest", PAPER_DIGESTS)
def test_the_paper_scenario_plays_the_same_workload_to_the_byte(flags, seed, digest):
    for scenario in ([], ["--scenario", "paper"]):
        _, spec = spec_for(opts_for(*scenario, *flags), seed)
        plan = [(r["seq"], r["offset"], r["phase"], r["class"]["name"], r["class"]["path"])
                for r in loadgen.schedule(spec, 0, 1)]
        text = json.dumps(spec, indent=1) + json.dumps(plan)
        assert hashlib.sha256(text.encode()).hexdigest() == digest


def test_every_preset_makes_a_valid_spec_on_its_own_configuration():
    for name, sc in scenarios.SCENARIOS.items():
        opts = opts_for("--scenario", name)
        cfg, spec = spec_for(opts)
        loadgen.validate_spec(spec)
        assert [c["name"] for c in spec["classes"]] == [c.name for c in sc.classes]
        assert loadgen.schedule(spec, 0, 1), name
        assert ("antagonists" in spec) == bool(sc.antagonists)
        assert scenarios.describe(opts)


def test_left_out_flags_take_the_scenarios_defaults_and_given_ones_win():
    assert opts_for().server_cpu == [0.3] and opts_for().peak_rate == 1.5
    assert opts_for("--scenario", "unequal").server_cpu == [0.6, 0.3, 0.3, 0.2]
    assert opts_for("--scenario", "unequal", "--server-cpu", "0.5").server_cpu == [0.5]
    cg = opts_for("--scenario", "callgraph")
    assert cg.peak_rate == 12.0 and cg.config is None
    assert scenarios.base_config_path(cg).endswith("configs/callgraph-lb.yaml")
    # the fluid model's parser is built on the comparison's: it sees the same
    assert lb_model.parser().parse_args(["--scenario", "unequal"]).server_cpu == \
        [0.6, 0.3, 0.3, 0.2]


@pytest.mark.parametrize("scenario, flag, value", [
    ("callgraph", "--video-rate", "200"), ("callgraph", "--cpu-scale", "1"),
    ("callgraph", "--job-mode", "deadline"), ("callgraph", "--duration-scale", "0.1"),
    ("callgraph", "--config", "configs/paper.yaml"), ("antagonist", "--server-cpu", "0.5"),
    ("antagonist", "--servers", "4")])
def test_a_flag_that_does_not_fit_the_scenario_is_a_usage_error(capsys, scenario, flag,
                                                                 value):
    with pytest.raises(SystemExit) as exc:
        lb_comparison.parser().parse_args(["--scenario", scenario, flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} does not fit --scenario {scenario}" in err and err.count("\n") == 1


def test_every_scenario_names_only_governed_flags_and_says_what_it_takes():
    for sc in scenarios.SCENARIOS.values():
        assert set(sc.refuses) <= set(scenarios.GOVERNED)
        assert set(sc.defaults) <= set(scenarios.GOVERNED)
        assert all(scenarios.GOVERNED[d][0] not in sc.accepts() for d in sc.refuses)
    with pytest.raises(ValueError, match="not a governed flag"):
        scenarios.Scenario("x", "x", (), refuses={"seed": "no"})
    assert "callgraph" in lb_comparison.parser().format_help()


def test_the_bounded_pareto_of_each_heavy_tail_class_keeps_the_papers_mean():
    for mean in (10, 30):
        low = scenarios.bounded_pareto_low(scenarios.TAIL_ALPHA, 4 * mean, mean)
        assert scenarios.bounded_pareto_mean(scenarios.TAIL_ALPHA, low, 4 * mean) == \
            pytest.approx(mean, rel=1e-9)
    # alpha 1 has its own formula; the limit of the general one
    assert scenarios.bounded_pareto_mean(1.0, 1, 10) == pytest.approx(
        scenarios.bounded_pareto_mean(1.0 + 1e-7, 1, 10), rel=1e-5)
    with pytest.raises(ValueError):
        scenarios.bounded_pareto_low(1.1, 10, 20)


def test_heavy_tail_offers_the_papers_cpu_per_request_with_a_heavier_spread():
    spec = spec_for(opts_for("--scenario", "heavy-tail", "--phase-seconds", "20000"))[1]
    plan = loadgen.schedule(spec, 0, 1)
    paper = {"backend-medium": (10, 0.15), "backend-heavy": (30, 0.32)}
    for name, (seconds, cpu) in paper.items():
        drawn = [r["class"]["drawn"]["seconds"] for r in plan if r["class"]["name"] == name]
        assert len(drawn) > 2000
        assert statistics.fmean(drawn) == pytest.approx(seconds, rel=0.04)
        assert statistics.median(drawn) < 0.8 * seconds            # most jobs are short
        assert max(drawn) <= 4 * seconds
        path = next(r["class"]["path"] for r in plan if r["class"]["name"] == name)
        assert f"&cpu={cpu * 0.25:g}&" in path and "{" not in path


def test_every_client_and_the_model_see_the_same_draws():
    spec = spec_for(opts_for("--scenario", "heavy-tail"))[1]
    whole = loadgen.schedule(spec, 0, 1)
    parts = sorted((r for k in range(3) for r in loadgen.schedule(spec, k, 3)),
                   key=lambda r: r["seq"])
    assert [r["class"]["path"] for r in parts] == [r["class"]["path"] for r in whole]
    # the arrivals and the class mix are the paper's on the same seed: draws have their own
    # random stream
    paper = loadgen.schedule(spec_for(opts_for())[1], 0, 1)
    assert [(r["offset"], r["class"]["name"]) for r in whole] == \
        [(r["offset"], r["class"]["name"]) for r in paper]


def test_the_antagonists_run_in_their_windows_of_the_load_on_their_servers():
    cfg, spec = spec_for(opts_for("--scenario", "antagonist", "--phase-seconds", "30"))
    inside, beside = spec["antagonists"]
    assert inside == {"name": "srv1-ui-inside", "server": "srv1", "where": "container",
                      "container": "mn.srv1-ui", "microservice": "ui", "start_s": 30.0,
                      "stop_s": 60.0, "cores": 1.0}
    assert beside["where"] == "beside" and beside["server"] == "srv3"
    assert (beside["start_s"], beside["stop_s"]) == (45.0, 75.0)     # overlapping windows
    assert "container" not in beside


def test_the_callgraph_configuration_is_the_generators_and_its_entries_the_classes():
    text = open(f"{ROOT}/{scenarios.CALLGRAPH_CONFIG}").read()
    assert text == scenarios.callgraph_config_text()
    data = generate(**scenarios.CALLGRAPH_GENERATOR)
    assert entry_services(data) == [c.name for c in scenarios.CALLGRAPH_CLASSES]
    cfg = load_config(f"{ROOT}/{scenarios.CALLGRAPH_CONFIG}")
    assert len(cfg.testbed.switches) == 1 and len(cfg.servers) == 4
    assert all(len(m.servers) == 3 for m in cfg.microservices)      # a choice for every call
    assert sorted({m.cpu_ms for m in cfg.microservices})[-1] == 20    # some are CPU-heavy


def test_the_generators_defaults_still_write_callgraph30():
    text = open(f"{ROOT}/configs/callgraph30.yaml").read()
    assert yaml.safe_load(text) == generate(30, 7)
    d = generate(12, 3, entries=3, replicas=2, servers=4)
    assert entry_services(d) == ["svc01", "svc02", "svc03"]
    assert all(m["replicas"] == 2 for m in d["microservices"])
    with pytest.raises(ValueError, match="replicas"):
        generate(12, 3, replicas=5, servers=4)


def test_the_longest_request_bounds_the_wait_for_the_last_one():
    assert scenarios.longest_request_s(opts_for()) == 30.0
    assert scenarios.longest_request_s(opts_for("--scenario", "heavy-tail")) == 120.0
    assert scenarios.longest_request_s(opts_for("--duration-scale", "0.1",
                                                "--video-seconds", "400")) == 40.0
    assert scenarios.longest_request_s(opts_for("--scenario", "callgraph")) == 0.0


def test_draws_are_seeded_and_reproducible():
    draw = {"dist": "bounded-pareto", "alpha": 1.1, "low": 4.0, "high": 40.0}
    one, two = random.Random(5), random.Random(5)
    a = [loadgen.draw_value(draw, one) for _ in range(3)]
    assert a == [loadgen.draw_value(draw, two) for _ in range(3)] and len(set(a)) == 3
    assert loadgen.bounded_pareto(0.0, 1.1, 4.0, 40.0) == 4.0
    assert loadgen.bounded_pareto(1 - 1e-15, 1.1, 4.0, 40.0) == pytest.approx(40.0, rel=1e-6)


def test_the_comparison_and_the_model_take_data_plane_mode_from_one_flag():
    for build in (lb_comparison.parser, lb_model.parser):
        opts = build().parse_args(["--scenario", "callgraph", "--dataplane"])
        cfg = parse_config_file_data(workload.config_data(opts),
                                     config_path(scenarios.base_config_path(opts)))
        assert opts.dataplane and cfg.controller.dataplane.short_flows == "switch"
    opts = lb_comparison.parser().parse_args(["--scenario", "callgraph"])
    assert workload.config_data(opts)["controller"].get("dataplane") is None


def test_tracker_mode_is_a_flag_and_one_mode_at_a_time(capsys):
    opts = lb_comparison.parser().parse_args(["--scenario", "hotel", "--tracker"])
    cfg = parse_config_file_data(workload.config_data(opts),
                                 config_path(scenarios.base_config_path(opts)))
    assert cfg.controller.dataplane.short_flows == "tracker"
    with pytest.raises(SystemExit) as exc:
        lb_comparison.parser().parse_args(["--dataplane", "--tracker"])
    assert exc.value.code == 2 and "give one" in capsys.readouterr().err


@pytest.mark.parametrize("app", sorted(scenarios.DSB_APPS))
def test_deathstarbench_puts_each_service_on_two_servers_and_1000_requests_in_each_class(app):
    source, generated = scenarios.DSB_APPS[app]
    assert open(f"{ROOT}/{generated}").read() == scenarios.dsb_config_text(app)
    with open(f"{ROOT}/{source}") as fh:
        entries = entry_services(yaml.safe_load(fh))
    sc = scenarios.SCENARIOS[app]
    assert {c.name for c in sc.classes} == set(entry_mix(f"{ROOT}/{source}", entries))
    opts = lb_comparison.parser().parse_args(["--scenario", app])
    assert opts.phase_seconds == scenarios.DSB_PHASE_S and opts.servers == 8
    cfg, spec = spec_for(opts)
    assert len(cfg.testbed.switches) == 4
    for ms in cfg.microservices:
        servers = [i.server for i in cfg.instances if i.microservice == ms.name]
        assert len(servers) == scenarios.DSB_REPLICAS == len(set(servers)), ms.name
    counts = collections.Counter(r["class"]["name"] for r in loadgen.schedule(spec, 0, 1))
    assert set(counts) == {c.name for c in sc.classes}
    assert min(counts.values()) >= 1000, counts


def test_connections_per_request_count_the_clients_and_every_call_down_the_graph():
    def per_request(name):
        return scenarios.connections_per_request(argparse.Namespace(scenario=name,
                                                                    config=None))
    # configs/callgraph-lb.yaml: svc01 -> svc09; svc02 -> svc06 -> svc10; svc03 -> svc04
    # (-> svc05 -> svc08, -> svc07 -> svc08) and svc09: 2, 3 and 7 connections
    assert per_request("callgraph") == pytest.approx((2 + 3 + 7) / 3)
    assert per_request("hotel") > per_request("callgraph")
    assert per_request("paper") is None
