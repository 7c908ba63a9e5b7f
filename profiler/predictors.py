"""Window-based predictors of a microservice's next resource-utilization sample: the paper's
Rolling Mean (RM) or ARMA over a sliding window (sections III.B, IV.A; docs/profiler.md,
"Profiler"), behind one interface (update, predict, name) that the profiler, the offline
evaluation and the tests share.

- Predictor, RollingMean, Arma, make_predictor: the interface, RM, ARMA, one by its name;
- ArmaParams, fit_arma, arma_one_step: ARMA fitted (statsmodels) and forecast (a recursion);
- ResourcePredictor: one predictor per resource (cpu, mem, net) of a microservice;
- walk_forward_mse: one-step predictions evaluated as the profiler makes them online;
- warn_limited: a warning at most once a minute.
"""
from __future__ import annotations

import logging
import math
import time
import warnings
from collections import deque
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from numbers import Real
from typing import Protocol
from collections.abc import Callable, Sequence

import numpy as np
from scipy.signal import lfilter

from profiler.weights import RESOURCES


log = logging.getLogger("malb.profiler.arma")


class Predictor(Protocol):
    """What the profiler needs from a predictor."""

    @property
    def name(self) -> str: ...

    def update(self, value: float) -> None: ...

    def predict(self) -> float | None: ...


def _finite(value: float) -> float:
    """Return ``value`` as a float, rejecting None/NaN/inf (a gap is the caller's to skip)."""
    kind = type(value)
    if (kind is float or kind is int or (kind is not bool and isinstance(value, Real))) \
            and math.isfinite(value):
        return float(value)
    raise ValueError(f"value: expected a finite number, got {value!r}")


def _check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window: expected an integer >= 1, got {window!r}")
    return window


class RollingMean:
    """Mean of the last ``window`` samples (the paper's RM; it uses window 10)."""

    def __init__(self, window: int) -> None:
        self.window = _check_window(window)
        self._values: deque[float] = deque(maxlen=window)

    @property
    def name(self) -> str:
        return f"rm(w={self.window})"

    def update(self, value: float) -> None:
        self._values.append(_finite(value))

    def predict(self) -> float | None:
        if not self._values:
            return None
        return sum(self._values) / len(self._values)


# ---------------------------------------------------------------------------
# ARMA
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ArmaParams:
    """Fitted ARMA(p, q) parameters: process mean, AR and MA coefficients.

    Sign convention (statsmodels'): y_t - mu = sum phi_i (y_{t-i} - mu) + e_t
    + sum theta_j e_{t-j}.
    """

    mu: float
    ar: tuple[float, ...]
    ma: tuple[float, ...]


def arma_one_step(y: Sequence[float], params: ArmaParams) -> float:
    """One-step-ahead forecast of ``y`` under ``params``, by the conditional recursion.

    Residuals are computed recursively over ``y`` with pre-sample deviations and
    residuals set to zero, then forecast = mu + sum phi_i (y_{t+1-i} - mu)
    + sum theta_j e_{t+1-j}. For an invertible MA part the effect of the zero start
    dies out geometrically, so over a window of a few dozen samples this matches the
    Kalman-filter forecast statsmodels computes, at a fraction of the cost.
    """
    if len(y) == 0:
        raise ValueError("y: expected at least one sample")
    x = np.asarray(y, dtype=float) - params.mu
    phi = np.asarray(params.ar, dtype=float)
    theta = np.asarray(params.ma, dtype=float)
    # The residual recursion x_t - sum phi_i x_{t-i} = e_t + sum theta_j e_{t-j}, with a
    # zero pre-sample, is an IIR filter: lfilter runs it in C (about 50x faster than a
    # Python loop over the window, which matters with thousands of series per period).
    e = lfilter(np.concatenate(([1.0], -phi)), np.concatenate(([1.0], theta)), x)
    n, p, q = len(x), len(phi), len(theta)
    x_hist = np.concatenate((np.zeros(p), x))[n:n + p][::-1]      # x_n .. x_{n-p+1}
    e_hist = np.concatenate((np.zeros(q), e))[n:n + q][::-1]      # e_n .. e_{n-q+1}
    return float(params.mu + phi @ x_hist + theta @ e_hist)


def fit_arma(y: np.ndarray, order: tuple[int, int]) -> tuple[ArmaParams | None, float]:
    """Fit ARMA(p, q) with a constant to ``y``; return (params or None on failure, seconds).

    Module-level and side-effect free so it can run on any executor, including a
    process pool. A flat window has no dynamics to estimate (statsmodels would only warn
    and return the mean approximately), so it yields the exact mean model directly.
    Non-converged optimizations are accepted as long as the parameters are finite:
    statsmodels constrains them to the stationary/invertible region, and on the short
    windows the paper uses "not converged" is common while the estimate is still usable.
    """
    p, q = order
    start = time.perf_counter()
    y = np.asarray(y, dtype=float)
    if np.ptp(y) == 0.0:
        return ArmaParams(float(y[0]), (0.0,) * p, (0.0,) * q), time.perf_counter() - start
    # deferred: statsmodels takes about a second to import and only ARMA needs it
    from statsmodels.tsa.arima.model import ARIMA
    try:
        # catch_warnings is process-global; at worst a concurrent fit's warning leaks.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ARIMA(y, order=(p, 0, q), trend="c").fit()
        mu = float(res.params[0])
        ar = tuple(float(v) for v in res.arparams) if p else ()
        ma = tuple(float(v) for v in res.maparams) if q else ()
    except Exception as exc:  # noqa: BLE001 -- any estimation error is a failed fit; old params kept
        warn_limited(f"ARMA{order} fit failed ({type(exc).__name__}: {exc}); the series "
                     f"keeps its previous parameters")
        return None, time.perf_counter() - start
    if not all(math.isfinite(v) for v in (mu, *ar, *ma)):
        return None, time.perf_counter() - start
    return ArmaParams(mu, ar, ma), time.perf_counter() - start


_last_warning = [0.0, 0]     # when the last one was logged, how many were held back since


def warn_limited(message: str, every_s: float = 60.0) -> None:
    """Log a warning, at most one a minute (fits fail in bursts on a thousand series): the
    held-back ones are counted in the next."""
    now = time.monotonic()
    if now - _last_warning[0] < every_s and _last_warning[0]:
        _last_warning[1] += 1
        return
    held, _last_warning[:] = _last_warning[1], [now, 0]
    log.warning("%s%s", message, f" ({held} more like it in the last minute)" if held else "")


def _check_order(order: tuple[int, int]) -> tuple[int, int]:
    try:
        p, q = order
        ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (p, q))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"order: expected (p, q) with integers p, q >= 0, got {order!r}")
    return p, q


class Arma:
    """ARMA(p, q) with a constant over the last ``window`` samples. A fit (statsmodels
    maximum likelihood) costs tens of milliseconds, far too much for every sample of every
    microservice and resource, so fits are rare and forecasts cheap.

    Fit schedule: the first fit happens as soon as the window holds ``min_samples``
    (max(p + q + 2, 5)) values, then one every ``refit_every`` updates. ``predict()``
    never fits; it runs :func:`arma_one_step` with the latest parameters over the
    current window (cached until the next update), or returns the window mean before
    the first successful fit.

    With an ``executor`` a due fit is submitted to it instead of run inline, and its
    result is picked up by a later ``update``/``predict`` once the future is done, so
    no call ever blocks on a fit. While a fit is still running, the next one is
    deferred until it completes. Not thread-safe: call it from one thread.

    ``fits`` counts completed fit attempts, ``fit_failures`` those among them that
    failed (the previous parameters, or the mean fallback, stay in use),
    ``last_fit_seconds`` the duration of the latest completed attempt.
    """

    def __init__(self, order: tuple[int, int] = (2, 1), window: int = 50,
                 refit_every: int = 10, executor: Executor | None = None,
                 refit_offset: int = 0) -> None:
        self.order = _check_order(order)
        self.window = _check_window(window)
        p, q = self.order
        self.min_samples = max(p + q + 2, 5)
        if window < self.min_samples:
            raise ValueError(f"window: ARMA{self.order} needs a window of at least "
                             f"{self.min_samples} samples, got {window}")
        if isinstance(refit_every, bool) or not isinstance(refit_every, int) or refit_every < 1:
            raise ValueError(f"refit_every: expected an integer >= 1, got {refit_every!r}")
        self.refit_every = refit_every
        # Many series updated together would all refit in the same period; an offset in
        # [0, refit_every) spreads their fits (the first one waits that many extra samples).
        self.refit_offset = int(refit_offset) % refit_every
        self.executor = executor
        self.params: ArmaParams | None = None
        self.fits = 0
        self.fit_failures = 0
        self.last_fit_seconds: float | None = None
        self._values: deque[float] = deque(maxlen=window)
        self._since_fit: int | None = None   # updates since the last fit started; None: never
        self._pending: Future | None = None
        self._cached: float | None = None

    @property
    def name(self) -> str:
        p, q = self.order
        return f"arma({p},{q},w={self.window})"

    @property
    def fit_pending(self) -> bool:
        """True while an asynchronous fit has been submitted and not yet picked up."""
        return self._pending is not None

    def update(self, value: float) -> None:
        self._values.append(_finite(value))
        self._cached = None
        self._collect()
        if self._since_fit is not None:
            self._since_fit += 1
        if self._pending is None and self._fit_due():
            self._start_fit()

    def predict(self) -> float | None:
        self._collect()
        if not self._values:
            return None
        if self._cached is None:
            if self.params is None:
                self._cached = sum(self._values) / len(self._values)
            else:
                self._cached = arma_one_step(self._values, self.params)
        return self._cached

    def _fit_due(self) -> bool:
        if self._since_fit is None:
            return len(self._values) >= min(self.window, self.min_samples + self.refit_offset)
        return self._since_fit >= self.refit_every

    def _start_fit(self) -> None:
        self._since_fit = 0
        data = np.array(self._values, dtype=float)  # a copy: the window keeps sliding
        if self.executor is None:
            self._apply(*fit_arma(data, self.order))
        else:
            self._pending = self.executor.submit(fit_arma, data, self.order)

    def _collect(self) -> None:
        """Adopt the result of a finished asynchronous fit, without ever waiting."""
        if self._pending is None or not self._pending.done():
            return
        future, self._pending = self._pending, None
        try:
            params, seconds = future.result()
        except Exception as exc:  # noqa: BLE001 -- cancelled, or the worker died: params kept
            warn_limited(f"ARMA fit lost ({type(exc).__name__}: {exc}); the series keeps its "
                         f"previous parameters")
            params, seconds = None, None
        self._apply(params, seconds)

    def _apply(self, params: ArmaParams | None, seconds: float | None) -> None:
        self.fits += 1
        self.last_fit_seconds = seconds
        if params is None:
            self.fit_failures += 1
        else:
            self.params = params
            self._cached = None


def make_predictor(kind: str, window: int, order: tuple[int, int] = (2, 1),
                   refit_every: int = 10, executor: Executor | None = None,
                   refit_offset: int = 0) -> Predictor:
    """Build the predictor named by ``kind`` ("rm" or "arma") from configuration values."""
    if kind == "rm":
        return RollingMean(window)
    if kind == "arma":
        return Arma(order=order, window=window, refit_every=refit_every, executor=executor,
                    refit_offset=refit_offset)
    raise ValueError(f"kind: expected 'rm' or 'arma', got {kind!r}")


def walk_forward_mse(series: Sequence[float], factory: Callable[[], Predictor]) -> dict:
    """Evaluate one-step predictions the way the profiler makes them online.

    A single predictor from ``factory`` predicts ``series[t]`` having been fed
    ``series[:t]``, then is updated with ``series[t]``. Points where it has no
    prediction yet are skipped. Returns {"mse": float | None (None if no point was
    predicted), "n": points predicted, "predictions": list aligned with ``series``,
    None where skipped}.
    """
    predictor = factory()
    predictions: list[float | None] = []
    sq_errors: list[float] = []
    for value in series:
        guess = predictor.predict()
        predictions.append(guess)
        if guess is not None:
            sq_errors.append((guess - value) ** 2)
        predictor.update(value)
    mse = sum(sq_errors) / len(sq_errors) if sq_errors else None
    return {"mse": mse, "n": len(sq_errors), "predictions": predictions}


class ResourcePredictor:
    """One predictor per resource (cpu, mem, net) for one microservice.

    A None sample (the resource was unreadable this period) is skipped for that
    resource only, so a gap never enters a window as a fake 0.
    """

    def __init__(self, factory: Callable[[], Predictor]) -> None:
        self.predictors: dict[str, Predictor] = {r: factory() for r in RESOURCES}
        self.samples = 0

    def update(self, cpu: float | None, mem: float | None, net: float | None) -> None:
        # Validate all three first so a bad value cannot leave the resources out of step.
        values = {r: None if v is None else _finite(v)
                  for r, v in zip(RESOURCES, (cpu, mem, net))}
        for resource, value in values.items():
            if value is not None:
                self.predictors[resource].update(value)
        self.samples += 1

    def predict(self) -> dict[str, float | None]:
        return {r: p.predict() for r, p in self.predictors.items()}
