import pytest

from experiments.loadgen import arrival_times, schedule, validate_spec

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


DRAWN = {"name": "job", "weight": 1, "host": "h", "port": 1,
         "path": "/job?seconds={seconds}&cpu=0.1",
         "draw": {"seconds": {"dist": "bounded-pareto", "alpha": 1.1, "low": 4.0,
                              "high": 40.0}}}
BUSY = {"name": "a", "server": "srv1", "where": "container", "container": "mn.srv1-ui",
        "microservice": "ui", "start_s": 10, "stop_s": 20, "cores": 1.0}


def test_a_class_with_draws_gets_its_path_filled_per_request():
    spec = {"seed": 4, "phases": PHASES, "classes": [DRAWN]}
    validate_spec(spec)
    plan = schedule(spec, 0, 1)
    values = [r["class"]["drawn"]["seconds"] for r in plan]
    assert len(set(values)) > len(values) * 0.9 and all(4.0 <= v <= 40.0 for v in values)
    for r in plan[:20]:
        assert r["class"]["path"] == \
            f"/job?seconds={r['class']['drawn']['seconds']:.3f}".rstrip("0").rstrip(".") + \
            "&cpu=0.1"
        assert "draw" not in r["class"]
    assert spec["classes"][0] is DRAWN and "{seconds}" in DRAWN["path"]   # left as it was


@pytest.mark.parametrize("change, message", [
    ({"path": "/job?seconds=3"}, "placeholders (none) and the draws (seconds) must match"),
    ({"path": "/job?s={seconds}&t={other}"}, "placeholders (seconds, other)"),
    ({"path": "/job?s={seconds}&t={seconds}"}, "each once"),
    ({"path": "/job?s={seconds}&t={"}, "a brace outside"),
    ({"draw": {"seconds": {"dist": "normal", "alpha": 1, "low": 1, "high": 2}}},
     "classes[0].draw.seconds.dist: expected one of bounded-pareto"),
    ({"draw": {"seconds": {"dist": "bounded-pareto", "alpha": 1, "low": 3, "high": 2}}},
     "draw.seconds.high: must be above low"),
    ({"draw": {"seconds": {"dist": "bounded-pareto", "alpha": 0, "low": 1, "high": 2}}},
     "draw.seconds.alpha: expected a finite number > 0"),
    ({"draw": {"seconds": {"dist": "bounded-pareto", "alpha": 1, "low": 1}}},
     "exactly alpha, low and high"),
    ({"draw": {}}, "draw: expected an object of named draws"),
    ({"color": "red"}, "classes[0].color: unknown field"),
])
def test_bad_draws_are_refused_naming_the_field(change, message):
    with pytest.raises(ValueError) as exc:
        validate_spec({"phases": PHASES, "classes": [{**DRAWN, **change}]})
    assert message in str(exc.value)


@pytest.mark.parametrize("change, message", [
    ({"where": "inside"}, "antagonists[0].where: 'container' or 'beside'"),
    ({"container": ""}, "antagonists[0].container: expected a non-empty string"),
    ({"where": "beside"}, "antagonists[0].container: only for where: container"),
    ({"stop_s": 5}, "antagonists[0].stop_s: must be after start_s (10)"),
    ({"cores": 2}, "antagonists[0].cores: one thread, at most 1 core"),
    ({"cores": 0}, "antagonists[0].cores: expected a finite number > 0"),
    ({"when": 1}, "antagonists[0].when: unknown field"),
])
def test_bad_antagonists_are_refused_naming_the_field(change, message):
    spec = {"phases": PHASES, "classes": [DRAWN], "antagonists": [{**BUSY, **change}]}
    with pytest.raises(ValueError) as exc:
        validate_spec(spec)
    assert message in str(exc.value)
    beside = {k: v for k, v in BUSY.items() if k not in ("container", "microservice")}
    validate_spec({"phases": PHASES, "classes": [DRAWN],
                   "antagonists": [BUSY, {**beside, "where": "beside", "name": "b"}]})
