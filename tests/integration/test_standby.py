"""A standby pair on the real testbed (docs/controller.md, "A standby controller"): two
controller processes, every switch given both; Open vSwitch itself says which is master.
The master killed, the standby takes over, running connections go on, and new connections
through the VIP are served by it. How long a takeover takes and what it costs new
connections under load is the fault suite's `--standby` run, not a test's. The pair's
decisions and messages are unit-tested in tests/unit/ryu_apps/test_roles.py and
test_standby_shell.py."""
from __future__ import annotations

import signal
import subprocess
import time

import pytest

from common.httpjson import HttpError, get_json
from experiments.stack import Stack
from tests.integration.helpers import FAST_CONFIG, finish_download, served_by, start_download
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration
VIP = "10.0.0.100"
UI = f"http://{VIP}:8002/object?size=20000"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    clean_testbed(quiet=True)
    st = Stack(FAST_CONFIG, str(tmp_path_factory.mktemp("standby")), policy="srr",
               standby=True)
    with st:
        yield st
    clean_testbed(quiet=True)


def role(port: int) -> dict:
    """A controller's GET /malb/role ({"role": None} while it does not answer)."""
    try:
        return get_json(f"http://127.0.0.1:{port}/malb/role", timeout=2)
    except HttpError:
        return {"role": None}


def switch_roles(switch: str) -> dict[str, str]:
    """Open vSwitch's view: each controller target's role on the bridge."""
    out = subprocess.run(["ovs-vsctl", "--format=csv", "--data=bare", "--no-headings",
                          "--columns=target,role", "list", "controller"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    bridge = subprocess.run(["ovs-vsctl", "get-controller", switch], capture_output=True,
                            text=True, timeout=10, check=True).stdout.split()
    rows = dict(line.split(",", 1) for line in out.splitlines() if line)
    return {target: rows.get(target, "") for target in bridge}


def test_the_switches_see_one_master_and_one_slave_and_the_master_serves(pair):
    rest, standby_rest = pair.cfg.controller.rest_port, pair.pair.standby_ports()[1]
    pair.wait_for(lambda: role(rest)["role"] == "master" and
                  role(standby_rest)["role"] == "standby", 15, "one master, one standby")
    for sw in pair.cfg.testbed.switches:
        pair.wait_for(lambda s=sw.name: sorted(switch_roles(s).values()) ==
                      ["master", "slave"], 15, f"{sw.name}: a master and a slave")
    cli = pair.testbed.node("cli1")
    assert all(w.endswith("-ui") for w in served_by(cli, UI, 4))


def test_the_standby_takes_over_and_running_connections_go_on(pair):
    standby_rest = pair.pair.standby_ports()[1]
    pair.wait_for(lambda: role(standby_rest)["role"] == "standby", 15, "a standby")
    cli = pair.testbed.node("cli1")
    start_download(cli, f"http://{VIP}:8001/stream?rate=200&seconds=8", "stream")
    time.sleep(2)
    pair.controller.kill(signal.SIGKILL)          # our own process group (common.procs)
    pair.wait_for(lambda: role(standby_rest)["role"] == "master", 30, "the standby's claim",
                  interval_s=0.05)
    for sw in pair.cfg.testbed.switches:
        pair.wait_for(lambda s=sw.name: "master" in switch_roles(s).values(), 10,
                      f"{sw.name}: the standby master")
    code, size = finish_download(cli, "stream", 60)
    assert code == 200 and size == 1_600_000, (code, size)
    assert all(w.endswith("-ui") for w in served_by(cli, UI, 8)), "new connections served"
    status = get_json(f"http://127.0.0.1:{standby_rest}/malb/status", timeout=5)
    assert status["role"]["claims"] == 1 and status["active_flows"] >= 0
    with open(pair.standby.log_path) as fh:
        assert "master from now on" in fh.read()
