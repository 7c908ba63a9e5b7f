"""What a short-flow instance uses beyond what our flows explain
(ryu_apps/estimators/unexplained_use.py), and the flow-seconds it rests on
(ryu_apps/estimators/open_flows.InstanceFlows.flow_seconds)."""
import pytest

from ryu_apps.estimators.open_flows import InstanceFlows
from ryu_apps.estimators.unexplained_use import UnexplainedUse


def test_flow_seconds_integrate_the_open_flows_over_time():
    f = InstanceFlows()
    f.add("a", "i", 10.0)
    f.add("b", "i", 11.0)
    f.end("a", 12.0)
    assert f.flow_seconds("i", 12.0) == pytest.approx(3.0)     # 2 s of a, 1 s of b
    assert f.flow_seconds("i", 14.0) == pytest.approx(5.0)     # b runs on
    f.end("b", 14.5)
    assert f.flow_seconds("i", 20.0) == pytest.approx(5.5)
    assert f.flow_seconds("other", 20.0) == 0.0


def test_use_beyond_the_flows_cost_is_unexplained_and_compared_with_the_peers():
    f = InstanceFlows()
    u = UnexplainedUse(f.flow_seconds, samples=3)
    # i carried one flow all along (cost 10 % CPU each) and used 70 %: 60 unexplained;
    # j carried none and used 1 %
    f.add("flow", "i", 9.0)
    for t in (10.0, 11.0, 12.0, 13.0):
        u.observe("i", t, 70.0, 5.0)
        u.observe("j", t, 1.0, 0.0)
    cost = {"i": (10.0, 5.0), "j": (10.0, 5.0)}
    assert u.unexplained("i", cost["i"], 13.0, 5.0) == pytest.approx((60.0, 0.0))
    assert u.excess("i", ["i", "j"], cost.get, 13.0, 5.0) == pytest.approx((59.0, 0.0))
    assert u.excess("j", ["i", "j"], cost.get, 13.0, 5.0) == (0.0, 0.0)
    assert u.unexplained("i", None, 13.0, 5.0) is None           # no cost known yet
    assert u.excess("i", ["i", "j"], cost.get, 30.0, 5.0) == (0.0, 0.0)   # too old


def test_flow_seconds_at_a_time_before_the_latest_change_leave_out_what_came_after():
    f = InstanceFlows()
    f.add("a", "i", 10.0)
    f.add("b", "i", 12.0)          # at 11 only a was open: 1 s carried, not 1 + b's
    assert f.flow_seconds("i", 11.0) == pytest.approx(1.0)


def test_a_flow_that_idled_out_carried_nothing_after_its_last_traffic():
    f = InstanceFlows()
    f.add("a", "i", 10.0)
    f.add("b", "i", 10.0)
    f.end("b", 30.0)
    f.end("a", 30.0, quiet_since=20.0)      # its rules idled out at 30 after 10 s quiet
    assert f.flow_seconds("i", 30.0) == pytest.approx(30.0)     # 10 s of a, 20 s of b
    assert f.flow_seconds("i", 20.0) == pytest.approx(20.0)     # before it went quiet
    assert f.flow_seconds("i", 25.0) == pytest.approx(25.0)     # b alone then
    assert f.open_count("i") == 0 and f.flow_seconds("i", 40.0) == pytest.approx(30.0)


def test_an_idle_end_found_late_takes_back_what_the_samples_counted():
    f = InstanceFlows()
    u = UnexplainedUse(f.flow_seconds, samples=4)
    f.add("a", "i", 0.0)
    for t in (1.0, 2.0, 3.0, 4.0, 5.0):
        u.observe("i", t, 10.0, 0.0)        # 10 % all along: one flow at 10 % explains it
    assert u.unexplained("i", (10.0, 0.0), 5.0, 10.0) == pytest.approx((0.0, 0.0))
    f.end("a", 5.0, quiet_since=1.0)         # it went quiet at 1: the 10 % was not its
    assert u.unexplained("i", (10.0, 0.0), 5.0, 10.0) == pytest.approx((10.0, 0.0))
