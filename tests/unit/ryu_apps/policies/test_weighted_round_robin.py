"""Weighted round robin (wrr): ryu_apps/policies/weighted_round_robin.py."""
from collections import Counter

from tests.lib.policy_core import SERVERS, make_core


def test_wrr_gives_each_server_flows_in_proportion_to_its_cores_without_bursts():
    caps = {"srv1": (0.6, 512, 100), "srv2": (0.3, 512, 100), "srv3": (0.3, 512, 100),
            "srv4": (0.2, 512, 100)}
    core = make_core("wrr", capacities=caps)
    picks = [core.choose("ui", 100.0).server for _ in range(140)]
    assert Counter(picks) == {"srv1": 60, "srv2": 30, "srv3": 30, "srv4": 20}
    # smooth: the big server never gets three in a row
    assert "111" not in "".join(p[-1] for p in picks)


def test_wrr_on_equal_servers_is_round_robin_and_skips_unhealthy_instances():
    core = make_core("wrr")
    assert [core.choose("ui", 100.0).server for _ in range(5)] == \
        ["srv1", "srv2", "srv3", "srv4", "srv1"]
    core.set_health("srv3-ui", False)
    assert "srv3" not in {core.choose("ui", 100.0).server for _ in range(9)}
    assert set(SERVERS) - {"srv3"} == {core.choose("ui", 100.0).server for _ in range(3)}


def test_an_instance_calling_its_own_vip_keeps_its_turn_credit():
    # left out of its own call (the switch cannot send a packet back where it came in), it
    # neither gains nor pays, and keeps its place in the turn; an instance out of the pool
    # loses its credit
    caps = {"srv1": (0.6, 512, 100), "srv2": (0.3, 512, 100), "srv3": (0.3, 512, 100),
            "srv4": (0.2, 512, 100)}
    core = make_core("wrr", capacities=caps)
    assert core.choose("ui", 100.0).server == "srv1"
    credit = core.strategy._credit["ui"]
    before = credit["srv1-ui"]
    assert core.choose("ui", 100.0, caller="10.0.1.1").server != "srv1"
    assert credit["srv1-ui"] == before
    core.remove_backend("srv4-ui")
    core.choose("ui", 100.0)
    assert "srv4-ui" not in credit
