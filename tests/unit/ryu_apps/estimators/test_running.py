"""ryu_apps/estimators/running_flows.py and open_flows.py: running-flow estimates from
assignment times and flow durations."""
import gc
import math
import random

import pytest

from ryu_apps.estimators.open_flows import HISTORY_FLOWS, InstanceFlows, OpenFlows
from ryu_apps.estimators.running_flows import RunningFlows
from ryu_apps.estimators.survival import Survival


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
    o = OpenFlows(max_age_s=100.0)
    o.add("a", "srv1", "video", 0.0)
    o.add("b", "srv1", "video", 50.0)
    assert o.expire(101.0) == 1 and "a" not in o
    assert o.running("srv1", 102.0) == {"video": 1}


def test_the_cost_of_a_count_does_not_grow_with_the_flows():
    o = OpenFlows(bucket_s=0.1)
    for i in range(20000):
        o.add(i, "srv1", "backend", i * 0.001)         # 20,000 flows in 20 s
    assert o.running("srv1", 20.0) == {"backend": 20000}
    assert sum(len(q) for q in o._recent.values()) <= 201    # buckets, not flows


def test_a_sample_goes_to_the_flows_that_ran_through_it_first():
    o = OpenFlows()
    o.add("a", "srv1", "backend", 90.0)
    o.add("b", "srv1", "backend", 91.5)            # half of the sample [90, 93]
    o.add("v", "srv1", "video", 90.0)
    o.attribute("srv1", {"backend": (30.0, 0.0), "video": (0.0, 16.0)}, 90.0, 93.0,
                {"backend": (10.0, 0.0)})
    # b ran half of it: it counts at the profile's 10 % for that half and waits; a gets
    # the other 25; the stream its 16 % of the network
    assert o.costs("srv1", 93.0) == {"backend": (1, 1, 25.0, 0.0),
                                     "video": (0, 1, 0.0, 16.0)}
    # the next sample: a explains 25, b ran all of it and gets the other 35
    o.attribute("srv1", {"backend": (60.0, 0.0)}, 93.0, 96.0)
    assert o.costs("srv1", 96.0)["backend"] == (0, 2, pytest.approx(60.0), 0.0)
    # a ends; past times count the flows then running, at their figures
    o.end("a", 97.0)
    assert o.costs("srv1", 98.0)["backend"] == (0, 1, pytest.approx(35.0), 0.0)
    assert o.costs("srv1", 96.5)["backend"] == (0, 2, pytest.approx(60.0), 0.0)
    assert o.costs("srv1", 91.0)["backend"] == (0, 1, pytest.approx(25.0), 0.0)
    assert o.costs("srv2", 98.0) == {}


def test_flows_measured_before_keep_the_mean_of_their_samples():
    o = OpenFlows()
    o.add("a", "srv1", "backend", 90.0)
    o.add("b", "srv1", "backend", 93.0)
    o.attribute("srv1", {"backend": (30.0, 0.0)}, 90.0, 93.0)        # a: 30
    o.attribute("srv1", {"backend": (40.0, 0.0)}, 93.0, 96.0)        # b: 10, a as it was
    # the server's other load squeezed both: 20 is half of 40, each gets half its own
    o.attribute("srv1", {"backend": (20.0, 0.0)}, 96.0, 99.0)
    a, b = o._open["a"], o._open["b"]
    assert (a["cpu"], b["cpu"]) == (pytest.approx((30 + 15) / 2), pytest.approx((10 + 5) / 2))
    assert o.costs("srv1", 99.0)["backend"] == (0, 2, pytest.approx(22.5 + 7.5), 0.0)
    o.end("a", 100.0)
    o.end("b", 100.0)
    assert o.costs("srv1", 100.0) == {}


def test_running_sums_make_a_decision_cost_the_same_at_any_number_of_flows():
    o = OpenFlows()
    for i in range(20000):
        o.add(i, "srv1", "backend", 70.0 + i * 0.0005)
    o.attribute("srv1", {"backend": (100.0, 0.0)}, 80.0, 90.0)
    o._on["srv1"].clear()       # a count at the latest time must not walk the flows
    assert o.costs("srv1", 90.0)["backend"][:2] == (0, 20000)


def test_the_garbage_collector_walks_no_watched_flow_open_measured_or_ended():
    # a full collection walks every object it tracks: at 1,000 flows/s the ended flows kept
    # are 120,000, and each collection stopped the controller for their walk
    o = OpenFlows()
    o.add("a", "srv1", "backend", 90.0)
    o.add("b", "srv1", "backend", 90.0)
    o.attribute("srv1", {"backend": (30.0, 1e6)}, 90.0, 93.0)      # both measured, weighty
    o.end("a", 94.0)
    gc.collect()
    flows = [o._open["b"], *o._ended["srv1"]]
    assert flows[0]["cpu"] == 15.0 and flows[1]["end"] == 94.0
    assert not any(gc.is_tracked(f) for f in flows)
    assert o.shortfall("srv1", 95.0, 10.0) == {}   # b, weighty, found: nothing says it ends


def test_a_sample_walks_the_flows_that_ended_within_it_not_all_that_ended():
    o = OpenFlows()
    for i in range(20000):                 # 20,000 flows ended over 100 s, 2 s each
        o.add(i, "srv1", "backend", i * 0.005)
        o.end(i, i * 0.005 + 2.0)
    walked = set(id(f) for f in o._flows_in("srv1", 99.0, 100.0))
    brute = set(id(f) for f in o._ended["srv1"] if f["start"] < 100.0 and f["end"] > 99.0)
    assert walked == brute and abs(len(brute) - 600) <= 1   # started in the last 3 s
    # the walk stopped where the ends were older than the sample by END_ORDER_SLACK_S:
    # the oldest flows are behind that, and a flow put there is not seen
    o._ended["srv1"][0]["end"] = 99.5
    assert id(o._ended["srv1"][0]) not in set(id(f) for f in o._flows_in("srv1", 99.0, 100.0))


def test_a_clock_stepped_back_within_the_slack_misses_no_ended_flow():
    o = OpenFlows()
    for key, start, end in (("a", 90.0, 100.0), ("b", 91.0, 97.0), ("c", 92.0, 200.0)):
        o.add(key, "srv1", "backend", start)
        o.end(key, end)                    # b's end reads 3 s before a's
    assert [f["end"] for f in o._flows_in("srv1", 99.0, 150.0)] == [100.0, 200.0]
    assert o.costs("srv1", 99.5)["backend"][:2] == (2, 0)      # a and c, neither measured


def test_flows_measured_at_nothing_share_what_a_later_sample_shows_alike():
    o = OpenFlows()
    o.add("a", "srv1", "video", 90.0)
    o.add("b", "srv1", "video", 90.0)
    o.attribute("srv1", {"video": (0.0, 0.0)}, 90.0, 93.0)      # not sending yet
    o.attribute("srv1", {"video": (0.0, 30.0)}, 93.0, 96.0)
    assert (o._open["a"]["net"], o._open["b"]["net"]) == (7.5, 7.5)   # (0 + 15) / 2 each


def _numeric_remaining(s, age, dt=1e-3):
    if s(age) <= 0:
        return 0.0
    steps = int((s.longest - age) / dt) + 1
    return sum(s(age + (i + 0.5) * dt) for i in range(steps)) * dt / s(age)


def test_expected_remaining_life_is_the_survival_integral_over_its_value():
    two_sizes = Survival([0.4] * 10 + [4.0] * 10)        # ui objects: 1 MB and 10 MB
    spread = Survival([0.5 + 0.25 * i for i in range(20)])
    for s in (two_sizes, spread):
        for age in (0.0, 0.2, 0.39, 0.41, 1.0, 2.5, 3.9):
            assert s.expected_remaining(age) == pytest.approx(_numeric_remaining(s, age),
                                                              abs=2e-3), age
    # a new ui object: half of them end at 0.4 s; S runs from 0.5 to 0.45 until 4 s
    assert two_sizes.expected_remaining(0.0) == pytest.approx(0.4 + 3.6 * (0.5 + 0.45) / 2)
    # an object older than 0.4 s is one of the long ones: most of its life is left
    assert two_sizes.expected_remaining(0.5) > two_sizes.expected_remaining(0.0)
    # past the longest flow seen (a lost FIN): nothing left
    assert two_sizes.expected_remaining(4.0) == 0.0 == two_sizes.expected_remaining(50.0)
    assert Survival([2.0] * 20).expected_remaining(0.5) == pytest.approx(1.5)


def test_instance_flows_count_each_open_flow_at_its_remaining_life():
    f = InstanceFlows(max_age_s=60.0)
    s = Survival([2.0] * 20)                          # every flow lasts 2 s
    f.add("a", "srv1-ui", 10.0)
    f.add("b", "srv1-ui", 11.0)
    f.add("b", "srv1-ui", 11.5)                       # a second add of an open key: ignored
    f.add("c", "srv2-ui", 11.0)
    assert (f.open_count("srv1-ui"), f.open_count("srv2-ui"), len(f)) == (2, 1, 3)
    # ages to the 0.1 s bucket
    assert f.remaining("srv1-ui", 11.5, s) == pytest.approx(0.5 + 1.5, abs=0.1)
    assert f.remaining("srv1-ui", 11.5, None) == 2.0        # no durations: open flows
    assert f.remaining("srv3-ui", 11.5, s) == 0.0
    assert f.end("a") and not f.end("a") and not f.end("unknown")
    assert f.remaining("srv1-ui", 12.5, s) == pytest.approx(0.5, abs=0.1)
    assert f.remaining("srv1-ui", 13.5, s) == 0.0          # older than any flow: done
    assert f.open_count("srv1-ui") == 1
    f.add("d", "srv2-ui", 100.0)                      # "b" and "c" never ended: dropped
    assert "b" not in f and "c" not in f and len(f) == 1
    assert f.open_count("srv1-ui") == 0 and f.remaining("srv1-ui", 100.0, None) == 0.0
    with pytest.raises(ValueError):
        InstanceFlows(max_age_s=0)


def test_instance_flows_keep_their_sum_within_a_step_as_flows_start_and_end():
    # the sum kept through a step's starts and ends, and summed again at the next step or
    # for new durations, is each open flow's remaining life at its bucket's age
    rng = random.Random(36)
    f = InstanceFlows(bucket_s=0.1, max_age_s=30.0)
    durations = [Survival([0.3, 0.8, 2.5, 6.0]), Survival([1.0] * 5 + [9.0] * 5)]
    survival, t, opened, n = durations[0], 100.0, [], 0
    for _ in range(3000):
        t += rng.choice((0.0, 0.001, 0.02, 0.13))
        if rng.random() < 0.02:
            survival = durations[rng.random() < 0.5]
        if opened and rng.random() < 0.45:
            f.end(opened.pop(rng.randrange(len(opened))), t)
        else:
            n += 1
            f.add(n, rng.choice(("srv1-ui", "srv2-ui")), t)
            opened.append(n)
        opened = [key for key in opened if key in f]       # dropped past max_age_s
        step = math.floor(t / 0.1 + 1e-9)
        for inst in ("srv1-ui", "srv2-ui"):
            ages = [max(0, step - k) for key, (i, k, _) in f._open.items() if i == inst]
            want = sum(survival.remaining_at_step(a, 0.1) for a in ages
                       if a * 0.1 < survival.longest)
            assert f.remaining(inst, t, survival) == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert f.remaining("srv1-ui", t, None) == f.open_count("srv1-ui")


def test_instance_flows_cost_the_buckets_not_the_flows():
    f = InstanceFlows(bucket_s=0.1)
    s = Survival([0.4] * 10 + [4.0] * 10)
    for k in range(200_000):                          # a SYN flood: 20,000 a second
        f.add(k, "srv1-ui", 100.0 + k * 0.00005)
    assert len(f._keys["srv1-ui"]) <= 101
    assert f.remaining("srv1-ui", 110.0, s) == pytest.approx(
        sum(s.expected_remaining(110.0 - 100.0 - k * 0.00005) for k in range(0, 200_000)),
        rel=0.05)                                   # ages to the bucket
    for k in range(200_000):
        assert f.end(k)
    assert len(f) == 0 and not f._keys["srv1-ui"] and f.remaining("srv1-ui", 110.0, s) == 0


def _ended_jobs(o, server, jobs, t=0.0):
    """Runs (cpu %, seconds) jobs one after another on the server, each measured by a
    sample it ran through alone, and ends them; returns the time after the last."""
    for _i, (cpu, secs) in enumerate(jobs):
        o.add(("old", t), server, "backend", t)
        o.attribute(server, {"backend": (cpu, 0.0)}, t, t + 3.0)
        o.end(("old", t), t + secs)
        t += secs + 1.0
    return t


def test_a_flow_counts_for_the_part_of_the_horizon_that_alike_flows_ran_past_its_age():
    o = OpenFlows(cores={"srv1": 0.3, "srv2": 0.6})
    # 10 s jobs at 12.5 % of a 0.3-core server, 30 s ones at 26.7 %
    _ended_jobs(o, "srv1", [(12.5, 10.0)] * 4 + [(26.7, 30.0)] * 4)
    small = 12.5 * 0.3
    assert o.ahead_share("backend", small, 8.0, 5.0) == pytest.approx(2.0 / 5.0)
    assert o.ahead_share("backend", small, 4.0, 5.0) == 1.0
    assert o.ahead_share("backend", 26.7 * 0.3, 8.0, 5.0) == 1.0
    assert o.ahead_share("backend", 26.7 * 0.3, 27.0, 5.0) == pytest.approx(3.0 / 5.0)
    # older than every alike flow, or of a size never seen, or of another microservice:
    # nothing says it ends soon
    assert o.ahead_share("backend", small, 11.0, 5.0) == 1.0
    assert o.ahead_share("backend", 5.0 * 0.3, 8.0, 5.0) == 1.0
    assert o.ahead_share("video", small, 8.0, 5.0) == 1.0
    # alike by cores, not by percent: a small job is 6.25 % of the 0.6-core srv2
    o.add("now-small", "srv2", "backend", 200.0)
    o.attribute("srv2", {"backend": (6.25, 0.0)}, 200.0, 203.0)
    o.add("now-big", "srv2", "backend", 203.0)
    o.attribute("srv2", {"backend": (6.25 + 13.35, 0.0)}, 203.0, 206.0)
    assert o.costs("srv2", 206.0)["backend"] == (0, 2, pytest.approx(19.6), 0.0)
    less = o.shortfall("srv2", 208.0, 5.0)        # the small one at 8 s, the big one at 5 s
    assert less["backend"][0] == pytest.approx(6.25 * (1 - 2.0 / 5.0))
    assert o.shortfall("srv2", 204.0, 5.0) == {}       # both have 5 s or more to run


def test_fewer_than_three_alike_flows_say_nothing():
    o = OpenFlows()
    _ended_jobs(o, "srv1", [(12.5, 10.0)] * 2)
    assert o.ahead_share("backend", 12.5, 8.0, 5.0) == 1.0
    _ended_jobs(o, "srv1", [(12.5, 10.0)], t=100.0)
    assert o.ahead_share("backend", 12.5, 8.0, 5.0) == pytest.approx(0.4)


def test_flows_whose_end_was_never_seen_say_nothing_about_durations():
    o = OpenFlows(max_age_s=60.0)
    o.add("silent", "srv1", "backend", 0.0)
    o.attribute("srv1", {"backend": (20.0, 0.0)}, 0.0, 3.0)
    o.add("later", "srv1", "backend", 100.0)      # expires the silent one
    assert "silent" not in o and o._history == {}
    assert o.shortfall("srv1", 100.0, 5.0) == {}


def test_the_shortfall_walks_only_flows_that_measured_a_real_part_of_the_server():
    o = OpenFlows()
    _ended_jobs(o, "srv1", [(12.5, 10.0)] * (HISTORY_FLOWS + 50))
    assert len(o._history["backend"]) == HISTORY_FLOWS       # the last ones only
    t0 = 10_000.0
    for i in range(20000):                  # a flood: 20,000 flows share one sample
        o.add(("flood", i), "srv1", "backend", t0 - 2.0 + i * 0.0001)
    o.attribute("srv1", {"backend": (100.0, 0.0)}, t0, t0 + 3.0)
    assert o.costs("srv1", t0 + 3.0)["backend"][:2] == (0, 20000)
    assert not o._weighty.get("srv1")
    assert o.shortfall("srv1", t0 + 3.0, 5.0) == {}
    for i in range(20000):
        o.end(("flood", i), t0 + 4.0)
    assert not o._weighty.get("srv1") and o.costs("srv1", t0 + 4.0) == {}
