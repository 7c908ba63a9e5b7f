"""What a service's GET /latency answers, kept by the service itself:

- LatencyWindow: recent request latencies as raw samples, for tail quantiles exact enough
  for an SLO loop (a 10 % band around 60-90 ms is finer than any fixed histogram bucket
  near it). Bounded in time (`horizon_s`) and in count (`max_samples`, the oldest dropped
  first);
- InFlight: the requests being served right now (the probes' requests in flight).

Standard library only: copied into the service image. Both thread-safe.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque

QUANTILES = (0.5, 0.9, 0.95, 0.99)


def exact_quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values, linear between order statistics (numpy's default)."""
    if not ordered:
        raise ValueError("no values")
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class LatencyWindow:
    def __init__(self, horizon_s: float = 60.0, max_samples: int = 200_000, clock=time.monotonic):
        self.horizon_s, self.clock = horizon_s, clock
        self.samples: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self.lock = threading.Lock()

    def add(self, seconds: float, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        with self.lock:
            self.samples.append((now, seconds))
            while self.samples and self.samples[0][0] < now - self.horizon_s:
                self.samples.popleft()

    def summary(self, window_s: float, now: float | None = None) -> dict:
        """Count and p50/p90/p95/p99 in ms of the requests that ended in the last window_s
        seconds (None without requests)."""
        now = self.clock() if now is None else now
        window_s = min(window_s, self.horizon_s)
        with self.lock:
            values = sorted(v for t, v in self.samples if t >= now - window_s)
        out = {"window_s": window_s, "count": len(values)}
        for q in QUANTILES:
            key = f"p{round(q * 100)}_ms"
            out[key] = round(1000 * exact_quantile(values, q), 3) if values else None
        return out


class InFlight:
    """A count of requests being served right now; thread-safe (+= on an attribute is not
    atomic across threads)."""

    def __init__(self):
        self._n = 0
        self._lock = threading.Lock()

    def add(self, k: int) -> None:
        with self._lock:
            self._n += k

    @property
    def value(self) -> int:
        return self._n
