"""Least connections (lc): ryu_apps/policies/least_connections.py."""
from tests.lib.policy_core import SERVERS, make_core


def open_flow(core, ms, n=1, start=0):
    """n watched flows of ms, as the controller opens them; their keys."""
    keys = []
    for k in range(start, start + n):
        core.choose(ms, 100.0, watched=("flow", ms, k))
        keys.append(("flow", ms, k))
    return keys


def test_lc_sends_a_flow_to_the_instance_with_the_fewest_open_connections():
    core = make_core("lc")
    assert core.watches("ui") and core.watches("backend")     # every flow to its end
    keys = open_flow(core, "backend", 4)                      # one on each, in turn
    assert [core.connections.instance_of(k) for k in keys] == \
        [f"{s}-backend" for s in SERVERS]
    core.flow_ended(keys[2], 101.0)                           # srv3's ends
    d = core.choose("backend", 102.0, watched=("flow", "backend", 9))
    assert (d.server, d.algorithm) == ("srv3", "least-connections")
    assert d.scores == {"srv1": 1.0, "srv2": 1.0, "srv3": 0.0, "srv4": 1.0}


def test_lc_breaks_ties_in_round_robin_order():
    core = make_core("lc")
    picks = [core.choose("ui", 100.0).server for _ in range(6)]   # unwatched: none open
    assert picks == ["srv1", "srv2", "srv3", "srv4", "srv1", "srv2"]


def test_lc_a_short_flow_ends_when_its_rules_idle_out_a_long_one_at_its_fin():
    core = make_core("lc")
    short = open_flow(core, "ui")[0]
    long = open_flow(core, "backend")[0]
    core.flow_idle(short)
    core.flow_idle(long)          # a job computing in silence: still open
    assert core.connections.open_count("srv1-ui") == 0
    assert core.connections.open_count("srv1-backend") == 1
    core.flow_ended(long, 130.0)
    assert core.connections.open_count("srv1-backend") == 0


def test_lc_ignores_load_figures():
    core = make_core("lc")
    for srv in SERVERS:
        core.update_server_load(srv, 90.0 if srv == "srv1" else 0.0, 10.0, 10.0, 99.0)
    assert core.choose("backend", 100.0).server == "srv1"      # no open flow anywhere
