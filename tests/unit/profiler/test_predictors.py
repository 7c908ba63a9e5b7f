import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from profiler import predictors
from profiler.predictors import (Arma, ArmaParams, ResourcePredictor, RollingMean,
                                 arma_one_step, fit_arma, make_predictor, walk_forward_mse)


def ar1_series(n: int, phi: float = 0.8, mean: float = 20.0, seed: int = 7) -> list[float]:
    rng = np.random.default_rng(seed)
    x = np.zeros(n)
    noise = rng.normal(size=n)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + noise[t]
    return list(mean + x)


def arma_series(n: int, ar, ma, mean: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.normal(size=n + 50)
    x = np.zeros(n + 50)
    for t in range(len(x)):
        x[t] = e[t] + sum(a * x[t - 1 - i] for i, a in enumerate(ar) if t - 1 - i >= 0) \
            + sum(m * e[t - 1 - j] for j, m in enumerate(ma) if t - 1 - j >= 0)
    return mean + x[50:]  # drop the burn-in


def wait_for(condition, timeout: float = 10.0) -> None:
    """Poll ``condition`` (a background fit's effect) until it holds or time runs out."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def fake_fit(monkeypatch):
    """Replace the statsmodels fit by an instant one that records the data it saw."""
    calls: list[np.ndarray] = []

    def fit(y, order):
        calls.append(np.array(y))
        p, q = order
        return ArmaParams(float(np.mean(y)), (0.5,) * p, (0.0,) * q), 0.001
    monkeypatch.setattr(predictors, "fit_arma", fit)
    return calls


# -- rolling mean ---------------------------------------------------------------------

def test_rolling_mean_constant_series_is_exact_and_none_before_data():
    rm = RollingMean(10)
    assert rm.predict() is None
    for _ in range(25):
        rm.update(4.25)
        assert rm.predict() == 4.25
    assert rm.name == "rm(w=10)"


def test_rolling_mean_lags_a_linear_ramp_by_half_the_window():
    w = 5
    result = walk_forward_mse([float(v) for v in range(30)], lambda: RollingMean(w))
    for t in range(w, 30):
        # mean of t-w .. t-1 = (t-1) - (w-1)/2: the last value lagged by (w-1)/2 steps
        assert result["predictions"][t] == (t - 1) - (w - 1) / 2
    # before the window is full it averages what it has
    assert result["predictions"][:3] == [None, 0.0, 0.5]


def test_rolling_mean_rejects_bad_window_and_values():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="window"):
            RollingMean(bad)
    rm = RollingMean(3)
    for bad in (float("nan"), float("inf"), None, "3"):
        with pytest.raises(ValueError, match="value"):
            rm.update(bad)


def test_walk_forward_mse_on_a_tiny_series():
    result = walk_forward_mse([1.0, 2.0, 3.0], lambda: RollingMean(1))
    assert result == {"mse": 1.0, "n": 2, "predictions": [None, 1.0, 2.0]}
    assert walk_forward_mse([], lambda: RollingMean(1)) == {"mse": None, "n": 0,
                                                             "predictions": []}


# -- ARMA: recursion and fits ------------------------------------------------------------

@pytest.mark.parametrize("ar, ma", [((0.6, -0.2), (0.3,)), ((0.8,), ()), ((), (0.4, 0.2))])
def test_numpy_recursion_matches_statsmodels_forecast_for_given_params(ar, ma):
    # deferred: statsmodels (a second to import), the reference these tests check against
    from statsmodels.tsa.arima.model import ARIMA
    y = arma_series(60, ar, ma, mean=10.0, seed=3)
    params = ArmaParams(10.2, ar, ma)
    sm_params = np.array([10.2, *ar, *ma, 1.0])  # const, ar.L*, ma.L*, sigma2
    expected = ARIMA(y, order=(len(ar), 0, len(ma)), trend="c").filter(sm_params).forecast(1)[0]
    assert arma_one_step(y, params) == pytest.approx(expected, abs=1e-6)


def test_numpy_recursion_matches_statsmodels_forecast_for_fitted_params():
    # deferred: statsmodels, as above
    from statsmodels.tsa.arima.model import ARIMA
    y = arma_series(50, (0.6, -0.2), (0.3,), mean=5.0, seed=11)
    params, seconds = fit_arma(y, (2, 1))
    assert params is not None and seconds > 0
    sm = ARIMA(y, order=(2, 0, 1), trend="c").fit()
    assert params.mu == pytest.approx(float(sm.params[0]))
    assert arma_one_step(y, params) == pytest.approx(sm.forecast(1)[0], abs=1e-6)


def test_fit_of_a_flat_window_is_the_exact_mean_model():
    params, _ = fit_arma(np.full(8, 3.0), (2, 1))
    assert params == ArmaParams(3.0, (0.0, 0.0), (0.0,))
    arma = Arma(order=(1, 1), window=8, refit_every=3)
    for _ in range(20):
        arma.update(3.0)
        assert arma.predict() == 3.0
    assert arma.fits >= 1 and arma.fit_failures == 0


def test_arma_beats_rolling_mean_on_an_ar1_series():
    series = ar1_series(300, phi=0.8)
    arma = walk_forward_mse(series, lambda: Arma(order=(1, 0), window=40, refit_every=20))
    rm = walk_forward_mse(series, lambda: RollingMean(10))
    assert arma["n"] == rm["n"] == 299
    assert arma["mse"] < rm["mse"]
    assert arma["mse"] < 1.3  # close to the innovation variance, 1


def test_refit_happens_exactly_every_refit_every_updates(fake_fit):
    arma = Arma(order=(1, 0), window=10, refit_every=4)
    assert arma.min_samples == 5
    for n in range(1, 31):
        arma.update(float(n % 7))
        for _ in range(3):  # predicting never fits
            arma.predict()
        expected = 0 if n < 5 else 1 + (n - 5) // 4
        assert arma.fits == len(fake_fit) == expected, n
    # each fit saw the window as it was (at most `window` samples)
    assert [len(c) for c in fake_fit[:3]] == [5, 9, 10]


def test_before_the_first_fit_arma_predicts_the_window_mean(fake_fit):
    arma = Arma(order=(2, 1), window=6, refit_every=5)
    assert arma.predict() is None
    for v in (1.0, 2.0, 6.0):
        arma.update(v)
    assert arma.predict() == 3.0 and arma.params is None
    assert arma.name == "arma(2,1,w=6)"


def test_failed_fits_are_counted_and_keep_the_previous_params(monkeypatch):
    results = iter([(ArmaParams(1.0, (0.5,), ()), 0.01), (None, 0.02)])
    monkeypatch.setattr(predictors, "fit_arma", lambda y, order: next(results))
    arma = Arma(order=(1, 0), window=5, refit_every=2)
    for v in range(5):
        arma.update(float(v))
    assert arma.fits == 1 and arma.params == ArmaParams(1.0, (0.5,), ())
    arma.update(5.0)
    arma.update(6.0)
    assert arma.fits == 2 and arma.fit_failures == 1 and arma.last_fit_seconds == 0.02
    assert arma.params == ArmaParams(1.0, (0.5,), ())
    assert arma.predict() == pytest.approx(1.0 + 0.5 * (6.0 - 1.0))


def test_fit_arma_reports_estimation_errors_as_failure_and_says_why(monkeypatch, caplog):
    # deferred: statsmodels, as above; fit_arma imports ARIMA from it at each call
    import statsmodels.tsa.arima.model as sm_model

    class Broken:
        def __init__(self, *args, **kwargs):
            raise np.linalg.LinAlgError("singular")
    monkeypatch.setattr(sm_model, "ARIMA", Broken)
    monkeypatch.setattr(predictors, "_last_warning", [0.0, 0])
    with caplog.at_level("WARNING", logger="malb.profiler.arma"):
        params, seconds = fit_arma(np.arange(10.0), (1, 0))
        params2, _ = fit_arma(np.arange(10.0), (1, 0))    # within the minute: held back
    assert params is None and params2 is None and seconds >= 0
    assert [r.getMessage() for r in caplog.records] == [
        "ARMA(1, 0) fit failed (LinAlgError: singular); the series keeps its previous "
        "parameters"]
    assert predictors._last_warning[1] == 1


def test_arma_validates_its_arguments():
    with pytest.raises(ValueError, match="window"):
        Arma(order=(2, 1), window=4)      # needs max(2+1+2, 5) = 5 samples
    with pytest.raises(ValueError, match="order"):
        Arma(order=(2, -1), window=20)
    with pytest.raises(ValueError, match="order"):
        Arma(order=(2,), window=20)
    with pytest.raises(ValueError, match="refit_every"):
        Arma(order=(1, 0), window=20, refit_every=0)


def test_make_predictor():
    assert isinstance(make_predictor("rm", 10), RollingMean)
    arma = make_predictor("arma", 20, order=(1, 1), refit_every=7)
    assert isinstance(arma, Arma) and arma.order == (1, 1) and arma.refit_every == 7
    with pytest.raises(ValueError, match="kind"):
        make_predictor("lstm", 10)


# -- ARMA: asynchronous fits ---------------------------------------------------------------

def test_async_refit_never_blocks_and_is_picked_up_later(monkeypatch):
    release = threading.Event()
    submitted = []

    def slow_fit(y, order):
        submitted.append(len(y))
        release.wait(timeout=10)
        return ArmaParams(100.0, (0.0,), ()), 0.5
    monkeypatch.setattr(predictors, "fit_arma", slow_fit)
    with ThreadPoolExecutor(max_workers=1) as pool:
        arma = Arma(order=(1, 0), window=5, refit_every=2, executor=pool)
        start = time.perf_counter()
        for v in range(12):   # the first fit is due at 5 and would block for 10 s
            arma.update(float(v))
            assert arma.predict() == pytest.approx(np.mean(list(arma._values)))
        assert time.perf_counter() - start < 5.0    # not held for the fit's 10 s
        assert arma.fit_pending and arma.fits == 0 and arma.params is None
        wait_for(lambda: len(submitted) == 1)
        release.set()
        wait_for(lambda: arma.predict() == 100.0)   # picked up by predict()
        assert not arma.fit_pending and arma.fits == 1 and arma.last_fit_seconds == 0.5
        assert len(submitted) == 1   # refits that fell due meanwhile waited for this one
        arma.update(1.0)             # ... and the next update submits one
        assert arma.fit_pending
        wait_for(lambda: len(submitted) == 2)


def test_async_refit_with_real_statsmodels_fit():
    series = ar1_series(60, seed=3)
    with ThreadPoolExecutor(max_workers=1) as pool:
        arma = Arma(order=(1, 0), window=30, refit_every=10, executor=pool)
        for v in series[:30]:
            arma.update(v)
        wait_for(lambda: arma.predict() is not None and not arma.fit_pending)
        arma.update(series[30])       # may submit a deferred refit over the full window
        wait_for(lambda: arma.predict() is not None and not arma.fit_pending)
    assert arma.params is not None and arma.fits >= 1 and arma.fit_failures == 0
    assert arma.last_fit_seconds > 0
    assert arma.predict() == pytest.approx(arma_one_step(series[1:31], arma.params))


# -- per-microservice resource predictor -----------------------------------------------------

def test_resource_predictor_keeps_one_predictor_per_resource_and_skips_gaps():
    rp = ResourcePredictor(lambda: RollingMean(2))
    assert rp.predict() == {"cpu": None, "mem": None, "net": None}
    rp.update(10.0, 50.0, None)
    rp.update(20.0, 50.0, 4.0)
    rp.update(None, 60.0, 6.0)
    assert rp.samples == 3
    assert rp.predict() == {"cpu": 15.0, "mem": 55.0, "net": 5.0}


def test_resource_predictor_rejects_nan_without_partial_update():
    rp = ResourcePredictor(lambda: RollingMean(2))
    with pytest.raises(ValueError):
        rp.update(1.0, 2.0, float("nan"))
    assert rp.predict() == {"cpu": None, "mem": None, "net": None} and rp.samples == 0
