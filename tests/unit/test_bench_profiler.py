"""The profiler-period benchmark runs and writes what it promises (structure, not timings)."""
import json

import pytest

from benchmarks import profiler_period as bench


def test_small_rm_run_writes_json_and_markdown(tmp_path):
    doc = bench.run_benchmark(sizes=[10], periods=3, modes=["rm"], out_dir=str(tmp_path),
                              warmup=2, store_dir=str(tmp_path), command="test")
    with open(tmp_path / "profiler_period.json") as fh:
        saved = json.load(fh)
    assert saved == json.loads(json.dumps(doc))
    assert {"benchmark", "command", "machine", "setup", "results", "elapsed_s"} <= set(saved)
    assert saved["machine"]["cpu_count"] >= 1 and saved["machine"]["python"]
    (r,) = saved["results"]
    assert (r["size"], r["mode"], r["predictor"], r["periods"], r["warmup_periods"]) == \
        (10, "rm", "rm", 3, 2)
    assert r["servers"] == 4 and r["instances"] == 40 and r["series"] == 3 * (10 + 4)
    assert r["failed_periods"] == 0 and r["fits"] is None and r["wave"] is None
    for key in ("model_ms", "sqlite_read_ms", "sqlite_write_ms", "total_ms"):
        assert set(r[key]) == {"mean", "p50", "p95", "max", "min"}
        assert all(isinstance(v, float) and v >= 0 for v in r[key].values())
    assert all(len(v) == 3 for v in r["per_period_ms"].values())
    assert r["rows_written_per_period"] == {"container_samples": 40, "server_samples": 4,
                                            "microservice_samples": 10}
    # 5 periods written (warm-up included); the temporary store was removed afterwards
    assert r["store_row_counts"]["microservice_samples"] == 5 * 10
    assert [p.name for p in tmp_path.iterdir()] and \
        not [p for p in tmp_path.iterdir() if p.name.startswith("malb-bench-")]

    md = (tmp_path / "profiler_period.md").read_text()
    assert "Command: `test`" in md and "| 10 | rm | 42 | 3 | 0 |" in md


def test_config_names_fit_linux_interfaces_and_ports_are_unique():
    cfg = bench.build_config(1000, "arma")
    assert len(cfg.microservices) == 1000 and len(cfg.instances) == 4000
    assert max(len(i.name) for i in cfg.instances) <= 10
    assert len({m.port for m in cfg.microservices}) == 1000
    assert (cfg.profiler.predictor, cfg.profiler.window, cfg.profiler.arma_order,
            cfg.profiler.arma_refit_every) == ("arma", 20, (2, 1), 10)


def test_synthetic_samples_look_like_the_agents():
    cfg = bench.build_config(10, "rm")
    agents = bench.SyntheticAgents(cfg, seed=1)
    samples = agents.sample(0, 100.0)
    assert set(samples) == {"srv1", "srv2", "srv3", "srv4"}
    s = samples["srv1"]
    assert {"server", "time", "capacity", "totals", "containers"} <= set(s)
    assert {"cpu_percent", "memory_percent", "network_percent", "complete",
            "missing"} <= set(s["totals"])
    assert len(s["containers"]) == 10
    c = s["containers"][0]
    assert {"name", "instance", "microservice", "readable", "cpu_percent", "memory_bytes",
            "rx_bytes_per_s", "tx_bytes_per_s"} <= set(c)
    # reproducible from the seed
    again = bench.SyntheticAgents(cfg, seed=1).sample(0, 100.0)
    assert again == samples


def test_counted_arma_schedule():
    a = bench._CountedArma(order=(2, 1), window=20, refit_every=10)
    assert a.fits_due() == 0 and a.updates_until_due() == 5
    a.updates = 5
    assert a.fits_due() == 1 and a.updates_until_due() == 10
    a.updates = 24
    assert a.fits_due() == 2 and a.updates_until_due() == 1


def test_summarize():
    assert bench.summarize([]) == {"mean": None, "p50": None, "p95": None, "max": None,
                                   "min": None}
    s = bench.summarize([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5 and s["p50"] == 2.5 and s["max"] == 4.0 and s["min"] == 1.0


def test_cli_rejects_bad_flags(capsys):
    for argv in (["--sizes", "ten"], ["--modes", "turbo"], ["--periods", "0"]):
        with pytest.raises(SystemExit) as exc:
            bench.main(argv)
        assert exc.value.code == 2
