"""The optional shared token (security.token, or $MALB_TOKEN): when set, every write route
(POST, PUT, DELETE) of the controller's REST API, the profiler, the agents and the testbed's
control API answers 401 JSON without it; reads stay open; the project's clients send it."""
import hmac
import json
import socket
import urllib.request
from types import SimpleNamespace

import pytest

import common.httpjson as httpjson
from common.config import DEFAULT_MICROSERVICES, ConfigError, load_config, parse_config, \
    with_token_from_environment
from common.httpjson import HttpError, JsonServer, check_token, delete_json, get_json, \
    post_json, put_json
from experiments.stack import Stack
from placement.apply import ControllerClient, RemoteTestbed
from tests.lib.rest_app import fake_app, served, state_of
from topologies.__main__ import start_control
from topologies.testbed import Testbed

TOKEN = "s3cret-token-0123456789"
J = "application/json"


# ------------------------------------------------------------------ configuration
def test_the_token_is_optional_and_checked_without_being_shown():
    assert parse_config({}).security.token is None
    cfg = parse_config({"security": {"token": TOKEN}})
    assert cfg.security.token == TOKEN and TOKEN not in repr(cfg)
    for bad, got in (("short", "5 characters"), ("with a space in it, long enough",
                                                 "not all visible ASCII"),
                     (12345678901234567890, "int"), ("é" * 20, "not all visible ASCII")):
        with pytest.raises(ConfigError) as err:
            parse_config({"security": {"token": bad}})
        message = str(err.value)
        assert message.startswith("security.token: expected 16 to 256 visible ASCII")
        assert got in message and str(bad) not in message and "\n" not in message
    with pytest.raises(ConfigError, match="security.tokens: unknown field"):
        parse_config({"security": {"tokens": TOKEN}})


def test_malb_token_overrides_the_file(config_file, monkeypatch):
    path = config_file({"microservices": DEFAULT_MICROSERVICES,
                        "security": {"token": "from-the-file-0123456789"}})
    monkeypatch.delenv("MALB_TOKEN", raising=False)
    assert load_config(path).security.token == "from-the-file-0123456789"
    monkeypatch.setenv("MALB_TOKEN", TOKEN)
    assert load_config(path).security.token == TOKEN
    monkeypatch.setenv("MALB_TOKEN", "")                   # empty: not set
    assert load_config(path).security.token == "from-the-file-0123456789"
    monkeypatch.setenv("MALB_TOKEN", "tiny")
    with pytest.raises(ConfigError, match="MALB_TOKEN: expected 16 to 256") as err:
        load_config(path)
    assert "tiny" not in str(err.value)
    # configurations built in code (tests, benchmarks) are not touched by the environment
    monkeypatch.setenv("MALB_TOKEN", TOKEN)
    assert parse_config({}).security.token is None
    assert with_token_from_environment(parse_config({}), {"MALB_TOKEN": TOKEN}) \
        .security.token == TOKEN


# ------------------------------------------------------------------ the JSON servers
@pytest.fixture
def guarded():
    state = []

    def post(_q, body):
        state.append(body)
        return 200, {"stored": len(state)}
    srv = JsonServer(("127.0.0.1", 0), {("POST", "/x"): post, ("DELETE", "/x"): post,
                                        ("GET", "/x"): lambda q, b: (200, {"n": len(state)})},
                     name="guarded", token=TOKEN)
    srv.start_background()
    srv.state = state
    srv.url = "http://%s:%d" % srv.server_address
    yield srv
    srv.shutdown()
    srv.server_close()


def send(srv, method, path, body=b"", headers=None):
    req = urllib.request.Request(srv.url + path, data=body or None, method=method,
                                 headers={"Content-Type": J, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers, json.load(r)        # headers: any case
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, json.loads(exc.read())


@pytest.mark.parametrize("headers, message", [
    ({}, "Authorization: POST needs the token"),
    ({"Authorization": "Bearer wrong-token-0123456789"}, "Authorization: wrong token"),
    ({"Authorization": f"Basic {TOKEN}"}, "Authorization: POST needs the token"),
    ({"Authorization": "Bearer"}, "Authorization: POST needs the token"),
    ({"X-MALB-Token": TOKEN[:-1]}, "Authorization: wrong token"),
    ({"X-MALB-Token": TOKEN + "x"}, "Authorization: wrong token"),
])
def test_a_write_without_the_token_is_a_401_and_changes_nothing(guarded, headers, message):
    status, answer_headers, body = send(guarded, "POST", "/x", b'{"a": 1}', headers)
    assert status == 401 and message in body["error"], body
    assert answer_headers["WWW-Authenticate"].startswith("Bearer")
    assert answer_headers["Content-Type"] == J and TOKEN not in json.dumps(body)
    assert guarded.state == []


def test_the_right_token_in_either_header_passes_and_reads_stay_open(guarded):
    assert send(guarded, "GET", "/x")[0] == 200
    assert send(guarded, "POST", "/x", b'{"a": 1}', {"Authorization": f"Bearer {TOKEN}"})[0] \
        == 200
    assert send(guarded, "POST", "/x", b'{"a": 2}', {"authorization": f"bearer  {TOKEN}"})[0] \
        == 200
    assert send(guarded, "DELETE", "/x", b"", {"X-MALB-Token": TOKEN})[0] == 200
    assert guarded.state == [{"a": 1}, {"a": 2}, None]


def test_404_and_405_come_before_401_and_the_body_is_checked_after(guarded):
    assert send(guarded, "POST", "/nope", b"{}")[0] == 404
    status, headers, _ = send(guarded, "PUT", "/x", b"{}")
    assert status == 405 and headers["Allow"] == "DELETE, GET, HEAD, POST"
    assert send(guarded, "POST", "/x", b"[" * 100)[0] == 401       # not parsed without it
    assert send(guarded, "POST", "/x", b"[" * 100, {"X-MALB-Token": TOKEN})[0] == 400


def test_the_comparison_is_constant_time(monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)
    monkeypatch.setattr(httpjson.hmac, "compare_digest", spy)
    check_token(TOKEN, "PUT", f"Bearer {TOKEN}", None)
    with pytest.raises(httpjson.HttpProblem):
        check_token(TOKEN, "PUT", None, "x")
    assert calls == [(32, 32), (32, 32)]        # digests: not even the length shows
    check_token(TOKEN, "GET", None, None)          # reads: nothing to check
    check_token(None, "PUT", None, None)           # no token configured: open
    assert len(calls) == 2


def test_the_clients_send_the_token(guarded):
    with pytest.raises(HttpError, match="HTTP 401"):
        post_json(guarded.url + "/x", {"a": 1})
    assert post_json(guarded.url + "/x", {"a": 1}, token=TOKEN) == {"stored": 1}
    assert delete_json(guarded.url + "/x", token=TOKEN) == {"stored": 2}
    assert get_json(guarded.url + "/x") == {"n": 2}


# ------------------------------------------------------------------ each server and client
def test_the_controller_rest_api_requires_it_on_writes():
    app = fake_app()
    app.token = TOKEN
    with served(app) as client:
        _the_controller_rest_api_requires_it_on_writes(app, client)


def _the_controller_rest_api_requires_it_on_writes(app, client):
    def call(method, path, body=b"", headers=None):
        return client.send(method, path, body,
                           {**({"Content-Type": J} if body else {}), **(headers or {})})
    before = state_of(app)
    for method, path, body in (("PUT", "/malb/policy", b'{"policy": "srr"}'),
                               ("PUT", "/malb/weights", b'{"ui": null}'),
                               ("POST", "/malb/instances", b'{"instance": "srv5-ui"}'),
                               ("PUT", "/malb/instances/srv1-ui", b'{"draining": true}'),
                               ("DELETE", "/malb/instances/srv1-ui", b"")):
        status, headers, answer = call(method, path, body)
        assert status == 401, (method, path, answer)
        assert "needs the token" in json.loads(answer)["error"]
        assert headers["WWW-Authenticate"].startswith("Bearer")
        status, _, answer = call(method, path, body, {"Authorization": "Bearer nope"})
        assert status == 401 and b"wrong token" in answer
    assert state_of(app) == before
    assert call("GET", "/malb/policy")[0] == 200
    assert call("PATCH", "/malb/policy")[0] == 405 and call("PUT", "/nope")[0] == 404
    assert call("PUT", "/malb/policy", b'{"policy": "srr"}', {"X-MALB-Token": TOKEN})[0] == 200
    assert call("DELETE", "/malb/instances/srv1-ui", b"",
                {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert app.policy_core.policy == "srr" and app.calls == [("remove", "srv1-ui")]


def test_an_agent_requires_it_on_put_slo():
    # deferred: the Docker SDK (agents.agent imports it), only for the agent's test
    from agents.agent import http_server
    from tests.lib.agents import make_agent   # deferred: as above

    agent, slo, routes = make_agent()
    server = http_server(("127.0.0.1", 0), routes, name="agent", token=TOKEN)
    server.start_background()
    url = "http://%s:%d" % server.server_address
    try:
        with pytest.raises(HttpError, match="HTTP 401.*needs the token"):
            put_json(f"{url}/slo", {"service": "ui", "target_ms": 50})
        assert slo.loops["ui"].settings.target_ms == 80
        assert put_json(f"{url}/slo", {"service": "ui", "target_ms": 50},
                        token=TOKEN)["slo"]["target_ms"] == 50
        assert get_json(f"{url}/slo")["services"]["ui"]["slo"]["target_ms"] == 50
    finally:
        server.shutdown()
        server.server_close()
        agent.pool.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_testbed_control_api_requires_it_and_placement_sends_it():
    """topologies' control API as start_control serves it, and placement's clients of the
    controller and of that API with the configured token."""
    cfg = parse_config({"servers": {"count": 2}, "security": {"token": TOKEN},
                        "testbed": {"control_port": free_port()}})
    started = []
    fake = SimpleNamespace(cfg=cfg, deployed=set(), add_instance=started.append,
                           remove_instance=lambda name: started.remove(name),
                           wait_services=lambda timeout, which: [])
    fake.control_routes = lambda: Testbed.control_routes(fake)
    server = start_control(fake)
    url = f"http://127.0.0.1:{cfg.testbed.control_port}"
    try:
        with pytest.raises(HttpError, match="HTTP 401"):
            RemoteTestbed(url).start(cfg.slot("srv1", "ui"))
        with pytest.raises(HttpError, match="HTTP 400.*instance: no slot"):
            post_json(f"{url}/instances", {"instance": ["x"]}, token=TOKEN)    # was a 500
        RemoteTestbed(url, token=TOKEN).start(cfg.slot("srv1", "ui"))
        assert [i.name for i in started] == ["srv1-ui"]
    finally:
        server.shutdown()
        server.server_close()

    seen = []

    def route(method):
        def handler(_q, body):
            seen.append(method)
            return 200, {"instances": {}} if method == "GET" else {}
        return handler
    controller = JsonServer(("127.0.0.1", 0), {
        ("GET", "/malb/instances"): route("GET"), ("POST", "/malb/instances"): route("POST"),
        ("PUT", "/malb/instances/srv1-ui"): route("PUT"),
        ("DELETE", "/malb/instances/srv1-ui"): route("DELETE"),
        ("PUT", "/malb/policy"): route("PUT policy")}, token=TOKEN)
    controller.start_background()
    try:
        url = "http://%s:%d" % controller.server_address
        with pytest.raises(HttpError, match="HTTP 401"):
            ControllerClient(url).add("srv1-ui")
        client = ControllerClient(url, token=TOKEN)
        client.add("srv1-ui")
        client.drain("srv1-ui")
        client.remove("srv1-ui", force=True)
        client.set_policy("malb-near")
        assert client.layout() == {}
        assert seen == ["POST", "PUT", "DELETE", "PUT policy", "GET"]
    finally:
        controller.shutdown()
        controller.server_close()


def test_the_experiments_stack_sends_it_to_the_controller(tmp_path):
    policies = []
    rest = JsonServer(("127.0.0.1", 0), {("PUT", "/malb/policy"): lambda q, b: (
        policies.append(b["policy"]) or 200, {"policy": b["policy"]})}, token=TOKEN)
    rest.start_background()
    try:
        st = Stack({}, str(tmp_path))
        st.cfg = parse_config({"controller": {"rest_port": rest.server_address[1]},
                               "security": {"token": TOKEN}})
        assert st.controller_put("/malb/policy", {"policy": "ln"}) == (200, {"policy": "ln"})
        st.cfg = parse_config({"controller": {"rest_port": rest.server_address[1]}})
        assert st.controller_put("/malb/policy", {"policy": "srr"})[0] == 401
        assert policies == ["ln"]
    finally:
        rest.shutdown()
        rest.server_close()
