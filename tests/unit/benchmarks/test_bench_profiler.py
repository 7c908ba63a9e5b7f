"""The profiler-period benchmark drives the real service and writes what it promises
(structure and plausibility, not timings)."""
import json

import pytest

from benchmarks import profiler_period as bench


def test_a_small_run_goes_through_the_real_service_and_writes_json_and_markdown(tmp_path):
    doc = bench.run_benchmark(sizes=[10], flows=[0, 500], predictors=["rm"], periods=3,
                              out_dir=str(tmp_path), store_dir=str(tmp_path), command="test")
    saved = json.loads((tmp_path / "profiler_period.json").read_text())
    assert saved == json.loads(json.dumps(doc))
    idle, busy = saved["results"]
    assert (idle["size"], idle["active_flows"], idle["predictor"], idle["periods"]) == \
        (10, 0, "rm", 3)
    assert idle["records_per_period"]["mean"] == 0 and idle["active_flows_known"] == 0
    # the reports went through the profiler's HTTP handler into its model and history
    assert busy["records_per_period"]["mean"] > 0 and busy["posts_per_period"]["mean"] >= 1
    assert 450 <= busy["active_flows_known"] <= 550
    assert busy["history_rows"]["flows"] > 0
    assert busy["history_rows"]["microservice_samples"] == (10 + 3) * 10   # warm-up + 3
    assert busy["report_cpu_ms"]["mean"] > 0 and busy["period_cpu_ms"]["mean"] > 0
    assert 0 < busy["core_share"] < 1
    assert "short" in busy["flow_classes"] and "long" in busy["flow_classes"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("malb-bench-")]
    md = (tmp_path / "profiler_period.md").read_text()
    assert "Command: `test`" in md and "| 10 | 500 | rm |" in md


def test_the_controller_side_reports_as_the_flow_table_says():
    cfg = bench.build_config(10, "rm")
    ctl = bench.SyntheticController(cfg, active=300, seed=1)
    first = ctl.period(1000.0)
    assert len([r for r in first if r["active"]]) >= 300      # every new flow, once
    second = ctl.period(1003.0)            # now all past the 3 s threshold: said once
    assert len([r for r in second if r["active"]]) >= 300
    third = ctl.period(1006.0)
    # what is due now: flows that ended and those that began instead, the short ones;
    # not every active flow again
    assert len([r for r in third if r["active"]]) < 100
    assert len([r for r in third if not r["active"]]) >= bench.SHORT_PER_PERIOD
    assert len(ctl.ends) == 300


def test_config_names_fit_linux_interfaces_and_ports_are_unique():
    cfg = bench.build_config(1000, "arma")
    assert len(cfg.microservices) == 1000 and len(cfg.instances) == 4000
    assert max(len(i.name) for i in cfg.instances) <= 10
    assert len({m.port for m in cfg.microservices}) == 1000
    assert (cfg.profiler.predictor, cfg.profiler.window, cfg.profiler.arma_order,
            cfg.profiler.arma_refit_every) == ("arma", 20, (2, 1), 10)


def test_synthetic_samples_look_like_the_agents():
    cfg = bench.build_config(10, "rm")
    samples = bench.SyntheticAgents(cfg, seed=1).sample(0, 100.0)
    assert set(samples) == {"srv1", "srv2", "srv3", "srv4"}
    s = samples["srv1"]
    assert {"server", "time", "capacity", "totals", "containers"} <= set(s)
    assert {"cpu_percent", "memory_percent", "network_percent", "complete",
            "missing"} <= set(s["totals"])
    assert len(s["containers"]) == 10
    assert bench.SyntheticAgents(cfg, seed=1).sample(0, 100.0) == samples   # reproducible


def test_summarize():
    assert bench.summarize([]) == {"mean": None, "p50": None, "p95": None, "max": None}
    s = bench.summarize([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5 and s["p50"] == 2.5 and s["max"] == 4.0


def test_cli_rejects_bad_flags():
    for argv in (["--sizes", "ten"], ["--predictors", "turbo"], ["--periods", "0"],
                 ["--flows", "-1"]):
        with pytest.raises(SystemExit) as exc:
            bench.main(argv)
        assert exc.value.code == 2
