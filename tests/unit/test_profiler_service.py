"""The profiler service's input checks and its ARMA worker pool; the JSON HTTP helpers."""
import json
import os
import signal
import socket
import threading

from concurrent.futures.process import BrokenProcessPool

import pytest

from common.httpjson import BadRequest, HttpError, JsonServer, get_json
from profiler.service import RespawningProcessPool, validate_flows


def flow(**kw):
    return {"flow_id": "1.1:1", "microservice": "ui", "duration_s": 0.5, "active": False, **kw}


def test_flow_reports_are_checked_field_by_field():
    flows, ports = validate_flows({"flows": [flow()]})
    assert len(flows) == 1 and ports is None          # no port list: keep the last one
    for bad, field in ((flow(bytes=2 ** 63), "flows[0].bytes"),
                       (flow(packets=-1), "flows[0].packets"),
                       (flow(bytes=True), "flows[0].bytes"),
                       (flow(server=5), "flows[0].server"),
                       (flow(duration_s=float("nan")), "flows[0].duration_s"),
                       (flow(active="yes"), "flows[0].active")):
        with pytest.raises(BadRequest, match=field.replace("[", r"\[").replace("]", r"\]")):
            validate_flows({"flows": [bad]})
    with pytest.raises(BadRequest, match="ports"):
        validate_flows({"flows": [], "ports": {"a": 1}})


def _pid_of_worker(_):
    return os.getpid()


def test_the_arma_pool_starts_a_new_worker_when_the_old_one_died():
    pool = RespawningProcessPool()
    try:
        pid = pool.submit(_pid_of_worker, 0).result(timeout=30)
        os.kill(pid, signal.SIGKILL)
        # A fit submitted before the pool noticed the death fails with BrokenProcessPool
        # (and only that); once it noticed, the next submission starts a new worker.
        new, broken = None, 0
        for _ in range(10):
            try:
                new = pool.submit(_pid_of_worker, 0).result(timeout=30)
                break
            except BrokenProcessPool:
                broken += 1
        assert new is not None and new != pid and pool.respawns == 1, (new, broken)
        assert pool.submit(_pid_of_worker, 0).result(timeout=30) == new
    finally:
        pool.shutdown(wait=True)


def test_json_server_rejects_a_bad_content_length_with_json():
    srv = JsonServer(("127.0.0.1", 0), {("POST", "/x"): lambda q, b: (200, {"ok": True})})
    srv.start_background()
    try:
        for length, status in ((b"abc", "400"), (b"-5", "400"), (b"999999999999", "413")):
            with socket.create_connection(srv.server_address, timeout=5) as s:
                s.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: " + length +
                          b"\r\n\r\n")
                answer = b""
                while not answer.rstrip().endswith(b"}"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
                answer = answer.decode()
            assert answer.startswith(f"HTTP/1.1 {status}"), answer
            error = json.loads(answer.split("\r\n\r\n", 1)[1])["error"]
            assert "Content-Length" in error or "over the limit" in error
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_peer_that_hangs_up_mid_answer_is_an_http_error():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def half_answer():
        conn, _ = listener.accept()
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"a\"")
        conn.close()
    t = threading.Thread(target=half_answer, daemon=True)
    t.start()
    try:
        with pytest.raises(HttpError):
            get_json(f"http://127.0.0.1:{listener.getsockname()[1]}/", timeout=5)
    finally:
        listener.close()


def test_a_handler_bug_is_a_500_without_details_and_a_log_line_with_them(caplog):
    def broken(_q, _b):
        raise KeyError("secret internals")
    srv = JsonServer(("127.0.0.1", 0), {("GET", "/x"): broken}, name="unit")
    srv.start_background()
    try:
        with caplog.at_level("ERROR", logger="malb.http"):
            with pytest.raises(HttpError, match="HTTP 500") as err:
                get_json(f"http://127.0.0.1:{srv.server_address[1]}/x", timeout=5)
        assert "secret internals" not in str(err.value)
        assert "KeyError" in str(err.value)
        logged = [r for r in caplog.records if "unit: GET /x failed" in r.getMessage()]
        assert logged and "secret internals" in logged[0].exc_text
    finally:
        srv.shutdown()
        srv.server_close()
