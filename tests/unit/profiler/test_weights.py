import math

import pytest

from profiler.weights import weights_from_usage


def test_paper_profiling_example():
    # Section IV.A: average usage 0.51, 19.26, 22.87 -> weights 0.012, 0.452, 0.536
    weights = weights_from_usage(0.51, 19.26, 22.87)
    assert tuple(round(w, 3) for w in weights) == (0.012, 0.452, 0.536)
    assert math.isclose(sum(weights), 1.0)


def test_weights_are_shares_of_the_total():
    assert weights_from_usage(10, 30, 60) == pytest.approx((0.1, 0.3, 0.6))


def test_no_usage_means_equal_weights():
    assert weights_from_usage(0, 0, 0) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert weights_from_usage(None, None, None) == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_unknown_resource_gets_no_weight():
    assert weights_from_usage(20.0, None, 60.0) == pytest.approx((0.25, 0.0, 0.75))


@pytest.mark.parametrize("resource", ["cpu", "mem", "net"])
@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), True])
def test_bad_usage_names_the_resource(resource, bad):
    args = {"cpu": 1.0, "mem": 1.0, "net": 1.0, resource: bad}
    with pytest.raises(ValueError, match=resource):
        weights_from_usage(**args)
