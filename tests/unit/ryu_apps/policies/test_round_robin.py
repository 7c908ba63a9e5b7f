"""Simple round robin (srr): ryu_apps/policies/round_robin.py."""
from collections import Counter

from tests.lib.policy_core import SERVERS, loads, make_core


def test_round_robin_spreads_40_short_flows_10_per_server_in_order():
    core = make_core()
    picks = [core.choose("ui").server for _ in range(40)]
    assert Counter(picks) == {s: 10 for s in SERVERS}
    assert picks[:5] == ["srv1", "srv2", "srv3", "srv4", "srv1"]


def test_round_robin_skips_unhealthy_and_resumes():
    core = make_core()
    core.set_health("srv2-ui", False)
    picks = [core.choose("ui").server for _ in range(6)]
    assert picks == ["srv1", "srv3", "srv4", "srv1", "srv3", "srv4"]
    core.set_health("srv2-ui", True)
    assert "srv2" in {core.choose("ui").server for _ in range(4)}


def test_srr_ignores_load_and_flow_class():
    core = make_core(policy="srr")
    loads(core, srv1=(99, 99, 99))
    assert [core.choose("video").server for _ in range(4)] == SERVERS
