"""Short/long flow classification of microservices by flow duration.

Section III.B of the paper: the profiler groups completed flow durations per
microservice and tags a microservice "short" when its flows last less than a threshold
and "long" otherwise; MALB round-robins short-flow microservices and load-balances
long-flow ones. Here "its flows last less" means a quantile (the median by default) of
its durations is below the threshold, so a few stragglers do not flip the class.

The threshold is either configured or found automatically (:func:`auto_threshold`)
as the best two-class split of all observed log-durations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from collections.abc import Mapping, Sequence

import numpy as np

from common.stats import quantile as quantile_of

MIN_DURATION_S = 1e-3       # durations are clipped here before taking log10
MIN_FLOWS_AUTO = 10         # fewer pooled flows: no automatic threshold
MIN_CLASS_FLOWS = 3         # a "mode" of one or two stray flows is not a mode
MIN_SEPARATION = 4.0        # class-mean distance / within-class std dev (log10 space)
MIN_MEAN_RATIO = 3.0        # geometric class means at least this factor apart (seconds)


def _durations(values: Sequence[float], name: str = "durations") -> np.ndarray:
    arr = np.asarray(values, dtype=float).reshape(-1)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name}: expected finite durations >= 0 seconds")
    return arr


def _checked(values: Sequence[float], name: str = "durations") -> list[float]:
    """The durations, sorted, each a finite number >= 0 (plain Python: per microservice
    these are a few to a few hundred values, where numpy's per-call cost dominates)."""
    out = []
    for v in values:
        if type(v) is not float:
            if isinstance(v, bool) or not isinstance(v, Real):
                raise ValueError(f"{name}: expected finite durations >= 0 seconds")
            v = float(v)
        if not (v >= 0 and v != math.inf):
            raise ValueError(f"{name}: expected finite durations >= 0 seconds")
        out.append(v)
    out.sort()
    return out


def classify_threshold(durations: Sequence[float], threshold_s: float,
                       quantile: float = 0.5) -> str | None:
    """Return "short" if the ``quantile`` of ``durations`` is below ``threshold_s``,
    else "long"; None when there are no durations."""
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile: expected a value in [0, 1], got {quantile!r}")
    if isinstance(threshold_s, bool) or not isinstance(threshold_s, Real) \
            or not math.isfinite(threshold_s) or threshold_s < 0:
        raise ValueError(f"threshold_s: expected a finite value >= 0, got {threshold_s!r}")
    values = _checked(durations)
    if not values:
        return None
    return "short" if quantile_of(values, quantile, is_sorted=True) < threshold_s else "long"


@dataclass(frozen=True)
class Split:
    """Best two-class split of log10-durations (Otsu / Jenks natural breaks, k=2)."""

    threshold_s: float      # 10 ** midpoint between the two classes' adjacent values
    separation: float       # (upper mean - lower mean) / pooled within-class std dev
    eta: float              # between-class / total variance, the Otsu criterion
    mean_ratio: float       # ratio of the classes' geometric mean durations
    n_short: int
    n_long: int


def best_split(durations: Sequence[float]) -> Split | None:
    """Split the pooled durations in two classes maximizing between-class variance of
    log10(duration); None if all durations are (after clipping) equal."""
    x = np.sort(np.log10(np.clip(_durations(durations), MIN_DURATION_S, None)))
    n = x.size
    if n < 2 or x[0] == x[-1]:
        return None
    k = np.arange(1, n)                       # size of the lower class
    csum = np.cumsum(x)
    lower = csum[k - 1] / k
    upper = (csum[-1] - csum[k - 1]) / (n - k)
    between = (k / n) * ((n - k) / n) * (upper - lower) ** 2
    between[x[k - 1] == x[k]] = -1.0          # never split between equal values
    i = int(np.argmax(between))
    total = float(x.var())
    within = max(total - float(between[i]), 0.0)
    gap = float(upper[i] - lower[i])
    return Split(
        threshold_s=float(10 ** ((x[i] + x[i + 1]) / 2)),
        separation=gap / math.sqrt(within) if within > 0 else math.inf,
        eta=float(between[i]) / total,
        mean_ratio=float(10 ** gap),
        n_short=int(k[i]),
        n_long=int(n - k[i]),
    )


def auto_threshold(durations_by_microservice: dict[str, Sequence[float]]) -> float | None:
    """Find the short/long threshold from the observed flow durations, or None.

    All completed flows of all microservices are pooled, durations clipped at 1 ms and
    taken as log10 (flow durations span decades), and split in two by Otsu's method
    (:func:`best_split`); the threshold is 10 ** the split point. The split is only
    trusted when the pooled distribution is clearly bimodal, i.e. all of:

    * at least 10 flows, and at least 3 in each class;
    * separation >= 4: the class means are at least 4 within-class standard
      deviations apart. The suggested variance ratio eta is not used because it is
      already 0.64 for a single Gaussian and drops for genuinely bimodal data when the
      classes are unbalanced (many short UI flows, few long back-end flows), whereas
      separation is about 2.6-3.5 for unimodal shapes (normal, exponential, gamma,
      log-uniform) and roughly the mode distance / mode width for two modes;
    * the classes' geometric mean durations are at least a factor 3 apart, so two
      tight clusters a few percent apart do not count as short and long.
    """
    pooled = [d for values in durations_by_microservice.values() for d in values]
    if len(pooled) < MIN_FLOWS_AUTO:
        return None
    split = best_split(pooled)
    if (split is None or min(split.n_short, split.n_long) < MIN_CLASS_FLOWS
            or split.separation < MIN_SEPARATION or split.mean_ratio < MIN_MEAN_RATIO):
        return None
    return split.threshold_s


def classify_all(durations_by_microservice: Mapping[str, Sequence[float]], threshold_s: float,
                 mode: str = "threshold", min_flows: int = 5) -> dict[str, dict]:
    """Classify every microservice's flows as short or long.

    ``mode`` "threshold" uses ``threshold_s``; "auto" uses :func:`auto_threshold` over
    all microservices and falls back to ``threshold_s`` when it finds none. Returns per
    microservice {"flow_class": "short" | "long" | None, "threshold_s": threshold used,
    "source": "threshold" | "auto" | "insufficient", "count": flows, "median_s",
    "p90_s": None without flows}. Fewer than ``min_flows`` flows: flow_class None,
    source "insufficient".
    """
    if mode not in ("threshold", "auto"):
        raise ValueError(f"mode: expected 'threshold' or 'auto', got {mode!r}")
    if isinstance(min_flows, bool) or not isinstance(min_flows, int) or min_flows < 1:
        raise ValueError(f"min_flows: expected an integer >= 1, got {min_flows!r}")
    if isinstance(threshold_s, bool) or not isinstance(threshold_s, Real) \
            or not math.isfinite(threshold_s) or threshold_s < 0:
        raise ValueError(f"threshold_s: expected a finite value >= 0, got {threshold_s!r}")
    lists = {ms: _checked(d, f"durations[{ms}]") for ms, d in durations_by_microservice.items()}
    threshold, source = threshold_s, "threshold"
    if mode == "auto":
        found = auto_threshold(lists)
        if found is not None:
            threshold, source = found, "auto"
    result: dict[str, dict] = {}
    for ms, values in lists.items():
        enough = len(values) >= min_flows
        median = quantile_of(values, 0.5, is_sorted=True)
        result[ms] = {
            "flow_class": ("short" if median < threshold else "long") if enough else None,
            "threshold_s": threshold,
            "source": source if enough else "insufficient",
            "count": len(values),
            "median_s": median,
            "p90_s": quantile_of(values, 0.9, is_sorted=True),
            # the duration distribution (20 quantiles, 5 % to 100 %): the controller's
            # estimate of how many of the flows it sent are still running
            "quantiles_s": [round(quantile_of(values, q / 20, is_sorted=True), 3)
                            for q in range(1, 21)] if enough else None,
        }
    return result
