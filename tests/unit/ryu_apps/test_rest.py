"""The controller's REST API (ryu_apps/rest.py: its routes in the project's JsonServer, over a
stand-in for the app, real sockets on 127.0.0.1; no ryu-manager): no traceback ever reaches
a client, errors are JSON naming the field, and a rejected request changes nothing."""
import json
import re
import socket

import pytest

from common.httpjson import route_methods
from ryu_apps.rest import MAX_BODY_BYTES, routes
from tests.lib.rest_app import fake_app, served, state_of


@pytest.fixture
def rest():
    app = fake_app()
    with served(app) as client:
        def call(method, path, body=None, raw=None, ctype="application/json"):
            data = raw if raw is not None else \
                (b"" if body is None else json.dumps(body).encode())
            return client.send(method, path, data, {"Content-Type": ctype} if data else {})
        call.app = app
        yield call


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
    ("PUT", "/malb/policy", b'{"policy": "srr", "x": 1}', 400, "x: unknown field"),
    ("PUT", "/malb/policy", b'{"policy": "srr", "' + b"k" * 10_000 + b'": 1}', 400,
     "'... (10000 characters): unknown field"),
    ("PUT", "/malb/policy", b'{"policy": ["srr"]}', 400, "policy: must be one of"),
    ("PUT", "/malb/policy", b'{"policy": "' + b"s" * 100_000 + b'"}', 400, "policy: must"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": 1e400, "beta": 1, "gamma": 0}}', 400,
     "video.alpha: expected a finite number"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": 1' + b"0" * 400 + b', "beta": 1, '
     b'"gamma": 0}}', 400, "video.alpha: expected a number of at most 1.8e308"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": NaN, "beta": 1, "gamma": 0}}', 400,
     "video.alpha: expected a finite number"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": 1, "beta": 1, "gamma": 0, "d": 1}}', 400,
     "video.d: unknown field"),
    ("PUT", "/malb/weights", b'{"vid\\ud800": null}', 400, "not valid Unicode"),
    ("PUT", "/malb/weights", b'{"video": null', 400, "not valid JSON"),
    ("PUT", "/malb/weights", b'{"video": {"alpha": 1, "beta": 1}}', 400,
     "video.gamma: expected a finite number"),
    ("PUT", "/malb/weights", b'{"nosuch": null}', 400, "nosuch: unknown microservice"),
    ("PUT", "/malb/weights", b'{"video": [1, 2, 3]}', 400, "video: expected an object"),
    ("PUT", "/malb/weights", b'{}', 400, "body: expected"),
    ("PUT", "/malb/policy", b'{"policy": "srr"}' * 2, 400, "not valid JSON"),
    ("PUT", "/malb/policy", b'{"policy": "srr", "policy ": "ln"}', 400,
     "'policy ': unknown field"),
    ("GET", "/malb/status?verbose=1", None, 400, "verbose: unknown query parameter "
                                                 "(known: none)"),
    ("GET", "/malb/flows?actve=1", None, 400, "actve: unknown query parameter (known: "
                                              "active)"),
    ("GET", "/malb/flows?active=1&%ff=1", None, 400, "query: not valid UTF-8"),
    ("GET", "/malb/decisions?limit=0", None, 400, "limit: expected a whole number in "
                                                  "[1, 100000], got '0'"),
    ("GET", "/malb/decisions?limit=" + "9" * 5000, None, 400, "limit: expected a whole"),
    ("GET", "/malb/decisions?limit=" + "0" * 5000, None, 400, "limit: expected a whole"),
    ("PUT", "/malb/weights?x=%ff", b'{"video": null}', 400, "x: not valid UTF-8"),
    ("POST", "/malb/instances", b'{"instance": "srv9-ui"}', 400,
     "instance: no slot 'srv9-ui' in the configuration"),
    ("POST", "/malb/instances", b'{"instance": 5}', 400, "instance: expected a string"),
    ("POST", "/malb/instances", b'{"instance": "srv5-ui", "now": true}', 400,
     "now: unknown field (known: instance)"),
    ("POST", "/malb/instances", b'["srv5-ui"]', 400, "body: expected a JSON object"),
    ("POST", "/malb/instances", b'{}', 400, "instance: required"),
    ("PUT", "/malb/instances/srv1-ui", b'{"draining": "yes"}', 400,
     "draining: expected true or false, got 'yes'"),
    ("PUT", "/malb/instances/srv1-ui", b'{"draining": true, "x": 1}', 400,
     "x: unknown field (known: draining)"),
    ("PUT", "/malb/instances/srv9-ui", b'{"draining": true}', 404,
     "'srv9-ui': not in any pool"),
    ("DELETE", "/malb/instances/srv1-ui?force=maybe", None, 400,
     "force: expected 1 or 0, got 'maybe'"),
    ("DELETE", "/malb/instances/srv1-ui?forced=1", None, 400, "forced: unknown query"),
    ("DELETE", "/malb/instances/srv9-ui", None, 404, "not in any pool"),
    ("GET", "/nothing/here?x=1", None, 404, "no such resource"),
    ("PATCH", "/malb/policy", None, 405, "PATCH: not allowed on /malb/policy"),
    ("HEAD", "/malb/instances/srv1-ui", None, 405, None),
    ("DELETE", "/malb/instances", None, 405, "DELETE: not allowed"),
    ("GET", "/nothing/here", None, 404, "no such resource"),
    ("GET", "/%0a%00", None, 404, "no such resource"),
    ("DELETE", "/malb/x%0ay", None, 404, "no such resource"),
    ("OPTIONS", "/nothing", None, 404, None),
    ("GET", "/malb/status", None, 500, "internal error (ZeroDivisionError)"),
])
def test_no_traceback_ever_and_errors_name_the_field(rest, method, path, raw, status, message):
    before = state_of(rest.app)
    answer = rest(method, path, raw=raw)
    assert answer[0] == status, answer
    if method != "HEAD":
        error = error_of(answer)
        assert message is None or message in error, error
        assert len(error) < 400
    assert state_of(rest.app) == before


def test_405_names_the_routes_methods_in_allow(rest):
    status, headers, body = rest("POST", "/malb/weights", {"video": None})
    assert status == 405 and headers["Allow"] == "GET, HEAD, PUT"
    assert json.loads(body)["allowed"] == ["GET", "HEAD", "PUT"]
    assert route_methods(routes(rest.app), "/malb/instances/srv1-ui") == ["DELETE", "PUT"]


def test_head_answers_wherever_get_does_with_the_gets_headers_and_no_body(rest):
    for path in ("/malb/policy", "/malb/weights", "/malb/decisions"):
        get, head = rest("GET", path), rest("HEAD", path)
        assert get[0] == head[0] == 200 and head[2] == b""
        assert head[1]["Content-Type"] == get[1]["Content-Type"]


def test_the_live_view_is_one_page_that_loads_nothing_from_elsewhere(rest):
    status, headers, body = rest("GET", "/malb/view")
    page = body.decode()
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    # no external asset: every URL it names is this server's own REST API
    assert not re.search(r"(src|href)=\"(?!data:)", page)
    assert set(re.findall(r"getJson\(`?\"?(/[a-z/]+)", page)) == {"/malb/status",
                                                                  "/malb/decisions"}
    assert rest("GET", "/malb/view?x=1")[0] == 400
    assert rest("PUT", "/malb/view", {})[0] == 405


def test_bodies_must_be_json_and_not_too_large(rest):
    assert rest("PUT", "/malb/policy", raw=b'{"policy": "srr"}', ctype="text/plain")[0] == 415
    big = b'{"policy": "' + b"x" * MAX_BODY_BYTES + b'"}'
    status, _, body = rest("PUT", "/malb/policy", raw=big)
    assert status == 413 and "over the limit" in json.loads(body)["error"]
    assert rest.app.policy_core.policy == "malb"
    assert rest("PUT", "/malb/policy", {"policy": "srr"})[0] == 200
    assert rest.app.policy_core.policy == "srr"


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
    status, _, body = rest("PUT", "/malb/weights",
                           {"ui": {"alpha": -0.0, "beta": 1, "gamma": 0}})
    assert b"-0.0" not in body and json.loads(body)["ui"]["alpha"] == 0.0


def test_a_handler_bug_is_logged_once_with_its_details(rest, caplog):
    with caplog.at_level("ERROR", logger="malb.http"):
        status, _, body = rest("GET", "/malb/status")
    assert status == 500 and b"ZeroDivisionError" in body and b"division" not in body
    records = [r for r in caplog.records if r.name == "malb.http"]
    assert len(records) == 1 and "division by zero" in records[0].exc_text


def test_good_requests_still_pass_every_check(rest):
    assert rest("GET", "/malb/flows?active=1")[0] == 200
    assert rest("GET", "/malb/decisions?limit=5&microservice=ui")[0] == 200
    assert rest("GET", "/malb/decisions?limit=" + "0" * 5000 + "7")[0] == 200
    assert rest("POST", "/malb/instances", {"instance": "srv5-ui"})[0] == 201
    assert rest("PUT", "/malb/instances/srv1-ui", {"draining": True})[0] == 200
    assert rest("DELETE", "/malb/instances/srv1-ui?force=1")[0] == 200
    assert rest.app.calls == [("add", "srv5-ui"), ("drain", "srv1-ui", True),
                              ("remove", "srv1-ui")]
    status, _, body = rest("PUT", "/malb/weights", {"video": {"alpha": 1, "beta": 3,
                                                              "gamma": 0}, "ui": None})
    assert status == 200 and json.loads(body)["video"]["beta"] == 0.75


def test_a_batch_of_weights_with_one_bad_entry_changes_none_of_them(rest):
    rest("PUT", "/malb/weights", {"ui": {"alpha": 1, "beta": 0, "gamma": 0}})
    before = state_of(rest.app)
    status, _, body = rest("PUT", "/malb/weights",
                           raw=b'{"ui": null, "video": {"alpha": 1, "beta": 1, "gamma": 0},'
                               b' "backend": {"alpha": 1e400, "beta": 0, "gamma": 0}}')
    assert status == 400 and "backend.alpha: expected a finite number" in error_of(
        (status, {"Content-Type": "application/json"}, body))
    assert state_of(rest.app) == before and "ui" in rest.app.policy_core.profiles.manual_weights


def raw_exchange(address, data: bytes) -> tuple[int, bytes]:
    """Raw bytes on one connection (what http.client will not send): (status, body)."""
    with socket.create_connection(address, timeout=5) as s:
        s.sendall(data)
        f = s.makefile("rb")
        status = int(f.readline().split()[1])
        length = 0
        while (line := f.readline().rstrip(b"\r\n")):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return status, f.read(length)


def test_the_http_layer_is_the_hardened_one_versions_headers_and_slashes():
    """What Ryu's WSGI server let through, now answered as every JsonServer does."""
    with served(fake_app()) as client:
        status, body = raw_exchange(client.address,
                                    b"GET /malb/policy HTTP/9.9\r\nHost: x\r\n\r\n")
        assert status == 505 and "only HTTP/1.0 and HTTP/1.1" in json.loads(body)["error"]
        big = b"X-Big: " + b"a" * (40 * 1024) + b"\r\n"
        status, body = raw_exchange(client.address,
                                    b"GET /malb/policy HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n")
        assert status == 431 and "Too Large" in json.loads(body)["error"]
        status, _, body = client.send("GET", "//malb/policy")
        assert status == 404 and "no such resource" in json.loads(body)["error"]
        status, headers, body = client.send("HEAD", "/malb/policy")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
