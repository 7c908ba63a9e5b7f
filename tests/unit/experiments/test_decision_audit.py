"""experiments/decision_audit.py: judging least-load decisions by what followed."""
import json
import shutil

import pytest

from experiments import decision_audit as audit


def test_actual_after_and_before_take_the_right_samples():
    series = [(float(t), float(t)) for t in range(0, 30, 3)]
    assert audit.actual_after(series, 10.0, 9.0) == pytest.approx((12 + 15 + 18) / 3)
    assert audit.actual_after(series, 40.0, 9.0) is None
    assert audit.before(series, 6.0) == [0.0, 3.0, 6.0]


def test_lag_of_a_rolling_mean_behind_a_ramp_is_about_half_its_window():
    series = [(3.0 * k, float((k // 25) % 2) * 50.0) for k in range(200)]   # square wave
    lag = audit.lag_periods(series, window=10)
    assert 3 <= lag <= 6
    assert audit.lag_periods(series[:20]) is None


def test_summary_counts_hits_regret_and_estimators():
    rows = [{"chosen": "a", "actual": {"a": 10.0, "b": 20.0},
             "estimates": {"last": {"a": 12.0, "b": 18.0}, "rm10": {"a": 30.0, "b": 5.0}}},
            {"chosen": "a", "actual": {"a": 30.0, "b": 20.0},
             "estimates": {"last": {"a": 28.0, "b": 25.0}, "rm10": None}}]
    s = audit.summarise(rows)
    assert s["chosen_least_loaded"] == 0.5 and s["regret_cpu_points"] == 5.0
    assert s["random_least_loaded"] == 0.5
    assert s["estimators"]["last"]["mae_cpu_points"] == pytest.approx((2 + 2 + 2 + 5) / 4)
    assert s["estimators"]["last"]["picks_least_loaded"] == 1.0
    assert s["estimators"]["rm10"] == {"n": 1, "mae_cpu_points": 17.5,
                                       "picks_least_loaded": 0.0, "regret_cpu_points": 10.0}
    assert audit.summarise([]) == {"decisions": 0}


def test_cli_names_a_missing_directory(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        audit.main([str(tmp_path / "none")])
    assert exc.value.code == 2
    assert "no such directory" in capsys.readouterr().err


def _run_dir(tmp_path, jobs, decisions):
    run = tmp_path / "malb" / "run1"
    run.mkdir(parents=True)
    shutil.copy("configs/paper.yaml", run / "config.yaml")          # 4 servers of 0.4 CPU
    (run / "workload.json").write_text(json.dumps({"classes": [
        {"name": "ui-light", "path": "/object?size=1000000"},
        {"name": "job-small", "path": "/job?seconds=10&cpu=0.04&mode=work"},
        {"name": "job-big", "path": "/job?seconds=30&cpu=0.08&mode=work"}]}))
    rows = ["seq,class,started,ended,served_by"] + [
        f"{k},{cls},{a},{e},{srv}-be" for k, (cls, a, e, srv) in enumerate(jobs)]
    rows.append("99,ui-light,1.0,2.0,srv1-ui")
    (run / "requests-0.csv").write_text("\n".join(rows) + "\n")
    (run / "decisions.json").write_text(json.dumps({"decisions": [
        {"time": t, "microservice": "backend", "server": srv, "algorithm": "round-robin",
         "scores": {}, "weights": w} for t, srv, w in decisions]}))
    return run


def test_decisions_are_judged_by_the_job_demand_each_server_carried_at_them(tmp_path):
    jobs = [("job-big", 0.0, 30.0, "srv1"),        # 20 % of a 0.4 server
            ("job-small", 1.0, 11.0, "srv2"),      # 10 %
            ("job-small", 4.99, 15.0, "srv2"),     # the job decided at 5.0 (not counted)
            ("job-small", 12.0, 22.0, "srv3")]     # after the decision: not counted
    run = _run_dir(tmp_path, jobs, [(5.0, "srv2", [0.39, 0.61, 0.0]),
                                    (40.0, "srv1", None)])     # round robin: no weights
    rows = audit.judge_at_decision(str(run))
    assert rows[0] == {"time": 5.0, "chosen": "srv2", "weights": [0.39, 0.61, 0.0],
                       "demand": {"srv1": 20.0, "srv2": 10.0, "srv3": 0.0, "srv4": 0.0}}
    s = audit.summarise_at_decision(rows[:1])
    assert s == {"decisions": 1, "chose_least_demand": 0.0, "random_least_demand": 0.5,
                 "regret_cpu_points": 10.0, "memory_weight_range": [0.61, 0.61]}
    assert audit.summarise_at_decision(rows[1:])["memory_weight_range"] is None
    assert audit.summarise_at_decision([]) == {"decisions": 0}
    # the CLI: only this judge, in seconds, to audit.md
    assert audit.main([str(tmp_path), "--at-decision-only"]) == 0
    md = (tmp_path / "audit-at-decision.md").read_text()
    assert "| malb | 2 | 50 % | 75 % | 5.0 |" in md and "--at-decision-only" in md
    assert "Memory's weight in the weighted decisions (lowest-highest): malb 61-61 %." in md
