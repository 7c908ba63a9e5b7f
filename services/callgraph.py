"""A call-graph microservice: each request does its own work, calls its downstream services and
answers when they have answered (the services the placement experiments run). Standard
library only and prometheus_client for its metrics (Debian's in the image). The spec, the calls and
the endpoints: docs/placement.md, "Applications that call each other".

    python3 -m services.callgraph --port 9001        # what it does: $MALB_SPEC (JSON)
    python3 -m services.callgraph --port 9001 --spec '{"service": "reviews", ...}'

- load_spec, SpecError: the spec (common/config/derive.py's callgraph_spec), checked;
- Handler, Server: a request's work and calls, and /metrics, /latency, /health;
- burn_cpu, call_once: CPU time of this thread; one call, to the callee's VIP;
- Metrics: requests by caller and calls by callee, each with its latency histogram.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import Counter, Histogram

from common.latency_window import InFlight, LatencyWindow
from common.metrics import CONTENT_TYPE, new_registry, render

INSTANCE = os.environ.get("MALB_INSTANCE", socket.gethostname())
LATENCY_BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04,
                   0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5,
                   0.75, 1, 2, 5, 10)
CHUNK = b"x" * 65536
MAX_BYTES = 1 << 30
CALL_TIMEOUT_S = 30.0
# requests being served now, but GET /health, /metrics and /latency: GET /latency's in_flight
IN_FLIGHT = InFlight()


class SpecError(ValueError):
    pass


def load_spec(text: str) -> dict:
    """The spec as JSON text, checked (SpecError naming the field)."""
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"spec: not JSON: {exc}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("service"), str):
        raise SpecError("spec.service: expected a name")
    for key in ("cpu_ms", "response_bytes"):
        v = spec.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_BYTES:
            raise SpecError(f"spec.{key}: expected a number >= 0, got {v!r}")
    callers = spec.get("callers", [])
    if not isinstance(callers, list) or not all(isinstance(c, str) for c in callers):
        raise SpecError("spec.callers: expected a list of service names")
    calls = spec.get("calls", [])
    if not isinstance(calls, list):
        raise SpecError("spec.calls: expected a list")
    for k, c in enumerate(calls):
        if not isinstance(c, dict) or not isinstance(c.get("service"), str) or \
                not isinstance(c.get("host"), str) or not isinstance(c.get("port"), int):
            raise SpecError(f"spec.calls[{k}]: expected service, host and port")
        for key in ("count", "request_bytes", "response_bytes"):
            v = c.get(key, 1 if key == "count" else 0)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BYTES:
                raise SpecError(f"spec.calls[{k}].{key}: expected an integer >= 0")
    return spec


def burn_cpu(ms: float) -> None:
    """Use ms milliseconds of this thread's CPU time (not wall time: on a busy server it
    takes longer, as real work would)."""
    if ms <= 0:
        return
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for _ in range(1000):
            x += 1


class Metrics:
    def __init__(self, service: str):
        self.service = service
        self.registry = r = new_registry("service")
        self.requests = Counter(
            "callgraph_requests_total",
            "Requests served, by caller (client, a caller the spec names, or other) and status.",
            ("service", "instance_name", "caller", "status"), registry=r)
        self.latency = Histogram(
            "callgraph_request_duration_seconds", "Latency of the requests served, by caller.",
            ("service", "instance_name", "caller"), buckets=LATENCY_BUCKETS, registry=r)
        self.calls = Histogram(
            "callgraph_call_duration_seconds",
            "Latency of the calls made, by callee (the caller's view of the edge).",
            ("service", "instance_name", "callee"), buckets=LATENCY_BUCKETS, registry=r)
        self.call_errors = Counter(
            "callgraph_call_errors_total", "Calls that failed, by callee.",
            ("service", "instance_name", "callee"), registry=r)
        self.bytes_sent = Counter("callgraph_bytes_sent_total", "Response body bytes sent.",
                                  ("service", "instance_name"), registry=r)
        self.recent = LatencyWindow()       # raw latencies of answered requests: GET /latency


def call_once(spec_service: str, call: dict) -> None:
    """One call: a new connection to the callee's VIP, the request body, the whole answer."""
    conn = http.client.HTTPConnection(call["host"], call["port"], timeout=CALL_TIMEOUT_S)
    try:
        body = CHUNK[:0] if not call.get("request_bytes") else \
            (CHUNK * (call["request_bytes"] // len(CHUNK) + 1))[:call["request_bytes"]]
        conn.request("POST", "/call", body, {"X-Caller": spec_service, "Connection": "close",
                                             "X-Response-Bytes":
                                                 str(call.get("response_bytes", 1000))})
        resp = conn.getresponse()
        while resp.read(65536):
            pass
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}")
    finally:
        conn.close()


class Handler(BaseHTTPRequestHandler):
    server_version = "malb-callgraph/1"
    protocol_version = "HTTP/1.1"
    spec: dict = {}
    metrics: Metrics = None

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.serve()

    def do_POST(self):
        self.serve()

    def serve(self):
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self.reply(200, b"ok\n")
        if path == "/metrics":
            return self.reply(200, render(self.metrics.registry).encode(), CONTENT_TYPE)
        if path == "/latency":
            return self.latency_summary()
        started = time.monotonic()
        caller = self.caller_label(self.headers.get("X-Caller"))
        status = 500
        IN_FLIGHT.add(1)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            left = max(0, min(length, MAX_BYTES))
            while left > 0:
                got = self.rfile.read(min(left, 65536))
                if not got:
                    break
                left -= len(got)
            want = self.headers.get("X-Response-Bytes")
            size = int(want) if want and want.isdigit() else \
                int(self.spec.get("response_bytes", 1000))
            burn_cpu(float(self.spec.get("cpu_ms", 0)))
            failed = self.call_all()
            if failed:
                status = 502
                self.reply(502, json.dumps({"error": failed}).encode(), "application/json")
            else:
                status = 200
                self.send_bytes(min(size, MAX_BYTES))
        except (BrokenPipeError, ConnectionResetError):
            status = 499
        finally:
            IN_FLIGHT.add(-1)
            self.metrics.requests.labels(self.spec["service"], INSTANCE, caller, status).inc()
            took = time.monotonic() - started
            self.metrics.latency.labels(self.spec["service"], INSTANCE, caller).observe(took)
            if status == 200:
                self.metrics.recent.add(took)

    def caller_label(self, header: str | None) -> str:
        """The caller as a metric label: "client" without X-Caller, a caller the spec names
        ("callers"), else "other": not one series per header value a client makes up."""
        if not header:
            return "client"
        return header if header in self.spec.get("callers", ()) else "other"

    def latency_summary(self) -> None:
        query = self.path.partition("?")[2]
        window = 5.0
        for part in query.split("&"):
            key, _, value = part.partition("=")
            if key == "window":
                try:
                    window = float(value)
                    if not 0.1 <= window <= 60:
                        raise ValueError
                except ValueError:
                    return self.reply(400, b'{"error": "window: expected seconds in '
                                      b'[0.1, 60]"}\n', "application/json")
        body = {**self.metrics.recent.summary(window), "in_flight": IN_FLIGHT.value}
        self.reply(200, json.dumps(body).encode() + b"\n", "application/json")

    def call_all(self) -> str | None:
        """Every downstream call: services in parallel, a service's calls in turn. The
        first failure, named, or None."""
        failures: list[str] = []

        def run(call: dict) -> None:
            for _ in range(int(call.get("count", 1))):
                t0 = time.monotonic()
                try:
                    call_once(self.spec["service"], call)
                except (OSError, RuntimeError, http.client.HTTPException) as exc:
                    self.metrics.call_errors.labels(self.spec["service"], INSTANCE,
                                                    call["service"]).inc()
                    failures.append(f"call to {call['service']}: {type(exc).__name__}: {exc}")
                    return
                finally:
                    self.metrics.calls.labels(self.spec["service"], INSTANCE,
                                              call["service"]).observe(time.monotonic() - t0)
        calls = self.spec.get("calls", [])
        threads = [threading.Thread(target=run, args=(c,)) for c in calls[1:]]
        for t in threads:
            t.start()
        if calls:
            run(calls[0])
        for t in threads:
            t.join()
        return failures[0] if failures else None

    def reply(self, status: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Served-By", INSTANCE)
        self.end_headers()
        self.wfile.write(body)

    def send_bytes(self, n: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.send_header("X-Served-By", INSTANCE)
        self.end_headers()
        left = n
        while left > 0:
            piece = CHUNK[:min(left, len(CHUNK))]
            self.wfile.write(piece)
            left -= len(piece)
        self.metrics.bytes_sent.labels(self.spec["service"], INSTANCE).inc(n)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="A call-graph microservice.")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--spec", help="the spec as JSON (default: $MALB_SPEC)")
    args = p.parse_args(argv)
    try:
        spec = load_spec(args.spec if args.spec is not None else
                         os.environ.get("MALB_SPEC", ""))
    except SpecError as exc:
        p.error(str(exc))
    handler = type("H", (Handler,), {"spec": spec, "metrics": Metrics(spec["service"])})
    server = Server((args.host, args.port), handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"callgraph service {spec['service']} ({INSTANCE}) on :{args.port}, "
          f"{len(spec.get('calls', []))} downstream", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
