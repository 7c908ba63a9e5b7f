import numpy as np
import pytest

from common.stats import histogram_quantile, quantile


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0],
                                    list(np.random.default_rng(1).lognormal(0, 1, 101))])
@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 0.99, 1.0])
def test_quantile_is_numpys_linear_interpolation(values, q):
    assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))
    assert quantile(sorted(values), q, is_sorted=True) == quantile(values, q)


def test_quantile_edges():
    assert quantile([], 0.5) is None
    with pytest.raises(ValueError, match="q in"):
        quantile([1.0], 1.5)


def test_histogram_quantile_interpolates_inside_the_bucket():
    buckets = [(0.01, 50.0), (0.02, 90.0), (0.05, 100.0), (float("inf"), 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.01)
    assert histogram_quantile(0.7, buckets) == pytest.approx(0.015)     # halfway in 10-20 ms
    assert histogram_quantile(0.95, buckets) == pytest.approx(0.035)
    assert histogram_quantile(1.0, [(0.1, 1.0), (float("inf"), 2.0)]) == 0.1  # open bucket
    assert histogram_quantile(0.5, []) is None
    assert histogram_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None
