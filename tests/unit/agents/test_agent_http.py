"""The host agent's HTTP server (GET /stats, /health, /metrics, GET and PUT /slo) over real
sockets on 127.0.0.1: it is common/httpjson's JsonServer, built the way `python -m agents`
builds it (agents.agent.http_server), so every error is JSON naming the problem, the limits
hold, and a rejected PUT /slo changes nothing."""
import json

import pytest

from agents.agent import MAX_BODY_BYTES, http_server
from tests.lib.agents import make_agent
from tests.lib.http_client import Client

J = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def agent_http():
    agent, slo, routes = make_agent()
    server = http_server(("127.0.0.1", 0), routes, name="agent-srv1")
    server.start_background()

    def call(method, path, body=b"", headers=None):
        # a new connection each call; Client reads the answer to an over-long body that the
        # server sent (and closed on) while the body was still going out
        client = Client(server.server_address)
        try:
            status, head, data = client.send(method, path, body, headers)
            return status, dict(head.items()), data
        finally:
            client.close()
    call.slo = slo
    yield call
    server.shutdown()
    server.server_close()
    agent.pool.shutdown()


def settings_of(slo):
    return slo.loops["ui"].settings, slo.loops["ui"].policy


def test_reads_answer(agent_http):
    for path in ("/stats", "/stats?window_s=3", "/health", "/slo"):
        status, headers, body = agent_http("GET", path)
        assert status == 200 and headers["Content-Type"] == "application/json", body
    status, headers, body = agent_http("GET", "/metrics")
    assert status == 200 and b"malb_agent_server_utilization_ratio" in body


@pytest.mark.parametrize("method, path, body, headers, status, message", [
    ("PUT", "/slo", b'{"service": "ui", "target_ms": 50}', {"Content-Type": "text/plain"},
     415, "Content-Type: expected application/json"),
    ("PUT", "/slo", b'{"service": "ui", "x": "' + b"a" * MAX_BODY_BYTES + b'"}', J, 413,
     "over the limit"),
    ("PUT", "/slo", b"[" * 1000 + b"]" * 1000, J, 400, "body: nested deeper than 32"),
    ("PUT", "/slo", b'{"service": "ui", "target_ms": 1e400}', J, 400,
     "target_ms: expected a finite number"),
    ("PUT", "/slo", b'{"service": "ui", "target_ms": 1' + b"0" * 400 + b'}', J, 400,
     "target_ms: expected a number of at most 1.8e308"),
    ("PUT", "/slo", b'{"service": "ui", "margin": NaN}', J, 400,
     "margin: expected a finite number"),
    ("PUT", "/slo", b'{"service": ["ui"], "target_ms": 50}', J, 400,
     "service: ['ui'] has no SLO loop on srv1"),
    ("PUT", "/slo", b'{"service": {"a": 1}, "target_ms": 50}', J, 400, "service:"),
    ("PUT", "/slo", b'{"service": "ui", "target_ms": 50, "colour": 1}', J, 400,
     "colour: unknown field"),
    ("PUT", "/slo", b'{"service": "ui", "band_mode": "\\ud800"}', J, 400,
     "band_mode: not valid Unicode"),
    ("PUT", "/slo", b'{"service": "ui", "target_ms": -1}', J, 400, "target_ms: expected > 0"),
    ("PUT", "/slo", b'{"service": "ui"', J, 400, "body is not valid JSON"),
    ("POST", "/slo", b'{"service": "ui", "target_ms": 50}', J, 405, "POST: not allowed"),
    ("DELETE", "/stats", b"", {}, 405, "DELETE: not allowed"),
    ("GET", "/nope", b"", {}, 404, "no such resource"),
    ("GET", "/stats?window_s=abc", b"", {}, 400, "window_s: expected seconds in (0, 600]"),
    ("GET", "/stats?window_s=0", b"", {}, 400, "window_s: expected seconds in (0, 600]"),
    ("GET", "/stats?window_s=nan", b"", {}, 400, "window_s: expected seconds"),
    ("GET", "/stats?window_s=601", b"", {}, 400, "window_s: expected seconds"),
    ("GET", "/stats?windows=3", b"", {}, 400, "windows: unknown query parameter"),
    ("GET", "/%ff%fe", b"", {}, 400, "path: not valid UTF-8"),
])
def test_errors_are_json_naming_the_problem_and_change_nothing(agent_http, method, path,
                                                               body, headers, status,
                                                               message):
    before = settings_of(agent_http.slo)
    got, answer_headers, answer = agent_http(method, path, body, headers)
    assert got == status, answer[:300]
    assert answer_headers["Content-Type"] == "application/json"
    assert b"Traceback" not in answer
    error = json.loads(answer)["error"]
    assert message in error and len(error) <= 400, error
    if status == 405:
        assert answer_headers["Allow"] == ("GET, HEAD, PUT" if path == "/slo" else "GET, HEAD")
    assert settings_of(agent_http.slo) == before
    assert agent_http("GET", "/health")[0] == 200


def test_a_good_put_still_changes_the_objective(agent_http):
    status, _, body = agent_http("PUT", "/slo", b'{"service": "ui", "target_ms": 70}', J)
    assert status == 200 and json.loads(body)["slo"]["target_ms"] == 70
    assert agent_http.slo.loops["ui"].settings.target_ms == 70
