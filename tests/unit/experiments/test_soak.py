"""The soak's verdict rule (experiments/soak.py): growth per hour over the second half, and
what levels off."""
from __future__ import annotations

import random

import pytest

from experiments import soak
from experiments.soak import growth, main, verdict, verdicts


def test_growth_is_the_slope_over_the_second_half_only():
    # a warm-up climb, then flat: the climb does not count
    pts = [(t, min(t, 600.0)) for t in range(0, 3600, 10)]
    g = growth(pts)
    assert g["per_hour"] == pytest.approx(0.0, abs=1e-9) and g["mean"] == 600.0
    # steady growth of 36 per hour
    g = growth([(t, 100 + t / 100) for t in range(0, 3600, 10)])
    assert g["per_hour"] == pytest.approx(36.0)
    assert growth([(0, 1), (10, None)])["per_hour"] is None


def test_what_levels_off_and_what_grows():
    rng = random.Random(1)
    noisy_flat = [(t, 200 + rng.uniform(-5, 5)) for t in range(0, 3600, 10)]
    assert verdict("rss_mb", growth(noisy_flat)) == "levels off"
    leak = [(t, 200 + t / 60) for t in range(0, 3600, 10)]       # 60 MB per hour
    assert verdict("rss_mb", growth(leak)) == "grows"
    small = [(t, 10 + t / 3600) for t in range(0, 3600, 10)]      # 1 fd per hour
    assert verdict("fds", growth(small)) == "levels off"
    rows = [{"time": t, "elapsed_s": t, "controller.rss_mb": 200 + t / 60,
             "s1.rules": 40.0, "controller.unknown": 1.0} for t in range(0, 3600, 10)]
    lines = {x["figure"]: x["verdict"] for x in verdicts(rows)}
    assert lines == {"controller.rss_mb": "grows", "s1.rules": "levels off"}


@pytest.mark.parametrize("argv, message", [
    (["--minutes", "0"], "--minutes: must be at least 1"),
    (["--rate", "x"], "--rate"),
    (["--policy", "nope"], "--policy"),
])
def test_bad_flags_are_one_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_the_summary_says_which_commit_ran_when_on_which_testbed_and_mode(tmp_path):
    import argparse
    import json
    args = argparse.Namespace(minutes=1, rate=2, policy="malb", short_flows="tracker",
                              out=str(tmp_path),
                              stamp={"command": "c", "commit": "abc1234",
                                     "when": "2026-11-27T07:00:00"},
                              testbed={"backend": "containernet", "datapath": "user"})
    rows = [{"time": t, "elapsed_s": t, "controller.rss_mb": 50.0} for t in range(0, 70, 10)]
    soak.write_summary(args, soak.verdicts(rows), rows)
    assert "Commit abc1234, started 2026-11-27T07:00:00." in \
        (tmp_path / "summary.md").read_text()
    assert "Testbed: containernet, user datapath." in (tmp_path / "summary.md").read_text()
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["commit"] == "abc1234" and doc["testbed"]["backend"] == "containernet"
    assert doc["short_flows"] == "tracker"
    assert (tmp_path / "growth.png").exists()
