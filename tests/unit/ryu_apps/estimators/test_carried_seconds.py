"""ryu_apps/estimators/carried_seconds.py: the integral of an open-flow count, with ends
dated back, against the integral summed flow by flow."""
import pytest
from hypothesis import given, settings, strategies as st

from ryu_apps.estimators.carried_seconds import CarriedSeconds
from ryu_apps.estimators.open_flows import CARRIED_KEEP_S, InstanceFlows
from tests.lib.fuzzing import examples


def by_flow(flows: list[tuple[float, float | None]], x: float) -> float:
    """Each flow's (start, end or None) overlap with [-inf, x]."""
    return sum(max(0.0, min(x, end if end is not None else x) - start)
               for start, end in flows)


def test_the_integral_of_two_flows_one_ended_back_in_time():
    c = CarriedSeconds(keep_s=60.0)
    c.change(10.0, +1)
    c.change(10.0, +1)
    c.change(30.0, -1)
    c.change(20.0, -1)              # found quiet since 20 when its rules went at 30
    assert c.at(5.0) == 0.0
    assert c.at(20.0) == pytest.approx(20.0)
    assert c.at(25.0) == pytest.approx(25.0)
    assert c.at(30.0) == pytest.approx(30.0)
    assert c.at(100.0) == pytest.approx(30.0)


def test_times_far_from_zero_stay_exact():
    c = CarriedSeconds()
    t0 = 1_790_000_000.0            # a wall clock's seconds
    for k in range(10_000):         # an hour of flows of 0.25 s at 3 per second
        c.change(t0 + k / 3, +1)
        c.change(t0 + k / 3 + 0.25, -1)
    end = t0 + 9_999 / 3 + 0.25
    assert c.at(end) == pytest.approx(2_500.0, abs=1e-3)
    assert c.at(end - 0.25) - c.at(end - 1.25) == pytest.approx(0.75, abs=1e-3)


def test_changes_that_leave_the_ring_still_count_in_full():
    c = CarriedSeconds(keep_s=1.0, slot_s=0.1)
    c.change(0.0, +1)
    c.change(0.5, +1)
    c.change(0.7, -1)
    c.change(100.0, +1)            # the ring moves on: the first three fold
    assert c.at(100.0) == pytest.approx(100.0 + 0.2)
    assert c.at(100.5) == pytest.approx(101.0 + 0.2)
    c.change(50.0, -1)             # an end dated before the ring: folds at once
    assert c.at(100.5) == pytest.approx(50.0 + 0.2 + 0.5)


def test_the_clock_jumping_far_ahead_folds_every_slot():
    c = CarriedSeconds(keep_s=1.0, slot_s=0.1)
    c.change(0.0, +1)
    c.change(1e6, -1)
    assert c.at(1e6 + 1) == pytest.approx(1e6)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError):
        CarriedSeconds(keep_s=0)
    with pytest.raises(ValueError):
        CarriedSeconds(slot_s=-1)


def test_a_range_that_wraps_round_the_ring_sums_both_ends():
    c = CarriedSeconds(keep_s=1.0, slot_s=0.1)
    assert c.size == 16
    for t in (1.45, 1.55, 1.65, 1.75):     # slots 14, 15 | 16, 17: positions 15, 16 | 1, 2
        c.change(t, +1)
    assert c._range(14, 17) == (4, 6_400_000)
    assert c._range(15, 16) == (2, 3_200_000)
    assert c.at(1.6) == pytest.approx(0.15 + 0.05)
    assert c.at(1.75) == pytest.approx(0.3 + 0.2 + 0.1)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2_000), st.integers(0, 300)), min_size=1,
                max_size=40).flatmap(lambda flows: st.permutations(
                    [(a, +1) for a, _ in flows] + [(a + b, -1) for a, b in flows])),
       st.lists(st.integers(0, 40), min_size=1, max_size=6))
def test_any_order_of_changes_gives_the_exact_integral_within_the_ring(changes, probes):
    """Flows' starts and ends reported in any order, the clock stepping back and the ring
    (16 slots of 0.1 s) wrapped up to 14 times in 23 s: every value from the ring's oldest
    slot on is the integral summed change by change (times in 10 ms steps)."""
    c = CarriedSeconds(keep_s=1.0, slot_s=0.1)
    latest = None
    for t, delta in changes:
        c.change(t / 100, delta)
        latest = t // 10 if latest is None else max(latest, t // 10)
    for p in probes:
        x = (latest - c.size + 1) * 10 + p     # in 10 ms: the ring's oldest slot and on
        truth = sum(d * max(0, x - t) for t, d in changes) / 100
        assert c.at(x / 100) == pytest.approx(truth, abs=1e-6)


flows_st = st.lists(st.tuples(st.floats(0, 500), st.floats(0, 20), st.booleans(),
                              st.floats(-1, 1.2)), min_size=1, max_size=60)


@settings(max_examples=examples(200), deadline=None)
@given(flows_st, st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_instance_flows_match_the_integral_flow_by_flow(spec, probes):
    """Flows start in time order and end in time order of their reports, over several
    turns of the ring; an idle end is dated back to a quiet time, which an idle timeout
    other than the controller's can put before the flow's start (the flow then carried
    nothing) or after its report (the report stands). Every value within the kept span
    equals the flow-by-flow sum."""
    f = InstanceFlows(max_age_s=1e9)
    events = []
    for n, (start, life, _idle, _quiet) in enumerate(spec):
        events.append((start, 0, n))
        events.append((start + life, 1, n))
    events.sort()
    truth: dict[int, list] = {}
    for t, kind, n in events:
        start, life, idle, quiet = spec[n]
        if kind == 0:
            f.add(n, "i", t)
            truth[n] = [t, None]
        else:
            since = start + quiet * life if idle else None
            f.end(n, t, quiet_since=since)
            truth[n][1] = min(t, max(since, start)) if idle else t
    last = events[-1][0]
    for p in probes:
        x = max(0.0, last - CARRIED_KEEP_S) + p * min(last, CARRIED_KEEP_S) + p
        assert f.flow_seconds("i", x) == pytest.approx(by_flow(list(truth.values()), x),
                                                      abs=1e-4)


def test_a_minute_of_changes_adds_nothing_the_garbage_collector_follows():
    import gc
    gc.collect()
    before = len(gc.get_objects())
    c = CarriedSeconds()
    for k in range(12_000):         # ten changes in every slot of the ring
        c.change(k * 0.005, +1)
    gc.collect()
    assert len(c._slots) > 1_000
    assert len(gc.get_objects()) - before < 20


def test_a_time_before_the_ring_is_never_negative():
    c = CarriedSeconds(keep_s=1.0, slot_s=0.1)
    c.change(10.0, +1)
    c.change(100.0, +1)
    assert c.at(5.0) == 0.0
