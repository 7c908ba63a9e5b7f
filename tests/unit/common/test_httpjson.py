"""The JSON HTTP base every project server but the controller runs on (common/httpjson.py):
errors are JSON and name the field, limits hold, a kept-alive connection stays in sync, slow
and idle clients are timed out, and hundreds of simultaneous clients are all answered."""
import http.client
from contextlib import contextmanager
import json
import resource
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from common.httpjson import (JsonServer, decode_body, dispatch, HttpProblem, quote,
                             too_deep)
from tests.conftest import ROOT

J = "application/json"


def routes(state):
    def post(_q, body):
        state.append(body)
        return 200, {"stored": len(state)}
    return {("POST", "/x"): post, ("GET", "/x"): lambda q, b: (200, {"q": q}),
            ("GET", "/health"): lambda q, b: (200, {"status": "ok"})}


@pytest.fixture
def server():
    state = []
    srv = JsonServer(("127.0.0.1", 0), routes(state), name="unit", request_timeout_s=1,
                     idle_timeout_s=2, max_body_bytes=1000)
    srv.start_background()
    srv.state = state
    yield srv
    srv.shutdown()
    srv.server_close()


def request(method, path, body=b"", ctype=J, extra=""):
    head = f"{method} {path} HTTP/1.1\r\nHost: t\r\n"
    if body:
        head += f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
    return (head + extra + "\r\n").encode("latin-1") + body


def exchange(srv, data: bytes, answers: int = 1, timeout: float = 5.0):
    """Send raw bytes on one connection; read `answers` responses: [(status, headers,
    body)] (each must have a Content-Length, as every answer of ours has)."""
    out = []
    with socket.create_connection(srv.server_address, timeout=timeout) as s:
        s.sendall(data)
        f = s.makefile("rb")
        for _ in range(answers):
            status = int(f.readline().split()[1])
            headers = {}
            while (line := f.readline().rstrip(b"\r\n")):
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip()] = v.strip()
            out.append((status, headers, f.read(int(headers["Content-Length"]))))
    return out


def test_every_error_is_json_naming_the_problem(server):
    cases = [
        (request("GET", "/nope"), 404, "no such resource"),
        (request("DELETE", "/x"), 405, "DELETE: not allowed"),
        (request("POST", "/x", b"{}", ctype="text/plain"), 415, "Content-Type"),
        (request("POST", "/x", b"[" * 200 + b"]" * 200), 400, "nested deeper"),
        (request("POST", "/x", b'{"a": [1, {"b": 1e400}]}'), 400, "a[1].b: expected a finite"),
        (request("POST", "/x", b'{"k": NaN}'), 400, "k: expected a finite"),
        (request("POST", "/x", b'{"k": -Infinity}'), 400, "k: expected a finite"),
        (request("POST", "/x", b'{"k": 1' + b"0" * 400 + b'.0}'), 400, "k: expected a finite"),
        (request("POST", "/x", b'{"f": ["s\\ud800"]}'), 400, "f[0]: not valid Unicode"),
        (request("POST", "/x", b'{"a": '), 400, "not valid JSON"),
        (request("POST", "/x", b'"\xff"'), 400, "not valid JSON"),
        (request("POST", "/x", b"1" * 1001), 413, "Too Large"),
        (b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n", 400, "Content-Length"),
        (b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999\r\n\r\n", 413,
         "over the limit of 1000 bytes"),
        (b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
         "Transfer-Encoding"),
        (b"\x00\x01 nonsense\r\n\r\n", 400, "Bad Request"),
        # an integer no handler can take as a number (10**400: float() overflows)
        (request("POST", "/x", b'{"n": [1, 1' + b"0" * 400 + b'], "s": "' + b"9" * 400 + b'"}'),
         400, "n[1]: expected a number of at most 1.8e308, got '1000"),
        (b"GET /x HTTP/9.9\r\nHost: t\r\n\r\n", 505, "HTTP/9.9: only HTTP/1.0 and HTTP/1.1"),
        (b"GET /x HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n", 431,
         "Request Header Fields Too Large"),
        (request("GET", "//x"), 404, "no such resource: '//x'"),
    ]
    for data, status, message in cases:
        (got, headers, body), = exchange(server, data)
        assert got == status, (data[:80], got, body)
        assert headers["Content-Type"] == J
        assert message in json.loads(body)["error"], (data[:80], body)
    assert server.state == []            # nothing rejected reached the handler


def test_405_lists_the_allowed_methods(server):
    (status, headers, body), = exchange(server, request("PUT", "/x", b"{}"))
    assert status == 405 and headers["Allow"] == "GET, HEAD, POST"
    assert json.loads(body)["allowed"] == ["GET", "HEAD", "POST"]


def test_big_integers_that_fit_a_number_and_long_digit_strings_are_taken(server):
    (status, _, body), = exchange(server, request("POST", "/x", b'{"n": 1' + b"0" * 300 +
                                                  b', "s": "' + b"7" * 500 + b'"}'))
    assert status == 200 and server.state[0]["n"] == 10 ** 300


def test_expect_100_continue_is_answered_at_once(server):
    """curl sends `Expect: 100-continue` for any body over 1 kB and waits a second (or, as
    found, eight with the old server) for the go-ahead before sending it. Here the body
    is sent only once the go-ahead came: a server that waited for it would never answer."""
    with socket.create_connection(server.server_address, timeout=30) as s:
        s.sendall(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 8\r\nExpect: 100-continue\r\n\r\n")
        first = s.recv(4096)
        s.sendall(b'{"a": 1}')
        rest = b""
        while b'"stored"' not in rest:
            rest += s.recv(4096)
    assert first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert b"200 OK" in first + rest


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE"])
def test_expect_100_continue_on_a_request_without_a_body_is_answered_not_left_waiting(
        server, method):
    # waitress sends 100 Continue and then takes the request as unfinished: no answer
    with socket.create_connection(server.server_address, timeout=5) as s:
        s.sendall(f"{method} /x HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                  f"\r\n".encode())
        first = s.recv(4096)
    assert first.startswith(b"HTTP/1.1 200 OK" if method != "DELETE" else b"HTTP/1.1 405")


def test_a_kept_alive_connection_stays_in_sync_after_a_404_or_405_with_a_body(server):
    # the body of each rejected request is itself a request: it must be read, not parsed
    smuggled = request("POST", "/x", b'{"smuggled": true}')
    data = (request("POST", "/nope", smuggled) + request("DELETE", "/x", smuggled) +
            request("POST", "/x", b'{"ok": 1}'))
    answers = exchange(server, data, answers=3)
    assert [a[0] for a in answers] == [404, 405, 200]
    assert server.state == [{"ok": 1}]


def test_answers_to_head_have_no_body_and_the_connection_stays_in_sync(server):
    """Found by the fuzz test: the 405's JSON body went out after a HEAD, and the client
    read it as the start of its next answer."""
    conn = http.client.HTTPConnection(*server.server_address, timeout=5)
    for method, path, status in (("HEAD", "/x", 200), ("HEAD", "/x", 200),
                                 ("HEAD", "/nope", 404), ("GET", "/health", 200)):
        conn.request(method, path)
        r = conn.getresponse()
        body = r.read()
        assert r.status == status
        assert body == b"" if method == "HEAD" else json.loads(body) == {"status": "ok"}
    conn.close()
    # the raw bytes: the headers only, Content-Length as a GET would have it
    with socket.create_connection(server.server_address, timeout=5) as s:
        s.sendall(request("HEAD", "/nope") + request("GET", "/health"))
        time.sleep(0.3)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    first, second = data.split(b"HTTP/1.1 ", 2)[1:]
    assert first.startswith(b"404") and first.endswith(b"\r\n\r\n")
    assert second.startswith(b"200") and second.endswith(b'{"status": "ok"}')


def test_chunked_bodies_are_decoded(server):
    data = (b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n3\r\n[1,\r\n2\r\n2]\r\n0\r\n\r\n")
    (status, _, body), = exchange(server, data)
    assert status == 200 and server.state == [[1, 2]]


def test_paths_and_queries_that_are_not_utf8_are_a_400_naming_them(server):
    (status, _, body), = exchange(server, request("GET", "/%ff"))
    assert status == 400 and json.loads(body)["error"] == "path: not valid UTF-8 (after " \
                                                          "%-decoding)"
    (status, _, body), = exchange(server, request("GET", "/x?a=%ff&b=2"))
    assert status == 400 and json.loads(body)["error"].startswith("a: not valid UTF-8")
    (status, _, body), = exchange(server, request("GET", "/x?a=%C3%A9&b=2"))
    assert status == 200 and json.loads(body)["q"] == {"a": ["\u00e9"], "b": ["2"]}


def seconds_until_closed(srv, first: bytes, trickle: bytes, limit_s: float = 8.0) -> float:
    """Send `first`, then `trickle` every 0.2 s until the server hangs up."""
    t0 = time.monotonic()
    with socket.create_connection(srv.server_address, timeout=0.2) as s:
        s.sendall(first)
        while time.monotonic() - t0 < limit_s:
            try:
                if s.recv(100) == b"":
                    break
            except TimeoutError:
                pass
            except OSError:
                break
            try:
                s.sendall(trickle)
            except OSError:
                break
    return time.monotonic() - t0


def test_slow_and_idle_clients_are_disconnected(server):
    # headers that never end, a byte every 0.2 s (never idle): request_timeout_s = 1
    slow = seconds_until_closed(server, b"GET /health HTTP/1.1\r\nHost: t\r\n", b"X")
    assert 1 <= slow < 4, slow
    # a body that never ends
    short = seconds_until_closed(server, request("POST", "/x", b"[1]")[:-1], b"")
    assert 1 <= short < 4, short
    # idle after connecting: idle_timeout_s = 2
    idle = seconds_until_closed(server, b"", b"")
    assert 2 <= idle < 5, idle


def idle_connections(srv, n: int, source: str = "127.0.0.1") -> list[socket.socket]:
    return [socket.create_connection(srv.server_address, timeout=5, source_address=(source, 0))
            for _ in range(n)]


def closed_by_server(sock: socket.socket, wait_s: float = 2.0) -> bool:
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def get_status(srv, source: str = "127.0.0.1") -> int:
    c = http.client.HTTPConnection(*srv.server_address, timeout=5, source_address=(source, 0))
    try:
        c.request("GET", "/health")
        return c.getresponse().status
    finally:
        c.close()


@contextmanager
def shedding_server(**limits):
    """A JsonServer with these limits, serving, that sheds connections idle for 0.3 s."""
    srv = JsonServer(("127.0.0.1", 0), routes([]), name="cap", **limits)
    srv._server.shed_after_s = 0.3
    srv.start_background()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_one_address_idle_connections_make_room_for_its_next_and_are_capped():
    with shedding_server(per_address_limit=8) as srv:
        idle = idle_connections(srv, 8)
        time.sleep(1.0)                           # idle longer than shed_after_s
        assert get_status(srv) == 200             # past its own address's idle ones
        assert closed_by_server(idle[0]) and not closed_by_server(idle[1], 0.2)
        # a ninth, tenth... idle one each close the oldest: never more than 8 from one address
        more = idle_connections(srv, 8)
        time.sleep(0.5)
        assert sum(closed_by_server(s, 0.5) for s in idle[1:] + more) >= 7
        # another address is not touched by this one's limit
        assert get_status(srv, "127.0.0.2") == 200
        for s in idle + more:
            s.close()


def test_a_burst_beyond_the_limit_is_served_and_what_then_idles_is_trimmed_to_it():
    with shedding_server(per_address_limit=4) as srv:
        burst = idle_connections(srv, 12)         # new ones are never refused
        for s in burst:
            s.sendall(request("GET", "/health"))
        answers = [s.recv(4096) for s in burst]
        assert all(a.startswith(b"HTTP/1.1 200") for a in answers)
        # idle: the housekeeping (every 1 s) trims them, oldest first, to the limit
        deadline = time.monotonic() + 15
        while True:
            closed = [closed_by_server(s, 0.2) for s in burst]
            if sum(closed) >= 8 or time.monotonic() > deadline:
                break
        assert sum(closed) == 8 and closed[0], closed
        for s in burst:
            s.close()


def test_a_full_server_closes_its_oldest_idle_connection_for_a_new_client():
    with shedding_server(connection_limit=12, per_address_limit=None) as srv:
        idle = [s for k in range(4) for s in idle_connections(srv, 3, f"127.0.0.{10 + k}")]
        time.sleep(0.5)
        assert get_status(srv, "127.0.0.99") == 200     # not left in the listen backlog
        assert closed_by_server(idle[0])
        for s in idle:
            s.close()


def test_a_handler_bug_is_a_500_and_the_server_goes_on(caplog):
    srv = JsonServer(("127.0.0.1", 0), {("GET", "/x"): lambda q, b: 1 / 0}, name="bug")
    srv.start_background()
    try:
        with caplog.at_level("ERROR", logger="malb.http"):
            answers = exchange(srv, request("GET", "/x") * 2, answers=2)
        assert [a[0] for a in answers] == [500, 500]
        assert b"Traceback" not in answers[0][2] and b"ZeroDivisionError" in answers[0][2]
        assert len([r for r in caplog.records if "bug: GET /x failed" in r.getMessage()]) == 2
    finally:
        srv.shutdown()
        srv.server_close()


def listen_queue_drops() -> int:
    """The kernel's count of connections its listen queues overflowed or dropped (this
    network namespace): each one a client waiting a second for its SYN to be sent again."""
    with open("/proc/net/netstat") as fh:
        head, values = [line.split() for line in fh if line.startswith("TcpExt:")][:2]
    row = dict(zip(head[1:], map(int, values[1:])))
    return row["ListenOverflows"] + row["ListenDrops"]


def test_two_hundred_simultaneous_clients_are_all_answered_none_dropped_at_the_listen(server):
    dropped_before = listen_queue_drops()
    n, results = 200, []
    barrier = threading.Barrier(n)

    def one(k):
        barrier.wait()
        try:      # from one address, beyond its limit of 64: a burst is served
            c = http.client.HTTPConnection(*server.server_address, timeout=5)
            c.request("GET", "/health")
            status = c.getresponse().status
            c.close()
        except OSError as exc:
            status = repr(exc)
        results.append(status)
    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert results == [200] * n
    # none had to try again: the listen queue took every one (a wall-clock bound on their
    # times measured this machine's load instead)
    assert listen_queue_drops() == dropped_before


# ------------------------------------------------------------------ the plain functions
def test_depth_is_checked_on_the_text_ignoring_brackets_in_strings():
    assert not too_deep(b'[' * 32 + b']' * 32)
    assert too_deep(b'[' * 33 + b']' * 33)
    assert not too_deep(b'{"a": "' + b"[" * 100 + b'"}')
    assert not too_deep(b'[{"a": "\\"[[[["}' + b', {}' * 100 + b']')
    assert not too_deep(b"[" * 40)          # unbalanced: json.loads reports it


def test_decode_body_accepts_what_the_controller_sends():
    body = {"flows": [{"flow_id": "a", "duration_s": 1.5, "x": "\U0001F600"}], "ports": []}
    raw = json.dumps(body).encode()
    assert decode_body(raw, "application/json; charset=utf-8") == body
    assert decode_body(b"", None) is None
    assert decode_body(b'"\\ud83d\\ude00"', J) == "\U0001F600"     # a valid pair
    with pytest.raises(HttpProblem) as e:
        decode_body(b"{}", None)
    assert e.value.status == 415


def test_errors_quote_a_short_prefix_only():
    assert len(quote("x" * 10_000_000)) < 80
    assert quote(list(range(1000))) == "a list of 1000 items"
    assert quote(1.5) == "1.5"
    status, _, payload = dispatch({("POST", "/x"): lambda q, b: (200, {})}, "u", "POST", "/x", "",
                                  J,
                                  b'{"k": "' + b"x" * 100_000 + b'\\ud800"}')
    assert status == 400 and len(payload["error"]) < 200


def test_the_open_files_limit_is_raised_for_the_connections_or_the_limit_lowered_saying_so():
    child = textwrap.dedent("""
        import json, logging, resource, sys
        logging.basicConfig(stream=sys.stderr)
        soft, hard = (int(x) for x in sys.argv[1:3])
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        from common.httpjson import JsonServer
        srv = JsonServer(("127.0.0.1", 0), {}, name="files", connection_limit=4096)
        print(json.dumps({"soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                          "limit": srv._server.adj.connection_limit}))
        srv.server_close()
    """)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def run(soft: int, hard: int):
        res = subprocess.run([sys.executable, "-c", child, str(soft), str(hard)], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr[-2000:]
        return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr

    if hard == resource.RLIM_INFINITY or hard >= 4096 + 256:
        out, _ = run(1024, hard)      # Linux's usual soft limit, below 4,096 connections
        assert out == {"soft": 4096 + 256, "limit": 4096}
    out, err = run(600, 1000)          # a hard limit below: fewer connections, said
    assert out == {"soft": 1000, "limit": 1000 - 256}
    assert "files: 744 connections at most, not 4096" in err
