"""A standby controller's decisions (ryu_apps/roles.py), time passed in: when it claims the
master role, with which generation, when a master steps down, what a switch's new connection
is asked, and answers that are not a role."""
import pytest

from ryu_apps.framework import ofproto_v1_3 as ofp
from ryu_apps.roles import MASTER, STANDBY, SUPERSEDED, Roles
from tests.lib.fakeswitch import RoleRequest, decode

T = 1_700_000_000.0
PEER = "http://127.0.0.1:8081"


def master_answer(generation=5, policy="srr"):
    return {"role": MASTER, "generation": generation, "policy": policy}


def test_a_standby_claims_once_no_master_has_answered_for_the_takeover_time():
    r = Roles(STANDBY, PEER, takeover_after_s=1.0, now=T)
    assert not r.active and r.asks_roles
    assert r.peer_answer(T + 0.25, master_answer()) is None
    assert r.peer_failed(T + 0.5, "connection refused") is None       # 0.25 s without
    assert r.peer_failed(T + 1.0, "connection refused") is None
    assert r.peer_failed(T + 1.25, "connection refused") == "claim"   # 1 s without
    generation = r.claim(T + 1.25)
    assert r.active and generation == int((T + 1.25) * 1000) and r.claims == 1
    assert r.peer_policy == "srr"          # the master's, to keep after the takeover
    # a standby peer (the old master back) is no reason for anything
    assert r.peer_answer(T + 2, {"role": STANDBY, "generation": 0}) is None


def test_a_preferred_master_claims_at_once_from_a_standby_peer_and_not_from_a_master():
    r = Roles(MASTER, PEER, takeover_after_s=1.0, now=T)
    assert not r.active                       # until the peer has answered or is gone
    assert r.peer_answer(T + 0.1, {"role": STANDBY, "generation": 0}) == "claim"
    back = Roles(MASTER, PEER, takeover_after_s=1.0, now=T)
    # restarted while the standby had taken over: it stays standby, no flapping back
    assert back.peer_answer(T + 0.1, master_answer(generation=9)) is None
    assert back.peer_answer(T + 5, master_answer(generation=9)) is None and not back.active


def test_generations_rise_above_the_peer_and_the_last_claim():
    r = Roles(STANDBY, PEER, takeover_after_s=1.0, now=T)
    r.peer_answer(T, master_answer(generation=int(T * 1000) + 10_000))   # a clock ahead
    assert r.claim(T + 2) == int(T * 1000) + 10_001
    r.step_down(T + 3, "test")
    assert r.claim(T + 3) == int(T * 1000) + 10_002


def test_two_masters_the_older_claim_steps_down_and_waits_before_claiming_again():
    r = Roles(MASTER, PEER, takeover_after_s=1.0, now=T)
    r.peer_answer(T, {"role": STANDBY, "generation": 0})
    mine = r.claim(T)
    assert r.peer_answer(T + 1, master_answer(generation=mine - 1)) is None   # mine is newer
    assert r.peer_answer(T + 2, master_answer(generation=mine + 1)) == "step_down"
    assert r.step_down(T + 2, "the peer's claim is newer") and not r.active
    assert r.step_downs == 1 and r.status(T + 2)["last_step_down"] == "the peer's claim is newer"
    assert r.step_down(T + 2, "again") is False                      # already standby
    assert r.peer_failed(T + 2.5, "timed out") is None                # waits its time
    assert r.peer_failed(T + 3.1, "timed out") == "claim"


def test_without_a_peer_a_controller_is_master_and_asks_no_role():
    r = Roles(MASTER, None, takeover_after_s=1.0, now=T)
    assert r.active and not r.asks_roles and r.on_connect(7) == b""
    assert r.step_down(T, "a switch refused a change") is False and r.active


def test_a_new_connection_asks_the_slave_role_at_the_masters_generation_or_the_master_role():
    r = Roles(STANDBY, PEER, takeover_after_s=1.0, now=T)
    r.peer_answer(T, master_answer(generation=42))
    assert decode(r.on_connect(3)) == [RoleRequest(ofp.OFPCR_ROLE_SLAVE, 42)]
    r.peer_failed(T + 2, "gone")
    generation = r.claim(T + 2)
    assert decode(r.on_connect(4)) == [RoleRequest(ofp.OFPCR_ROLE_MASTER, generation)]


def test_the_errors_that_mean_another_master_are_those_of_openflow():
    assert (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE) in SUPERSEDED
    assert (ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE) in SUPERSEDED
    assert len(SUPERSEDED) == 2


@pytest.mark.parametrize("body, message", [
    ([], "expected a JSON object"),
    ({"role": "boss", "generation": 1}, "role: expected one of master, standby"),
    ({"role": MASTER, "generation": -1}, "generation: expected an integer >= 0"),
    ({"role": MASTER, "generation": True}, "generation: expected an integer"),
    ({"role": MASTER}, "generation: expected an integer"),
])
def test_an_answer_that_is_not_a_role_is_refused_naming_the_field(body, message):
    r = Roles(STANDBY, PEER, takeover_after_s=1.0, now=T)
    with pytest.raises(ValueError, match=message):
        r.peer_answer(T, body)
    assert r.peer_role is None


def test_a_role_not_known_is_refused():
    with pytest.raises(ValueError, match="role: expected one of master, standby, got 'boss'"):
        Roles("boss", PEER, 1.0, T)
