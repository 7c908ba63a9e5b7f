"""The controller's listening sockets (ryu_apps/listeners.py) and its start-up refusals,
in process (no ryu-manager): eventlet, which Ryu binds with, sets SO_REUSEPORT, so a second
controller on the same ports would start silently; ours are bound without it while the app
starts, handed to Ryu, and a port in use (or a bad configuration) is one line and exit 2."""
import socket

import eventlet
import pytest
from ryu import cfg
from ryu.app.wsgi import WSGIApplication
from ryu.lib import hub

from common.config import DEFAULT_MICROSERVICES
from ryu_apps import listeners
from ryu_apps.malb import MalbController


@pytest.fixture(autouse=True)
def own_eventlet_listen(monkeypatch):
    monkeypatch.setattr(eventlet, "listen", eventlet.listen)     # restored afterwards
    monkeypatch.setattr(listeners, "_original_listen", None)
    yield
    listeners.release()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reuseport(sock) -> int:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)


def test_eventlet_alone_lets_two_listeners_share_a_port():
    """Why listeners.py exists: what Ryu does without it."""
    port = free_port()
    first = eventlet.listen(("127.0.0.1", port))
    second = eventlet.listen(("127.0.0.1", port))     # no error: the port is shared
    try:
        assert reuseport(first) == 1 and reuseport(second) == 1
    finally:
        first.close()
        second.close()


def test_a_reserved_port_is_bound_without_reuseport_and_refused_to_a_second_one():
    port = free_port()
    listeners.reserve({"REST API": ("127.0.0.1", port)})
    held = listeners._held[("127.0.0.1", port)]
    assert reuseport(held) == 0
    with pytest.raises(listeners.PortInUse) as err:       # a second controller's start
        listeners.reserve({"REST API": ("127.0.0.1", port)})
    assert str(err.value) == (f"REST API 127.0.0.1:{port}: Address already in use (another "
                              f"process listens there: a second controller?)")
    with pytest.raises(OSError):          # nor can anyone share it with SO_REUSEPORT
        listeners._original_listen(("127.0.0.1", port), reuse_port=True)


def test_a_port_held_by_an_older_ryu_is_refused_and_nothing_stays_bound():
    rest, ofp = free_port(), free_port()
    older = eventlet.listen(("127.0.0.1", ofp))            # SO_REUSEPORT, as Ryu's own
    try:
        with pytest.raises(listeners.PortInUse, match=f"OpenFlow 127.0.0.1:{ofp}: Address "
                                                      "already in use"):
            listeners.reserve({"REST API": ("127.0.0.1", rest),
                               "OpenFlow": ("127.0.0.1", ofp)})
        assert listeners._held == {}
        with socket.socket() as s:                          # the REST port was let go
            s.bind(("127.0.0.1", rest))
    finally:
        older.close()


def test_ryu_is_handed_the_reserved_sockets():
    port = free_port()
    listeners.reserve({"OpenFlow": ("127.0.0.1", port)})
    held = listeners._held[("127.0.0.1", port)]
    server = hub.StreamServer(("127.0.0.1", port), lambda sock, addr: None)
    assert server.server is held and listeners._held == {}
    other = hub.StreamServer(("127.0.0.1", free_port()), lambda sock, addr: None)
    try:
        assert reuseport(other.server) == 0           # nor any other listener of Ryu's
    finally:
        other.server.close()
        held.close()


# ------------------------------------------------------------------ MalbController start-up
@pytest.fixture
def start_controller(monkeypatch, capsys):
    """MalbController(...) with MALB_CONFIG set; returns (exit code, stderr lines)."""

    def start(path):
        monkeypatch.setenv("MALB_CONFIG", path)
        monkeypatch.delenv("MALB_TOKEN", raising=False)
        with pytest.raises(SystemExit) as exc:
            MalbController(wsgi=WSGIApplication())
        return exc.value.code, capsys.readouterr().err.strip().splitlines()
    yield start
    for name in ("wsapi_host", "wsapi_port", "ofp_tcp_listen_port"):
        cfg.CONF.clear_override(name)


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
    assert listeners._held == {}
