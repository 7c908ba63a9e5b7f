"""slo/budgets.py: one end-to-end target split into per-service budgets."""
import pytest

from slo.budgets import MAX_FACTOR, split

# a -> b (once), a -> c (twice, in turn); c -> d
CALLS = {"a": [("b", 1), ("c", 2)], "c": [("d", 1)]}
# own parts a 10, b 20, c 5, d 8; every call 1 ms there and back
LAT = {"d": 8.0, "c": 5.0 + 9.0, "b": 20.0}
EDGE = {("c", "d"): 9.0, ("a", "b"): 21.0, ("a", "c"): 15.0}
LAT["a"] = 10.0 + max(21.0, 2 * 15.0)


def test_the_measurements_give_each_own_part_and_the_target_scales_them_alike():
    s = split(LAT["a"], "a", CALLS, LAT, EDGE)
    assert s.own_ms == pytest.approx({"a": 10.0, "b": 20.0, "c": 5.0, "d": 8.0})
    assert s.feasible and s.factor == pytest.approx(1.0)
    assert s.budgets_ms == pytest.approx(LAT)            # the target is what they measure
    tight = split(30.0, "a", CALLS, LAT, EDGE)
    k = tight.factor
    assert 0 < k < 1
    b = tight.budgets_ms
    assert b["a"] == pytest.approx(30.0, abs=1e-6)
    assert b["d"] == pytest.approx(8.0 * k) and b["b"] == pytest.approx(20.0 * k)
    assert b["c"] == pytest.approx(5.0 * k + 1.0 + 8.0 * k)
    # the entry's budget is its own part plus its slowest branch at those budgets
    assert b["a"] == pytest.approx(10.0 * k + max(1.0 + b["b"], 2 * (1.0 + b["c"])))


def test_a_target_the_network_alone_exceeds_is_said_to_be_out_of_reach():
    s = split(3.0, "a", CALLS, LAT, EDGE)       # the calls' network parts take 4 ms
    assert not s.feasible and s.factor == 0.0 and "4.0 ms of 3" in s.reason
    loose = split(1e9, "a", CALLS, LAT, EDGE)
    assert loose.feasible and loose.factor == MAX_FACTOR


def test_what_is_not_measured_is_named():
    with pytest.raises(ValueError, match=r"latency_ms\['d'\]"):
        split(40.0, "a", CALLS, {k: v for k, v in LAT.items() if k != "d"}, EDGE)
    with pytest.raises(ValueError, match=r"edge_ms\[\('a', 'c'\)\]"):
        split(40.0, "a", CALLS, LAT, {k: v for k, v in EDGE.items() if k != ("a", "c")})
    with pytest.raises(ValueError, match="target_ms"):
        split(0, "a", CALLS, LAT, EDGE)
    # a service outside the entry's tree needs no measurement
    assert set(split(40.0, "c", CALLS, LAT, EDGE).budgets_ms) == {"c", "d"}


def _planner(target=30.0):
    from slo.budgets import BudgetPlanner, Objective
    return BudgetPlanner(Objective("a", target, CALLS), window_s=30.0)


def test_the_planner_waits_for_every_reading_and_names_what_is_missing():
    p = _planner()
    p.observe(0.0, {k: v for k, v in LAT.items() if k != "d"})
    plan = p.plan({k: v for k, v in EDGE.items() if k != ("a", "b")})
    assert plan.split is None and plan.send == {}
    assert plan.waiting_for == ["d", "a -> b"]


def test_the_planner_sends_every_callee_its_budget_not_the_entry():
    p = _planner()
    p.observe(0.0, LAT)
    plan = p.plan(EDGE)
    assert set(plan.send) == {"b", "c", "d"}                   # the entry keeps the target
    assert plan.send["b"] == pytest.approx(plan.split.budgets_ms["b"], abs=1e-3)
    assert plan.split.budgets_ms["a"] == pytest.approx(30.0, abs=1e-6)


def test_a_budget_is_sent_again_only_when_it_moved_or_a_loop_lost_it():
    from slo.budgets import RESEND_SHARE
    p = _planner()
    p.observe(0.0, LAT)
    for s, t in p.plan(EDGE).send.items():
        p.confirm(s, t)
    p.observe(1.0, LAT)
    assert p.plan(EDGE).send == {}                             # nothing moved
    p.forget("d")
    again = p.plan(EDGE).send
    assert set(again) == {"d"}
    p.confirm("d", again["d"])
    # a target ten times looser moves every budget by more than RESEND_SHARE
    p.objective = type(p.objective)("a", 300.0, CALLS)
    moved = p.plan(EDGE).send
    assert set(moved) == {"b", "c", "d"}
    assert all(abs(moved[s] - p.sent[s]) >= RESEND_SHARE * p.sent[s] for s in moved)


def test_readings_are_smoothed_over_the_window_and_bad_ones_left_out():
    p = _planner()
    p.observe(0.0, {"b": 20.0})
    p.observe(30.0, {"b": 40.0, "c": float("nan"), "d": -1.0})
    # one time constant later: 1 - 1/e of the way
    assert p.latency_ms["b"] == pytest.approx(20.0 + 20.0 * (1 - 2.718281828 ** -1))
    assert "c" not in p.latency_ms and "d" not in p.latency_ms


def test_an_out_of_reach_target_sends_the_smallest_budgets():
    from slo.budgets import MIN_BUDGET_MS
    p = _planner(target=3.0)
    p.observe(0.0, LAT)
    plan = p.plan(EDGE)
    assert not plan.split.feasible
    assert all(v >= MIN_BUDGET_MS for v in plan.send.values())
    assert plan.send["d"] == MIN_BUDGET_MS          # a leaf's own part at factor 0


def _watts(power, freqs, measured_at, busy):
    return sum(power.leakage_w(f) + min(1.0, busy[s] * measured_at[s] / f) * power.dynamic_w(f)
               for s, f in freqs.items())


def test_the_priced_split_gives_the_mhz_where_a_millisecond_is_cheapest():
    from slo.budgets import priced_split
    from slo.energy import CorePowerModel
    power = CorePowerModel(1000, 2100)
    calls = {"a": [("b", 1)]}
    # a: 4 ms of its own, b: 40 ms, both measured at 2,100 MHz, 1 ms of network
    lat = {"b": 40.0, "a": 4.0 + 41.0}
    edge = {("a", "b"): 41.0}
    at, busy = {"a": 2100, "b": 2100}, {"a": 0.2, "b": 0.6}
    s = priced_split(60.0, "a", calls, lat, edge, at, busy, power)
    assert s.feasible and s.budgets_ms["a"] <= 60.0
    assert s.freq_mhz["b"] > s.freq_mhz["a"]          # b's milliseconds are the cheap ones
    assert s.budgets_ms["b"] == pytest.approx(40.0 * 2100 / s.freq_mhz["b"])
    # the uniform factor at the same target slows a and b alike and spends more watts
    k = split(60.0, "a", calls, lat, edge).factor
    uniform = {x: min(2100, max(1000, at[x] / k)) for x in at}
    assert _watts(power, s.freq_mhz, at, busy) < _watts(power, uniform, at, busy)


def test_the_priced_split_meets_parallel_branches_and_says_when_it_cannot():
    from slo.budgets import priced_split
    from slo.energy import CorePowerModel
    power = CorePowerModel(1000, 2100)
    calls = {"a": [("b", 1), ("c", 1)]}            # b and c in parallel, alike
    lat = {"b": 20.0, "c": 20.0, "a": 5.0 + 21.0}
    edge = {("a", "b"): 21.0, ("a", "c"): 21.0}
    at, busy = dict.fromkeys("abc", 2100), dict.fromkeys("abc", 0.5)
    s = priced_split(30.0, "a", calls, lat, edge, at, busy, power)
    assert s.feasible and s.budgets_ms["a"] <= 30.0
    assert s.freq_mhz["b"] == s.freq_mhz["c"]
    out = priced_split(20.0, "a", calls, lat, edge, at, busy, power)   # 26 ms at the max
    assert not out.feasible and set(out.freq_mhz.values()) == {2100}
    assert "no frequency meets 20 ms" in out.reason
    with pytest.raises(ValueError, match=r"freq_mhz\['c'\]"):
        priced_split(30.0, "a", calls, lat, edge, {"a": 2100, "b": 2100}, busy, power)
    with pytest.raises(ValueError, match=r"busy\['a'\]"):
        priced_split(30.0, "a", calls, lat, edge, at, {**busy, "a": 2.0}, power)
