"""The services' GET /latency carries their requests in flight (`in_flight`, what the agents'
probes read): services/rom.py counts its work endpoints, services/callgraph.py every request
but /health, /metrics and /latency. Real services on loopback."""
from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request

from tests.lib.services import in_flight_reaches, latency, start_service


def test_the_rom_service_reports_its_work_requests_in_flight():
    proc, port = start_service(["services.rom", "backend"])
    try:
        assert latency(port)["in_flight"] == 0          # its own /latency does not count
        jobs = [threading.Thread(target=lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{port}/job?seconds=1.5&cpu=0.02", timeout=10).read())
            for _ in range(3)]
        for j in jobs:
            j.start()
        in_flight_reaches(port, 3)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
        doc = latency(port)
        assert doc["in_flight"] == 3 and doc["count"] == 0, doc
        for j in jobs:
            j.join()
        doc = in_flight_reaches(port, 0)
        assert doc["in_flight"] == 0 and doc["count"] == 3 and doc["p50_ms"] >= 1500, doc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_call_graph_service_reports_its_requests_in_flight():
    # its one call goes to a listener that never answers: the request stays in flight
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)
    spec = json.dumps({"service": "front", "cpu_ms": 1, "calls": [
        {"service": "hole", "host": "127.0.0.1", "port": hole.getsockname()[1]}]})
    proc, port = start_service(["services.callgraph", "--spec", spec])
    try:
        assert latency(port)["in_flight"] == 0
        results = []
        req = threading.Thread(target=lambda: results.append(_status(port)))
        req.start()
        assert in_flight_reaches(port, 1)["in_flight"] == 1
        hole.close()                  # the call fails: 502, and the request is over
        req.join(10)
        # the answer is sent before the count comes down: wait for it, not one read
        assert results == [502] and in_flight_reaches(port, 0)["in_flight"] == 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        hole.close()


def _status(port) -> int:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/work", timeout=20).status
    except urllib.error.HTTPError as exc:
        return exc.code
