"""Resource-Organized Microservices (ROMs) of the MALB paper's use case, one program, standard
library only and prometheus_client for its metrics (Debian's python3-prometheus-client in
the image built offline). Each kind's endpoints: docs/testbed.md, "The services".

    python3 -m services.rom video   --port 8001   # long-lived constant-bitrate streams
    python3 -m services.rom ui      --port 8002   # HTTP objects (1 MB, 10 MB), moderate CPU
    python3 -m services.rom backend --port 8003   # CPU-bound jobs with a fixed execution time

- Handler, Server: the endpoints: the kind's work, /health, /metrics, /bytes, /latency;
- burn, work, spin: CPU at a duty cycle for a time, or until its CPU-seconds are done;
- Metrics: the service's Prometheus metrics; main: the command line.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client import Counter, Gauge, Histogram

from common.latency_window import InFlight, LatencyWindow
from common.metrics import CONTENT_TYPE, new_registry, render

INSTANCE = os.environ.get("MALB_INSTANCE", socket.gethostname())
CHUNK = os.urandom(64 * 1024)
# how much CPU a work-mode job may fall behind its pace and make up later (work())
MAX_DEBT_S = 0.1
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 45, 60,
                   120, 300)
WORK_ENDPOINTS = ("/object", "/job", "/stream", "/bytes")
# the label of a path that is no work endpoint (a 404): one series for them all, not one per
# path a client makes up; /health, /metrics and /latency are probes, not traffic: not counted
OTHER = "other"
PROBES = ("/health", "/metrics", "/latency")
MAX_OBJECT = 1 << 30
MAX_SECONDS = 3600.0


class Metrics:
    """The service's Prometheus metrics (prometheus_client: Debian's in the image)."""

    def __init__(self, kind: str):
        self.labels = (kind, INSTANCE)
        self.registry = r = new_registry("service")
        self.requests = Counter("rom_requests_total",
                                "Requests served, by work endpoint (other: any other path) "
                                "and status; the probes' requests not counted.",
                                ("service", "instance_name", "endpoint", "status"), registry=r)
        self.latency = Histogram("rom_request_duration_seconds", "Request latency.",
                                 ("service", "instance_name", "endpoint"), buckets=LATENCY_BUCKETS,
                                 registry=r)
        self.bytes_sent = Counter("rom_bytes_sent_total", "Body bytes sent.",
                                  ("service", "instance_name"), registry=r).labels(*self.labels)
        self.in_flight = Gauge("rom_in_flight", "Requests being served (probes not counted).",
                               ("service", "instance_name"), registry=r).labels(*self.labels)
        self.recent = LatencyWindow()      # raw latencies of the work endpoints: GET /latency
        # the work endpoints' requests being served (GET /latency's in_flight): the gauge
        # above also counts requests for paths the service does not have
        self.working = InFlight()

    def begin(self, endpoint: str):
        if endpoint in PROBES:
            return
        self.in_flight.inc()
        if endpoint in WORK_ENDPOINTS:
            self.working.add(1)

    def end(self, endpoint: str, status: int, seconds: float, nbytes: int):
        if endpoint in PROBES:
            return
        self.in_flight.dec()
        label = endpoint if endpoint in WORK_ENDPOINTS else OTHER
        if endpoint in WORK_ENDPOINTS:
            self.working.add(-1)
        self.requests.labels(*self.labels, label, status).inc()
        self.latency.labels(*self.labels, label).observe(seconds)
        self.bytes_sent.inc(nbytes)
        if endpoint in WORK_ENDPOINTS and status == 200:
            self.recent.add(seconds)

    def render(self) -> str:
        return render(self.registry)


def spin() -> None:
    """A moment of pure CPU work."""
    x = 0
    for _ in range(2000):
        x += 1


def burn(cpu_fraction: float, seconds: float, slice_s: float = 0.05) -> None:
    """Keep one thread busy for cpu_fraction of each slice, for `seconds` of wall time.

    The job ends at its deadline whatever CPU it actually got (the paper's back-end returns
    'the best outcome within a deadline')."""
    deadline = time.monotonic() + seconds
    while True:
        start = time.monotonic()
        if start >= deadline:
            return
        busy_until = start + slice_s * cpu_fraction
        while time.monotonic() < busy_until:
            spin()
        rest = start + slice_s - time.monotonic()
        if rest > 0:
            time.sleep(min(rest, max(0.0, deadline - time.monotonic())))


def work(cpu_fraction: float, seconds: float, slice_s: float = 0.05,
         max_debt_s: float = MAX_DEBT_S, step=spin, clock=time.monotonic,
         cpu_clock=time.thread_time, sleep=time.sleep) -> None:
    """Work-conserving job: F x S CPU-seconds of work at F of one core, so it takes S
    seconds with the CPU it asks for and longer with less (the server is busy).

    Paced by the thread's own CPU clock, not the wall clock: each slice the thread works
    until it has had F x slice of CPU, plus what earlier slices fell short by (at most
    `max_debt_s`). A wall-clock duty cycle loses the share it is preempted for, so on a
    busy machine every job runs slower than it asked, by how busy the whole machine is;
    this one makes up short
    preemptions within a few slices and runs slower only when held off for long, as when
    its server's CPU limit is reached. The clocks and the sleep are passed in for tests."""
    todo = cpu_fraction * seconds
    done = 0.0
    owed = 0.0              # CPU the job fell short of its pace by, carried to the next slice
    while done < todo:
        start, cpu0 = clock(), cpu_clock()
        want = min(cpu_fraction * slice_s + owed, todo - done)
        while cpu_clock() - cpu0 < want and clock() - start < slice_s:
            step()
        got = cpu_clock() - cpu0
        done += got
        owed = min(max_debt_s, max(0.0, want - got))
        rest = start + slice_s - clock()
        if rest > 0 and done < todo:
            sleep(rest)


class BadRequest(ValueError):
    pass


def _param(query: dict, name: str, default: float, lo: float, hi: float) -> float:
    raw = query.get(name, [None])[0]
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name}: not a number: {raw!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name}: must be within [{lo}, {hi}], got {value}")
    return value


class Handler(BaseHTTPRequestHandler):
    server_version = "malb-rom/1"
    protocol_version = "HTTP/1.1"
    kind = "ui"
    metrics: Metrics = None
    cpu_ms_per_mb = 20.0

    def log_message(self, fmt, *args):  # keep container logs quiet; metrics tell the story
        pass

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        endpoint = url.path.rstrip("/") or "/"
        started = time.monotonic()
        self.metrics.begin(endpoint)
        status, sent = 500, 0
        try:
            status, sent = self.route(endpoint, query)
        except BadRequest as exc:
            status, sent = self.reply(400, f"{exc}\n".encode())
        except (BrokenPipeError, ConnectionResetError):
            status = 499  # client went away (normal end of a video stream)
        finally:
            self.metrics.end(endpoint, status, time.monotonic() - started, sent)

    def route(self, endpoint: str, query: dict) -> tuple[int, int]:
        if endpoint == "/health":
            return self.reply(200, b"ok\n")
        if endpoint == "/metrics":
            return self.reply(200, self.metrics.render().encode(), CONTENT_TYPE)
        if endpoint == "/latency":
            summary = self.metrics.recent.summary(_param(query, "window", 5, 0.1, 60))
            body = json.dumps({**summary, "in_flight": self.metrics.working.value})
            return self.reply(200, body.encode() + b"\n", "application/json")
        if endpoint == "/bytes":
            return self.send_bytes(int(_param(query, "n", 1_000_000, 0, MAX_OBJECT)))
        if endpoint == "/stream" and self.kind == "video":
            return self.stream(_param(query, "rate", 200, 1, 1_000_000),
                               _param(query, "seconds", 10, 0.1, MAX_SECONDS))
        if endpoint == "/object" and self.kind == "ui":
            size = int(_param(query, "size", 1_000_000, 0, MAX_OBJECT))
            self.work(size)
            return self.send_bytes(size)
        if endpoint == "/job" and self.kind == "backend":
            seconds = _param(query, "seconds", 10, 0, MAX_SECONDS)
            cpu = _param(query, "cpu", 0.15, 0, 1)
            mode = query.get("mode", ["deadline"])[0]
            if mode not in ("deadline", "work"):
                raise BadRequest(f"mode: 'deadline' or 'work', got {mode[:40]!r}")
            (work if mode == "work" else burn)(cpu, seconds)
            return self.reply(200, f'{{"seconds": {seconds}, "cpu": {cpu}}}\n'.encode(),
                              "application/json")
        return self.reply(404, f"no endpoint {endpoint} on a {self.kind} service\n".encode())

    def headers_out(self, status: int, length: int | None, ctype: str):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("X-Served-By", INSTANCE)
        if length is None:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def reply(self, status: int, body: bytes, ctype: str = "text/plain") -> tuple[int, int]:
        self.headers_out(status, len(body), ctype)
        self.wfile.write(body)
        return status, len(body)

    def send_bytes(self, n: int) -> tuple[int, int]:
        self.headers_out(200, n, "application/octet-stream")
        left = n
        while left > 0:
            piece = CHUNK[:min(left, len(CHUNK))]
            self.wfile.write(piece)
            left -= len(piece)
        return 200, n

    def work(self, size: int) -> None:
        """Moderate CPU per object: hashing that takes about cpu_ms_per_mb per MB."""
        budget = self.cpu_ms_per_mb * size / 1e6 / 1000.0
        deadline = time.monotonic() + budget
        h = hashlib.sha256()
        while time.monotonic() < deadline:
            h.update(CHUNK[:4096])

    def stream(self, rate_kB_s: float, seconds: float) -> tuple[int, int]:
        """Constant bitrate: rate_kB_s kilobytes per second in 100 ms ticks, until `seconds`
        elapse or the client closes the connection."""
        self.headers_out(200, None, "video/mp2t")
        per_tick = max(1, int(rate_kB_s * 1000 / 10))
        start = time.monotonic()
        sent = 0
        tick = 0
        while time.monotonic() - start < seconds:
            left = per_tick
            while left > 0:
                piece = CHUNK[:min(left, len(CHUNK))]
                self.wfile.write(piece)
                left -= len(piece)
            sent += per_tick
            tick += 1
            pause = start + tick * 0.1 - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        return 200, sent


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="A MALB resource-organized microservice.")
    p.add_argument("kind", choices=("video", "ui", "backend"))
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--cpu-ms-per-mb", type=float, default=20.0,
                   help="ui: CPU work per MB of object (default 20 ms)")
    args = p.parse_args(argv)
    handler = type("H", (Handler,), {"kind": args.kind, "metrics": Metrics(args.kind),
                                     "cpu_ms_per_mb": args.cpu_ms_per_mb})
    server = Server((args.host, args.port), handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"{args.kind} service {INSTANCE} on :{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
