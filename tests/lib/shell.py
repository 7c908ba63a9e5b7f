"""The controller's shell (ryu_apps/malb.py) for unit tests, without ryu-manager: make_app
builds it with its port check, threads and REST server stubbed (the `app` fixture of
tests/unit/conftest.py), Datapath is a fake datapath that applies what the shell sends to a
fake switch, event wraps a message as Ryu delivers it, connect brings a switch up."""
from __future__ import annotations

import os
import types

from ryu_apps.framework import MAIN_DISPATCHER, cfg, ofproto_v1_3 as ofp, \
    ofproto_v1_3_parser as parser

from tests.conftest import ROOT
from tests.lib.fakeswitch import FakeSwitch

NOW = 1_700_000_000.0


class Datapath:
    """What the shell uses of Ryu's Datapath: id, ofproto, xid, send, send_msg."""

    def __init__(self, dpid):
        self.id, self.ofproto, self.ofproto_parser, self.xid = dpid, ofp, parser, 0
        self.switch = FakeSwitch(dpid)

    def send(self, buf):
        self.switch.apply(buf)

    def send_msg(self, msg):          # the shell should send bytes only
        raise AssertionError(f"send_msg({type(msg).__name__})")


def event(dp, **fields):
    return types.SimpleNamespace(msg=types.SimpleNamespace(datapath=dp, **fields))


def make_app(monkeypatch, **env):
    """The shell as ryu-manager would build it, on configs/paper.yaml at time NOW, with the
    environment variables given (MALB_PEER=..., say); a generator (a fixture's body): the
    options it sets in Ryu's cfg are cleared after."""
    # deferred: the framework's app stack (eventlet), only for the tests that build the shell
    from ryu_apps import malb
    monkeypatch.setenv("MALB_CONFIG", os.path.join(ROOT, "configs", "paper.yaml"))
    for name in ("MALB_POLICY", "MALB_TOKEN", "MALB_PEER", "MALB_ROLE", "MALB_EAGER_PARSE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(malb.listeners, "check_free", lambda ports: None)
    monkeypatch.setattr(malb.hub, "spawn", lambda *a, **k: None)
    monkeypatch.setattr(malb.gc, "freeze", lambda: None)
    # the collector's own list stays as it was: no app of a test outlives it in a callback
    monkeypatch.setattr(malb.gc, "callbacks", [])
    monkeypatch.setattr("ryu_apps.rest.server", lambda app, host, port: types.SimpleNamespace(
        server_address=(host, port), serve_forever=None))
    monkeypatch.setattr(malb.time, "time", lambda: NOW)
    yield malb.MalbController()
    cfg.CONF.clear_override("ofp_tcp_listen_port")
    malb.lazy_parse.uninstall()


def connect(app, dpid=1):
    dp = Datapath(dpid)
    app._switch_features(event(dp))
    app._state_change(types.SimpleNamespace(datapath=dp, state=MAIN_DISPATCHER))
    return dp
