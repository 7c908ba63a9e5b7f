"""experiments/decision_audit.py: judging least-load decisions by what followed."""
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
