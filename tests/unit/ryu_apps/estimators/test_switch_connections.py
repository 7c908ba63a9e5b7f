"""SwitchConnections: each instance's open connections from the switches' counters."""
from ryu_apps.estimators.switch_connections import SwitchConnections


def test_open_connections_are_summed_over_switches_each_at_least_zero():
    sc = SwitchConnections(max_age_s=1.0)
    sc.update(1, {"a": (10, 7), "b": (3, 3)}, now=100.0)
    # a switch whose counters started again after connections opened before: no negative
    sc.update(2, {"a": (2, 0), "b": (0, 2)}, now=100.2)
    assert sc.open("a") == 5 and sc.open("b") == 0 and sc.open("c") == 0
    assert sc.fresh_counts(["a", "b", "c"], 100.5) == {"a": 5, "b": 0, "c": 0}
    # a newer reply replaces the switch's last one
    sc.update(1, {"a": (12, 12), "b": (4, 3)}, now=100.6)
    assert sc.fresh_counts(["a", "b"], 100.7) == {"a": 2, "b": 1}
    assert sc.status(100.7) == {"open": {"a": 2, "b": 1}, "oldest_reply_s": 0.5}


def test_counts_are_not_fresh_while_any_switch_is_late_or_none_answered():
    sc = SwitchConnections(max_age_s=1.0)
    assert sc.fresh_counts(["a"], 0.0) is None
    sc.update(1, {"a": (1, 0)}, now=10.0)
    sc.update(2, {"a": (1, 0)}, now=8.5)
    assert sc.fresh_counts(["a"], 10.1) is None
    sc.forget(2)                                # gone: its counts with it
    assert sc.fresh_counts(["a"], 10.1) == {"a": 1}
