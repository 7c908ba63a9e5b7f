"""A standby pair in the controller's shell (ryu_apps/malb.py, its role logic in
ryu_apps/roles.py), without ryu-manager: a standby asks each switch for the slave role and
sends it nothing else, ignores what it is sent, takes over with the master role and the
rules a restart sends, steps down when a switch says another controller is master; its
REST API refuses changes naming the master; bad flags exit 2. Two real controllers on Open
vSwitch: tests/integration/test_standby.py."""
from __future__ import annotations

import json

import pytest

from common.metrics import render
from ryu_apps import ofwire, standby as standby_shell
from ryu_apps.framework import ofproto_v1_3 as ofp
from ryu_apps.roles import MASTER, STANDBY, Roles
from tests.lib.fakeswitch import CONTROLLER, RoleRequest
from tests.lib.metrics import value
from tests.lib.rest_app import fake_app, served
from tests.lib.shell import NOW, connect, event, make_app

PEER = "http://127.0.0.1:18081"


@pytest.fixture
def standby(monkeypatch):
    yield from make_app(monkeypatch, MALB_PEER=PEER, MALB_ROLE="standby")


@pytest.fixture
def preferred_master(monkeypatch):
    yield from make_app(monkeypatch, MALB_PEER=PEER, MALB_ROLE="master")


def syn(app, dp, sport):
    c = app.cfg.testbed.clients[0]
    ms = app.cfg.microservice("ui")
    frame = ofwire.tcp_frame(app.cfg.controller.vip_mac, c.mac, c.ip, ms.vip, sport, ms.port,
                             1, flags=ofwire.TCP_SYN)
    app._packet_in(event(dp, match={"in_port": c.switch_port}, data=frame, cookie=0))


def test_a_standby_asks_for_the_slave_role_sends_nothing_else_and_ignores_packet_ins(standby):
    dp = connect(standby)
    assert dp.switch.roles == [RoleRequest(ofp.OFPCR_ROLE_SLAVE, 0)]
    assert dp.switch.rules == [] and dp.switch.requests == []
    syn(standby, dp, 40000)
    assert dp.switch.rules == [] and dp.switch.packet_outs == [] and not standby.decisions
    assert standby.status()["role"]["role"] == STANDBY
    assert value(render(standby.metrics), "malb_controller_master") == 0


def test_a_takeover_claims_the_master_role_then_sends_what_a_restart_sends(standby):
    dp = connect(standby)
    standby.roles.peer_answer(NOW, {"role": MASTER, "generation": 7, "policy": "srr"})
    standby.standby.take_over()
    assert dp.switch.roles[-1] == RoleRequest(ofp.OFPCR_ROLE_MASTER, int(NOW * 1000))
    assert dp.switch.lookup({"eth_type": 0x88B5, "eth_dst": "x"}).actions[0].port == CONTROLLER
    assert standby.policy_core.policy == "srr"       # the master's, not the configuration's
    syn(standby, dp, 40001)
    assert len(dp.switch.nat_rules()) == 2
    metrics = render(standby.metrics)
    assert value(metrics, "malb_controller_master") == 1
    assert value(metrics, "malb_takeovers_total") == 1
    # a switch that connects again now gets the master role again, ahead of its rules
    again = connect(standby, dpid=2)
    assert again.switch.roles == [RoleRequest(ofp.OFPCR_ROLE_MASTER, int(NOW * 1000))]


def test_a_master_a_switch_calls_slave_steps_down_and_starts_afresh(standby):
    dp = connect(standby)
    standby.standby.take_over()
    syn(standby, dp, 40002)
    old = standby.core
    standby._error(event(dp, type=ofp.OFPET_BAD_REQUEST, code=ofp.OFPBRC_IS_SLAVE, xid=9))
    assert not standby.roles.active and standby.core is not old
    assert standby.status()["active_flows"] == 0          # the master knows them now
    role = standby.role_status()
    assert role["step_downs"] == 1 and "this controller is its slave" in role["last_step_down"]
    # other errors change nothing
    standby.standby.take_over()
    standby._error(event(dp, type=ofp.OFPET_FLOW_MOD_FAILED, code=0, xid=10))
    assert standby.roles.active


def test_the_peer_loop_claims_when_the_peer_is_standby_and_the_role_is_preferred(
        preferred_master, monkeypatch):
    app = preferred_master
    dp = connect(app)
    assert dp.switch.roles == [RoleRequest(ofp.OFPCR_ROLE_SLAVE, 0)]   # not master yet

    class Stop(Exception):
        pass
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) > 1:
            raise Stop
    monkeypatch.setattr(standby_shell.hub, "sleep", sleep)
    monkeypatch.setattr(standby_shell, "get_json", lambda url, timeout: {"role": STANDBY,
                                                                "generation": 0})
    with pytest.raises(Stop):
        app.standby.peer_loop()
    assert sleeps[0] == app.cfg.controller.failover.peer_poll_s
    assert app.roles.active and dp.switch.roles[-1].role == ofp.OFPCR_ROLE_MASTER


def test_a_standby_asks_the_slave_role_again_once_the_masters_generation_is_known(
        standby, monkeypatch):
    dp = connect(standby)                      # before any answer: at generation 0, stale
    assert dp.switch.roles == [RoleRequest(ofp.OFPCR_ROLE_SLAVE, 0)]
    answers = iter([{"role": MASTER, "generation": 42}, {"role": MASTER, "generation": 42},
                    {"role": MASTER, "generation": 43}])

    class Stop(BaseException):      # past the loop's own catch-all
        pass

    def get_json(url, timeout):
        try:
            return next(answers)
        except StopIteration:
            raise Stop from None
    monkeypatch.setattr(standby_shell.hub, "sleep", lambda s: None)
    monkeypatch.setattr(standby_shell, "get_json", get_json)
    with pytest.raises(Stop):
        standby.standby.peer_loop()
    assert dp.switch.roles[1:] == [RoleRequest(ofp.OFPCR_ROLE_SLAVE, 42),
                                   RoleRequest(ofp.OFPCR_ROLE_SLAVE, 43)]
    assert not standby.roles.active


def test_a_standby_refuses_changes_over_rest_naming_the_master():
    app = fake_app()
    app.roles = Roles(STANDBY, PEER, 1.0, NOW)
    app.role_status = lambda: {**app.roles.status(NOW), "policy": app.policy_core.policy}
    with served(app) as client:
        status, _, body = client.send("PUT", "/malb/policy", b'{"policy": "srr"}',
                                      {"Content-Type": "application/json"})
        assert status == 409 and json.loads(body)["master"] == PEER
        assert app.policy_core.policy != "srr"
        status, _, body = client.send("GET", "/malb/role")
        assert status == 200 and json.loads(body)["role"] == STANDBY
        app.roles.claim(NOW)
        status, _, _ = client.send("PUT", "/malb/policy", b'{"policy": "srr"}',
                                   {"Content-Type": "application/json"})
        assert status == 200


@pytest.mark.parametrize("env, message", [
    ({"MALB_ROLE": "boss", "MALB_PEER": PEER}, "--malb-role (MALB_ROLE): expected one of "
                                               "master, standby, got 'boss'"),
    ({"MALB_ROLE": "standby"}, "--malb-role (MALB_ROLE) needs the other controller"),
    ({"MALB_PEER": "ftp://x"}, "--malb-peer (MALB_PEER): expected an http URL"),
])
def test_a_bad_role_or_peer_exits_2_naming_it(monkeypatch, capsys, env, message):
    with pytest.raises(SystemExit) as stop:
        next(make_app(monkeypatch, **env))
    assert stop.value.code == 2 and message in capsys.readouterr().err
