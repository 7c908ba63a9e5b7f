"""The SLO loop's shell: per service, read the SLI (and, for the predictive rule, the service's
queue), let slo/frequency_controller.py or slo/predictive.py decide, set the frequency,
account the energy, keep the last decisions. The I/O comes in as functions (sli_fn,
queue_fn, cpu_fn) and an actuator factory, so the loop runs against fakes in unit tests and
against the service, its cgroup and cpufreq in the agent (agents/slo.py).
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import replace

from slo.actuators import ActuatorError
from slo.frequency_controller import FREQUENCY_POLICIES, FrequencyDecision, LoopSettings, \
    baseline, decide, floor_mhz, initial_state
from slo.energy import CorePowerModel, emulated_busy_s
from slo.predictive import PredictiveSettings, PredictiveState, QueueReading, correct, \
    decide_predictive, observe

log = logging.getLogger("malb.slo")
HISTORY = 300
MIN_WINDOW_S = 0.5
MAX_WINDOW_S = 60.0         # the longest window the services' /latency keeps


class ServiceLoop:
    """sli_fn(window_s) -> {"count": n, "p95_ms": ..., ...} of the requests answered in the
    last window_s seconds, or None (unreachable). The window is `window_s`, cut at the last
    frequency change: a frequency is judged only on requests served at it (else a 5 s window
    still shows the old frequency for 5 s, and the loop overshoots both ways);
    cpu_fn() -> CPU seconds the service used so far, or None; make_actuator() -> an
    actuator (slo/actuators.py), called again after it fails (a restarted container);
    queue_fn(seconds) -> {"in_flight": n, "count": answered in the last seconds, ...} of
    the service itself, or None (the predictive rule's input; without it that rule has no
    signal and runs at the maximum)."""

    def __init__(self, service: str, settings: LoopSettings, make_actuator, sli_fn, cpu_fn,
                 cores: int = 1, power: CorePowerModel | None = None, rapl=None,
                 capacity_cores: float | None = None, policy: str = "slo",
                 window_s: float = 5.0, queue_fn=None,
                 predictive: PredictiveSettings | None = None):
        if policy not in FREQUENCY_POLICIES:
            raise ValueError(f"policy: expected one of {', '.join(FREQUENCY_POLICIES)}, "
                             f"got {policy!r}")
        self.service, self.settings, self.policy = service, settings, policy
        self.queue_fn = queue_fn
        self.predictive = predictive or PredictiveSettings()
        self.model = PredictiveState()
        self.last_cpu_s: float | None = None     # CPU the service used in the last period
        self.window_s = window_s
        # what the service may use at the maximum frequency (its load is measured against it)
        self.capacity_cores = capacity_cores or cores
        self.load: float | None = None
        # busy share averaged over about the SLI's window, at the current frequency only
        self.window_load: float | None = None
        self.make_actuator, self.sli_fn, self.cpu_fn = make_actuator, sli_fn, cpu_fn
        self.cores = cores
        self.power = power or CorePowerModel(settings.f_min_mhz, settings.f_max_mhz)
        self.rapl = rapl
        self.state = initial_state(settings)
        self.actuator = None
        self.actuator_error: str | None = None
        self.history: deque[dict] = deque(maxlen=HISTORY)
        self.energy_j = 0.0
        # the same CPU work at the lowest step that carries each period's (floor_mhz)
        self.floor_energy_j = 0.0
        self.measured_energy_j = None if rapl is None else 0.0
        self.cpu_s = 0.0
        self.requests = 0
        self.changes = 0
        self._last: tuple[float, float | None] | None = None   # (time, cpu seconds)
        self._rapl_last = None
        self.lock = threading.Lock()

    # ------------------------------------------------------------ one period
    def step(self, now: float) -> FrequencyDecision:
        reading = None
        since = self.state.last_change
        # the predictive rule compares each window with its predictions at whatever
        # frequencies ran in it, so it reads whole windows
        window = self.window_s if since is None or self.policy == "predictive" else \
            max(MIN_WINDOW_S, min(self.window_s, now - since))
        try:
            reading = self.sli_fn(window)
        except Exception as exc:          # noqa: BLE001 -- any failure of the source is "no signal"
            log.warning("%s: SLI unreadable: %s", self.service, exc)
        key = f"p{round(self.settings.percentile)}_ms"
        sli = reading.get(key) if isinstance(reading, dict) else None
        count = int(reading.get("count") or 0) if isinstance(reading, dict) else 0
        queue = self._queue(now) if self.policy == "predictive" else None
        with self.lock:
            previous = self._last[0] if self._last is not None else None
            self._account(now, self.state.freq_mhz)
            if self.policy == "predictive":
                d = self._predict(now, previous, queue, sli, count, window)
            elif self.policy == "slo":
                d = decide(self.settings, self.state, sli, count, now, self.window_load)
            else:
                d = baseline(self.settings, self.state, self.policy, self.load, now)
            d = replace(d, sli_ms=sli, samples=count)
            self.state = d.state
            if d.changed:
                self.window_load = None
            applied = self._apply(d.state.freq_mhz, force=d.changed or self.actuator is None)
            self.changes += d.changed
            self.history.append({"time": round(now, 3), "sli_ms": sli, "samples": count,
                                 "freq_mhz": d.state.freq_mhz, "action": d.action,
                                 "load": None if self.load is None else round(self.load, 3),
                                 "energy_j": round(self.energy_j, 3),
                                 "floor_j": round(self.floor_energy_j, 3),
                                 "reason": d.reason, "applied": applied})
        return d

    def _queue(self, now: float) -> dict | None:
        """The service's queue over the period since the last step, or None."""
        if self.queue_fn is None:
            return None
        seconds = self.window_s if self._last is None else now - self._last[0]
        try:
            got = self.queue_fn(min(MAX_WINDOW_S, max(MIN_WINDOW_S, seconds)))
        except Exception as exc:      # noqa: BLE001 -- any failure of the source is "no signal"
            log.warning("%s: queue unreadable: %s", self.service, exc)
            return None
        return got if isinstance(got, dict) and "in_flight" in got else None

    def _predict(self, now: float, previous: float | None, queue: dict | None,
                 sli: float | None, count: int, window: float) -> FrequencyDecision:
        """The predictive rule: learn from the period that ended, correct by the windowed
        SLI, decide (under self.lock)."""
        if queue is not None and previous is not None:
            emulated = self.actuator is None or getattr(self.actuator, "emulated", True)
            self.model = observe(self.predictive, self.model, QueueReading(
                in_flight=int(queue.get("in_flight") or 0),
                completed=int(queue.get("count") or 0),
                seconds=min(MAX_WINDOW_S, now - previous),          # what _queue read
                cpu_s=self.last_cpu_s), self.state.freq_mhz, self.settings.f_max_mhz,
                emulated)
        self.model = correct(self.predictive, self.model, sli, count,
                             self.settings.min_samples, now, window, self.settings.target_ms)
        d, self.model = decide_predictive(self.settings, self.predictive, self.state,
                                          self.model, sli, count, now, self.capacity_cores,
                                          queue_known=queue is not None)
        return d

    def _apply(self, mhz: int, force: bool) -> bool:
        if not force:
            return True
        try:
            if self.actuator is None:
                self.actuator = self.make_actuator()
            self.actuator.set_mhz(mhz)
            self.actuator_error = None
            return True
        except ActuatorError as exc:
            if self.actuator_error != str(exc):
                log.warning("%s: cannot set %d MHz: %s", self.service, mhz, exc)
            self.actuator_error, self.actuator = str(exc), None
            return False

    def _account(self, now: float, freq: int) -> None:
        """Energy of the period that just ended, at the frequency it ran at."""
        try:
            cpu = self.cpu_fn()
        except Exception:       # noqa: BLE001 -- the container is gone: no CPU counted for this period
            cpu = None
        last, self._last = self._last, (now, cpu)
        if last is None:
            return
        seconds = now - last[0]
        used = 0.0 if cpu is None or last[1] is None else max(0.0, cpu - last[1])
        self.last_cpu_s = None if cpu is None or last[1] is None else used
        self.cpu_s += used
        emulated = self.actuator is None or getattr(self.actuator, "emulated", True)
        busy = emulated_busy_s(used, freq, self.settings.f_max_mhz) if emulated else used
        scale = freq / self.settings.f_max_mhz if emulated else 1.0
        self.load = None if cpu is None or seconds <= 0 else \
            used / (seconds * self.capacity_cores * scale)
        if self.load is not None:
            a = min(1.0, seconds / self.window_s)
            self.window_load = self.load if self.window_load is None else \
                self.window_load + a * (self.load - self.window_load)
        self.energy_j += self.power.energy_j(freq, seconds, busy, self.cores)
        if self.load is not None:
            floor = floor_mhz(self.settings, self.load, freq)
            # busy at the floor: the same cycles (used is CPU time at freq, emulated or not)
            floor_busy = self.load * seconds * self.capacity_cores * freq / floor
            self.floor_energy_j += self.power.energy_j(floor, seconds, floor_busy, self.cores)
        if self.rapl is not None:
            uj = self.rapl.read_uj()
            if self._rapl_last is not None:
                self.measured_energy_j += (uj - self._rapl_last) / 1e6
            self._rapl_last = uj

    # ------------------------------------------------------------ control
    def set_objective(self, policy: str | None = None, **changes) -> LoopSettings:
        """Change the target (target_ms, percentile, margin, band_mode) or the policy (one of
        FREQUENCY_POLICIES) at run time; ValueError names the field, and nothing changes
        then."""
        if policy is not None and policy not in FREQUENCY_POLICIES:
            raise ValueError(f"policy: expected one of {', '.join(FREQUENCY_POLICIES)}, "
                             f"got {policy!r}")
        with self.lock:
            new = replace(self.settings, **changes)     # validated by LoopSettings
            self.settings = new
            if policy is not None and policy != self.policy:
                # a fresh start for the new policy: no dwell or cooldown carried over
                self.policy = policy
                self.state = replace(self.state, last_change=None,
                                     cooldown_until=float("-inf"))
                self.model = PredictiveState()     # learned afresh: no stale offset
            return new

    def restore(self) -> None:
        with self.lock:
            if self.actuator is not None:
                self.actuator.restore()

    def _model_status(self) -> dict:
        m = self.model
        return {"arrivals_per_s": None if m.arrival_rate is None else round(m.arrival_rate, 2),
                "work_ms": None if m.work_s is None else round(1000 * m.work_s, 3),
                "in_flight": m.in_flight, "offset_ms": round(m.offset_ms, 2),
                "predicted_ms": round(m.predictions[-1][1], 2) if m.predictions else None}

    def status(self) -> dict:
        with self.lock:
            s = self.settings
            last = self.history[-1] if self.history else None
            act = self.actuator.describe() if self.actuator is not None else None
            return {
                "policy": self.policy,
                "slo": {"percentile": s.percentile, "target_ms": s.target_ms,
                        "margin": s.margin, "band_mode": s.band_mode},
                "load": None if self.load is None else round(self.load, 3),
                "sli_ms": last and last["sli_ms"], "samples": last and last["samples"],
                "frequency_mhz": self.state.freq_mhz,
                "range_mhz": [s.f_min_mhz, s.f_max_mhz], "state": self.state.decision,
                "actuator": act, "actuator_error": self.actuator_error,
                "energy": {"joules": round(self.energy_j, 3), "source": "modelled",
                           "model": self.power.describe(),
                           "measured_joules": None if self.measured_energy_j is None
                           else round(self.measured_energy_j, 3)},
                "cpu_seconds": round(self.cpu_s, 3), "frequency_changes": self.changes,
                "model": self._model_status() if self.policy == "predictive" else None,
                "last_decisions": list(self.history)[-10:]}
