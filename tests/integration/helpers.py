"""Client-side helpers for integration tests: real curl from a Mininet client host."""
from __future__ import annotations

import copy
import re
import time
import urllib.request

from common.config import DEFAULT_MICROSERVICES

# Fast periods so degraded modes show within seconds; everything else as in the paper.
FAST_CONFIG = {
    "testbed": {"clients": 2},
    # written to a file by the Stack, where microservices are required: the paper's three
    "microservices": copy.deepcopy(DEFAULT_MICROSERVICES),
    "controller": {"monitoring_period_s": 1, "idle_timeout_s": 5, "server_stale_after_s": 4,
                   "weights_stale_after_s": 8,
                   "health": {"method": "tcp", "interval_s": 1, "timeout_s": 0.5,
                              "unhealthy_after": 2, "healthy_after": 1}},
    "profiler": {"period_s": 1, "window": 3, "flow_threshold_s": 2},
    "agents": {"period_s": 1},
}


def served_by(client, url: str, n: int, max_time: float = 20) -> list[str]:
    """n sequential requests (new TCP connection each); the instance that served each one,
    or 'FAIL:<code>' for a request that did not succeed."""
    out = client.cmd(
        f"for i in $(seq 1 {n}); do curl -s -o /dev/null -D - --max-time {max_time} "
        f"-w 'STATUS:%{{http_code}}\\n' '{url}' | tr -d '\\r' | "
        f"grep -iE '^(x-served-by|STATUS)'; echo END; done")
    results, who = [], None
    for line in out.splitlines():
        line = line.strip()
        if line.lower().startswith("x-served-by:"):
            who = line.split(":", 1)[1].strip()
        elif line.startswith("STATUS:"):
            code = line.split(":", 1)[1]
            results.append(who if code == "200" and who else f"FAIL:{code}")
            who = None
    return results


def download(client, url: str, max_time: float = 60) -> tuple[int, int, str]:
    """(HTTP status, bytes received, served by) of one request."""
    out = client.cmd(f"curl -s -o /dev/null -D /tmp/h --max-time {max_time} "
                     f"-w '%{{http_code}} %{{size_download}}' '{url}'; echo; "
                     f"tr -d '\\r' < /tmp/h | grep -i '^x-served-by' ").strip().splitlines()
    code, size = out[0].split()
    who = out[1].split(":", 1)[1].strip() if len(out) > 1 else ""
    return int(code), int(size), who


def start_download(client, url: str, tag: str, max_time: float = 120) -> None:
    """A download in the background on the client; collect it with finish_download."""
    client.cmd(f"curl -s -o /dev/null --max-time {max_time} -w '%{{http_code}} "
               f"%{{size_download}}' '{url}' > /tmp/{tag}.out 2>&1 &")


def finish_download(client, tag: str, timeout_s: float = 120) -> tuple[int, int]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        out = client.cmd(f"cat /tmp/{tag}.out 2>/dev/null").strip()
        if re.fullmatch(r"\d{3} \d+", out):
            code, size = out.split()
            return int(code), int(size)
        time.sleep(0.5)
    raise TimeoutError(f"download {tag} did not finish")


def burn(node, on: bool) -> None:
    if on:
        node.cmd("python3 -c 'while True: pass' > /dev/null 2>&1 &")
    else:
        node.cmd("pkill -f 'while True: pass'")


def packet_in_count(stack, kind: str) -> float:
    """The controller's malb_packet_in_total for one kind, from its Prometheus text."""
    text = urllib.request.urlopen(stack.controller_url("/metrics"), timeout=5).read().decode()
    m = re.search(r'^malb_packet_in_total\{kind="%s"\} (\S+)$' % re.escape(kind), text, re.M)
    return float(m.group(1)) if m else 0.0
