"""Weighted least connections (wlc): ryu_apps/policies/weighted_least_connections.py."""
from tests.lib.policy_core import SERVERS, make_core, same_choices

CAPS = {"srv1": (0.6, 512, 100), "srv2": (0.3, 512, 100), "srv3": (0.3, 512, 100),
        "srv4": (0.2, 512, 100)}


def test_wlc_counts_open_connections_per_cpu_core():
    core = make_core("wlc", capacities=CAPS)
    picks = [core.choose("backend", 100.0, watched=k).server for k in range(12)]
    # each new flow to the fewest per core: 4, 3, 3 and 2 open (6.7, 10, 10, 10 per core)
    assert [picks.count(s) for s in SERVERS] == [4, 3, 3, 2]
    d = core.choose("backend", 100.0, watched=99)
    assert (d.server, d.algorithm) == ("srv1", "weighted-least-connections")
    assert d.scores == {"srv1": round(4 / 0.6, 3), "srv2": 10.0, "srv3": 10.0, "srv4": 10.0}


def test_wlc_on_equal_servers_decides_as_lc():
    a, b = make_core("wlc"), make_core("lc")
    assert same_choices(a, b)
