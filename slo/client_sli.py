"""The SLI as the clients see it: the latencies of requests that clients (a load generator, a
probe client) measured end to end and reported to the service's agent, read over a window
as the service's own GET /latency answers (plain Python, time passed in).

- ClientLatencies: one service's reported requests, kept for a while (in the services' own
  common/latency_window.LatencyWindow), and their window;
- parse_observations: a report's body checked, or ValueError naming what is wrong;
- MAX_OBSERVATIONS: how many requests one report may carry.

A service's own histogram starts timing when it reads a request and stops when it writes the
answer: the connection's setup through the switch and the controller, the queue in the
listen backlog and the answer's way back are not in it, and a user who sets `target_ms: 40`
means what the clients see (docs/slo.md measures the difference).
Reports carry each request's end as Unix time from the client's clock: clients and agent
must share a clock (one machine here; NTP across machines, whose milliseconds of skew only
move the window's edge).
"""
from __future__ import annotations

import math
import time

from common.latency_window import LatencyWindow

MAX_OBSERVATIONS = 10_000
KEEP_S = 120.0             # longer than any loop window (agents.slo.window_s <= 60)
MAX_KEPT = 500_000


def parse_observations(body) -> tuple[str, list[tuple[float, float]]]:
    """(service, [(end, latency_ms)]) from {"service": name, "observations": [[end_unix_s,
    latency_ms], ...]}; ValueError naming the field otherwise."""
    if not isinstance(body, dict):
        raise ValueError("body: expected an object with service and observations")
    unknown = set(body) - {"service", "observations"}
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown field (service, observations)")
    service = body.get("service")
    if not isinstance(service, str) or not service:
        raise ValueError("service: expected the microservice's name")
    obs = body.get("observations")
    if not isinstance(obs, list):
        raise ValueError("observations: expected a list of [end_unix_s, latency_ms]")
    if len(obs) > MAX_OBSERVATIONS:
        raise ValueError(f"observations: at most {MAX_OBSERVATIONS} per report, got {len(obs)}")
    out = []
    for k, o in enumerate(obs):
        if not (isinstance(o, list) and len(o) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for v in o)) or o[0] <= 0 or o[1] < 0:
            raise ValueError(f"observations[{k}]: expected [end_unix_s > 0, latency_ms >= 0], "
                             f"got {o!r}"[:160])
        out.append((float(o[0]), float(o[1])))
    return service, out


class ClientLatencies:
    """One service's client-reported requests in a LatencyWindow (the services' own store,
    on the wall clock: the reports' ends are Unix times), and how the reports came."""

    def __init__(self, keep_s: float = KEEP_S, max_kept: int = MAX_KEPT):
        self.kept = LatencyWindow(horizon_s=keep_s, max_samples=max_kept, clock=time.time)
        self.reports = 0
        self.received = 0
        self.last_report: float | None = None

    def add(self, observations: list[tuple[float, float]], now: float) -> int:
        """Keep a report's requests, but those that ended before any window could reach
        or after now (a client clock ahead); returns how many were kept."""
        kept = 0
        for end, latency_ms in observations:
            if now - self.kept.horizon_s <= end <= now:
                self.kept.add(latency_ms / 1000.0, now=end)
                kept += 1
        self.reports += 1
        self.received += len(observations)
        self.last_report = now
        return kept

    def window(self, now: float, window_s: float) -> dict | None:
        """The requests that ended in the window_s seconds up to the last report (what
        came since is not known yet: a window up to now would miss a report period's
        requests; once reports have stopped for longer than a window, up to now): count and
        p50/p90/p95/p99 in ms, as a service's GET /latency answers;
        None when no client has reported yet (no signal, not an idle service)."""
        if self.last_report is None:
            return None
        # reports that stopped longer ago than a window: the window runs to now (empty)
        end = self.last_report if 0 <= now - self.last_report <= window_s else now
        return self.kept.summary(window_s, now=end)

    def status(self, now: float) -> dict:
        return {"reports": self.reports, "requests_received": self.received,
                "last_report_age_s": None if self.last_report is None
                else round(now - self.last_report, 3)}
