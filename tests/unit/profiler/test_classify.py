import numpy as np
import pytest

from profiler.classify import auto_threshold, best_split, classify_all, classify_threshold

RNG = np.random.default_rng(42)
SHORT = list(RNG.uniform(0.05, 0.5, 120))      # user-interaction requests
LONG = list(RNG.uniform(10.0, 30.0, 40))       # back-end medium/heavy requests


def test_threshold_classification_uses_the_median():
    assert classify_threshold([0.1, 0.2, 5.0], 3.0) == "short"
    assert classify_threshold([0.1, 5.0, 6.0], 3.0) == "long"
    assert classify_threshold([3.0], 3.0) == "long"    # "less than the threshold" is short
    assert classify_threshold([], 3.0) is None


def test_quantile_makes_the_test_stricter():
    durations = [0.1] * 8 + [10.0] * 2
    assert classify_threshold(durations, 3.0) == "short"
    assert classify_threshold(durations, 3.0, quantile=0.9) == "long"
    with pytest.raises(ValueError, match="quantile"):
        classify_threshold(durations, 3.0, quantile=1.5)
    with pytest.raises(ValueError, match="threshold_s"):
        classify_threshold(durations, float("nan"))
    with pytest.raises(ValueError, match="durations"):
        classify_threshold([1.0, -2.0], 3.0)


def test_auto_threshold_falls_between_the_two_modes():
    threshold = auto_threshold({"ui": SHORT, "backend": LONG})
    assert threshold is not None and max(SHORT) < threshold < min(LONG)
    split = best_split(SHORT + LONG)
    assert (split.n_short, split.n_long) == (120, 40) and split.separation > 4


def test_auto_threshold_handles_unbalanced_modes():
    many_short = list(RNG.uniform(0.05, 0.5, 1000))
    few_long = list(RNG.uniform(10.0, 12.0, 30))
    threshold = auto_threshold({"ui": many_short, "backend": few_long})
    assert threshold is not None and 0.5 < threshold < 10.0


@pytest.mark.parametrize("sample", [
    list(10 ** RNG.normal(0.0, 1.0, 400)),       # log-normal
    list(RNG.exponential(2.0, 400)),            # exponential
    list(10 ** RNG.uniform(-2, 2, 400)),        # log-uniform
])
def test_auto_threshold_rejects_unimodal_durations(sample):
    assert auto_threshold({"ms": sample}) is None


def test_auto_threshold_needs_enough_flows_and_real_separation():
    assert auto_threshold({"a": [0.1] * 5, "b": [20.0] * 4}) is None        # 9 flows
    assert auto_threshold({"a": [0.1] * 5, "b": [20.0] * 5}) is not None
    assert auto_threshold({"a": [0.1] * 20, "b": [20.0] * 2}) is None       # 2-flow "mode"
    assert auto_threshold({"a": [1.0] * 10, "b": [1.5] * 10}) is None       # < 3x apart
    assert auto_threshold({"a": [2.0] * 30}) is None                        # no split at all
    assert auto_threshold({}) is None


def test_classify_all_threshold_mode():
    result = classify_all({"ui": SHORT, "backend": LONG, "new": [0.2, 0.3]}, 3.0,
                          mode="threshold", min_flows=5)
    assert result["ui"]["flow_class"] == "short" and result["backend"]["flow_class"] == "long"
    assert result["ui"]["source"] == "threshold" and result["ui"]["threshold_s"] == 3.0
    assert result["ui"]["count"] == 120
    assert result["backend"]["median_s"] == pytest.approx(float(np.median(LONG)))
    assert result["backend"]["p90_s"] == pytest.approx(float(np.quantile(LONG, 0.9)))
    assert result["new"] == {"flow_class": None, "threshold_s": 3.0, "source": "insufficient",
                             "count": 2, "median_s": 0.25, "p90_s": pytest.approx(0.29),
                             "quantiles_s": None}


def test_classify_all_auto_mode_and_its_fallback():
    # the configured threshold (60 s) would call everything short; auto finds the gap
    result = classify_all({"ui": SHORT, "backend": LONG}, 60.0, mode="auto")
    assert result["backend"]["flow_class"] == "long" and result["backend"]["source"] == "auto"
    assert max(SHORT) < result["ui"]["threshold_s"] < min(LONG)
    unimodal = {"ui": list(RNG.exponential(2.0, 100))}
    result = classify_all(unimodal, 60.0, mode="auto")
    assert result["ui"]["source"] == "threshold" and result["ui"]["threshold_s"] == 60.0
    assert result["ui"]["flow_class"] == "short"


def test_classify_all_without_flows_and_bad_arguments():
    assert classify_all({"video": []}, 3.0)["video"] == {
        "flow_class": None, "threshold_s": 3.0, "source": "insufficient", "count": 0,
        "median_s": None, "p90_s": None, "quantiles_s": None}
    with pytest.raises(ValueError, match="mode"):
        classify_all({}, 3.0, mode="median")
    with pytest.raises(ValueError, match="min_flows"):
        classify_all({}, 3.0, min_flows=0)
    with pytest.raises(ValueError, match=r"durations\[ui\]"):
        classify_all({"ui": [float("nan")]}, 3.0)
