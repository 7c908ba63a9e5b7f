"""What the policy core knows of each microservice from its configuration and the profiler
(plain Python): its flow class, its weights (the profiler's, or manual ones), what one of its
flows uses, how long its flows last, and how late the predictions show a change.

- MicroserviceProfiles: that knowledge, updated as the profiler answers
  (ryu_apps/profiler_answers.py applies an answer) and read by the policies;
- normalise_weights: three weights checked and scaled to sum to 1.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from profiler.weights import EQUAL_WEIGHTS
from common.numbers import finite_non_negative
from ryu_apps.estimators.survival import Survival


@dataclass
class _Weights:
    values: tuple[float, float, float]
    updated: float


class MicroserviceProfiles:
    """`microservices`: the pools' mapping (new microservices join it); `flow_classes`:
    the configured classes (short | long | auto)."""

    def __init__(self, microservices: dict, flow_classes: dict[str, str],
                 weights_stale_after_s: float, period_s: float, clock=time.time):
        self.microservices = microservices
        self.configured_class = dict(flow_classes)      # short | long | auto
        self.profiled_class: dict[str, str] = {}
        self.weights_stale_after_s = weights_stale_after_s
        self.period_s = period_s
        self.clock = clock
        self.profiler_weights: dict[str, _Weights] = {}
        self.manual_weights: dict[str, tuple[float, float, float]] = {}
        # ms -> what one flow uses: (cpu, mem, net) in % of a server, and (cores, bytes/s)
        self.per_flow: dict[str, tuple[float, float, float]] = {}
        self.per_flow_abs: dict[str, tuple[float, float]] = {}
        self.survival: dict[str, Survival] = {}     # ms -> its flows' durations
        self.prediction_lag_s = 0.0
        self.version = 0           # bumped by update: costs may change

    def update(self, weights: dict[str, tuple[float, float, float]],
                        flow_classes: dict[str, str | None], updated: float,
                        per_flow: dict[str, tuple[float, float, float]] | None = None,
                        prediction_lag_s: float | None = None,
                        per_flow_abs: dict[str, tuple[float, float]] | None = None,
                        durations: dict[str, list[float]] | None = None) -> None:
        """Weights and flow classes per microservice; optionally what one flow of each uses
        (cpu, mem, net in % of a server; and absolute: CPU cores, network bytes/s), how long
        its flows last (quantiles of their durations) and how long the predictions take to
        show a change. Weights are checked first: refused ones change nothing."""
        checked = {ms: normalise_weights(w, ms) for ms, w in weights.items()
                   if ms in self.microservices}
        for ms, use in (per_flow or {}).items():
            if ms in self.microservices and all(finite_non_negative(v) for v in use):
                self.per_flow[ms] = (float(use[0]), float(use[1]), float(use[2]))
        for ms, use_abs in (per_flow_abs or {}).items():
            if ms in self.microservices and len(use_abs) == 2 and \
                    all(finite_non_negative(v) for v in use_abs):
                self.per_flow_abs[ms] = (float(use_abs[0]), float(use_abs[1]))
        self.version += 1
        for ms, qs in (durations or {}).items():
            if ms in self.microservices:
                try:
                    self.survival[ms] = Survival(qs)
                except (TypeError, ValueError):
                    pass
        if prediction_lag_s is not None and prediction_lag_s >= 0:
            self.prediction_lag_s = float(prediction_lag_s)
        for ms, w in checked.items():
            self.profiler_weights[ms] = _Weights(w, updated)
        for ms, cls in flow_classes.items():
            if ms in self.microservices and cls in ("short", "long"):
                self.profiled_class[ms] = cls

    def set_manual_weights(self, microservice: str,
                           weights: tuple[float, float, float] | None) -> None:
        if microservice not in self.microservices:
            raise KeyError(f"unknown microservice {microservice!r}")
        if weights is None:
            self.manual_weights.pop(microservice, None)
        else:
            self.manual_weights[microservice] = normalise_weights(weights, microservice)

    def flow_class(self, microservice: str) -> tuple[str, str]:
        """(short|long, where it comes from). Unknown 'auto' classes count as long: the
        least-load choice is the safe one until the profiler has seen flows."""
        configured = self.configured_class.get(microservice, "auto")
        if configured in ("short", "long"):
            return configured, "config"
        if microservice in self.profiled_class:
            return self.profiled_class[microservice], "profiler"
        return "long", "default (not profiled yet)"

    def weights(self, microservice: str, now: float | None = None
                ) -> tuple[tuple[float, float, float], str]:
        now = self.clock() if now is None else now
        if microservice in self.manual_weights:
            return self.manual_weights[microservice], "manual"
        w = self.profiler_weights.get(microservice)
        if w is None:
            return EQUAL_WEIGHTS, "equal (no profile yet)"
        age = now - w.updated
        if age > self.weights_stale_after_s:
            return EQUAL_WEIGHTS, f"equal (profile {age:.0f} s old)"
        if age <= 2 * self.period_s:
            return w.values, "profiler"
        return w.values, f"profiler, stale (last update {age:.0f} s ago)"

    def flow_weights(self, microservice: str, now: float | None = None
                     ) -> tuple[tuple[float, float, float], str]:
        """The weights of `malb`'s long-flow choice: each resource's share of what one flow
        of the microservice uses (the profiler's per-flow use), not of what its instances
        use. The paper's shares count an instance's idle footprint: its memory, which no
        flow moves, can take most of the back-end's weight, and a job's server is then
        chosen on memory figures that differ by tenths of a percent. Manual weights still
        win; without a per-flow use, the profiler's weights."""
        if microservice in self.manual_weights:
            return self.manual_weights[microservice], "manual"
        use = self.per_flow.get(microservice)
        if use is not None and sum(use) > 0:
            return normalise_weights(use, microservice), "per-flow use"
        return self.weights(microservice, now)


def normalise_weights(weights, microservice: str = "") -> tuple[float, float, float]:
    """Three non-negative numbers, scaled to sum to 1 (all zero: equal weights).

    Scaled by the largest first, so that the sum cannot overflow: 1e308, 1e308, 0 is
    0.5, 0.5, 0 (their plain sum is inf, which made each share 0 and so equal weights)."""
    try:
        a, b, g = (float(x) + 0.0 for x in weights)     # + 0.0: -0.0 is 0.0
    except (TypeError, ValueError):
        raise ValueError(f"{microservice}: weights must be three numbers") from None
    except OverflowError:             # an int past 1.8e308 (JSON allows one)
        raise ValueError(f"{microservice}: weights must be finite numbers >= 0, one is "
                         f"too large for a float") from None
    for name, v in (("alpha", a), ("beta", b), ("gamma", g)):
        if not v >= 0 or v == float("inf"):
            raise ValueError(f"{microservice}: {name} must be a finite number >= 0, got {v}")
    top = max(a, b, g)
    if top == 0:
        return EQUAL_WEIGHTS
    a, b, g = a / top, b / top, g / top         # each in [0, 1], one of them 1
    total = a + b + g
    return a / total, b / total, g / total
