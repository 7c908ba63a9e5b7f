"""Fuzzing the project's HTTP servers (issue 14): thousands of generated bad requests to
- the profiler (an in-process ProfilerService behind its JsonServer, over real sockets on
  127.0.0.1),
- a host agent (its server as agents.agent.http_server builds it, with the SLO routes, over
  real sockets),
- the controller's REST API (ryu_apps/rest.py's server over a stand-in for the app, over
  real sockets on 127.0.0.1; no ryu-manager).
Each must get a 4xx JSON answer whose "error" names the problem (the field, the parameter,
the header), never a 5xx or a traceback; each server must keep answering and what it held
before must be unchanged (checked when its module fixture ends, followed by a good request
that must still work). Hypothesis runs derandomized (a fixed seed) without its example
database: the same cases on every run; a tenth of the counts below unless MALB_FUZZ=thorough
(tests/lib/fuzzing.py; about 12 s in all when thorough).

    .venv/bin/python -m pytest tests/unit/test_fuzz_http.py -q
    MALB_FUZZ=thorough .venv/bin/python -m pytest tests/unit/test_fuzz_http.py -q
"""
import json
import socket
from urllib.parse import unquote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from common.config import parse_config
from common.httpjson import JsonServer
from profiler.service import FLOW_FIELDS, ProfilerService
from profiler.store import HistoryStore
from tests.lib.fuzzing import examples
from tests.lib.http_client import Client
from tests.lib.rest_app import fake_app, served, state_of

EXAMPLES = examples(700)   # per profiler test: about 2,400 requests when thorough
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def profiler():
    cfg = parse_config({"servers": {"count": 2}, "profiler": {"period_s": 3}})
    service = ProfilerService(cfg, store=HistoryStore(":memory:", 3600), collector=dict,
                              clock=lambda: 1000.0)
    server = JsonServer(("127.0.0.1", 0), service.routes(), name="fuzz")
    server.start_background()
    client = Client(server.server_address)
    # earlier state: an active flow, a completed one, a port list
    status, _, _ = client.send("POST", "/flows", json.dumps({
        "flows": [good_record(flow_id="active-1"), good_record(flow_id="done-1", active=False)],
        "ports": [{"dpid": 1, "port": 1}]}).encode(), {"Content-Type": "application/json"})
    assert status == 200
    before = snapshot(service)
    yield service, client, server.server_address
    assert snapshot(service) == before, "a rejected request changed the profiler"
    # still answering, and still taking good input
    assert client.send("GET", "/health")[0] == 200
    status, _, body = client.send("POST", "/flows", json.dumps(
        {"flows": [good_record(flow_id="done-1", active=False)]}).encode(),
        {"Content-Type": "application/json"})
    assert status == 200 and json.loads(body)["completed"] == 1
    server.shutdown()
    server.server_close()
    service.stop()


def good_record(**kw):
    return {"flow_id": "f", "microservice": "ui", "server": "srv1", "instance": "srv1-ui",
            "client": "10.0.0.9:1", "protocol": "tcp", "duration_s": 0.5, "bytes": 1,
            "bytes_to_server": 1, "bytes_to_client": 0, "packets": 1, "active": True,
            "end_reason": None, **kw}


def snapshot(service):
    f = service.model.flows
    return (dict(f.seen), {k: list(v) for k, v in f.completed.items()},
            json.dumps(service.model.ports), service.store.counts(),
            service.store.completed_flows())


def expect_error(answer, *names):
    status, headers, body = answer
    assert 400 <= status < 500, (status, body[:300])
    assert headers.get("Content-Type") == "application/json", headers
    assert b"Traceback" not in body and b'File "' not in body
    error = json.loads(body)["error"]
    assert isinstance(error, str) and len(error) <= 400
    assert any(n in error for n in names), (names, error)
    return error


# ------------------------------------------------------------------ generated bad values
def raw(text):            # a JSON fragment as it appears in the body (1e400, NaN, \ud800)
    return st.just(text)


SURROGATE = st.sampled_from(['"s\\ud800"', '"\\udfff"', '"a\\udc00b"'])
NONFINITE = st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "-Infinity",
                             "1" + "0" * 400 + ".0", "1" + "0" * 400])   # an int past floats
JUNK = st.one_of(st.sampled_from(["[]", "{}", "[1, 2]", '{"a": 1}', "[" * 40 + "]" * 40]),
                 NONFINITE, SURROGATE)
TEXT = st.text(max_size=30).map(json.dumps)
BIG_TEXT = st.integers(100, 5000).map(lambda n: json.dumps("x" * n))
NOT_A_COUNT = st.one_of(st.integers(max_value=-1), st.integers(min_value=2 ** 63),
                        st.floats(allow_nan=False, allow_infinity=False).filter(
                            lambda v: v != int(v)), TEXT, raw("true"), raw("null"))
BAD = {
    "flow_id": st.one_of(raw("null"), raw('""'), st.integers(), raw("false"), JUNK),
    "microservice": st.one_of(raw("null"), raw('""'), st.integers(), JUNK),
    "server": st.one_of(st.integers(), raw("true"), JUNK),
    "instance": st.one_of(st.floats(allow_nan=False, allow_infinity=False), JUNK),
    "client": st.one_of(st.integers(), JUNK),
    "protocol": st.one_of(st.integers(), raw("false"), JUNK),
    "end_reason": st.one_of(st.integers(), JUNK),
    "duration_s": st.one_of(st.floats(max_value=-1e-9, allow_nan=False,
                                      allow_infinity=False), TEXT, BIG_TEXT, raw("null"),
                            raw("true"), JUNK),
    "bytes": st.one_of(NOT_A_COUNT, JUNK),
    "packets": st.one_of(NOT_A_COUNT, JUNK),
    "bytes_to_server": st.one_of(NOT_A_COUNT, JUNK),
    "bytes_to_client": NOT_A_COUNT,
    "active": st.one_of(st.integers(), TEXT, raw("null"), JUNK),
}
assert set(BAD) == FLOW_FIELDS
HOLE = "__FUZZ_HOLE__"


@FUZZ
@given(st.integers(1, 4), st.data())
def test_a_bad_field_anywhere_in_a_batch_is_a_400_naming_it(profiler, n, data):
    service, client, _ = profiler
    k = data.draw(st.integers(0, n - 1), "index")
    records = [good_record(flow_id=f"new-{i}", active=bool(i % 2)) for i in range(n)]
    if data.draw(st.booleans(), "unknown field instead"):
        key = data.draw(st.text(min_size=1, max_size=20).filter(
            lambda s: s not in FLOW_FIELDS), "key")
        records[k][key] = HOLE
        fragment, names = '"x"', (f"flows[{k}].", "not valid Unicode")
    else:
        field = data.draw(st.sampled_from(sorted(BAD)), "field")
        fragment = data.draw(BAD[field], "value")
        if not isinstance(fragment, str):
            fragment = json.dumps(fragment)
        records[k][field] = HOLE
        names = (f"flows[{k}].{field}", f"flows[{k}]: nested", "body: nested")
    body = json.dumps({"flows": records}).replace(json.dumps(HOLE), fragment, 1).encode()
    answer = client.send("POST", "/flows", body, {"Content-Type": "application/json"})
    error = expect_error(answer, *names)
    if "unknown field instead" and "unknown" in error:
        assert "unknown field" in error


@pytest.mark.parametrize("where", ["flows[0].duration_s", "time", "pairs.interval_s"])
def test_an_integer_past_a_floats_range_is_a_400_not_a_crash(profiler, where):
    """JSON's integers have no limit; 10^400 is no float (math.isfinite raises on it)."""
    _, client, _ = profiler
    huge = "1" + "0" * 400
    body = {"flows": [good_record(flow_id="huge")]}
    if where == "time":
        body["time"] = HOLE
    elif where == "pairs.interval_s":
        body["pairs"] = {"interval_s": HOLE, "edges": []}
    else:
        body["flows"][0]["duration_s"] = HOLE
    text = json.dumps(body).replace(json.dumps(HOLE), huge, 1).encode()
    expect_error(client.send("POST", "/flows", text, {"Content-Type": "application/json"}),
                 where)


def _not_an_object(body: bytes) -> bool:
    """Random bytes that happen to be a JSON object ({} is an empty report, a valid body)
    are not a wrong shape."""
    try:
        return not isinstance(json.loads(body), dict)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return True


BODIES = st.one_of(
    st.binary(max_size=200).filter(lambda b: b.strip() != b"" and _not_an_object(b)),
    st.sampled_from([b"[]", b"5", b'"flows"', b"null", b"true", b'{"flows": {}}',
                     b'{"flows": "x"}', b'{"ports": 5}', b'{"pairs": []}',
                     b'{"pairs": {"interval_s": -1, "edges": []}}',
                     b'{"pairs": {"interval_s": 1, "edges": [{"src": "a"}]}}',
                     b'{"time": NaN}', b'{"source": 5}', b'{"flows": [], "x": 1}',
                     b"[" * 5000, b"{" * 50 + b"}" * 50, b'{"flows": [' + b"[" * 40 + b"]" * 40
                     + b"]}"]),
    st.dictionaries(st.text(max_size=8), st.integers(), min_size=1).filter(
        lambda d: not set(d) <= {"flows", "ports", "pairs", "source", "time"}).map(
        lambda d: json.dumps(d).encode()),
)


@FUZZ
@given(BODIES)
def test_bodies_of_the_wrong_shape_are_400s(profiler, body):
    _, client, _ = profiler
    answer = client.send("POST", "/flows", body, {"Content-Type": "application/json"})
    expect_error(answer, "body", "flows", "ports", "pairs", "time", "source", "unknown field",
                 "not valid JSON", "nested")


def _percent_encoded(path: str) -> str:
    """Every character but ASCII letters and digits percent-encoded (a '/' too)."""
    return "/" + "".join(c if c.isascii() and c.isalnum() else
                         "".join(f"%{b:02x}" for b in c.encode()) for c in path[1:])


def _served_as(quoted: str) -> str:
    """The route a percent-encoded path reaches: waitress decodes it and folds leading
    slashes into one ('/%2fservers' is '/servers'); our dispatch drops trailing ones."""
    path = "/" + unquote(quoted).lstrip("/")
    return path.rstrip("/") or "/"


# the Allow header of each route: HEAD wherever GET is
ROUTES = {"/profiles": "GET, HEAD", "/servers": "GET, HEAD", "/graph": "GET, HEAD",
          "/flows": "POST", "/links": "GET, HEAD", "/history": "GET, HEAD",
          "/health": "GET, HEAD", "/metrics": "GET, HEAD"}
METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])


def test_encoded_slashes_reach_the_route_they_spell(profiler):
    """The cases the fuzzer once drew that the path oracle must model: an encoded slash
    at either end is the route itself, one inside a path is not."""
    _, client, _ = profiler
    for quoted in ("/servers%2f", "/%2fservers", "/%2f%2fservers%2F"):
        assert _served_as(quoted) == "/servers"
        assert client.send("GET", quoted)[0] == 200, quoted
    assert _served_as("/servers%2fx") == "/servers/x"
    expect_error(client.send("GET", "/servers%2fx"), "no such resource")


@FUZZ
@given(st.data())
def test_wrong_paths_methods_queries_and_content_types_are_named(profiler, data):
    _, client, _ = profiler
    case = data.draw(st.sampled_from(["path", "method", "ctype", "history"]), "case")
    if case == "path":
        path = "/" + data.draw(st.text(st.characters(blacklist_categories=("Cs",)),
                                       max_size=30), "path")
        quoted = _percent_encoded(path)
        if _served_as(quoted) in ROUTES:
            return
        expect_error(client.send("GET", quoted), "no such resource")
    elif case == "method":
        path = data.draw(st.sampled_from(sorted(ROUTES)), "route")
        method = data.draw(METHODS.filter(lambda m: m not in ROUTES[path].split(", ")),
                           "method")
        status, headers, body = client.send(method, path, b'{"flows": []}',
                                            {"Content-Type": "application/json"})
        assert status == 405 and headers["Allow"] == ROUTES[path]
        if method != "HEAD":
            expect_error((status, headers, body), "not allowed")
    elif case == "ctype":
        ctype = data.draw(st.one_of(
            st.sampled_from(["text/plain", "application/x-www-form-urlencoded",
                             "multipart/form-data; boundary=x", "", "application/jsonx"]),
            st.from_regex(r"[a-z]{1,8}/[a-z]{1,8}", fullmatch=True).filter(
                lambda c: c != "application/json" and not c.endswith("+json"))), "ctype")
        expect_error(client.send("POST", "/flows", b'{"flows": []}',
                                 {"Content-Type": ctype} if ctype else {}), "Content-Type")
    else:
        query = {"kind": "server", "key": "srv1", "column": "cpu"}
        bad = data.draw(st.sampled_from(["kind", "column", "since", "unknown", "missing"]))
        if bad == "since":
            query["since"] = data.draw(st.one_of(
                st.text(min_size=1, max_size=40).filter(lambda s: not _is_finite(s)),
                st.sampled_from(["nan", "inf", "-inf", "1e400", "²", "x" * 5000])))
        elif bad == "unknown":
            query[data.draw(st.text(min_size=1, max_size=10).filter(
                lambda s: s not in query and s != "since"))] = "1"
        elif bad == "missing":
            del query[data.draw(st.sampled_from(sorted(query)))]
        else:
            query[bad] = data.draw(st.text(max_size=40).filter(
                lambda s: s not in ("server", "microservice", "container", "edge", "cpu",
                                    "mem", "net", "age_s", "stale")))
        expect_error(client.send("GET", "/history?" + urlencode(query)),
                     bad if bad in ("kind", "column", "since") else
                     "unknown query parameter" if bad == "unknown" else "required")


def _is_finite(s):
    try:
        v = float(s)
    except ValueError:
        return False
    return v == v and abs(v) != float("inf")


@settings(max_examples=examples(300), derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=300))
def test_garbage_on_the_socket_gets_a_4xx_or_a_hang_up(profiler, garbage):
    _, _, address = profiler
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(garbage + b"\r\n\r\n")
        s.shutdown(socket.SHUT_WR)        # an unfinished request ends at the hang-up
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    if not answer:
        return
    assert b"Traceback" not in answer
    first = answer.split(b"\r\n", 1)[0].split()
    status = int(first[1])
    assert 400 <= status < 500 or (status == 501 and b"transfer-encoding" in garbage.lower()), \
        answer[:300]
    assert b'{"error": ' in answer


# ------------------------------------------------------------------ the host agent
# Its server as `python -m agents` builds it (agents.agent.http_server), with the SLO loop
# routes of tests/unit/agents/test_agent_http.py: GET /stats, /health, /metrics, GET and PUT /slo.
AGENT_EXAMPLES = examples(400)


@pytest.fixture(scope="module")
def agent():
    # deferred: the Docker SDK (agents.agent imports it), only for the agent's tests
    from agents.agent import http_server
    from tests.lib.agents import make_agent   # deferred: as above

    agent, slo, routes = make_agent()
    agent.period_s = 3600.0           # its one sample stays fresh: /health answers 200
    server = http_server(("127.0.0.1", 0), routes, name="fuzz-agent")
    server.start_background()
    client = Client(server.server_address)
    before = slo_state(slo)
    yield slo, client
    assert slo_state(slo) == before, "a rejected PUT /slo changed the loop"
    for path in ("/health", "/stats", "/slo"):
        assert client.send("GET", path)[0] == 200
    status, _, body = client.send("PUT", "/slo", b'{"service": "ui", "target_ms": 70}',
                                  {"Content-Type": "application/json"})
    assert status == 200 and slo.loops["ui"].settings.target_ms == 70
    server.shutdown()
    server.server_close()
    agent.pool.shutdown()


def slo_state(slo):
    return slo.loops["ui"].settings, slo.loops["ui"].policy


def _not(*good):
    return lambda text: json.loads(text) not in good


FINITE = st.floats(allow_nan=False, allow_infinity=False)
SLO_BAD = {
    "service": st.one_of(TEXT.filter(_not("ui")), st.integers(), raw("null"), raw("true"),
                         JUNK),
    "target_ms": st.one_of(FINITE.filter(lambda v: v <= 0), st.integers(max_value=0), TEXT,
                           raw("null"), raw("true"), raw("1" + "0" * 400), JUNK),
    "percentile": st.one_of(FINITE.filter(lambda v: v not in (90, 95, 99)), TEXT,
                            raw("false"), JUNK),
    "margin": st.one_of(FINITE.filter(lambda v: not 0 < v < 1), TEXT, raw("null"), JUNK),
    "band_mode": st.one_of(TEXT.filter(_not("safe", "paper")), st.integers(), JUNK),
    "policy": st.one_of(TEXT.filter(_not("slo", "max", "min", "ondemand")), FINITE, JUNK),
}


@settings(FUZZ, max_examples=AGENT_EXAMPLES)
@given(st.data())
def test_agent_a_bad_put_slo_is_a_400_naming_the_field(agent, data):
    _, client = agent
    body = {"service": "ui", "target_ms": 80}
    if data.draw(st.booleans(), "unknown field instead"):
        key = data.draw(st.text(min_size=1, max_size=20).filter(
            lambda k: k not in SLO_BAD), "key")
        body[key], fragment = HOLE, '"x"'
        names = ("unknown field",)
    else:
        field = data.draw(st.sampled_from(sorted(SLO_BAD)), "field")
        fragment = data.draw(SLO_BAD[field], "value")
        if not isinstance(fragment, str):
            fragment = json.dumps(fragment)
        body[field] = HOLE
        names = (f"{field}:", "body: nested")
    text = json.dumps(body).replace(json.dumps(HOLE), fragment, 1)
    answer = client.send("PUT", "/slo", text.encode(), {"Content-Type": "application/json"})
    expect_error(answer, *names)


AGENT_ROUTES = {"/stats": "GET, HEAD", "/health": "GET, HEAD", "/metrics": "GET, HEAD",
                "/slo": "GET, HEAD, PUT"}


@settings(FUZZ, max_examples=AGENT_EXAMPLES)
@given(st.data())
def test_agent_wrong_paths_methods_bodies_and_content_types_are_named(agent, data):
    _, client = agent
    case = data.draw(st.sampled_from(["path", "method", "ctype", "body"]), "case")
    if case == "path":
        path = "/" + data.draw(st.text(st.characters(blacklist_categories=("Cs",)),
                                       max_size=30), "path")
        quoted = _percent_encoded(path)
        if _served_as(quoted) in AGENT_ROUTES:
            return
        method = data.draw(st.sampled_from(["GET", "PUT", "POST", "DELETE"]), "method")
        expect_error(client.send(method, quoted, b"{}", {"Content-Type": "application/json"}),
                     "no such resource")
    elif case == "method":
        path = data.draw(st.sampled_from(sorted(AGENT_ROUTES)), "route")
        method = data.draw(METHODS.filter(lambda m: m not in AGENT_ROUTES[path].split(", ")),
                           "method")
        status, headers, body = client.send(method, path, b'{"service": "ui"}',
                                            {"Content-Type": "application/json"})
        assert status == 405 and headers["Allow"] == AGENT_ROUTES[path]
        if method != "HEAD":
            expect_error((status, headers, body), "not allowed")
    elif case == "ctype":
        ctype = data.draw(st.from_regex(r"[a-z]{1,8}/[a-z]{1,8}", fullmatch=True).filter(
            lambda c: c != "application/json" and not c.endswith("+json")), "ctype")
        expect_error(client.send("PUT", "/slo", b'{"service": "ui", "target_ms": 70}',
                                 {"Content-Type": ctype}), "Content-Type")
    else:
        body = data.draw(BODIES, "body")
        expect_error(client.send("PUT", "/slo", body, {"Content-Type": "application/json"}),
                     "body", "service", "unknown field", "not valid JSON", "nested",
                     "target_ms", "time", "flows")


# ------------------------------------------------------------------ the controller's REST
# Its server (ryu_apps/rest.py) over a stand-in for the app, as tests/unit/ryu_apps/
# test_rest.py drives it.
REST_EXAMPLES = examples(600)


@pytest.fixture(scope="module")
def rest():
    app = fake_app()
    app.status = lambda: {"policy": app.policy_core.policy}
    with served(app) as client:
        def call(method, path, body=b"", ctype="application/json"):
            return client.send(method, path, body, {"Content-Type": ctype} if body else {})
        before = state_of(app)
        yield call
        assert state_of(app) == before, "a rejected request changed the controller"
        assert call("GET", "/malb/status")[0] == 200
        assert call("PUT", "/malb/policy", b'{"policy": "srr"}')[0] == 200
        assert app.policy_core.policy == "srr"


WEIGHT_BAD = st.one_of(st.floats(max_value=-5e-324, allow_nan=False), TEXT, raw("null"),
                       raw("true"),
                       raw("1" + "0" * 400), JUNK)
REST_WRITES = {
    # method, path, body with HOLE, the field the error must name, bad values for HOLE, a
    # good one (when an unknown field is the fault)
    "policy": ("PUT", "/malb/policy", {"policy": HOLE}, "policy",
               st.one_of(TEXT.filter(_not("malb", "srr", "ln", "maglev")), st.integers(),
                         raw("null"), JUNK), "srr"),
    "alpha": ("PUT", "/malb/weights", {"video": {"alpha": HOLE, "beta": 1, "gamma": 0}},
              "video.alpha", WEIGHT_BAD, 1),
    "gamma": ("PUT", "/malb/weights", {"ui": None, "backend": {"alpha": 1, "beta": 1,
                                                               "gamma": HOLE}},
              "backend.gamma", WEIGHT_BAD, 0),
    "weights": ("PUT", "/malb/weights", {"video": HOLE}, "video",
                st.one_of(TEXT, st.integers(), FINITE, raw("true"), JUNK), None),
    "instance": ("POST", "/malb/instances", {"instance": HOLE}, "instance",
                 st.one_of(TEXT.filter(_not("srv1-ui", "srv5-ui")), st.integers(),
                           raw("null"), JUNK), "srv5-ui"),
    "draining": ("PUT", "/malb/instances/srv1-ui", {"draining": HOLE}, "draining",
                 st.one_of(TEXT, st.integers(), raw("null"), JUNK), True),
}


def _with_unknown_key(body, key, good):
    """body with HOLE made good, and key added beside it (in the same object)."""
    if isinstance(body, dict):
        out = {k: _with_unknown_key(v, key, good) for k, v in body.items()}
        if HOLE in body.values():
            out = {k: (good if v == HOLE else v) for k, v in out.items()}
            out[key] = 1
        return out
    return body


@settings(FUZZ, max_examples=REST_EXAMPLES)
@given(st.data())
def test_rest_a_bad_write_is_a_400_naming_the_field_and_changes_nothing(rest, data):
    which = data.draw(st.sampled_from(sorted(REST_WRITES)), "route")
    method, path, body, field, bad, good = REST_WRITES[which]
    if data.draw(st.booleans(), "unknown field instead"):
        key = data.draw(st.text(min_size=1, max_size=20).filter(
            lambda k: k not in ("policy", "instance", "draining", "ui", "backend", "video",
                                "alpha", "beta", "gamma")), "key")
        text = json.dumps(_with_unknown_key(body, key, good))
        names = ("unknown field", "unknown microservice")
    else:
        fragment = data.draw(bad, "value")
        if not isinstance(fragment, str):
            fragment = json.dumps(fragment)
        text = json.dumps(body).replace(json.dumps(HOLE), fragment, 1)
        names = (f"{field}:", f"{field}.", "body: nested")
    expect_error(rest(method, path, text.encode()), *names)


REST_ROUTES = {"/malb/status": "GET, HEAD", "/malb/policy": "GET, HEAD, PUT",
               "/malb/weights": "GET, HEAD, PUT", "/malb/decisions": "GET, HEAD",
               "/malb/flows": "GET, HEAD", "/malb/instances": "GET, HEAD, POST",
               "/metrics": "GET, HEAD"}
QUERY_BYTES = st.binary(min_size=1, max_size=20).map(
    lambda b: "".join(f"%{x:02x}" for x in b))


@settings(FUZZ, max_examples=REST_EXAMPLES)
@given(st.data())
def test_rest_wrong_paths_methods_queries_and_content_types_are_named(rest, data):
    case = data.draw(st.sampled_from(["path", "method", "query", "ctype", "body"]), "case")
    if case == "path":
        path = "/" + data.draw(st.one_of(QUERY_BYTES, st.text(max_size=30).map(
            lambda t: "".join(c if c.isascii() and c.isalnum() else
                              "".join(f"%{b:02x}" for b in c.encode()) for c in t))), "path")
        if path.rstrip("/") in REST_ROUTES or path.startswith("/malb/instances/"):
            return
        method = data.draw(st.sampled_from(["GET", "PUT", "POST", "DELETE", "PATCH"]))
        status, headers, body = rest(method, path, b'{"policy": "srr"}')
        if status == 405:        # the path decoded to a real route's after all
            return
        expect_error((status, headers, body), "no such resource", "path: not valid UTF-8")
    elif case == "method":
        path = data.draw(st.sampled_from(sorted(REST_ROUTES)), "route")
        method = data.draw(METHODS.filter(lambda m: m not in REST_ROUTES[path].split(", ")),
                           "method")
        status, headers, body = rest(method, path, b'{"policy": "srr"}')
        assert status == 405 and headers["Allow"] == REST_ROUTES[path], (status, body)
        if method != "HEAD":
            expect_error((status, headers, body), "not allowed")
    elif case == "query":
        path = data.draw(st.sampled_from(sorted(REST_ROUTES)), "route")
        name = data.draw(st.one_of(st.sampled_from(["limit", "active", "force", "x"]),
                                   QUERY_BYTES), "name")
        value = data.draw(st.one_of(QUERY_BYTES, st.text(max_size=10).map(
            lambda t: "".join(f"%{b:02x}" for b in t.encode()))), "value")
        status, headers, body = rest("GET", f"{path}?{name}={value}")
        if status == 200:
            return               # e.g. ?limit=7 or ?active=1 where they belong
        expect_error((status, headers, body), "unknown query parameter", "not valid UTF-8",
                     "limit: expected", "active: expected")
    elif case == "ctype":
        ctype = data.draw(st.from_regex(r"[a-z]{1,8}/[a-z]{1,8}", fullmatch=True).filter(
            lambda c: c != "application/json" and not c.endswith("+json")), "ctype")
        expect_error(rest("PUT", "/malb/policy", b'{"policy": "srr"}', ctype), "Content-Type")
    else:
        path = data.draw(st.sampled_from(["/malb/policy", "/malb/weights",
                                          "/malb/instances/srv1-ui"]), "route")
        expect_error(rest("PUT", path, data.draw(BODIES, "body")),
                     "body", "policy", "draining", "unknown", "not valid JSON", "nested",
                     "expected")
