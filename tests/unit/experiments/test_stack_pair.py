"""The stack's standby pair (experiments/controller_pair.py, experiments/stack.py), without
a testbed: the two controllers' ports, names, roles and peers, and the swap when the
standby takes over (the stack then asks the new master)."""
import os

from common.config import load_config
from experiments.controller_pair import ControllerPair
from experiments.stack import Stack
from tests.conftest import ROOT

CFG = load_config(os.path.join(ROOT, "configs", "paper.yaml"))


def flag(service, name: str) -> str:
    return service.argv[service.argv.index(name) + 1]


def pair() -> ControllerPair:
    return ControllerPair(CFG, "/nonexistent/config.yaml", "srr", "/nonexistent-run-dir")


def test_the_pair_runs_on_the_configured_ports_and_the_next_ones_each_told_the_other():
    c, p = CFG.controller, pair()
    master, standby = p.service("master"), p.service("standby")
    assert (flag(master, "--ofp-tcp-listen-port"), flag(master, "--wsapi-port")) == \
        (str(c.ofp_port), str(c.rest_port))
    assert (flag(standby, "--ofp-tcp-listen-port"), flag(standby, "--wsapi-port")) == \
        (str(c.ofp_port + 1), str(c.rest_port + 1))
    assert master.env["MALB_ROLE"] == "master" and standby.env["MALB_ROLE"] == "standby"
    assert master.env["MALB_PEER"] == f"http://127.0.0.1:{c.rest_port + 1}"
    assert standby.env["MALB_PEER"] == f"http://127.0.0.1:{c.rest_port}"
    assert (master.name, standby.name) == ("controller", "controller-b")


def test_after_a_takeover_the_stack_asks_the_new_master_and_restarts_the_old_as_standby():
    c = CFG.controller
    st = Stack({}, "/nonexistent-run-dir", policy="srr", standby=True)
    st.cfg, st.pair = CFG, pair()
    assert st.controller_url("/x") == f"http://127.0.0.1:{c.rest_port}/x"
    st.controller, st.standby = "a", "b"
    st.promote_standby()
    assert (st.controller, st.standby) == ("b", "a")
    assert st.controller_url("/x") == f"http://127.0.0.1:{c.rest_port + 1}/x"
    again = st.pair.service("standby")
    assert again.name == "controller" and flag(again, "--wsapi-port") == str(c.rest_port)
    assert again.env["MALB_PEER"] == f"http://127.0.0.1:{c.rest_port + 1}"


def test_without_a_pair_the_controller_keeps_its_configured_ports_and_no_peer():
    st = Stack({}, "/nonexistent-run-dir", policy="srr")
    st.cfg = CFG
    service = st._controller_service()
    assert "--wsapi-port" not in service.argv and "MALB_PEER" not in service.env
