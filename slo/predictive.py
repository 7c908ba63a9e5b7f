"""A frequency loop that acts before the tail (policy `predictive`): from the service's queue
now, its arrival rate and the CPU work of its requests, predict the tail latency at every
frequency step and take the lowest step that keeps the prediction inside the target; the
windowed SLI (the service's or the clients') corrects the prediction by what frequency does
not change. Plain Python, time passed in; frequencies in MHz.

The idea is Rubik's (Kasture, Bartolini, Beckmann and Sanchez, "Rubik: Fast Analytical Power
Management for Latency-Critical Systems", MICRO 2015): choose the frequency from the tail
distribution of the work queued now, not from the tail already measured. Ours decides once
per control period (not at each request's arrival and end, which a container's CPU quota
or a sysfs write could not follow), on a service whose threads share their cores, and adds
the waiting that the arrivals of the next moments bring. docs/slo.md, "The predictive loop",
has the model, its assumptions and the settings.

- QueueReading: what one period saw (requests in the service, requests answered, CPU used);
- PredictiveSettings, PredictiveState: its settings and what it has learned (arrival rate,
  work per request, the path's offset, its recent predictions);
- observe: the state after one period's reading;
- predicted_tail_ms, work_quantile_ms: the model;
- decide_predictive: one control period: the frequency and why.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scipy.stats import gamma

from slo.frequency_controller import FrequencyDecision, LoopSettings, LoopState

PREDICTION_HISTORY = 120       # periods of predictions kept for the windowed correction


@dataclass(frozen=True)
class PredictiveSettings:
    """work_scv: the squared coefficient of variation of a request's CPU work (1: as varied
    as an exponential; 0: every request the same); rate_horizon_s, work_horizon_s: the
    horizons of the arrival rate's and the work's moving averages; offset_gain: how much of
    each windowed residual (SLI minus prediction) the offset takes; max_down_steps: steps
    down in one period at most (up is never limited); min_completed: requests a period
    needs before its CPU per request counts; margin: the band the rule aims in the middle
    of, a share of the target (None: the loop's, LoopSettings.margin)."""
    work_scv: float = 1.0
    rate_horizon_s: float = 2.0
    work_horizon_s: float = 10.0
    offset_gain: float = 0.3
    max_down_steps: int = 2
    min_completed: int = 5
    margin: float | None = None

    def __post_init__(self):
        if self.margin is not None and not 0 < self.margin < 1:
            raise ValueError(f"margin: expected a share in (0, 1), got {self.margin!r}")
        if not 0 <= self.work_scv <= 100:
            raise ValueError(f"work_scv: expected 0-100, got {self.work_scv!r}")
        for name in ("rate_horizon_s", "work_horizon_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: expected > 0, got {getattr(self, name)!r}")
        if not 0 < self.offset_gain <= 1:
            raise ValueError(f"offset_gain: expected a share in (0, 1], got "
                             f"{self.offset_gain!r}")
        if self.max_down_steps < 1:
            raise ValueError(f"max_down_steps: expected >= 1, got {self.max_down_steps!r}")
        if self.min_completed < 1:
            raise ValueError(f"min_completed: expected >= 1, got {self.min_completed!r}")


@dataclass(frozen=True)
class QueueReading:
    """One period: `in_flight` requests in the service at its end, `completed` answered in
    it, `seconds` long, `cpu_s` of CPU time used by the service in it (None: unknown)."""
    in_flight: int
    completed: int
    seconds: float
    cpu_s: float | None


@dataclass(frozen=True)
class PredictiveState:
    """What the loop has learned: arrivals per second and CPU work per request (core
    seconds at the maximum frequency) as moving averages, the requests in the service at
    the last reading, the offset (ms) between the windowed SLI and the predictions over its
    window, and the recent predictions as (time, ms) at the frequency then set."""
    arrival_rate: float | None = None
    work_s: float | None = None
    in_flight: int = 0
    offset_ms: float = 0.0
    predictions: tuple[tuple[float, float], ...] = ()


def _blend(old: float | None, new: float, weight: float) -> float:
    return new if old is None else old + min(1.0, weight) * (new - old)


def observe(ps: PredictiveSettings, state: PredictiveState, reading: QueueReading,
            freq_mhz: int, f_max_mhz: int, emulated: bool) -> PredictiveState:
    """The state after one period. Arrivals are what was answered plus what the queue
    grew by (answers alone stop counting arrivals once the cores saturate). A request's
    work is CPU time per request answered, in core seconds at the maximum frequency: under
    the emulation (a CPU quota) CPU time does not depend on the frequency; on real cpufreq
    a CPU-bound request's time scales with f_max / f, so it is scaled back by f / f_max."""
    if reading.seconds <= 0:
        return replace(state, in_flight=max(0, reading.in_flight))
    n = max(0, reading.in_flight)
    arrivals = max(0.0, reading.completed + n - state.in_flight) / reading.seconds
    rate = _blend(state.arrival_rate, arrivals, reading.seconds / ps.rate_horizon_s)
    work = state.work_s
    if reading.cpu_s is not None and reading.completed >= ps.min_completed:
        per_request = reading.cpu_s / reading.completed
        if not emulated:
            per_request *= freq_mhz / f_max_mhz
        work = _blend(work, max(0.0, per_request), reading.seconds / ps.work_horizon_s)
    return replace(state, arrival_rate=rate, work_s=work, in_flight=n)


def work_quantile_ms(mean_ms: float, scv: float, p: float) -> float:
    """The p-quantile of a gamma-distributed duration with this mean and squared coefficient
    of variation (scv 0: every one the mean)."""
    if mean_ms <= 0:
        return 0.0
    if scv < 1e-9:          # the gamma's shape overflows; its quantiles are the mean by then
        return mean_ms
    return float(gamma.ppf(p, a=1.0 / scv, scale=mean_ms * scv))


def predicted_tail_ms(percentile: float, arrival_rate: float, work_s: float, scv: float,
                      capacity_cores: float, in_flight: int) -> float:
    """The percentile of the latency of the requests of the next moments, in ms, for a
    service that gets `capacity_cores` of CPU (its share at this frequency): the larger of

    - steady state: a request's own time (its work at min(1, capacity) of a core, one
      thread) plus the waiting tail, P(W > t) ~ rho exp(-t rho / E[W]), with E[W] =
      rho / (1 - rho) max(1, (1 + scv) / 2) E[S]: Pollaczek-Khinchine's mean for an
      M/G/1 queue, but never below M/M/1's, which a processor-shared server (the
      service's threads on its cores) has whatever the work's variability;
    - the queue now (Rubik's part): a request that arrives now waits for the `in_flight`
      requests' work (its percentile, gamma with n times the mean), drained at the
      capacity, then does its own.

    Infinite when the arrivals' work would saturate the capacity. The two terms add
    percentiles, which bounds the percentile of a sum from above."""
    if capacity_cores <= 0:
        return math.inf
    p = percentile / 100.0
    rho = arrival_rate * work_s / capacity_cores
    if rho >= 1.0:
        return math.inf
    service_ms = 1000.0 * work_s / min(1.0, capacity_cores)
    own_ms = work_quantile_ms(service_ms, scv, p)
    wait_ms = 0.0
    if rho > 1.0 - p:
        # threads sharing the cores (processor sharing) wait as M/M/1 does on average,
        # whatever the work's variability below that: E[T] = E[S] / (1 - rho)
        mean_wait_ms = rho / (1.0 - rho) * max(1.0, (1.0 + scv) / 2.0) * service_ms
        wait_ms = mean_wait_ms / rho * math.log(rho / (1.0 - p))
    backlog_ms = 0.0
    if in_flight > 0:
        backlog_ms = work_quantile_ms(1000.0 * in_flight * work_s, scv / in_flight, p) \
            / capacity_cores
    return own_ms + max(wait_ms, backlog_ms)


def _steps(s: LoopSettings) -> list[int]:
    """The frequencies the loop can set, lowest first (the maximum even off the grid)."""
    steps = list(range(s.f_min_mhz, s.f_max_mhz + 1, s.step_mhz))
    return steps if steps[-1] == s.f_max_mhz else steps + [s.f_max_mhz]


def _window_mean(predictions: tuple[tuple[float, float], ...], since: float) -> float | None:
    inside = [ms for t, ms in predictions if t >= since and math.isfinite(ms)]
    return sum(inside) / len(inside) if inside else None


def correct(ps: PredictiveSettings, state: PredictiveState, sli_ms: float | None,
            samples: int, min_samples: int, now: float, window_s: float,
            target_ms: float) -> PredictiveState:
    """Move the offset toward the windowed SLI minus the mean prediction over the same
    window (what the model does not see: the handshake, the network, the listen queue, its
    own error), by offset_gain; only with a quantile of min_samples requests. Kept within
    [-target / 2, target]: a model that is off by more is better said than hidden."""
    if sli_ms is None or not math.isfinite(sli_ms) or samples < min_samples:
        return state
    mean = _window_mean(state.predictions, now - window_s)
    if mean is None:
        return state
    offset = state.offset_ms + ps.offset_gain * (sli_ms - mean - state.offset_ms)
    return replace(state, offset_ms=min(target_ms, max(-target_ms / 2.0, offset)))


def decide_predictive(s: LoopSettings, ps: PredictiveSettings, state: LoopState,
                      model: PredictiveState, sli_ms: float | None, samples: int,
                      now: float, capacity_cores: float, queue_known: bool = True
                      ) -> tuple[FrequencyDecision, PredictiveState]:
    """One control period. No queue reading: the maximum (no-signal). A measured SLI over
    (1 + emergency) x the target: the maximum, no step down for cooldown_s. No arrival rate
    or work per request yet: hold (learning). Else the lowest step whose prediction plus the
    offset is at most the middle of the band, target x (1 - margin / 2) (the predictive
    settings' margin, else the loop's): up to it at once,
    down to it by at most max_down_steps, and not sooner than dwell_s after a change or
    within a cooldown. `capacity_cores`: the service's CPU at the maximum frequency; the
    prediction at f takes f / f_max of it."""
    def result(action, freq, reason, predicted=None):
        changed = freq != state.freq_mhz
        new = replace(state, freq_mhz=freq, decision=action,
                      last_change=now if changed else state.last_change,
                      last_step=(1 if freq > state.freq_mhz else -1) if changed
                      else state.last_step,
                      cooldown_until=now + s.cooldown_s if action == "emergency"
                      else state.cooldown_until)
        error = None if sli_ms is None else sli_ms - s.target_ms
        kept = model
        if predicted is not None:
            kept = replace(model, predictions=(model.predictions + ((now, predicted),))
                           [-PREDICTION_HISTORY:])
        return FrequencyDecision(new, action, sli_ms, samples, error, reason, changed), kept

    if not queue_known:
        return result("no-signal", s.f_max_mhz, "the service's queue is unreadable: the "
                      "maximum")
    if sli_ms is not None and samples >= s.min_samples \
            and sli_ms > (1.0 + s.emergency) * s.target_ms:
        return result("emergency", s.f_max_mhz, f"SLI {sli_ms:.1f} ms over "
                      f"{1 + s.emergency:g} x the SLO: maximum")
    if model.arrival_rate is None or model.work_s is None:
        return result("learning", state.freq_mhz, "no arrival rate or work per request "
                      "yet: hold")

    def at(f: int) -> float:
        return predicted_tail_ms(s.percentile, model.arrival_rate or 0.0, model.work_s or 0.0,
                                 ps.work_scv, capacity_cores * f / s.f_max_mhz,
                                 model.in_flight) + model.offset_ms

    aim = s.target_ms * (1.0 - (s.margin if ps.margin is None else ps.margin) / 2.0)
    steps = _steps(s)
    need = next((f for f in steps if at(f) <= aim), s.f_max_mhz)
    how = (f"{model.arrival_rate:.1f} req/s of {1000 * model.work_s:.2f} ms CPU, "
           f"{model.in_flight} in the service, offset {model.offset_ms:+.1f} ms")
    if need > state.freq_mhz:
        return result("predict-up", need, f"{at(state.freq_mhz):.1f} ms predicted at "
                      f"{state.freq_mhz} MHz over the aim {aim:.1f} ms ({how}): {need} MHz",
                      at(need))
    if need == state.freq_mhz:
        return result("hold", need, f"{at(need):.1f} ms predicted ({how})", at(need))
    here = at(state.freq_mhz)
    if now < state.cooldown_until:
        return result("cooldown", state.freq_mhz, "could go down, but cooling down after "
                      "an emergency", here)
    if state.last_change is not None and now - state.last_change < s.dwell_s:
        return result("dwell", state.freq_mhz, f"could go down to {need} MHz, but changed "
                      f"{now - state.last_change:.1f} s ago", here)
    lower = max(need, state.freq_mhz - ps.max_down_steps * s.step_mhz)
    return result("predict-down", lower, f"{at(lower):.1f} ms predicted at {lower} MHz, "
                  f"within the aim {aim:.1f} ms ({how})", at(lower))
