"""The controller's listening ports (ryu_apps/listeners.py, ryu_apps/rest.py) and its
start-up refusals, in process (no ryu-manager): eventlet, which the framework binds the
OpenFlow port with, sets SO_REUSEPORT, so a second controller would share that port
silently; the start-up check binds it once without, the REST server binds without it, and a
port in use (or a bad configuration) is one line and exit 2. Nothing of the framework is
patched."""
import socket

import eventlet
import pytest

from common.config import DEFAULT_MICROSERVICES
from ryu_apps import listeners, rest
from ryu_apps.framework import cfg, hub
from ryu_apps.malb import MalbController
from tests.lib.rest_app import fake_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reuseport(sock) -> int:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)


def test_eventlet_alone_lets_two_listeners_share_a_port():
    """Why listeners.py exists: what the framework's binding does without it."""
    port = free_port()
    first = eventlet.listen(("127.0.0.1", port))
    second = eventlet.listen(("127.0.0.1", port))     # no error: the port is shared
    try:
        assert reuseport(first) == 1 and reuseport(second) == 1
    finally:
        first.close()
        second.close()


def test_a_port_the_framework_listens_on_is_refused_and_a_free_one_left_free():
    port = free_port()
    listeners.check_free({"OpenFlow": ("127.0.0.1", port)})       # free: nothing kept bound
    older = hub.StreamServer(("127.0.0.1", port), lambda sock, addr: None)   # SO_REUSEPORT
    try:
        assert reuseport(older.server) == 1
        with pytest.raises(listeners.PortInUse) as err:
            listeners.check_free({"REST API": ("127.0.0.1", free_port()),
                                  "OpenFlow": ("127.0.0.1", port)})
        assert str(err.value) == (f"OpenFlow 127.0.0.1:{port}: Address already in use "
                                  f"(another process listens there: a second controller?)")
    finally:
        older.server.close()
    listeners.check_free({"OpenFlow": ("127.0.0.1", port)})


def test_the_rest_server_binds_without_reuseport_and_nobody_can_share_it():
    server = rest.server(fake_app(), "127.0.0.1", 0)
    try:
        port = server.server_address[1]
        with pytest.raises(OSError):           # not even with SO_REUSEPORT
            eventlet.listen(("127.0.0.1", port), reuse_port=True)
        with pytest.raises(listeners.PortInUse):
            listeners.check_free({"REST API": ("127.0.0.1", port)})
    finally:
        server.server_close()


# ------------------------------------------------------------------ MalbController start-up
@pytest.fixture
def start_controller(monkeypatch, capsys):
    """MalbController(...) with MALB_CONFIG set; returns (exit code, stderr lines)."""

    def start(path):
        monkeypatch.setenv("MALB_CONFIG", path)
        monkeypatch.delenv("MALB_TOKEN", raising=False)
        with pytest.raises(SystemExit) as exc:
            MalbController()
        return exc.value.code, capsys.readouterr().err.strip().splitlines()
    yield start
    cfg.CONF.clear_override("ofp_tcp_listen_port")


def test_the_controller_exits_2_on_a_bad_configuration(start_controller, config_file):
    code, err = start_controller(config_file({"controller": {"rest_host": "999.999.1.1"},
                                              "microservices": DEFAULT_MICROSERVICES}))
    assert code == 2 and len(err) == 1
    assert err[0].startswith("malb: bad configuration: ") and err[0].endswith(
        "controller.rest_host: not a valid IPv4 address: '999.999.1.1'")
    code, err = start_controller(config_file({"servers": {"count": 2}}))
    assert code == 2 and err[0].endswith("microservices: required: the list of "
                                         "microservices to balance, e.g. configs/paper.yaml's "
                                         "(docs/configuration.md)")


@pytest.mark.parametrize("taken", ["rest", "ofp"])
def test_a_second_controller_on_the_same_ports_exits_2_saying_which(start_controller,
                                                                     config_file, taken):
    ports = {"rest": free_port(), "ofp": free_port()}
    first = eventlet.listen(("127.0.0.1" if taken == "rest" else "0.0.0.0", ports[taken]))
    try:
        code, err = start_controller(config_file({
            "microservices": DEFAULT_MICROSERVICES,
            "controller": {"rest_port": ports["rest"], "ofp_port": ports["ofp"]}}))
    finally:
        first.close()
    assert code == 2 and len(err) == 1, err
    what = "REST API (controller.rest_host:rest_port) 127.0.0.1" if taken == "rest" else \
        "OpenFlow (controller.ofp_port) 0.0.0.0"
    assert err[0] == (f"malb: cannot listen: {what}:{ports[taken]}: Address already in use "
                      f"(another process listens there: a second controller?)")
    for port in ports.values():                 # nothing of the refused start stays bound
        listeners.check_free({"port": ("127.0.0.1", port)})
