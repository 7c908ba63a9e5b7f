"""The controller as a user starts it: ryu-manager (or the os-ken launcher, under
MALB_FRAMEWORK=os-ken) with a configuration file, no testbed.

A second controller on the same ports must fail with one line and exit 2 (the framework's
eventlet listener sets SO_REUSEPORT, so without ryu_apps/listeners.py it would start and
share the connections), and leave the first one serving; a bad configuration is one line and exit 2.
Ports here are unusual ones, so a stack running on the defaults is not disturbed."""
import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

from common.procs import controller_argv, controller_service
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

REST, OFP = 18180, 16653


def write_config(path, **controller):
    with open(os.path.join(ROOT, "configs", "paper.yaml")) as fh:
        data = yaml.safe_load(fh)
    data.setdefault("controller", {}).update(rest_port=REST, ofp_port=OFP, **controller)
    data.setdefault("testbed", {})["controller"] = f"127.0.0.1:{OFP}"
    with open(path, "w") as fh:
        yaml.safe_dump(data, fh)
    return str(path)


def start_controller(config: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The controller's command ($MALB_FRAMEWORK's: ryu-manager or the os-ken launcher), run
    to its end."""
    return subprocess.run(controller_argv(), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "MALB_CONFIG": config}, cwd=ROOT)


def status(timeout_s: float = 5.0):
    with urllib.request.urlopen(f"http://127.0.0.1:{REST}/malb/status", timeout=timeout_s) as r:
        return r.status, json.loads(r.read())


def test_a_second_controller_on_the_same_ports_exits_2_and_the_first_keeps_serving(tmp_path):
    config = write_config(tmp_path / "c.yaml")
    first = controller_service(config, log_path=str(tmp_path / "first.log"), rest_port=REST,
                               name="controller-first")
    with first:
        assert status()[0] == 200
        second = start_controller(config)
        assert second.returncode == 2, (second.returncode, second.stderr[-2000:])
        lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
        assert any("cannot listen" in ln and (str(REST) in ln or str(OFP) in ln) for ln in lines)
        assert "Traceback" not in second.stderr
        time.sleep(1)
        for _ in range(20):              # every answer comes from the first: none is lost
            assert status()[0] == 200


def test_a_bad_configuration_is_one_line_and_exit_2(tmp_path):
    config = write_config(tmp_path / "bad.yaml", monitoring_period_s=float("nan"))
    res = start_controller(config)
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "monitoring_period_s" in res.stderr and "Traceback" not in res.stderr


def test_idle_and_slow_clients_do_not_take_the_rest_api_offline(tmp_path):
    """1,100 idle connections (Ryu's WSGI server once capped them at 1,024, with no timeout)
    and a client that sends half a request: REST still answers, and the slow one is
    dropped."""
    config = write_config(tmp_path / "c.yaml")
    with controller_service(config, log_path=str(tmp_path / "c.log"), rest_port=REST,
                            name="controller-idle"):
        idle = []
        try:
            for k in range(1100):     # from 22 addresses, 50 each: within the per-address cap
                idle.append(socket.create_connection(
                    ("127.0.0.1", REST), timeout=5, source_address=(f"127.0.1.{1 + k % 22}", 0)))
            time.sleep(1)
            # it answers (Ryu's server never did again), and soon: the idle ones are taken
            # from the listen backlog in batches and cost the loop nothing while they idle
            t = time.monotonic()
            assert status(timeout_s=30.0)[0] == 200
            assert time.monotonic() - t < 5.0
            slow = socket.create_connection(("127.0.0.1", REST), timeout=60)
            slow.sendall(b"GET /malb/status HTTP/1.1\r\nHost: x\r\n")   # never finished
            slow.settimeout(45)
            t = time.monotonic()
            try:
                data = slow.recv(1024)      # the server closes it: b"" (or a 408-like answer)
            except ConnectionResetError:
                data = b""
            dropped_after = time.monotonic() - t
            assert not data.startswith(b"HTTP/1.1 200"), data[:80]
            assert dropped_after < 40, dropped_after
            slow.close()
        finally:
            for s in idle:
                s.close()
