"""How many of the flows sent to a server are still running, estimated from the assignments and
their microservice's durations (plain Python): a flow sent at t still runs at x with
probability S(x - t), S the survival function of its microservice's durations
(estimators/survival.py). With what one running flow costs, a load estimate without the lag
of measured or predicted data (docs/controller.md, "How a decision is made", step 3).

- RunningFlows: flow starts per (server, microservice) in buckets of bucket_s, and the
  expected number still running at a time (expected);
- DEFAULT_BUCKET_S, DEFAULT_MAX_AGE_S: the buckets' width (1 s), how long starts are kept.
"""
from __future__ import annotations

import bisect
import math
from collections import deque

from ryu_apps.estimators.survival import Survival

DEFAULT_BUCKET_S = 1.0
DEFAULT_MAX_AGE_S = 600.0


class RunningFlows:
    """Flow starts per server and microservice, in time buckets: [bucket number, count]. An
    estimate costs the buckets within the longest duration, whatever the number of flows;
    memory is bounded by that horizon (at most max_age_s)."""

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

    def expected(self, server: str, at: float, survival: dict[str, Survival | float]
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
