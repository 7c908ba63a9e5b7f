"""How long a microservice's flows last: the survival function S(age) of its durations, from
the profiler's duration quantiles, and a flow's expected remaining life at its age."""
from __future__ import annotations

import bisect
import math


class Survival:
    """S(age) from n duration quantiles q_1 <= ... <= q_n: 1 before q_1, then the distribution
    function runs linearly through (q_i, i/n), so S reaches 0 at the longest duration seen
    (flows shorter than q_1, the shortest 1/n of them, count until q_1)."""

    __slots__ = ("points", "probs", "longest", "_remaining")

    def __init__(self, quantiles_s):
        qs = sorted(float(q) for q in quantiles_s)
        if not qs or any(not math.isfinite(q) or q < 0 for q in qs):
            raise ValueError(f"quantiles: expected finite durations >= 0, got {quantiles_s!r}")
        n = len(qs)
        self.points = qs
        self.probs = [(i + 1) / n for i in range(n)]
        self.longest = qs[-1]
        self._remaining: dict[tuple[int, float], float] = {}   # (steps, step_s) -> seconds

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

    def expected_remaining(self, age: float) -> float:
        """How much longer a flow that has run `age` seconds is expected to run:
        the integral of S from age on, over S(age) (0 past the longest duration seen)."""
        age = max(0.0, age)
        s_age = self(age)
        if s_age <= 0.0:
            return 0.0
        pts, probs = self.points, self.probs
        area = max(0.0, pts[0] - age)               # S = 1 before the shortest
        for i in range(1, len(pts)):
            lo, hi = pts[i - 1], pts[i]
            if hi <= age or hi <= lo:
                continue
            a = max(lo, age)
            s_a = 1.0 - (probs[i - 1] + (probs[i] - probs[i - 1]) * (a - lo) / (hi - lo))
            area += (hi - a) * (s_a + 1.0 - probs[i]) / 2
        return area / s_age

    def remaining_at_step(self, steps: int, step_s: float) -> float:
        """expected_remaining(steps * step_s), kept: ages counted in steps repeat."""
        key = (steps, step_s)
        rem = self._remaining.get(key)
        if rem is None:
            rem = self._remaining[key] = self.expected_remaining(steps * step_s)
        return rem
