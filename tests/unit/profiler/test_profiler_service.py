"""The profiler service's input checks and its ARMA worker pool; the JSON HTTP helpers."""
import json
import os
import re
import signal
import socket
import sqlite3
import threading

from concurrent.futures.process import BrokenProcessPool

import pytest

from common.config import parse_config
from common.httpjson import BadRequest, HttpError, JsonServer, get_json
from profiler.service import ProfilerService, RespawningProcessPool, validate_flows, \
    validate_pairs
from profiler.store import HistoryStore


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


# ------------------------------------------------------------------ POST /flows: all or nothing
def make_service():
    cfg = parse_config({"servers": {"count": 2}, "profiler": {"period_s": 3}})
    return ProfilerService(cfg, store=HistoryStore(":memory:", 3600), collector=dict,
                           clock=lambda: 1000.0)


def state_of(service):
    f = service.model.flows
    return (dict(f.seen), dict(f.ms_of), {k: list(v) for k, v in f.completed.items()},
            list(service.model.ports), service.store.counts())


@pytest.mark.parametrize("bad, field", [
    (flow(flow_id="s\ud800"), "flows[1].flow_id: not valid Unicode"),
    (flow(microservice="\udfff"), "flows[1].microservice: not valid Unicode"),
    (flow(client="a\ud800b"), "flows[1].client: not valid Unicode"),
    (flow(duration_s=float("inf")), "flows[1].duration_s: expected a finite number"),
    (flow(duration_s=1e308 * 10), "flows[1].duration_s"),
    (flow(colour="red"), "flows[1].colour: unknown field"),
    (flow(bytes_to_client=-1), "flows[1].bytes_to_client"),
    # the history stores no empty name: refused before anything is stored
    (flow(client=""), "flows[1].client: expected a non-empty string"),
    (flow(server=""), "flows[1].server: expected a non-empty string"),
])
def test_a_rejected_batch_changes_nothing_in_memory_or_on_disk(bad, field):
    service = make_service()
    try:
        service.post_flows({}, {"flows": [flow(flow_id="f1", active=True)],
                                "ports": [{"port": 1}]})
        before = state_of(service)
        batch = {"flows": [flow(flow_id="f1", active=False), bad], "ports": [{"port": 2}],
                 "pairs": {"interval_s": 1.0, "edges": []}}
        with pytest.raises(BadRequest, match=re.escape(field)):
            service.post_flows({}, batch)
        assert state_of(service) == before
        # the same batch without the bad record goes through whole
        status, answer = service.post_flows({}, {**batch, "flows": batch["flows"][:1]})
        assert status == 200 and answer == {"accepted": 1, "completed": 1}
        assert "f1" not in service.model.flows.seen and service.store.counts()["flows"] == 1
    finally:
        service.stop()


@pytest.mark.parametrize("port, field", [
    ({"port": 1, "server": {}}, "ports[0].server: expected a string"),
    ({"port": -1}, "ports[0].port: expected an integer"),
    ({"port": 1, "rx_bytes_per_s": "fast"}, "ports[0].rx_bytes_per_s: expected a finite"),
    ({"port": 1, "dpid": 2 ** 64}, "ports[0].dpid: expected an integer from 0 to 2^64-1"),
])
def test_a_port_record_of_the_wrong_shape_is_refused(port, field):
    """Each field of a port record is checked, and a bad one stores nothing."""
    service = make_service()
    try:
        with pytest.raises(BadRequest, match=re.escape(field)):
            service.post_flows({}, {"flows": [], "ports": [port]})
        assert service.model.ports == []
    finally:
        service.stop()


def test_a_failed_history_write_leaves_the_model_as_it_was():
    service = make_service()
    try:
        service.post_flows({}, {"flows": [flow(flow_id="f1", active=True)]})
        before = state_of(service)

        def disk_full(*_a, **_k):
            raise sqlite3.OperationalError("database or disk is full")
        service.store.add_flows = disk_full
        with pytest.raises(sqlite3.OperationalError):
            service.post_flows({}, {"flows": [flow(flow_id="f1", active=False)]})
        assert state_of(service) == before        # f1 still active, to be completed later
    finally:
        service.stop()


def test_what_the_controller_sends_is_accepted_and_unknown_fields_are_not():
    record = {"flow_id": "18c.1:2a", "microservice": "video", "server": "srv1",
              "instance": "srv1-video", "client": "10.0.0.1:5555", "protocol": "tcp",
              "duration_s": 1.5, "bytes": 10, "bytes_to_server": 4, "bytes_to_client": 6,
              "packets": 2, "active": False, "end_reason": "fin"}
    body = {"source": "malb-controller", "time": 1.0, "flows": [record],
            "ports": [{"dpid": 1, "port": 2, "time": 1.0, "rx_bytes_per_s": 0.0,
                       "tx_bytes_per_s": 1.0, "instance": None, "server": None}],
            "pairs": {"interval_s": 1.0, "edges": [{"src": "h1", "dst": "srv1-video",
                                                    "bytes": 5, "flows": 1}]}}
    assert len(validate_flows(body)[0]) == 1 and validate_pairs(body)["edges"]
    for bad, field in (({**body, "extra": 1}, "extra: unknown field"),
                       ({**body, "ports": [{"prot": 1}]}, "ports[0].prot: unknown field"),
                       ({**body, "time": float("nan")}, "time: expected a finite"),
                       ({**body, "x" * 5000: 1}, "x" * 40 + "...: unknown field")):
        with pytest.raises(BadRequest, match=re.escape(field)):
            validate_flows(body=bad)
    for pairs, field in (({"interval_s": 1, "edges": [], "more": 1}, "pairs.more"),
                         ({"interval_s": 1, "edges": [{"src": "\ud800", "dst": "b",
                                                       "bytes": 1, "flows": 1}]},
                          "pairs.edges[0].src: not valid Unicode")):
        with pytest.raises(BadRequest, match=re.escape(field)):
            validate_pairs({"pairs": pairs})


def test_history_names_the_bad_query_parameter():
    service = make_service()
    try:
        q = {"kind": ["server"], "key": ["srv1"], "column": ["cpu"]}
        assert service.history(q, None) == (200, {"series": []})
        for extra, field in (({"since": ["nan"]}, "since: expected a finite"),
                             ({"since": ["1e400"]}, "since: expected a finite"),
                             ({"since": ["x" * 10_000]}, "since: expected a finite"),
                             ({"limit": ["3"]}, "limit: unknown query parameter")):
            with pytest.raises(BadRequest, match=re.escape(field)) as err:
                service.history({**q, **extra}, None)
            assert len(str(err.value)) < 200
    finally:
        service.stop()


def test_a_switch_whose_datapath_id_has_its_top_bit_set_is_taken():
    service = make_service()
    try:
        status, _ = service.post_flows({}, {"flows": [], "ports": [
            {"dpid": 2 ** 64 - 1, "port": 1, "rx_bytes_per_s": 0.0}]})
        assert status == 200
    finally:
        service.stop()
