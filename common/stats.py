"""Statistics helpers shared by the profiler, the experiments and the benchmarks, in plain
Python: they run on a few to a few thousand values at a time, where numpy's per-call
overhead is most of the cost (the profiler classifies a thousand microservices a period)."""
from __future__ import annotations

import math
from typing import Sequence


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
