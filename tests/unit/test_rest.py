"""The controller's REST API in-process (Ryu's WSGI application and our controllers, called
with webob requests; no ryu-manager): no traceback ever reaches a client, errors are JSON
naming the field, and a rejected request changes nothing."""
import json
import logging
from types import SimpleNamespace

import pytest
from ryu.app.wsgi import WSGIApplication
from webob import Request

from ryu_apps.rest import MAX_BODY_BYTES, allowed_methods, register_rest
from tests.unit.test_policy import make_core


@pytest.fixture
def rest():
    app = SimpleNamespace(core=make_core(), decisions=[], logger=logging.getLogger("t"),
                          flows=SimpleNamespace(idle_timeout=10, epoch="", flows={}),
                          status=lambda: 1 / 0)          # a bug, to see the 500
    wsgi = WSGIApplication()
    register_rest(wsgi, app)

    def call(method, path, body=None, raw=None, ctype="application/json"):
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        req = Request.blank(path, method=method, body=data)
        if data:
            req.content_type = ctype
        resp = req.get_response(wsgi)
        return resp.status_int, resp.headers, resp.body
    call.app = app
    return call


def error_of(answer) -> str:
    status, headers, body = answer
    assert headers["Content-Type"].startswith("application/json"), answer
    assert b"Traceback" not in body
    return json.loads(body)["error"]


@pytest.mark.parametrize("method, path, raw, status, message", [
    ("GET", "/malb/%ff", None, 400, "path: not valid UTF-8"),
    ("GET", "/%ff%fe", None, 400, "path: not valid UTF-8"),
    ("GET", "/malb/flows?active=%ff", None, 400, "active: not valid UTF-8"),
    ("GET", "/malb/flows?active=maybe", None, 400, "active: expected 1 or 0"),
    ("GET", "/malb/decisions?limit=%C2%B2", None, 400, "limit: expected a whole number"),
    ("PUT", "/malb/policy", b"[" * 1000 + b"]" * 1000, 400, "body: nested deeper"),
    ("PUT", "/malb/policy", b'{"policy": "srr", "x": 1}', 400, "'x': unknown field"),
    ("PUT", "/malb/policy", b'{"policy": ["srr"]}', 400, "policy: must be one of"),
    ("PUT", "/malb/policy", b'{"policy": "' + b"s" * 100_000 + b'"}', 400, "policy: must"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": 1e400, "beta": 1, "gamma": 0}}', 400,
     "video.alpha: expected a finite number"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": 1' + b"0" * 400 + b', "beta": 1, '
     b'"gamma": 0}}', 400, "video.alpha: expected a finite number"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": NaN, "beta": 1, "gamma": 0}}', 400,
     "video.alpha: expected a finite number"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": 1, "beta": 1, "gamma": 0, "d": 1}}', 400,
     "video.'d': unknown field"),
    ("PUT", "/malb/weights", b'{"vid\\ud800": null}', 400, "not valid Unicode"),
    ("PUT", "/malb/weights", b'{"video": null', 400, "not valid JSON"),
    ("PATCH", "/malb/policy", None, 405, "PATCH: not allowed on /malb/policy"),
    ("HEAD", "/malb/weights", None, 405, None),
    ("DELETE", "/malb/instances", None, 405, "DELETE: not allowed"),
    ("GET", "/nothing/here", None, 404, "no such resource"),
    ("OPTIONS", "/nothing", None, 404, None),
    ("GET", "/malb/status", None, 500, "internal error (ZeroDivisionError)"),
])
def test_no_traceback_ever_and_errors_name_the_field(rest, method, path, raw, status, message):
    before = (rest.app.core.policy, dict(rest.app.core.manual_weights))
    answer = rest(method, path, raw=raw)
    assert answer[0] == status, answer
    if method != "HEAD":
        error = error_of(answer)
        assert message is None or message in error, error
        assert len(error) < 400
    assert (rest.app.core.policy, dict(rest.app.core.manual_weights)) == before


def test_405_names_the_routes_methods_in_allow(rest):
    status, headers, body = rest("POST", "/malb/weights", {"video": None})
    assert status == 405 and headers["Allow"] == "GET, PUT"
    assert json.loads(body)["allowed"] == ["GET", "PUT"]
    assert allowed_methods("/malb/instances/srv1-ui") == ["DELETE", "PUT"]


def test_bodies_must_be_json_and_not_too_large(rest):
    assert rest("PUT", "/malb/policy", raw=b'{"policy": "srr"}', ctype="text/plain")[0] == 415
    big = b'{"policy": "' + b"x" * MAX_BODY_BYTES + b'"}'
    status, _, body = rest("PUT", "/malb/policy", raw=big)
    assert status == 413 and "over the limit" in json.loads(body)["error"]
    assert rest.app.core.policy == "malb"
    assert rest("PUT", "/malb/policy", {"policy": "srr"})[0] == 200
    assert rest.app.core.policy == "srr"


def test_huge_weights_are_scaled_not_overflowed(rest):
    """F7: 1e308 + 1e308 is inf; each share was then 0, and the weights fell back to equal."""
    status, _, body = rest("PUT", "/malb/weights",
                           {"video": {"alpha": 1e308, "beta": 1e308, "gamma": 0}})
    assert status == 200
    assert json.loads(body)["video"] == {"alpha": 0.5, "beta": 0.5, "gamma": 0.0,
                                         "source": "manual"}
    status, _, body = rest("PUT", "/malb/weights",
                           {"ui": {"alpha": 5e-324, "beta": 0, "gamma": 0}})
    assert json.loads(body)["ui"]["alpha"] == 1.0


def test_a_handler_bug_is_logged_once_with_its_details(rest, caplog):
    with caplog.at_level("ERROR", logger="malb.rest"):
        status, _, body = rest("GET", "/malb/status")
    assert status == 500 and b"ZeroDivisionError" in body and b"division" not in body
    records = [r for r in caplog.records if r.name == "malb.rest"]
    assert len(records) == 1 and "division by zero" in records[0].exc_text
