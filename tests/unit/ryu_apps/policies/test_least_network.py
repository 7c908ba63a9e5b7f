"""Least network load (ln): ryu_apps/policies/least_network.py."""
from tests.lib.policy_core import SERVERS, loads, make_core


def test_ln_uses_switch_network_measurement_then_profiler():
    core = make_core(policy="ln")
    loads(core, srv1=(0, 0, 50), srv2=(0, 0, 40), srv3=(0, 0, 30), srv4=(0, 0, 60))
    assert core.choose("video").server == "srv3"       # profiler net only
    for srv, net in zip(SERVERS, (5, 50, 50, 50)):
        core.update_network(srv, net, 99.5)
    d = core.choose("video")
    assert (d.server, d.algorithm) == ("srv1", "least-network-load")
