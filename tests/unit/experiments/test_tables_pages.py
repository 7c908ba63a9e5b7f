"""docs/experiments.md's, docs/profiler.md's and docs/haproxy.md's generated results tables
(experiments/tables/experiments_page.py, bench_pages.py): each figure from the data it is
given, each run's setup and code in the caption."""
import pytest

from experiments import profiling_accuracy
from experiments.tables import bench_pages, experiments_page


def _cells(md: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is `first`."""
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in\n{md}")


# ------------------------------------------------------------------ the fluid model

def _model(scenario: str, commit: str = "abc1234", **cpu):
    """A model.json: the command naming its scenario, CPU STDEV per policy as (mean, ci)."""
    return {"command": f"python -m experiments.lb_model --scenario {scenario} --runs 5",
            "commit": commit, "runs": 5,
            "comparison": {"cpu_stdev": {"label": "CPU STDEV across servers (%)",
                                         "policies": {p: {"n": 5, "mean": m, "ci": ci}
                                                      for p, (m, ci) in cpu.items()}}}}


def _setup_line(*cpus: float, seed: int = 1) -> str:
    """model.md's setup line, with these servers' CPU shares."""
    servers = ", ".join(f"srv{k} {c:g} CPU / 20 Mbit/s" for k, c in enumerate(cpus, start=1))
    return (f"# Scenario 2, fluid model\n\nPhases: 3 x 30 s, peak 1.5 requests/s; servers: "
            f"{servers}; back-end jobs at 0.25 x the paper's CPU; seed {seed} (run k: "
            f"seed + k).\n")


def test_the_model_table_is_each_scenarios_cpu_stdev_per_policy():
    md = experiments_page.model_table(
        _model("paper", srr=(12.04, 1.16), malb=(7.86, 0.4)), _setup_line(0.3, 0.3),
        _model("unequal", wrr=(12.1, 0.96), malb=(7.54, 0.66)), _setup_line(0.6, 0.2))
    assert md.splitlines()[0] == "| scenario | SRR | WRR | MALB |"     # the page's order
    assert _cells(md, "paper") == ["paper", "12.0 ± 1.2", "–", "7.9 ± 0.4"]
    # unequal servers: the shares are part of the scenario
    assert _cells(md, "unequal (0.6, 0.2)") == ["unequal (0.6, 0.2)", "–", "12.1 ± 1.0",
                                                "7.5 ± 0.7"]
    assert "5 runs per policy, seeds 2-6, 3 x 30 s phases; code at abc1234." in md


def test_the_model_table_names_each_scenarios_code_when_they_differ():
    md = experiments_page.model_table(
        _model("paper", "aaa1111", malb=(8.0, 0.5)), _setup_line(0.3),
        _model("antagonist", "bbb2222", malb=(17.5, 0.9)), _setup_line(0.3, seed=7))
    assert "code at aaa1111 (paper); bbb2222 (antagonist)." in md
    assert "seeds 2-6" in md and "seeds 8-12" in md


# ---------------------------------------------------------- Scenario 1's accuracy

def _recording(values_cpu: list[float], values_net: list[float]) -> str:
    """microservice_samples.csv of one microservice, a sample a second from t = 0."""
    lines = ["t,microservice,cpu,mem,net"]
    lines += [f"{t},video,{c},4.0,{n}" for t, (c, n) in enumerate(zip(values_cpu, values_net))]
    return "\n".join(lines) + "\n"


def test_the_accuracy_table_scores_each_predictor_on_the_recording(tmp_path):
    cpu = [1.0, 3.0] * 6            # a rolling mean of 2 or 10 misses by 1, of 5 by 1.2
    phases = [{"microservice": "video", "phase": "increasing", "start": 0, "end": 12}]
    # as the committed mse.csv was made: analyse on the recording, written by write_csv
    recording = tmp_path / "microservice_samples.csv"
    recording.write_text(_recording(cpu, [5.0] * 12))
    rows = profiling_accuracy.analyse(profiling_accuracy.load_history(str(recording)),
                                      phases, resources=("cpu", "net"))
    path = tmp_path / "mse.csv"
    profiling_accuracy.write_csv(rows, str(path))
    settings = {"arma_order": [2, 1], "refit_every": 10, "computed_at": "c0ffee1",
                "recorded_with": "deadbee1"}
    md = experiments_page.accuracy_table(path.read_text(), settings)
    assert md.splitlines()[0].startswith("| type | resource | phase | mean (%) | RM w=2 | "
                                         "RM w=5 | RM w=10 | ARMA w=20 |")
    # the lowest of a row in bold, ties too; ARMA's windows longer than the phase: no MSE
    assert _cells(md, "video")[:7] == ["video", "CPU", "increasing", "2.00", "**1**",
                                       "1.44", "**1**"]
    assert _cells(md, "video")[7:] == ["–", "–", "–"]
    assert "| video | network | increasing | 5.00 | **0** | **0** | **0** |" in md
    assert "analyse at c0ffee1 from the series the live run recorded (committed with " \
        "deadbee1)." in md and "(ARMA(2,1) refitted every 10 samples)" in md


# ------------------------------------------------------------ the profiler's period

def _period_run(paced: bool, commit: str = "abc1234", **arma):
    result = {"size": 1000, "active_flows": 20000, "predictor": "arma" if arma else "rm",
              "warmup_periods": 20 if arma else 10,
              "period_cpu_ms": {"mean": 146.64, "p95": 280.01},
              "report_cpu_ms": {"mean": 44.66}, "records_per_period": {"mean": 2362.5},
              "core_share": 0.0638, **({"arma": arma} if arma else {})}
    return {"commit": commit, "machine": {"cpu_count": 2},
            "setup": {"servers": 4, "period_s": 3.0, "periods": 30 if paced else 20,
                      "paced": paced}, "results": [result]}


def test_the_period_table_is_every_configuration_of_each_run():
    md = bench_pages.period_table(
        _period_run(False),
        _period_run(True, fits_done=2619, fits_due=9036, worker_cpu_share=0.9825))
    assert _cells(md, "1,000")[2:] == ["RM, w = 10", "2,362", "146.6 / 280.0", "44.7",
                                       "6.4 %", "–"]
    paced = md.splitlines()[3]
    assert "| ARMA, w = 20, paced (3 s per period) |" in paced
    assert paced.endswith("| 2,619 / 9,036, 98 % |")
    assert "unpaced: 20 periods, paced: 30 periods" in md and "code at abc1234." in md


# ---------------------------------------------------------------------------- HAProxy

def _haproxy_run(**summary):
    row = {"path": "HAProxy leastconn", "ok": "800/800", "seconds": 12.1325,
           "mb_per_s": 32.97, "haproxy_cpu_s": 0.9, "ovs_cpu_s": 6.4, "servers_cpu_s": 6.0,
           "haproxy_vs_servers": 0.15, **summary}
    return {"commit": "cfa4ce6", "summary": [row],
            "settings": {"objects": 200, "parallel": 8, "size": 1000000, "rounds": 2,
                         "policy": "srr"}}


def test_the_haproxy_table_is_each_paths_means_over_the_rounds():
    md = bench_pages.haproxy_table(_haproxy_run(ryu_cpu_s=0.035))
    assert _cells(md, "HAProxy leastconn") == [
        "HAProxy leastconn", "800/800", "12.1", "33.0", "0.90", "0.04", "6.40", "6.00",
        "0.150"]
    assert "Means over 2 rounds; a burst: 200 ui objects of 1 MB per client, 8 at a time" \
        in md and "code at cfa4ce6." in md


def test_the_haproxy_table_reads_the_controllers_cpu_under_either_name():
    md = bench_pages.haproxy_table(_haproxy_run(controller_cpu_s=0.21, haproxy_cpu_s=None,
                                                haproxy_vs_servers=None))
    cells = _cells(md, "HAProxy leastconn")
    assert cells[4:6] == ["–", "0.21"] and cells[-1] == "–"


# ------------------------------------------------------------------------ GET /probes

def _probes(commit: str, took_p99: float, spawned: float):
    return {"commit": commit,
            "sequential": {"instances_per_answer": 3,
                           "client_wall_ms": {"p50": 2.41, "p99": 8.24},
                           "agent_took_ms": {"p50": 1.66, "p99": took_p99},
                           "agent_cpu_ms_per_answer": 0.925,
                           "service_cpu_ms_per_reading": 0.351},
            "nsenter_curl": {"wall_ms_per_reading": {"p50": 9.39, "p99": 27.34},
                             "spawned_cpu_ms_per_reading": spawned},
            "steady": {"agents": 4, "rate_per_s": 4.0, "seconds": 20.01,
                       "agent_extra_cpu_percent_of_a_core": {"mean": 0.737},
                       "service_extra_cpu_percent_of_a_core_per_instance": {"mean": 0.304}}}


def test_the_probes_table_gives_each_run_in_turn():
    md = bench_pages.probes_table(_probes("aaa1111", 7.501, 6.45), _probes("bbb2222", 44.4, 6.18))
    assert md.splitlines()[0] == ("| figure | GET /probes, run 1 / run 2 | nsenter + curl, "
                                  "run 1 / run 2 |")
    took = _cells(md, "the agent's own time for it (`took_ms`) p50 / p99")
    assert took[1] == "1.7 / 7.5; 1.7 / 44 ms"
    # reading through nsenter costs 3 readings an answer
    agent = _cells(md, "agent CPU per answer")
    assert agent[1] == "0.93; 0.93 ms" and agent[2].startswith("19; 19 ms (6.5; 6.2 ms")
    assert "code at aaa1111" in md and "code at bbb2222" in md


def test_a_figure_keeps_two_significant_digits():
    assert [bench_pages.significant(v) for v in (45.33, 0.3509, 1.0749, 0, None)] == \
        ["45", "0.35", "1.1", "0", "–"]


@pytest.mark.e2e
def test_the_committed_mse_csv_is_what_analyse_computes_from_the_recording():
    """data/profiler/scenario1/mse.csv, which the page's table reads, against the analysis
    its README names run again on the recording beside it, with the settings of
    mse-settings.json (minutes of ARMA fits: `make test-e2e` only)."""
    import math
    import os

    from experiments.standing import load
    from tests.conftest import ROOT
    where = os.path.join(ROOT, "data", "profiler", "scenario1")
    settings = load("profiler/scenario1/mse-settings.json")
    fresh = profiling_accuracy.analyse(
        profiling_accuracy.load_history(os.path.join(where, "microservice_samples.csv")),
        profiling_accuracy.load_phases(os.path.join(where, "phases.json")),
        rm_windows=settings["rm_windows"], arma_windows=settings["arma_windows"],
        arma_order=tuple(settings["arma_order"]), refit_every=settings["refit_every"],
        score=settings["score"])
    committed = experiments_page.mse_rows(load("profiler/scenario1/mse.csv"),
                                          ("cpu", "mem", "net"))
    key = ("microservice", "resource", "phase", "predictor", "window")

    def order(r):
        return tuple(str(r[k]) for k in key)
    assert len(fresh) == len(committed)
    for new, old in zip(sorted(fresh, key=order), sorted(committed, key=order)):
        assert order(new) == order(old)
        if new["mse"] is None or old["mse"] is None:
            assert new["mse"] is old["mse"] is None, new
        else:
            assert math.isclose(new["mse"], old["mse"], rel_tol=1e-9, abs_tol=1e-12), new


def test_two_mses_that_print_alike_are_both_bold():
    rows = [{"microservice": "video", "resource": "net", "phase": "stable", "predictor": k,
             "window": w, "mse": m, "mean": 7.0}
            for k, w, m in (("rm", 2, 0.711509), ("arma", 100, 0.711461), ("rm", 5, 1.2))]
    md = experiments_page.accuracy_markdown(rows, {"arma_order": [2, 1], "refit_every": 10,
                                                   "computed_at": "a", "recorded_with": "b"})
    assert _cells(md, "video")[4:] == ["**0.7115**", "1.2", "**0.7115**"]


def test_the_scenario_is_read_from_either_spelling_of_the_flag():
    for command in ("python -m experiments.lb_model --scenario unequal --runs 20",
                    "python -m experiments.lb_model --scenario=unequal"):
        assert experiments_page.scenario_of({"command": command}) == "unequal"
    assert experiments_page.scenario_of({"command": "python -m experiments.lb_model"}) == \
        "paper"
