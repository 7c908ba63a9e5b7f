import pytest

from experiments.loadgen import arrival_times, schedule

PHASES = [{"name": "increasing", "seconds": 60, "from": 1, "to": 3},
          {"name": "stable", "seconds": 60, "from": 3, "to": 3},
          {"name": "decreasing", "seconds": 60, "from": 3, "to": 1}]


def test_uniform_arrivals_follow_the_rate_profile_exactly():
    times = arrival_times(PHASES, "uniform", 1)
    by_phase = {p["name"]: [t for t, ph in times if ph == p["name"]] for p in PHASES}
    assert [len(v) for v in by_phase.values()] == [120, 180, 120]   # integral of the rate
    inc = by_phase["increasing"]
    first_10 = sum(1 for t in inc if t < 10)
    last_10 = sum(1 for t in inc if t >= 50)
    assert first_10 < last_10                 # the rate grows inside the phase
    assert times == sorted(times)
    assert all(60 <= t < 120 for t in by_phase["stable"])


def test_poisson_arrivals_are_reproducible_and_close_to_the_expected_count():
    a, b = arrival_times(PHASES, "poisson", 7), arrival_times(PHASES, "poisson", 7)
    assert a == b
    assert 420 * 0.85 <= len(a) <= 420 * 1.15
    assert arrival_times(PHASES, "poisson", 8) != a


def test_clients_split_the_schedule_without_gaps_or_overlaps():
    spec = {"seed": 3, "phases": PHASES, "arrivals": "uniform",
            "classes": [{"name": "a", "weight": 3, "host": "h", "port": 1, "path": "/"},
                        {"name": "b", "weight": 1, "host": "h", "port": 1, "path": "/"}]}
    parts = [schedule(spec, k, 3) for k in range(3)]
    seqs = sorted(r["seq"] for part in parts for r in part)
    assert seqs == list(range(420))
    classes = [r["class"]["name"] for part in parts for r in part]
    assert 0.65 <= classes.count("a") / len(classes) <= 0.85
    whole = schedule(spec, 0, 1)
    merged = sorted((r for part in parts for r in part), key=lambda r: r["seq"])
    assert [r["class"]["name"] for r in merged] == [r["class"]["name"] for r in whole]


def test_bad_profiles_are_refused():
    with pytest.raises(ValueError, match="phase"):
        arrival_times([{"name": "x", "seconds": 0, "from": 1, "to": 1}], "uniform", 1)
    with pytest.raises(ValueError, match="arrivals"):
        arrival_times(PHASES, "bursty", 1)
