"""ryu_apps/load_view.py: a policy reads the core's state as it is and changes none of it but
the round-robin turn."""
import pytest

from ryu_apps import policies
from ryu_apps.policies import Policy
from tests.lib.policy_core import loads, make_core


def test_the_view_reads_what_the_core_holds_now():
    core = make_core()
    view = core.view
    loads(core, srv1=(70.0, 10.0, 10.0))
    assert view.loads["srv1"].cpu == 70.0                   # a change after the view was made
    core.set_draining("srv2-ui")
    assert not view.in_service(core.pools["ui"][1])
    assert [b.name for b in view.pools["ui"]] == [b.name for b in core.pools["ui"]]


@pytest.mark.parametrize("member", ["pools", "loads", "switch_net", "probes", "capacities",
                                    "sites"])
def test_a_policy_cannot_write_the_cores_state(member):
    core = make_core()
    with pytest.raises(TypeError):
        getattr(core.view, member)["srv1"] = None
    assert "srv1" not in core.pools


def test_the_turn_is_the_one_thing_a_policy_moves_and_it_stays_in_the_pool():
    core = make_core("srr")
    view = core.view
    view.advance_turn("ui", 5)                              # four instances: 5 is the second
    assert view.turn("ui") == 1
    assert core.choose("ui").instance == "srv2-ui"
    assert view.turn("ui") == 2


def test_a_policy_switched_at_run_time_goes_on_from_the_same_turn():
    core = make_core("srr")
    assert core.choose("ui").instance == "srv1-ui"
    core.set_policy("p2c")
    core.set_policy("srr")
    assert core.choose("ui").instance == "srv2-ui"


def test_every_registered_policy_decides_from_the_view_alone():
    """Each policy is handed the view, not the core: a rule reaching for the core's insides
    fails here with AttributeError."""
    for name in policies.names():
        core = make_core(name)
        loads(core)
        decision = core.choose("ui", 100.0)
        assert decision.policy == name
        assert isinstance(core.strategy, Policy)
