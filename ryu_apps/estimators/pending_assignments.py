"""Recent flow assignments per server and microservice, summed in time buckets (plain Python):
what the least-load choices add to a server's load for the flows its data does not show yet
(docs/controller.md, "How a decision is made", step 3).

- PendingFlows: assignments added, their shares against data sampled at a time with a lag
  (shares, view), the count after a time (count_after), old buckets dropped (prune);
- DEFAULT_BUCKET_S: the buckets' width (0.1 s).
"""
from __future__ import annotations

import bisect
import math

DEFAULT_BUCKET_S = 0.1
_NO_BUCKET = -(1 << 62)


class _Series:
    """One microservice's assignments to one server."""
    __slots__ = ("keys", "cn", "ct", "origin", "memo", "memo_k")

    def __init__(self):
        self.keys: list[int] = []     # bucket numbers floor(t / bucket_s), ascending
        self.cn: list[int] = [0]      # cn[i]: assignments in the buckets before keys[i]
        self.ct: list[float] = [0.0]  # the same for the sum of (t - origin)
        self.origin = 0.0             # reference time: small sums keep their precision
        # (d, L) -> (shares, count after d, cn through d's bucket) of the flows up to d's
        # bucket; valid while no flow lands in a bucket <= memo_k and nothing is dropped
        self.memo: dict[tuple[float, float], tuple[float, int, int]] = {}
        self.memo_k = _NO_BUCKET

    def add(self, t: float, k: int) -> None:
        keys, cn, ct = self.keys, self.cn, self.ct
        if k <= self.memo_k:
            self.memo.clear()
            self.memo_k = _NO_BUCKET
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

    def drop_before(self, i: int) -> None:
        """Forget buckets [0, i); re-base the sums on the first bucket kept."""
        if i >= len(self.keys):
            _Series.__init__(self)      # empty again
            return
        n0, t0 = self.cn[i], self.ct[i]
        # the first kept bucket's mean time is a reference as good as any
        shift = (self.ct[i + 1] - t0) / (self.cn[i + 1] - n0)
        self.keys = self.keys[i:]
        self.cn = [c - n0 for c in self.cn[i:]]
        self.ct = [c - t0 - shift * n for c, n in zip(self.ct[i:], self.cn)]
        self.origin += shift
        self.memo.clear()
        self.memo_k = _NO_BUCKET

    def up_to(self, d: float, lag: float, kd: int, kl: int, inv: float
              ) -> tuple[float, int, int]:
        """The flows up to d's bucket: their shares, how many came after d, and cn through
        d's bucket. With x = the sum of (d - t) over n flows, their shares sum to n - x / L."""
        keys, cn, ct = self.keys, self.cn, self.ct
        rd = d - self.origin
        di = bisect.bisect_left(keys, kd)
        dj = bisect.bisect_right(keys, kd, di)
        total, count = 0.0, 0
        if dj > di:                                 # d's bucket, at its mean time
            n = cn[dj] - cn[di]
            x = n * rd - (ct[dj] - ct[di])
            if x < 0:
                count = n
            total = n if x <= 0 else (n - x * inv if n > x * inv else 0.0)
        if kl != kd:
            li = bisect.bisect_left(keys, kl, 0, di)
            lj = bisect.bisect_right(keys, kl, li, di)
            n = cn[di] - cn[lj]                     # wholly between the kinks: exact
            if n:
                total += n - (n * rd - (ct[di] - ct[lj])) * inv
            if lj > li:                             # d - lag's bucket, at its mean time
                n = cn[lj] - cn[li]
                x = (n * rd - (ct[lj] - ct[li])) * inv
                if n > x:
                    total += n - x
        return total, count, cn[dj]


class PendingFlows:
    """Assignments per (server, microservice), as running (prefix) sums per bucket of
    `bucket_s`: their number and the sum of their times. A flow assigned at t counts,
    against data sampled at d with a prediction lag L, with the share

        1                      if t >= d
        1 - (d - t) / L        if d - L < t < d      (0 when L = 0)
        0                      otherwise,

    which the sums give exactly for every bucket wholly on one side of each kink. The (at
    most two) buckets holding d and d - L count their flows at the bucket's mean time: for L
    of a bucket or more, an error of at most n * bucket_s / (4 L) flows for a bucket of n
    (none when its flows share one time); for L = 0, the bucket holding d counts all or
    nothing. tests/unit/ryu_apps/estimators/test_pending.py checks the bound against a
    per-flow walk. Counts after a time are exact the same way. Each series remembers its
    part up to d's bucket per (d, L), recomputed when the data moves on, buckets are
    dropped or a flow lands at or before d's bucket, so a decision costs one subtraction
    per series whatever the number of flows. `prune` drops buckets in batches and re-bases
    the sums, which never grow with the process's age."""

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
        if since is None:
            return sum(s.cn[-1] for s in self._series.get(server, {}).values())
        return self.view(server, since, 0.0)[0]

    def shares(self, server: str, data_time: float, lag_s: float) -> dict[str, float]:
        return self.view(server, data_time, lag_s)[1]

    def view(self, server: str, data_time: float, lag_s: float
             ) -> tuple[int, dict[str, float]]:
        """What the data sampled at data_time, with lag_s, does not show yet: how many
        flows came after it, and per microservice the sum of the shares above."""
        series = self._series.get(server)
        if not series:
            return 0, {}
        key = (data_time, lag_s)
        count, out = 0, {}
        for ms, s in series.items():
            m = s.memo.get(key)
            if m is None:
                kd = self._bucket(data_time)
                inv = 1.0 / lag_s if lag_s > 0 else 0.0
                kl = self._bucket(data_time - lag_s) if inv else kd
                if len(s.memo) >= 4:      # two views per server in use, at most
                    s.memo.clear()
                    s.memo_k = _NO_BUCKET
                m = s.memo[key] = s.up_to(data_time, lag_s, kd, kl, inv)
                s.memo_k = max(s.memo_k, kd)
            after = s.cn[-1] - m[2]                  # after d's bucket: in full
            count += after + m[1]
            total = after + m[0]
            if total > 0:
                out[ms] = total
        return count, out

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
