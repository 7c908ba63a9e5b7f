"""What a number read from outside (JSON, YAML, a REST body, an agent's answer) must be, said
once: a real number that is not a bool, finite (an integer too large for a float is not:
math.isfinite raises on it), and where asked not negative.
"""
from __future__ import annotations

import math
from typing import TypeGuard


def is_real(v) -> TypeGuard[float]:         # (an int is a float to the type checker)
    """An int or a float, not a bool (True is an int to Python, not a number to us)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_finite(v) -> TypeGuard[float]:
    """A real number that a float holds and that is neither inf nor NaN."""
    if not is_real(v):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:          # an int beyond a float's range (JSON and YAML allow one)
        return False


def finite_non_negative(v) -> TypeGuard[float]:
    """A finite real number >= 0: what a use, a time span or a weight must be to count."""
    return is_finite(v) and v >= 0
