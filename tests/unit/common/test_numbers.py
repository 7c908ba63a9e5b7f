"""common/numbers.py: numbers from outside, judged one way."""
import pytest

from common.numbers import finite_non_negative, is_finite, is_real

HUGE = 10 ** 400        # JSON and YAML parse it to an int no float holds


@pytest.mark.parametrize("v,real,finite,non_negative", [
    (0, True, True, True), (2.5, True, True, True), (-1, True, True, False),
    (True, False, False, False), (False, False, False, False), ("1", False, False, False),
    (None, False, False, False), (float("inf"), True, False, False),
    (float("nan"), True, False, False), (HUGE, True, False, False),
    (-HUGE, True, False, False), (1.7e308, True, True, True),
])
def test_numbers_from_outside(v, real, finite, non_negative):
    assert (is_real(v), is_finite(v), finite_non_negative(v)) == (real, finite, non_negative)
