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
