"""Recent flow assignments per server and microservice, summed in time buckets (plain Python).

The least-load policy corrects a server's load for the flows sent to it that its data does
not show yet (ryu_apps/policy.py): a flow assigned at t counts, against data sampled at d
with a prediction lag L, with the share

    1                      if t >= d
    1 - (d - t) / L        if d - L < t < d      (0 when L = 0)
    0                      otherwise.

Walking every remembered assignment per decision cost milliseconds at thousands of pending
flows. Here each (server, microservice) keeps, per bucket of ``bucket_s`` seconds, the
number of assignments and the sum of their times, as running (prefix) sums: a decision
bisects for d and d - L and reads sums, in time independent of the number of flows. The
share is linear in t between the two kinks, so the sums give it exactly for every bucket
that lies wholly on one side of each kink. Only the (at most two) buckets holding d or
d - L are approximated, by counting their flows at the buckets' mean time: for L at least
one bucket the error is at most n * bucket_s / (4 L) flows for a bucket of n flows
(n * 0.008 at the default 0.1 s and a 3 s lag), and none when the bucket's flows share one
time; for L = 0 (switch counters) the flows of the one bucket holding d count all or
nothing, by their mean time. Counts of flows after a time (the tie-break) are exact in the
same way. (tests/unit/test_pending.py checks the bound against the per-flow walk.)

Memory: buckets whose every flow is older than the horizon the caller gives (nothing older
can count for any fresh data) are dropped, in batches so that dropping costs O(1) per bucket
on average; the sums are re-based on each drop so they never grow with the process's age.
"""
from __future__ import annotations

import bisect
import math

DEFAULT_BUCKET_S = 0.1


class _Series:
    """One microservice's assignments to one server."""
    __slots__ = ("keys", "cn", "ct", "origin")

    def __init__(self):
        self.keys: list[int] = []     # bucket numbers floor(t / bucket_s), ascending
        self.cn: list[int] = [0]      # cn[i]: assignments in the buckets before keys[i]
        self.ct: list[float] = [0.0]  # the same for the sum of (t - origin)
        self.origin = 0.0             # reference time: small sums keep their precision

    def add(self, t: float, k: int) -> None:
        keys, cn, ct = self.keys, self.cn, self.ct
        if not keys:
            self.origin = t
        rel = t - self.origin
        if keys and k == keys[-1]:
            cn[-1] += 1
            ct[-1] += rel
        elif not keys or k > keys[-1]:
            keys.append(k)
            cn.append(cn[-1] + 1)
            ct.append(ct[-1] + rel)
        else:
            # an assignment older than the newest bucket (the clock stepped back): rare,
            # O(buckets)
            i = bisect.bisect_left(keys, k)
            if keys[i] != k:
                keys.insert(i, k)
                cn.insert(i + 1, cn[i])
                ct.insert(i + 1, ct[i])
            for j in range(i + 1, len(cn)):
                cn[j] += 1
                ct[j] += rel

    def span(self, k: int) -> tuple[int, int]:
        """Index range [i, j) of bucket k (empty when absent)."""
        i = bisect.bisect_left(self.keys, k)
        return i, i + (i < len(self.keys) and self.keys[i] == k)

    def sums(self, i: int, j: int) -> tuple[int, float]:
        """Assignments in buckets [i, j): how many, and the sum of (t - origin)."""
        return self.cn[j] - self.cn[i], self.ct[j] - self.ct[i]

    def drop_before(self, i: int) -> None:
        """Forget buckets [0, i); re-base the sums on the first bucket kept."""
        if i >= len(self.keys):
            self.__init__()
            return
        n0, t0 = self.cn[i], self.ct[i]
        # the first kept bucket's mean time is a reference as good as any
        shift = (self.ct[i + 1] - t0) / (self.cn[i + 1] - n0)
        new_origin = self.origin + shift
        self.keys = self.keys[i:]
        self.cn = [c - n0 for c in self.cn[i:]]
        self.ct = [c - t0 - shift * n for c, n in zip(self.ct[i:], self.cn)]
        self.origin = new_origin


class PendingFlows:
    def __init__(self, bucket_s: float = DEFAULT_BUCKET_S):
        if not bucket_s > 0:
            raise ValueError(f"bucket_s: must be > 0, got {bucket_s!r}")
        self.bucket_s = bucket_s
        self._series: dict[str, dict[str, _Series]] = {}   # server -> microservice -> series

    def _bucket(self, t: float) -> int:
        return math.floor(t / self.bucket_s)

    def add(self, server: str, microservice: str, t: float) -> None:
        per_ms = self._series.setdefault(server, {})
        s = per_ms.get(microservice)
        if s is None:
            s = per_ms[microservice] = _Series()
        s.add(t, self._bucket(t))

    def count_after(self, server: str, since: float | None) -> int:
        """Assignments made after `since` (a bucket holding `since` counts by its mean;
        None: all kept)."""
        per_ms = self._series.get(server, {})
        if since is None:
            return sum(s.cn[-1] for s in per_ms.values())
        k = self._bucket(since)
        total = 0
        for s in per_ms.values():
            i, j = s.span(k)
            total += s.cn[-1] - s.cn[j]
            if j > i:
                n, tsum = s.sums(i, j)
                total += n if s.origin + tsum / n > since else 0
        return total

    def shares(self, server: str, data_time: float, lag_s: float) -> dict[str, float]:
        """Per microservice, how many of its flows the data sampled at data_time does not
        show yet: the sum of the shares above."""
        d, lag = data_time, lag_s
        kd = self._bucket(d)
        kl = self._bucket(d - lag) if lag > 0 else kd
        out = {}
        for ms, s in self._series.get(server, {}).items():
            di, dj = s.span(kd)
            total = float(s.cn[-1] - s.cn[dj])           # after d's bucket: in full
            if lag <= 0:
                if dj > di:
                    n, tsum = s.sums(di, dj)
                    total += n if s.origin + tsum / n >= d else 0
            elif kl == kd:
                total += _at_mean(s, di, dj, d, lag)
            else:
                li, lj = s.span(kl)
                n, tsum = s.sums(lj, di)                  # wholly between the kinks
                if n:
                    total += n * (1.0 - (d - s.origin) / lag) + tsum / lag
                total += _at_mean(s, li, lj, d, lag) + _at_mean(s, di, dj, d, lag)
            if total > 0:
                out[ms] = total
        return out

    def prune(self, server: str, horizon: float, batch: int = 32) -> None:
        """Forget the buckets wholly at or before `horizon`, once at least `batch` of them
        (or a quarter of a series) are due: dropping then costs O(1) per bucket."""
        last = self._bucket(horizon) - 1      # bucket k ends at (k + 1) * bucket_s
        per_ms = self._series.get(server)
        if not per_ms:
            return
        for ms in list(per_ms):
            s = per_ms[ms]
            i = bisect.bisect_right(s.keys, last)
            if i == len(s.keys):
                del per_ms[ms]
            elif i >= batch or (i and i >= len(s.keys) // 4):
                s.drop_before(i)

    def buckets(self) -> int:
        """How many buckets are kept, all servers together (memory)."""
        return sum(len(s.keys) for per_ms in self._series.values() for s in per_ms.values())


def _at_mean(s: _Series, i: int, j: int, d: float, lag: float) -> float:
    """A bucket holding a kink: its flows counted at their mean time."""
    if j <= i:
        return 0.0
    n, tsum = s.sums(i, j)
    age = d - (s.origin + tsum / n)
    return n * (1.0 if age <= 0 else max(0.0, 1.0 - age / lag))
