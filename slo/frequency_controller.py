"""The SLO frequency loop of SLO-AEEM (Song et al., Intel) as pure functions (time passed in;
frequencies in MHz, quantised to the step): a service's tail latency (the SLI) against its
objective decides the frequency of the cores it is pinned to. The rule, its band, our guard
and the paper's literal band: docs/slo.md, "The loop".

- decide, initial_state: one control period (the new state and why), and the start;
- LoopSettings, LoopState, FrequencyDecision, BAND_MODES: its settings, state and output;
- predicted_sli, quantise: the SLI one step down; a frequency clamped to whole steps;
- baseline, ondemand, schedutil, GOVERNORS: the policies that ignore the SLI (fixed
  maximum, fixed minimum, Linux's ondemand and schedutil), for comparison;
- FREQUENCY_POLICIES: every rule a loop can run, by name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from common.config.model import LOOP_POLICIES

BAND_MODES = ("safe", "paper")


@dataclass(frozen=True)
class LoopSettings:
    target_ms: float
    percentile: float = 95.0
    margin: float = 0.10
    f_min_mhz: int = 1000
    f_max_mhz: int = 2100
    step_mhz: int = 100
    max_up_steps: int = 4          # proportional up-steps: one per 5 % over the SLO
    emergency: float = 0.5         # SLI > (1 + emergency) * SLO: straight to the maximum
    cooldown_s: float = 10.0       # after an emergency, no down-steps for this long
    dwell_s: float = 3.0           # no down-step sooner than this after any change
    min_samples: int = 100
    band_mode: str = "safe"
    guard: float = 0.4             # top share of the band that steps up (safe mode); 0: off

    def __post_init__(self):
        if not self.target_ms > 0:
            raise ValueError(f"target_ms: expected > 0, got {self.target_ms!r}")
        if self.percentile not in (90.0, 95.0, 99.0):
            raise ValueError(f"percentile: expected 90, 95 or 99, got {self.percentile!r}")
        if not 0 < self.margin < 1:
            raise ValueError(f"margin: expected a share in (0, 1), got {self.margin!r}")
        if not 0 < self.f_min_mhz <= self.f_max_mhz:
            raise ValueError(f"frequency range: expected 0 < min <= max, got "
                             f"{self.f_min_mhz}-{self.f_max_mhz} MHz")
        if self.step_mhz <= 0:
            raise ValueError(f"step_mhz: expected > 0, got {self.step_mhz!r}")
        if not 0 <= self.guard < 1:
            raise ValueError(f"guard: expected a share in [0, 1), got {self.guard!r}")
        if self.band_mode not in BAND_MODES:
            raise ValueError(f"band_mode: expected one of {', '.join(BAND_MODES)}, got "
                             f"{self.band_mode!r}")


@dataclass(frozen=True)
class LoopState:
    freq_mhz: int
    last_change: float | None = None     # time of the last frequency change
    last_step: int = 0                   # its direction: +1 up, -1 down
    cooldown_until: float = -math.inf    # no down-steps before this (after an emergency)
    decision: str = "start"


@dataclass(frozen=True)
class FrequencyDecision:
    state: LoopState
    action: str            # up, guard, down, hold, emergency, insufficient, no-signal, dwell,
                           # cooldown
    sli_ms: float | None
    samples: int
    error_ms: float | None = None
    reason: str = ""
    changed: bool = field(default=False)


def initial_state(settings: LoopSettings) -> LoopState:
    """The loop starts at the maximum: safe until the first SLI says otherwise."""
    return LoopState(freq_mhz=settings.f_max_mhz)


def quantise(settings: LoopSettings, mhz: float) -> int:
    """Clamp to the range and round to whole steps above the minimum."""
    steps = round((mhz - settings.f_min_mhz) / settings.step_mhz)
    f = settings.f_min_mhz + steps * settings.step_mhz
    return int(min(settings.f_max_mhz, max(settings.f_min_mhz, f)))


def _bounds(s: LoopSettings, sli: float) -> tuple[float, float]:
    """(go up above, go down below) for this SLI."""
    if s.band_mode == "paper":
        band = s.margin * sli                  # Band_T = 10 % of TL_T, around the target
        return s.target_ms + band, s.target_ms - band
    return s.target_ms, (1.0 - s.margin) * s.target_ms


def predicted_sli(sli_ms: float, f_mhz: int, lower_mhz: int, load: float | None) -> float:
    """The SLI one step down: service time grows as f / f'; with the cores' busy share rho
    known, queueing as well, by (1 - rho) / (1 - rho') as in an M/M/1 queue (rho' = rho f /
    f'). Infinite when the lower frequency would saturate the cores."""
    factor = f_mhz / lower_mhz
    if load is None:
        return sli_ms * factor
    rho = max(0.0, load)
    rho_lower = rho * factor
    if rho_lower >= 0.95:
        return math.inf
    return sli_ms * factor * (1.0 - min(rho, 0.95)) / (1.0 - rho_lower)


def decide(s: LoopSettings, state: LoopState, sli_ms: float | None, samples: int,
           now: float, load: float | None = None) -> FrequencyDecision:
    """One control period: the new state and why. `load`: the pinned cores' busy share at
    the current frequency over the SLI's window, if known (sharpens the down-step check).
    No SLI: the maximum; fewer than min_samples requests: hold (the quantile is noise);
    over the SLO by more than `emergency`: the maximum, no step down for cooldown_s; over
    it: up 1-4 steps by how far; in the band's top `guard` share: up one step; under the
    band: down one step, after dwell_s and only if predicted_sli stays under it; inside the
    band: hold. band_mode "paper" puts the band at margin x SLI around the target."""
    def result(action, freq, reason, error=None, **changes):
        changed = freq != state.freq_mhz
        new = replace(state, freq_mhz=freq, decision=action,
                      last_change=now if changed else state.last_change,
                      last_step=(1 if freq > state.freq_mhz else -1) if changed
                      else state.last_step, **changes)
        return FrequencyDecision(new, action, sli_ms, samples, error, reason, changed)

    if sli_ms is None or not math.isfinite(sli_ms):
        return result("no-signal", s.f_max_mhz, "no SLI: the service or its latency "
                      "source does not answer; running at the maximum")
    if samples < s.min_samples:
        return result("insufficient", state.freq_mhz,
                      f"{samples} requests in the window, fewer than {s.min_samples}: hold")
    error = sli_ms - s.target_ms
    if sli_ms > (1.0 + s.emergency) * s.target_ms:
        return result("emergency", s.f_max_mhz,
                      f"SLI {sli_ms:.1f} ms over {1 + s.emergency:g} x the SLO: maximum",
                      error, cooldown_until=now + s.cooldown_s)
    up_above, down_below = _bounds(s, sli_ms)
    if sli_ms > up_above:
        over = sli_ms / s.target_ms - 1.0
        steps = min(s.max_up_steps, max(1, math.ceil(over / 0.05 - 1e-9)))
        return result("up", quantise(s, state.freq_mhz + steps * s.step_mhz),
                      f"SLI {sli_ms:.1f} ms over the SLO {s.target_ms:g} ms: +{steps} "
                      f"step(s)", error)
    guard_above = s.target_ms * (1.0 - s.guard * s.margin)
    if s.band_mode == "safe" and s.guard > 0 and sli_ms > guard_above \
            and state.freq_mhz < s.f_max_mhz:
        # the dwell waits for a fresh SLI after an up-step; a down-step that brought the SLI
        # this near the SLO is undone at once (fast up)
        if state.last_step > 0 and state.last_change is not None \
                and now - state.last_change < s.dwell_s:
            return result("dwell", state.freq_mhz, f"near the SLO, but changed "
                          f"{now - state.last_change:.1f} s ago", error)
        return result("guard", quantise(s, state.freq_mhz + s.step_mhz),
                      f"SLI {sli_ms:.1f} ms in the band's top (over {guard_above:.1f} ms): "
                      f"one step up before it breaks the SLO", error)
    if sli_ms < down_below:
        if state.freq_mhz <= s.f_min_mhz:
            return result("hold", state.freq_mhz, "under the band at the minimum", error)
        lower = quantise(s, state.freq_mhz - s.step_mhz)
        predicted = predicted_sli(sli_ms, state.freq_mhz, lower, load)
        if s.band_mode == "safe" and predicted >= down_below:
            # one step down would land in the band or above: stay
            return result("hold", state.freq_mhz, f"under the band, but {lower} MHz would "
                          f"give about {predicted:.1f} ms: hold", error)
        if now < state.cooldown_until:
            return result("cooldown", state.freq_mhz, "under the band, but cooling down "
                          "after an emergency", error)
        if state.last_change is not None and now - state.last_change < s.dwell_s:
            return result("dwell", state.freq_mhz, f"under the band, but changed "
                          f"{now - state.last_change:.1f} s ago", error)
        return result("down", quantise(s, state.freq_mhz - s.step_mhz),
                      f"SLI {sli_ms:.1f} ms under the band ({down_below:.1f} ms): one step "
                      f"down", error)
    return result("hold", state.freq_mhz, "inside the band", error)


# every rule a loop can run, chosen by name: the windowed SLI (decide), the predictive loop
# (slo/predictive.py) and the governors (baseline); the configuration declares the names
FREQUENCY_POLICIES = LOOP_POLICIES
GOVERNORS = ("max", "min", "ondemand", "schedutil")
# schedutil's headroom: the frequency asked is 1.25 x the maximum x the utilization
# (kernel/sched/cpufreq_schedutil.c, map_util_freq: freq + freq / 4)
SCHEDUTIL_HEADROOM = 1.25


def ondemand(s: LoopSettings, load: float) -> int:
    """Linux's ondemand governor, one sampling period (the baseline the paper's operators
    disable): the share of the period the cores were busy at the current frequency above
    `up_threshold` (0.8) -> the maximum; else proportional, f_min + load * (f_max - f_min)."""
    if load > 0.8:
        return s.f_max_mhz
    return quantise(s, s.f_min_mhz + max(0.0, load) * (s.f_max_mhz - s.f_min_mhz))


def _at_or_above(s: LoopSettings, mhz: float) -> int:
    """The lowest step at or above mhz (the range's ends beyond it)."""
    steps = math.ceil((mhz - s.f_min_mhz) / s.step_mhz - 1e-9)
    return int(min(s.f_max_mhz, max(s.f_min_mhz, s.f_min_mhz + steps * s.step_mhz)))


def schedutil(s: LoopSettings, load: float, freq_mhz: int) -> int:
    """Linux's schedutil governor (the default on most kernels now), one period: the
    utilization made frequency-invariant (busy share at the current frequency x current /
    maximum), asked for with 25 % headroom, at the lowest step at or above that."""
    util = max(0.0, load) * freq_mhz / s.f_max_mhz
    return _at_or_above(s, SCHEDUTIL_HEADROOM * s.f_max_mhz * util)


def floor_mhz(s: LoopSettings, load: float, freq_mhz: int) -> int:
    """The lowest step that carries a period's work (busy share `load` at freq_mhz): its
    frequency-invariant utilization fits there with nothing to spare. What a rule that knew
    each period's work beforehand and ignored latency would set: the energy at it is the
    floor of any rule's on the power model (the SLO experiment's `floor`)."""
    return _at_or_above(s, max(0.0, load) * freq_mhz)


def baseline(s: LoopSettings, state: LoopState, policy: str, load: float | None,
             now: float) -> FrequencyDecision:
    """A policy that ignores the SLI: fixed maximum, fixed minimum, ondemand or schedutil
    (these two hold until a load is known)."""
    if policy == "max":
        f = s.f_max_mhz
    elif policy == "min":
        f = s.f_min_mhz
    elif policy == "ondemand":
        f = state.freq_mhz if load is None else ondemand(s, load)
    elif policy == "schedutil":
        f = state.freq_mhz if load is None else schedutil(s, load, state.freq_mhz)
    else:
        raise ValueError(f"policy: expected one of {', '.join(GOVERNORS)}, got {policy!r}")
    changed = f != state.freq_mhz
    new = replace(state, freq_mhz=f, decision=policy,
                  last_change=now if changed else state.last_change)
    return FrequencyDecision(new, policy, None, 0, None,
                    f"{policy}: {f} MHz" + ("" if load is None else f" (load {load:.2f})"),
                    changed)
