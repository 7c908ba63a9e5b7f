"""Statistics helpers shared by the profiler, the experiments and the benchmarks, in plain
Python: they run on a few to a few thousand values at a time, where numpy's per-call
overhead is most of the cost (the profiler classifies a thousand microservices a period)."""
from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(values: Sequence[float], q: float, *, is_sorted: bool = False) -> float | None:
    """The q-quantile (0 <= q <= 1) by linear interpolation between the closest ranks, as
    numpy's default method; None without values."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile: expected q in [0, 1], got {q!r}")
    if not values:
        return None
    s = values if is_sorted else sorted(values)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile of a histogram given as (upper bound, cumulative count) pairs in
    increasing order (the last bound may be infinite), interpolated linearly inside the
    bucket that holds it, as Prometheus' histogram_quantile does; None without counts. A
    quantile in the open last bucket is that bucket's lower bound."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile: expected q in [0, 1], got {q!r}")
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / \
                (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound
