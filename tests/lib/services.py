"""Our services (services/) on loopback for unit tests: free_port, start_service (a service
module started and answering /health), latency (its GET /latency), in_flight_reaches (its
requests in flight polled until they reach a count: a busy machine may take a while)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

from tests.conftest import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(args: list[str]):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", *args, "--host", "127.0.0.1", "--port",
                             str(port)], cwd=ROOT, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{args} did not start")


def latency(port, window=30):
    return json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/latency?window={window}",
                                            timeout=5))


def in_flight_reaches(port, count: int, within_s: float = 10.0) -> dict:
    """The service's GET /latency once its requests in flight are `count` (or the last one
    read, after within_s)."""
    deadline = time.monotonic() + within_s
    while True:
        doc = latency(port)
        if doc["in_flight"] == count or time.monotonic() > deadline:
            return doc
        time.sleep(0.05)
