"""How many of the flows sent to a server are still running, estimated (plain Python).

The controller knows when it sent each flow where; the profiler knows how long flows of each
microservice last (20 quantiles of the durations it has seen). A flow sent at t is still
running at time x with probability S(x - t), S the survival function of its microservice's
durations; the expected number of running flows of a microservice on a server is the sum of
S over the flows sent there. With what one running flow costs (the profiler's per-flow use)
this is a load estimate without the lag of measured or predicted data (issue 12: in the
spirit of Envoy's least-request, which counts the requests each backend has open).

Flows are counted per (server, microservice) in buckets of ``bucket_s`` (1 s), so an estimate
costs the number of buckets within the longest duration, whatever the number of flows, and
memory is bounded by that horizon (at most ``max_age_s``).
"""
from __future__ import annotations

import bisect
import math
from collections import deque

DEFAULT_BUCKET_S = 1.0
DEFAULT_MAX_AGE_S = 600.0


class Survival:
    """S(age) from n duration quantiles q_1 <= ... <= q_n: 1 before q_1, then the distribution
    function runs linearly through (q_i, i/n), so S reaches 0 at the longest duration seen
    (flows shorter than q_1, the shortest 1/n of them, count until q_1)."""

    __slots__ = ("points", "probs", "longest")

    def __init__(self, quantiles_s):
        qs = sorted(float(q) for q in quantiles_s)
        if not qs or any(not math.isfinite(q) or q < 0 for q in qs):
            raise ValueError(f"quantiles: expected finite durations >= 0, got {quantiles_s!r}")
        n = len(qs)
        self.points = qs
        self.probs = [(i + 1) / n for i in range(n)]
        self.longest = qs[-1]

    def __call__(self, age: float) -> float:
        pts = self.points
        if age < pts[0]:
            return 1.0
        if age >= self.longest:
            return 0.0
        i = bisect.bisect_right(pts, age)          # pts[i-1] <= age < pts[i]
        lo, hi = pts[i - 1], pts[i]
        p_lo, p_hi = self.probs[i - 1], self.probs[i]
        return 1.0 - (p_lo + (p_hi - p_lo) * (age - lo) / (hi - lo))


class RunningFlows:
    """Flow starts per server and microservice, in time buckets: [bucket number, count]."""

    def __init__(self, bucket_s: float = DEFAULT_BUCKET_S, max_age_s: float = DEFAULT_MAX_AGE_S):
        if not bucket_s > 0 or not max_age_s > 0:
            raise ValueError("bucket_s and max_age_s must be > 0")
        self.bucket_s, self.max_age_s = bucket_s, max_age_s
        self._starts: dict[str, dict[str, deque]] = {}

    def add(self, server: str, microservice: str, t: float) -> None:
        k = math.floor(t / self.bucket_s)
        q = self._starts.setdefault(server, {}).setdefault(microservice, deque())
        if q and q[-1][0] == k:
            q[-1][1] += 1
        elif not q or q[-1][0] < k:
            q.append([k, 1])
        else:                       # the clock stepped back: rare, insert in order
            keys = [b[0] for b in q]
            i = bisect.bisect_left(keys, k)
            if i < len(q) and q[i][0] == k:
                q[i][1] += 1
            else:
                q.insert(i, [k, 1])
        oldest = math.floor((t - self.max_age_s) / self.bucket_s)
        while q and q[0][0] < oldest:
            q.popleft()

    def expected(self, server: str, at: float, survival: dict[str, "Survival | float"]
                 ) -> dict[str, float]:
        """Per microservice, the expected number of its flows on the server still running at
        `at` (flows sent after `at` do not count). `survival` maps a microservice to its
        Survival, or to a number of seconds for which every flow counts as running (no
        durations known yet); microservices not in it are left out."""
        out = {}
        half = self.bucket_s / 2
        for ms, q in self._starts.get(server, {}).items():
            s = survival.get(ms)
            if s is None:
                continue
            horizon = s.longest if isinstance(s, Survival) else float(s)
            total = 0.0
            for k, n in reversed(q):
                age = at - (k * self.bucket_s + half)
                if age < -half:
                    continue                  # sent after `at`
                if age >= horizon:
                    break
                total += n * (s(max(0.0, age)) if isinstance(s, Survival) else 1.0)
            if total > 0:
                out[ms] = total
        return out

    def buckets(self) -> int:
        return sum(len(q) for per in self._starts.values() for q in per.values())


class OpenFlows:
    """Flows whose end the controller sees (long TCP flows: the instance's FIN), counted
    exactly. The flows running on a server at time x are those started by x less those
    ended by x: both are running totals per server and microservice, with the last
    `keep_s` of starts and ends in buckets of `bucket_s`, so a count at a recent time costs
    the buckets after it, whatever the number of flows. A flow that never shows its end is
    dropped (counted as ended) after `max_age_s`."""

    def __init__(self, bucket_s: float = 0.1, keep_s: float = 120.0,
                 max_age_s: float = DEFAULT_MAX_AGE_S):
        if not bucket_s > 0 or not keep_s > 0 or not max_age_s > 0:
            raise ValueError("bucket_s, keep_s and max_age_s must be > 0")
        self.bucket_s, self.keep_s, self.max_age_s = bucket_s, keep_s, max_age_s
        self._open: dict = {}          # key -> (server, microservice, start), start order
        self._totals: dict[tuple[str, str], list[int]] = {}     # (server, ms) -> [starts, ends]
        self._recent: dict[tuple[str, str], deque] = {}         # -> [bucket, starts, ends]

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key) -> bool:
        return key in self._open

    def _event(self, server: str, ms: str, t: float, start: int, end: int) -> None:
        where = (server, ms)
        tot = self._totals.setdefault(where, [0, 0])
        tot[0] += start
        tot[1] += end
        k = math.floor(t / self.bucket_s)
        q = self._recent.setdefault(where, deque())
        if q and q[-1][0] >= k:        # same bucket (or the clock stepped back: the last)
            q[-1][1] += start
            q[-1][2] += end
        else:
            q.append([k, start, end])
        oldest = math.floor((t - self.keep_s) / self.bucket_s)
        while q and q[0][0] < oldest:
            q.popleft()

    def add(self, key, server: str, microservice: str, t: float) -> None:
        """A flow started (a second add of an open key changes nothing)."""
        if key in self._open:
            return
        self.expire(t)
        self._open[key] = (server, microservice, t)
        self._event(server, microservice, t, 1, 0)

    def end(self, key, t: float) -> bool:
        """The flow ended at t; False if it was not open (unknown, or already ended)."""
        flow = self._open.pop(key, None)
        if flow is None:
            return False
        self._event(flow[0], flow[1], t, 0, 1)
        return True

    def expire(self, now: float) -> int:
        n = 0
        while self._open:
            key, (server, ms, start) = next(iter(self._open.items()))
            if now - start <= self.max_age_s:
                break
            del self._open[key]
            self._event(server, ms, now, 0, 1)
            n += 1
        return n

    def running(self, server: str, at: float) -> dict[str, int]:
        """Per microservice, its flows on the server running at `at` (within keep_s of the
        latest event; earlier times count as the oldest kept)."""
        out = {}
        for (srv, ms), (starts, ends) in self._totals.items():
            if srv != server:
                continue
            for k, s, e in reversed(self._recent.get((srv, ms), ())):
                if (k + 0.5) * self.bucket_s <= at:
                    break
                starts, ends = starts - s, ends - e
            if starts - ends > 0:
                out[ms] = starts - ends
        return out
