"""ryu_apps/running.py: running-flow estimates from assignment times and flow durations."""
import pytest

from ryu_apps.running import RunningFlows, Survival


def test_survival_of_two_job_sizes():
    # 12 of 20 quantiles at 10 s, 8 at 30 s: 60 % of the flows last 10 s, 40 % 30 s
    s = Survival([10.0] * 12 + [30.0] * 8)
    assert s(0) == 1.0
    assert s(5) == 1.0 and s(9.9) == 1.0
    assert s(10) == pytest.approx(0.4)                    # the 10 s jobs are over
    assert s(20) == pytest.approx(0.4 - 0.05 / 2)         # linear from (10, 0.6) to (30, 0.65)
    assert s(29.9) == pytest.approx(0.35, abs=0.01)
    assert s(30) == 0.0 and s(100) == 0.0


def test_survival_rejects_bad_quantiles():
    for bad in ([], [float("nan")], [-1.0], [float("inf")]):
        with pytest.raises(ValueError):
            Survival(bad)


def test_expected_running_flows_fade_with_their_durations():
    r = RunningFlows()
    for t in (100.2, 100.4, 100.6):             # three 20 s streams sent at ~100 s
        r.add("srv1", "video", t)
    r.add("srv1", "backend", 110.5)
    s = {"video": Survival([20.0] * 20), "backend": Survival([10.0] * 20)}
    assert r.expected("srv1", 105.0, s) == pytest.approx({"video": 3.0})   # backend not yet
    at_115 = r.expected("srv1", 115.0, s)
    assert at_115["video"] == pytest.approx(3.0)       # 20 s streams: all still running
    assert at_115["backend"] == pytest.approx(1.0)
    assert r.expected("srv1", 125.0, s) == {}                     # all over
    assert r.expected("srv2", 105.0, s) == {}
    # without durations, a number of seconds: every flow counts that long
    assert r.expected("srv1", 112.0, {"video": 15.0}) == pytest.approx({"video": 3.0})
    assert r.expected("srv1", 116.0, {"video": 15.0}) == {}


def test_memory_is_bounded_by_the_horizon_not_the_flows():
    r = RunningFlows(bucket_s=1.0, max_age_s=60.0)
    for k in range(100_000):
        r.add("srv1", "ui", k * 0.01)            # 1,000 s of flows, 100 a second
    assert r.buckets() <= 62


def test_open_flows_count_exactly_now_and_at_a_recent_time():
    from ryu_apps.running import OpenFlows
    o = OpenFlows(bucket_s=0.1)
    o.add("a", "srv1", "backend", 10.0)
    o.add("b", "srv1", "backend", 12.0)
    o.add("c", "srv2", "backend", 12.0)
    o.add("a", "srv1", "backend", 13.0)          # a second add of an open flow: nothing
    assert o.end("a", 20.0) and not o.end("a", 21.0) and not o.end("zz", 21.0)
    assert o.running("srv1", 25.0) == {"backend": 1}
    assert o.running("srv1", 15.0) == {"backend": 2}     # a ended at 20
    assert o.running("srv1", 11.0) == {"backend": 1}     # b started at 12
    assert o.running("srv1", 5.0) == {}
    assert o.running("srv3", 25.0) == {} and len(o) == 2 and "b" in o


def test_open_flows_that_never_end_are_dropped_after_the_max_age():
    from ryu_apps.running import OpenFlows
    o = OpenFlows(max_age_s=100.0)
    o.add("a", "srv1", "video", 0.0)
    o.add("b", "srv1", "video", 50.0)
    assert o.expire(101.0) == 1 and "a" not in o
    assert o.running("srv1", 102.0) == {"video": 1}


def test_the_cost_of_a_count_does_not_grow_with_the_flows():
    from ryu_apps.running import OpenFlows
    o = OpenFlows(bucket_s=0.1)
    for i in range(20000):
        o.add(i, "srv1", "backend", i * 0.001)         # 20,000 flows in 20 s
    assert o.running("srv1", 20.0) == {"backend": 20000}
    assert sum(len(q) for q in o._recent.values()) <= 201    # buckets, not flows
