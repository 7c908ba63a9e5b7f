"""What an instance uses while none of our flows is open on it (ryu_apps/estimators/quiet_use.py)."""
from ryu_apps.estimators.quiet_use import QuietUse


def test_only_a_sample_with_no_flow_open_since_the_previous_one_counts():
    q = QuietUse(keep_s=60.0)
    q.observe("a", 0, 0, 50.0, 1.0, 10.0)        # never had a flow of ours: nothing known
    q.observe("a", 0, 0, 50.0, 1.0, 11.0)
    assert q.latest("a") is None
    q.observe("a", 1, 1, 40.0, 1.0, 12.0)        # a flow opened
    q.observe("a", 2, 0, 30.0, 1.0, 13.0)        # ... and ended in this interval: busy
    assert q.latest("a") is None
    q.observe("a", 2, 0, 20.0, 2.0, 14.0)        # quiet from 13 to 14
    assert q.latest("a") == (20.0, 2.0, 14.0)
    q.observe("a", 4, 0, 90.0, 2.0, 15.0)        # one started and ended in between: busy
    assert q.latest("a") == (20.0, 2.0, 14.0)


def test_excess_is_above_the_quietest_peer_and_forgotten_after_keep_s():
    q = QuietUse(keep_s=5.0)
    for name, cpu in (("a", 30.0), ("b", 0.5), ("c", 0.8)):
        q.observe(name, 2, 0, cpu, 0.0, 9.0)
        q.observe(name, 2, 0, cpu, 0.0, 10.0)
    assert q.excess("a", ["a", "b", "c"], 12.0) == (29.5, 0.0)
    assert q.excess("c", ["a", "b", "c"], 12.0)[0] == 0.8 - 0.5
    assert q.excess("d", ["a", "b", "c", "d"], 12.0) == (0.0, 0.0)     # nothing known
    assert q.excess("a", ["a", "b", "c"], 16.0) == (0.0, 0.0)         # too old
