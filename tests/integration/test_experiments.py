"""The experiments' pipelines end to end, at very short lengths: in `make test` one short
run of each kind (a comparison of malb and HAProxy, a placement comparison, the SLO
experiment; the fault suite and the soak have their own modules), in `make test-e2e` the
comparison with every policy and Scenario 1, and an SLO experiment cut off and resumed."""
import csv
import glob
import json
import os
import subprocess
import time

import pytest

from common import config
from common.config import DEFAULT_MICROSERVICES
from experiments.stack import Stack
from common.procs import ROOT
from tests.conftest import PY, run_module
from topologies.clean import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("clean_machine")]


# every policy of the controller's registry, and HAProxy (its agent-fed mode) outside it
POLICIES = (*config.POLICIES, "haproxy-agent")
# ours and the outside balancer practitioners pick: each policy's own path through the VIP
# is tested in `make test` on one stack switched over REST (test_controller.py)
SHORT_POLICIES = ("malb", "haproxy-agent")


def test_a_short_comparison_of_malb_and_haproxy(tmp_path):
    comparison(tmp_path, SHORT_POLICIES)


@pytest.mark.e2e
def test_lb_comparison_smoke_run_of_every_policy(tmp_path):
    comparison(tmp_path, POLICIES)


def comparison(tmp_path, policies):
    out = tmp_path / "cmp"
    res = run_module("experiments.lb_comparison", "--phase-seconds", "6", "--peak-rate", "2",
                     "--duration-scale", "0.1", "--video-seconds", "20", "--period", "1",
                     "--policies", ",".join(policies),
                     "--out", str(out), "--progress", "5", timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Table II" in res.stdout and "Table III" in res.stdout
    for name in ("summary.md", "summary.json", "table2.csv", "table3.csv", "fig3.csv",
                 "fig3.png", "cpu_timeline.png", "response_times.png"):
        assert (out / name).stat().st_size > 0, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] is True
    # one run: the statistics say that nothing was tested
    assert "One run per policy: no confidence interval and no test" in \
        (out / "summary.md").read_text()
    baseline = "srr" if "srr" in policies else policies[-1]
    assert summary["statistics"]["cpu_stdev"]["vs"][baseline]["verdict"] == \
        "not tested (one run)"
    for policy in policies:
        run = summary["runs"][policy][0]
        # every request is accounted for: each one planned was recorded, done or failed
        assert run["requests_planned"] == run["requests_recorded"] > 0
        rows = [r for f in glob.glob(str(out / policy / "run1" / "requests-*.csv"))
                for r in csv.DictReader(open(f))]
        assert len(rows) == run["requests_planned"]
        t3 = run["table3"]
        assert sum(c["completed"] + c["failed"] for c in t3.values()) == len(rows)
        assert set(run["table2"]) == {"cpu", "mem", "net", "energy"}
        # 18 s of load over 3 s periods; the 20 s streams run on in the drain after it
        assert run["table2"]["cpu"]["timestamps"] >= 4
        assert run["table2_with_drain"]["cpu"]["timestamps"] > \
            run["table2"]["cpu"]["timestamps"]
        assert os.path.exists(out / policy / "run1" / "history.sqlite")
    # what balancing cost: the controller's CPU in every run, HAProxy's where it balanced
    assert all(summary["runs"][p][0]["balancer_cores"]["controller"] is not None
               for p in policies)
    assert summary["runs"]["haproxy-agent"][0]["balancer_cores"]["haproxy"] > 0
    assert "| HAProxy leastconn + agent weights |" in (out / "summary.md").read_text()
    table2 = list(csv.DictReader(open(out / "table2.csv")))
    assert {(r["policy"], r["metric"]) for r in table2} == {
        (p, m) for p in policies for m in ("cpu", "mem", "net", "energy")}
    classes = {r["class"] for r in csv.DictReader(open(out / "table3.csv"))}
    assert classes <= {"ui-light", "ui-medium", "backend-medium", "backend-heavy", "video"}
    assert {"ui-light", "ui-medium"} <= classes
    assert leftovers()["containers"] == []
    # the same raw data evaluated again by the same code: the same figures
    res = run_module("experiments.lb_comparison", "--resummarise", str(out), timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    again = json.loads((out / "summary.json").read_text())
    assert again["statistics"] == summary["statistics"]
    assert again["runs"]["malb"][0]["table2"] == summary["runs"]["malb"][0]["table2"]


def test_a_short_placement_comparison_moves_live_and_loses_no_request(tmp_path):
    out = tmp_path / "placement"
    res = run_module("experiments.placement_comparison", "--methods", "spread,ours",
                     "--warmup", "10", "--phase", "5", "--settle", "2", "--move-batch", "3",
                     "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads((out / "summary.json").read_text())
    (run,) = doc["runs"]
    spread, ours = run["results"]["spread"], run["results"]["ours"]
    # the plan was carried out live under load: every move made, no request lost to them
    assert ours["moves"] and all(not m["forced"] for m in ours["moves"]), ours["moves"]
    assert ours["failed_during_moves"] == 0 and ours["requests_during_moves"] > 0
    assert {ms: sorted(servers) for ms, servers in ours["layout"].items()} == \
        {ms: sorted(servers) for ms, servers in run["plans"]["ours"]["layout"].items()}
    # what clients saw, measured for each placement
    for result in (spread, ours):
        assert result["end_to_end"]["requests"] > 0 and result["end_to_end"]["failed"] == 0
        assert result["end_to_end"]["p95_ms"] is not None
        # each call as its caller waited for it, from the callers' own histograms
        assert any(c["p50_ms"] for c in result["calls"].values()), result["calls"]
        # and what the switch and the controller cost meanwhile
        assert result["cpu"]["ovs_cores"] and result["cpu"]["controller_cores"], result["cpu"]
    assert "| trunk Mbit/s |" in (out / "summary.md").read_text()
    assert (out / "placement.png").stat().st_size > 0
    assert leftovers()["containers"] == []


def test_a_short_slo_run_measures_energy_and_what_the_clients_saw(tmp_path):
    out = tmp_path / "slo"
    # the predictive rule (test_slo_loop.py holds the windowed rule to a load step)
    res = run_module("experiments.slo_energy", "--profiles", "step", "--policies",
                     "slo-predictive", "--short-flows", "switch", "--seconds", "30",
                     "--warmup", "0", "--no-progress", "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads((out / "summary.json").read_text())
    assert doc["short_flows"] == "switch"
    for policy in ("slo-predictive",):
        (run,) = doc["profiles"]["step"][policy]
        assert run["requests"] > 0 and run["failed"] == 0
        assert run["energy_j"] > 0 and run["energy_per_request_mj"] > 0
        assert run["p95_ms"] is not None and run["intervals"] > 0
        # where the clients' time went: each part measured
        assert None not in (run["connect_p95_ms"], run["server_p95_ms"],
                            run["service_p50_ms"], run["service_p99_ms"])
        # the loop acted on the frequency (the emulated one: the container's CPU quota)
        assert run["freq_changes_per_min"] > 0 and 0 < run["mean_freq_mhz"] <= 2100
    # the predictive rule read the service's queue and decided from it; a reading that
    # timed out (the service busy at a low frequency) sends it to the maximum for a period
    with open(out / "run" / "loop-step-slo-predictive.csv") as fh:
        actions = [r["action"] for r in csv.DictReader(fh)]
    decided = [a for a in actions if a in ("predict-up", "predict-down", "hold", "dwell")]
    assert len(decided) >= 0.8 * len(actions) and actions.count("no-signal") <= 3, actions
    assert doc["energy_model"] and "| slo-predictive |" in (out / "summary.md").read_text()
    assert (out / "slo-step.png").stat().st_size > 0
    assert leftovers()["containers"] == []


@pytest.mark.e2e
def test_profiling_accuracy_live_and_from_the_recorded_history(tmp_path):
    out = tmp_path / "s1"
    res = run_module("experiments.profiling_accuracy", "live", "--out", str(out),
                     "--microservices", "ui", "--phase-seconds", "12", "--rm-windows", "2,5",
                     "--arma-windows", "6", timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "mse.csv")))
    phases = {r["phase"] for r in rows if r["predictor"] == "rm" and r["mse"]}
    assert phases == {"increasing", "stable", "decreasing"}
    assert (out / "mse.png").stat().st_size > 0
    # the same analysis from the recorded history alone
    again = tmp_path / "again"
    res = run_module("experiments.profiling_accuracy", "analyse", "--history",
                     str(out / "history.sqlite"), "--phases", str(out / "phases.json"),
                     "--out", str(again), "--rm-windows", "2,5", "--arma-windows", "6")
    assert res.returncode == 0, res.stderr
    assert (again / "mse.csv").read_text() == (out / "mse.csv").read_text()


def test_a_load_generator_that_crashes_is_reported_at_once_not_at_the_deadline(tmp_path):
    data = {"testbed": {"clients": 1}, "servers": {"count": 1},
            "microservices": DEFAULT_MICROSERVICES}
    with Stack(data, str(tmp_path), controller=False, agents=False, profiler=False,
               start_services=False) as st:
        st.start_loadgen(str(tmp_path / "no-such-spec.json"), time.time())
        deadline = time.time() + 15
        with pytest.raises(RuntimeError, match="(?s)ended without a summary.*no-such-spec"):
            while time.time() < deadline:
                assert st.loadgen_summaries() == []
                time.sleep(0.5)


@pytest.mark.e2e
def test_an_slo_experiment_cut_off_goes_on_from_its_first_play_without_a_result(tmp_path):
    out = tmp_path / "slo"
    flags = ["--profiles", "step", "--policies", "max,ondemand", "--short-flows", "switch",
             "--seconds", "30", "--warmup", "0", "--no-progress", "--out", str(out)]
    proc = subprocess.Popen([PY, "-m", "experiments.slo_energy", *flags], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 400
    while not list(out.glob("plays/*.json")) and proc.poll() is None \
            and time.time() < deadline:
        time.sleep(1)
    proc.terminate()                    # cut off during the second play
    _stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert "--resume goes on" in stderr and not (out / "summary.json").exists()
    (kept,) = out.glob("plays/*.json")
    first = json.loads(kept.read_text())
    res = run_module("experiments.slo_energy", *flags, "--resume", timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "played before, read back" in res.stdout
    doc = json.loads((out / "summary.json").read_text())
    started = json.loads((out / "started.json").read_text())["stamp"]
    assert doc["commit"] == started["commit"] and doc["when"] == started["when"]
    played = {p: runs for p, runs in doc["profiles"]["step"].items()}
    assert sorted(played) == ["max", "ondemand"] and all(len(r) == 1 for r in played.values())
    # the play kept is the one reported; the other was played on the resumed stack, in
    # a directory of its own
    assert first["result"] in (played["max"][0], played["ondemand"][0])
    assert (out / "run").is_dir() and (out / "run-2").is_dir()
    assert leftovers()["containers"] == []
