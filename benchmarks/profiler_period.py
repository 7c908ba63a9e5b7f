"""Benchmark: what one profiler period costs, for 10, 100, 1000 microservices.

    .venv/bin/python -m benchmarks.profiler_period [--sizes 10,100,1000] [--periods N]
                                                   [--out DIR] [--modes rm,arma-worker,arma-inline]

One period of :meth:`profiler.service.ProfilerService.run_period` is: collect every agent's
``/stats`` (HTTP, excluded here), ``ingest_agent`` for each server, ``ProfilerModel.step``,
build the ``profiles``/``servers`` views, read the recent flow durations from SQLite and
write the period's rows (``ProfilerService._record``). This benchmark feeds the real
:class:`~profiler.model.ProfilerModel` with synthetic agent answers shaped like the real
agent's (``agents/agent.py`` ``_publish``: capacity, ``server_totals``, one container per
microservice per server, noisy CPU/memory/network use, a rare unreadable container) and
times, per period:

- ``model``: ingest + step + views (what the period thread spends under the lock);
- ``sqlite``: ``flow_durations`` read + ``_record`` writes, on a real
  :class:`~profiler.store.HistoryStore` in a temporary file (WAL, synchronous=FULL, as the
  service runs it);
- ``total``: their sum, i.e. the period minus the HTTP collection.

Modes (the configuration is built with ``parse_config``: 4 servers, N microservices):

- ``rm``: rolling mean, window 10 (the paper's and the default configuration's choice);
- ``arma-worker``: ARMA(2,1), window 20, refit every 10 updates, fits submitted to a
  ``ProcessPoolExecutor(max_workers=1)`` exactly as the service does; the period cost is the
  period thread's, the fits run in the worker and lag behind when there are more of them
  than the worker can do. Reported: fits completed vs due during the run, and the steady
  state: the worker's fit time with the period thread idle (timed at the end on 20 of the
  current windows) against the fits due per period (series / refit_every);
- ``arma-inline``: the same ARMA with ``executor=None``: every due fit runs inside the
  period. All series start together, so their fits fall due in the same period ("refit
  wave", every ``refit_every`` periods) and that period takes series x fit time.

Warm-up: ``window`` periods (not measured) so windows are full and the first fits are past.
``arma-worker`` first waits for one fit in the worker (process start, statsmodels import),
then warms up with real fits (they cost the period thread only their submission).
``arma-inline`` warms up with an instant stand-in fitter (the first wave of real fits on
3,000 series would take minutes and is not what is measured), then times the real fit on 20
of the windows (which also pays statsmodels' import) to size the refit waves; the measured
periods always use the real statsmodels fit. To keep the run to a few minutes, when the
waves of the measured periods would exceed ``--inline-wave-budget-s`` (default 90 s) only
``refit_every`` periods (one wave) are measured, and when a single wave would, only the
periods before it are measured and the wave period is estimated (marked "est.").
For fits-due accounting the ARMA predictors are a subclass of
:class:`~profiler.predictors.Arma` that only counts ``update`` calls.

A period whose model step raises (as ``weights_from_usage`` does on a negative ARMA
forecast) is counted as failed and left out of the timings; the service would log it and
skip the period.

Periods run back to back (no 3 s sleep) unless ``--pace``: the period costs do not depend on
it, but how many worker fits complete during the run does, which is why the steady-state
figures are the ones to read for the worker's lag.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import shlex
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from agents.dockerstats import Capacity, server_totals
from common.cli import ArgumentParser, bounded, choice_list, non_negative_float, number_list
from common.config import parse_config
from profiler import predictors
from profiler.model import ProfilerModel
from profiler.predictors import Arma, ArmaParams, make_predictor
from profiler.service import FLOW_WINDOW_S, ProfilerService
from profiler.store import HistoryStore

MODES = ("rm", "arma-worker", "arma-inline")
DEFAULT_SIZES = (10, 100, 1000)
DEFAULT_PERIODS = 30
DEFAULT_OUT = os.path.join("results", "bench")
DEFAULT_WAVE_BUDGET_S = 90.0
N_SERVERS = 4
RM_WINDOW = 10
ARMA_ORDER = (2, 1)
ARMA_WINDOW = 20
ARMA_REFIT_EVERY = 10
PERIOD_S = 3.0
SEED = 20240501
FLOWS_PER_MICROSERVICE = 8

# Per-container use at "scale 1" (three microservices per server, as in the paper), by the
# paper's three microservice types: video is network-bound, backend CPU-bound, ui moderate.
# cpu: percent of one core; mem: MB; net: bytes/s (rx, tx).
PROFILES = {
    "video": {"cpu": 3.0, "mem": 40.0, "rx": 40e3, "tx": 1.5e6},
    "ui": {"cpu": 6.0, "mem": 30.0, "rx": 60e3, "tx": 350e3},
    "backend": {"cpu": 15.0, "mem": 50.0, "rx": 10e3, "tx": 15e3},
}
KINDS = tuple(PROFILES)
FLOW_MEDIAN_S = {"video": 60.0, "ui": 0.3, "backend": 10.0}


# ---------------------------------------------------------------------------- setup

def build_config(size: int, predictor: str):
    """4 servers and ``size`` microservices m1..mN (abbrev = name, <= 5 characters so node
    names srv<i>-<abbrev> stay <= 10 characters), unique ports from 10000."""
    if not 1 <= size <= 99999:
        raise ValueError(f"size: expected 1..99999 microservices, got {size!r}")
    microservices = [{"name": f"m{j}", "abbrev": f"m{j}", "port": 10000 + j - 1,
                      "flow_class": "auto"} for j in range(1, size + 1)]
    profiler = {"predictor": predictor, "period_s": PERIOD_S, "history_path": ":memory:"}
    if predictor == "rm":
        profiler["window"] = RM_WINDOW
    else:
        profiler.update(window=ARMA_WINDOW, arma_order=list(ARMA_ORDER),
                        arma_refit_every=ARMA_REFIT_EVERY)
    return parse_config({"servers": {"count": N_SERVERS, "cpu": 0.4, "memory": "256m",
                                     "network_mbit": 100},
                         "microservices": microservices, "profiler": profiler},
                        source=f"<benchmark size={size} predictor={predictor}>")


class SyntheticAgents:
    """Agent ``/stats`` answers for every server, one per period, reproducible from a seed.

    Each microservice has a type (video/ui/backend, in turn), a slow sinusoidal load with
    its own phase, and each instance a fixed imbalance factor; readings get multiplicative
    noise, CPU occasional peaks (x3, 3 %), memory a small noise. The use is divided by
    size/3 so that the servers' totals stay realistic whatever the number of microservices.
    With probability 2 % per server and period one container is unreadable (as when
    ``docker stats`` fails), which makes that server's totals partial.
    """

    def __init__(self, cfg, seed: int = SEED) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.servers = list(cfg.servers)
        self.instances = {s.name: cfg.instances_on(s.name) for s in self.servers}
        n = len(cfg.microservices)
        self.kind = {m.name: KINDS[(m.index - 1) % len(KINDS)] for m in cfg.microservices}
        self.scale = max(1.0, n / 3.0)
        self.phase = {m.name: float(self.rng.uniform(0, 2 * math.pi)) for m in cfg.microservices}
        self.imbalance = {i.name: float(self.rng.uniform(0.8, 1.2)) for i in cfg.instances}
        self.capacity = {s.name: Capacity(cpu_cores=s.cpu, memory_bytes=s.memory_mb * 2 ** 20,
                                          network_bytes_per_s=s.network_mbit * 1e6 / 8,
                                          source="synthetic") for s in self.servers}

    def flow_durations(self) -> dict[str, list[float]]:
        """A few completed flow durations per microservice (log-normal around its type's)."""
        return {m.name: [round(float(d), 3) for d in self.rng.lognormal(
                    math.log(FLOW_MEDIAN_S[self.kind[m.name]]), 0.4, FLOWS_PER_MICROSERVICE)]
                for m in self.cfg.microservices}

    def sample(self, period: int, now: float) -> dict[str, dict]:
        return {s.name: self._server_sample(s, period, now) for s in self.servers}

    def _server_sample(self, server, period: int, now: float) -> dict:
        insts = self.instances[server.name]
        n = len(insts)
        rng = self.rng
        load = np.array([
            (0.6 + 0.4 * math.sin(2 * math.pi * period / 200 + self.phase[i.microservice]))
            * self.imbalance[i.name] / self.scale for i in insts])
        base = {k: np.array([PROFILES[self.kind[i.microservice]][k] for i in insts])
                for k in ("cpu", "mem", "rx", "tx")}
        peaks = np.where(rng.random(n) < 0.03, 3.0, 1.0)
        cpu = base["cpu"] * load * rng.lognormal(0, 0.15, n) * peaks
        mem = base["mem"] * 2 ** 20 * (0.7 + 0.3 * load * self.scale) / self.scale \
            * rng.lognormal(0, 0.02, n)
        rx = base["rx"] * load * rng.lognormal(0, 0.15, n)
        tx = base["tx"] * load * rng.lognormal(0, 0.15, n)
        broken = int(rng.integers(n)) if rng.random() < 0.02 else -1
        cap = self.capacity[server.name]
        containers = []
        for k, inst in enumerate(insts):
            entry = {"name": f"mn.{inst.name}", "id": f"{server.index:04x}{k:08x}",
                     "instance": inst.name, "microservice": inst.microservice,
                     "readable": True, "error": None, "cpu_percent": None,
                     "memory_bytes": None, "memory_percent": None,
                     "rx_bytes_per_s": None, "tx_bytes_per_s": None}
            if k == broken:
                entry.update(readable=False, error="APIError: 500 Server Error (synthetic)")
            else:
                mem_b = int(mem[k])
                entry.update(cpu_percent=round(float(cpu[k]), 3), memory_bytes=mem_b,
                             memory_percent=round(100.0 * mem_b / cap.memory_bytes, 3),
                             rx_bytes_per_s=round(float(rx[k]), 1),
                             tx_bytes_per_s=round(float(tx[k]), 1))
            containers.append(entry)
        return {
            "server": server.name, "time": now - 0.4, "period_s": 1.0,
            "selector": f"label malb.server={server.name}", "error": None,
            "capacity": {"cpu_cores": cap.cpu_cores, "memory_bytes": cap.memory_bytes,
                         "network_bytes_per_s": cap.network_bytes_per_s, "source": cap.source},
            "totals": server_totals(containers, cap), "containers": containers,
            "unreadable": sum(1 for c in containers if not c["readable"]),
        }


class _CountedArma(Arma):
    """:class:`Arma` that also counts its updates, to know how many fits were due."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.updates = 0

    def update(self, value: float) -> None:
        self.updates += 1
        super().update(value)

    def cancel_pending(self) -> None:
        """Cancel a submitted fit that has not started (benchmark clean-up only)."""
        if self._pending is not None and self._pending.cancel():
            self._pending = None

    def window_values(self) -> np.ndarray:
        return np.array(self._values, dtype=float)

    def updates_until_due(self) -> int:
        """How many more updates until the schedule asks for the next fit."""
        if self.updates < self.min_samples:
            return self.min_samples - self.updates
        return self.refit_every - (self.updates - self.min_samples) % self.refit_every

    def fits_due(self) -> int:
        """Fits the schedule asks for after ``updates`` updates (first at min_samples, then
        every refit_every), whether or not a pending fit deferred them."""
        if self.updates < self.min_samples:
            return 0
        return 1 + (self.updates - self.min_samples) // self.refit_every


def _warmup_fit(y, order):
    """Instant stand-in for fit_arma during the inline warm-up (parameters irrelevant)."""
    p, q = order
    return ArmaParams(float(np.mean(y)), (0.3,) + (0.0,) * (p - 1) if p else (),
                      (0.2,) + (0.0,) * (q - 1) if q else ()), 0.0


@contextlib.contextmanager
def _fits_replaced_by(fit):
    real = predictors.fit_arma
    predictors.fit_arma = fit
    try:
        yield
    finally:
        predictors.fit_arma = real


def summarize(values_ms: list[float]) -> dict:
    if not values_ms:
        return {"mean": None, "p50": None, "p95": None, "max": None, "min": None}
    a = np.asarray(values_ms, dtype=float)
    return {"mean": round(float(a.mean()), 3), "p50": round(float(np.percentile(a, 50)), 3),
            "p95": round(float(np.percentile(a, 95)), 3), "max": round(float(a.max()), 3),
            "min": round(float(a.min()), 3)}


# ---------------------------------------------------------------------------- one run

def _error_key(exc: BaseException) -> str:
    """An exception as a message with its numbers masked, to count alike failures."""
    return f"{type(exc).__name__}: " + re.sub(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", "#", str(exc))[:200]


def _calibrate_fits(armas: list[_CountedArma], order, n: int = 20) -> list[float]:
    """Time the real fit on ``n`` of the predictors' current windows (spread over them)."""
    step = max(1, len(armas) // n)
    return [fit_seconds for a in armas[::step][:n]
            for _params, fit_seconds in [predictors.fit_arma(a.window_values(), order)]]


def run_mode(size: int, mode: str, periods: int, warmup: int | None = None,
             seed: int = SEED, pace: bool = False, store_dir: str | None = None,
             wave_budget_s: float | None = DEFAULT_WAVE_BUDGET_S) -> dict:
    """Run ``warmup`` + ``periods`` profiler periods for ``size`` microservices in ``mode``;
    return the figures (milliseconds) of the measured periods.

    ``arma-inline`` only, to bound the run time: a refit wave costs about series x fit time
    (the fit time calibrated on 20 of the current windows). If the waves of the ``periods``
    measured periods would take longer than ``wave_budget_s`` (None or <= 0: no limit), only
    ``refit_every`` periods (one wave) are measured; if even one wave would, only the
    periods before the next wave are, and the wave period is estimated as their mean plus
    series x fit time. ``wave.policy`` says which: "all", "one-wave" or "estimated".

    A period whose model step raises is counted as failed (the service logs it and skips
    the period's writes, as here) and left out of the timing statistics.
    """
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    if periods < 1:
        raise ValueError(f"periods: expected >= 1, got {periods!r}")
    predictor = "rm" if mode == "rm" else "arma"
    cfg = build_config(size, predictor)
    p = cfg.profiler
    warmup = p.window if warmup is None else warmup
    executor = ProcessPoolExecutor(max_workers=1) if mode == "arma-worker" else None
    armas: list[_CountedArma] = []

    def factory():
        if predictor == "rm":   # exactly what the service builds
            return make_predictor(p.predictor, p.window, p.arma_order, p.arma_refit_every,
                                  executor)
        a = _CountedArma(order=p.arma_order, window=p.window, refit_every=p.arma_refit_every,
                         executor=executor)
        armas.append(a)
        return a

    agents = SyntheticAgents(cfg, seed)
    durations = agents.flow_durations()
    model = ProfilerModel(cfg, factory)
    series = 3 * (len(cfg.microservices) + len(cfg.servers))
    tmp = tempfile.mkdtemp(prefix="malb-bench-", dir=store_dir)
    store = HistoryStore(os.path.join(tmp, "history.sqlite"), p.retention_s)
    # The service writes through its own _record; a ProfilerService with an RM configuration
    # (no process pool) over our store gives the very same rows and metric updates.
    recorder = ProfilerService(build_config(size, "rm"), store=store)
    t0 = 1_700_000_000.0
    store.add_flows(t0 - 60.0, [
        {"flow_id": f"{ms}-{k}", "microservice": ms, "server": "srv1", "instance": None,
         "client": "10.0.200.1", "duration_s": d, "bytes": 1000, "packets": 10, "active": False}
        for ms, ds in durations.items() for k, d in enumerate(ds)])
    times = {"model": [], "read": [], "write": [], "total": []}
    failures = {"warmup": 0, "measured": 0, "errors": {}, "ms": []}
    last_rows = None
    clock = {"k": 0, "started": time.perf_counter()}

    def period(measure: bool) -> None:
        nonlocal last_rows
        k = clock["k"]
        clock["k"] += 1
        now = t0 + k * p.period_s
        samples = agents.sample(k, now)
        results = {name: (sample, None) for name, sample in samples.items()}
        if pace:
            delay = clock["started"] + k * p.period_s - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        # The order of ProfilerService.run_period: ingest, read flows, step, views, record.
        a = time.perf_counter()
        try:
            for name, (sample, err) in results.items():
                model.ingest_agent(name, sample, err, now)
            b = time.perf_counter()
            store.flow_durations(since=now - FLOW_WINDOW_S)
            c = time.perf_counter()
            model.step(now, durations)
            profiles = model.profiles(now)
            servers = model.servers_view(now)
        except Exception as exc:   # the service logs "profiler period failed" and goes on
            failures["measured" if measure else "warmup"] += 1
            if measure:   # the time the period ran until it failed
                failures["ms"].append(round((time.perf_counter() - a) * 1e3, 3))
            key = _error_key(exc)
            failures["errors"][key] = failures["errors"].get(key, 0) + 1
            return
        d = time.perf_counter()
        recorder._record(now, results, profiles, servers)
        e = time.perf_counter()
        last_rows = {"container_samples": sum(len(s["containers"]) for s in samples.values()),
                     "server_samples": len(servers["servers"]),
                     "microservice_samples": len(profiles["microservices"])}
        if measure:
            times["model"].append(((b - a) + (d - c)) * 1e3)
            times["read"].append((c - b) * 1e3)
            times["write"].append((e - d) * 1e3)
            times["total"].append((e - a) * 1e3)

    wave = None
    try:
        if mode == "arma-inline":
            with _fits_replaced_by(_warmup_fit):
                for _ in range(warmup):
                    period(False)
            calib = _calibrate_fits(armas, p.arma_order)   # also pays statsmodels' import
            mean_fit_s = float(np.mean(calib))
            wave_s = series * mean_fit_s
            until = [a.updates_until_due() for a in armas]
            next_wave = max(set(until), key=until.count)    # the wave of most series
            waves = 0 if periods < next_wave else 1 + (periods - next_wave) // p.arma_refit_every
            wave = {"calibration_fits": len(calib),
                    "calibration_mean_fit_ms": round(mean_fit_s * 1e3, 2),
                    "estimated_wave_s": round(wave_s, 2), "budget_s": wave_budget_s,
                    "requested_periods": periods, "policy": "all", "estimated": False}
            if wave_budget_s and wave_budget_s > 0 and waves * wave_s > wave_budget_s:
                if wave_s <= wave_budget_s:
                    periods = min(periods, p.arma_refit_every)   # holds exactly one wave
                    wave["policy"] = "one-wave"
                else:
                    periods = max(1, min(periods, next_wave - 1))   # up to the next wave
                    wave.update(policy="estimated", estimated=True)
        else:
            if executor is not None:
                # Pay the worker's cold start (process fork, statsmodels import) up front.
                executor.submit(predictors.fit_arma, np.array([1.0, 2.0, 1.5, 2.5, 1.0, 3.0]),
                                p.arma_order).result(timeout=300)
            for _ in range(warmup):
                period(False)
        fits_before = [a.fits for a in armas]
        due_before = [a.fits_due() for a in armas]
        measured_wall = time.perf_counter()
        for _ in range(periods):
            period(True)
        measured_s = time.perf_counter() - measured_wall
        counts = store.counts()
        fits = _fit_figures(mode, armas, fits_before, due_before, p, measured_s)
        if executor is not None:
            fits.update(_calibrate_worker(executor, armas, p))
    finally:
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        recorder.stop()           # closes the store too
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    model_stats = summarize(times["model"])
    if wave and wave["estimated"]:
        base = model_stats["mean"] or 0.0
        wave["estimated_wave_period_ms"] = round(base + series * mean_fit_s * 1e3, 1)
    return {
        "size": size, "mode": mode, "predictor": predictor,
        "predictor_config": {"kind": p.predictor, "window": p.window,
                             **({"arma_order": list(p.arma_order),
                                 "refit_every": p.arma_refit_every}
                                if predictor == "arma" else {})},
        "executor": {"rm": None, "arma-worker": "ProcessPoolExecutor(max_workers=1)",
                     "arma-inline": "none (fits inline)"}[mode],
        "servers": len(cfg.servers), "instances": len(cfg.instances), "series": series,
        "warmup_periods": warmup, "periods": periods, "paced": pace,
        "failed_periods": failures["measured"], "failed_warmup_periods": failures["warmup"],
        "errors": failures["errors"], "failed_period_ms": failures["ms"],
        "model_ms": model_stats, "sqlite_read_ms": summarize(times["read"]),
        "sqlite_write_ms": summarize(times["write"]), "total_ms": summarize(times["total"]),
        "per_period_ms": {k: [round(v, 3) for v in vs] for k, vs in times.items()},
        "rows_written_per_period": last_rows, "store_row_counts": counts,
        "measured_wall_s": round(measured_s, 3),
        "fits": fits, "wave": wave,
    }


def _calibrate_worker(executor, armas: list[_CountedArma], p, n: int = 20) -> dict:
    """The worker's fit time while the period thread is idle, as it mostly is in service
    (one period of a few hundred ms every 3 s): drop the backlog, then time ``n`` fits on
    the current windows. The fit times seen during the back-to-back run are inflated by the
    period thread (and both processes' BLAS threads) competing for the same cores."""
    for a in armas:
        a.cancel_pending()
    step = max(1, len(armas) // n)
    futures = [executor.submit(predictors.fit_arma, a.window_values(), p.arma_order)
               for a in armas[::step][:n]]
    seconds = [f.result(timeout=600)[1] for f in futures]
    mean_fit_s = float(np.mean(seconds))
    series = len(armas)
    capacity = p.period_s / mean_fit_s
    return {"idle_calibration_fits": len(seconds),
            "idle_mean_fit_ms": round(mean_fit_s * 1e3, 2),
            "idle_worker_capacity_fits_per_period": round(capacity, 2),
            "idle_sustainable": capacity >= series / p.arma_refit_every,
            "idle_effective_refit_every_periods": round(
                max(p.arma_refit_every, series * mean_fit_s / p.period_s), 1)}


def _fit_figures(mode, armas, fits_before, due_before, p, measured_s) -> dict | None:
    if not armas:
        return None
    due_window = sum(a.fits_due() - u for a, u in zip(armas, due_before))
    done_window = sum(a.fits - f for a, f in zip(armas, fits_before))
    # last_fit_seconds of fits completed in the measured periods only (warm-up ones may be
    # the inline stand-in's)
    seconds = [a.last_fit_seconds for a, f in zip(armas, fits_before)
               if a.fits > f and a.last_fit_seconds]
    mean_fit_s = float(np.mean(seconds)) if seconds else None
    series = len(armas)
    out = {
        "due_measured": due_window,
        "completed_measured": done_window,
        "failed_total": sum(a.fit_failures for a in armas),
        "pending_at_end": sum(1 for a in armas if a.fit_pending),
        "series_never_fitted": sum(1 for a in armas if a.params is None),
        "mean_fit_ms": None if mean_fit_s is None else round(mean_fit_s * 1e3, 2),
        "fit_ms_sample": len(seconds),
        "demand_fits_per_period": round(series / p.arma_refit_every, 2),
    }
    if mode == "arma-worker":
        out["due_total"] = sum(a.fits_due() for a in armas)
        out["completed_total"] = sum(a.fits for a in armas)
        out["completed_per_s_during_run"] = round(done_window / measured_s, 2) \
            if measured_s > 0 else None
        if mean_fit_s:
            capacity = p.period_s / mean_fit_s
            out["worker_capacity_fits_per_period"] = round(capacity, 2)
            out["sustainable"] = capacity >= series / p.arma_refit_every
            out["effective_refit_every_periods"] = round(
                max(p.arma_refit_every, series * mean_fit_s / p.period_s), 1)
    elif mean_fit_s is not None:
        out["refit_wave_ms"] = round(series * mean_fit_s * 1e3, 1)
    return out


# ---------------------------------------------------------------------------- whole run

def machine_info(store_dir: str | None) -> dict:
    import scipy
    import statsmodels
    where = os.path.realpath(store_dir or tempfile.gettempdir())
    fs = None
    try:
        best = ""
        with open("/proc/mounts") as fh:
            for line in fh:
                dev, mnt, fstype = line.split()[:3]
                inside = where == mnt or where.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best):
                    best, fs = mnt, f"{fstype} ({dev} on {mnt})"
    except OSError:
        pass
    return {"cpu_count": os.cpu_count(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "numpy": np.__version__, "scipy": scipy.__version__,
            "statsmodels": statsmodels.__version__,
            "sqlite": __import__("sqlite3").sqlite_version,
            "store_dir": where, "store_filesystem": fs,
            "loadavg_start": [round(x, 2) for x in os.getloadavg()]}


def run_benchmark(sizes=DEFAULT_SIZES, periods: int = DEFAULT_PERIODS, modes=MODES,
                  out_dir: str | None = DEFAULT_OUT, warmup: int | None = None,
                  seed: int = SEED, pace: bool = False,
                  wave_budget_s: float | None = DEFAULT_WAVE_BUDGET_S,
                  store_dir: str | None = None, command: str | None = None,
                  log=None) -> dict:
    """Run every (size, mode); write ``profiler_period.json`` and ``.md`` into ``out_dir``
    (unless None); return the JSON document."""
    doc = {
        "benchmark": "profiler_period",
        "command": command or f"run_benchmark(sizes={list(sizes)}, periods={periods}, "
                              f"modes={list(modes)})",
        "machine": machine_info(store_dir),
        "setup": {"servers": N_SERVERS, "period_s": PERIOD_S, "seed": seed,
                  "rm": {"window": RM_WINDOW},
                  "arma": {"order": list(ARMA_ORDER), "window": ARMA_WINDOW,
                           "refit_every": ARMA_REFIT_EVERY},
                  "flows_per_microservice": FLOWS_PER_MICROSERVICE,
                  "periods": periods, "warmup": warmup if warmup is not None else "window",
                  "paced": pace, "inline_wave_budget_s": wave_budget_s},
        "results": [],
    }
    started = time.perf_counter()
    for size in sizes:
        for mode in modes:
            if log:
                log(f"size {size} mode {mode} ...")
            t = time.perf_counter()
            r = run_mode(size, mode, periods, warmup=warmup, seed=seed, pace=pace,
                         store_dir=store_dir, wave_budget_s=wave_budget_s)
            r["elapsed_s"] = round(time.perf_counter() - t, 1)
            doc["results"].append(r)
            if log:
                log(f"size {size} mode {mode}: done in {r['elapsed_s']} s"
                    + (f", {r['failed_periods']} failed periods" if r["failed_periods"] else ""))
    doc["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["elapsed_s"] = round(time.perf_counter() - started, 1)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "profiler_period.json"), "w") as fh:
            json.dump(doc, fh, indent=1)
        with open(os.path.join(out_dir, "profiler_period.md"), "w") as fh:
            fh.write(render_markdown(doc))
    return doc


# ---------------------------------------------------------------------------- report

def _f(v, digits=1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def results_table(doc: dict) -> str:
    head = ("| microservices | mode | series | periods | failed | model mean | p50 | p95 | max "
            "| SQLite mean | SQLite p95 | period mean | p95 | max | fits done / due |")
    lines = [head, "|" + "|".join(["---:", "---"] + ["---:"] * 13) + "|"]
    for r in doc["results"]:
        m, rd, w, t = r["model_ms"], r["sqlite_read_ms"], r["sqlite_write_ms"], r["total_ms"]
        sql_mean = None if rd["mean"] is None else rd["mean"] + w["mean"]
        sql_p95 = None if rd["p95"] is None else rd["p95"] + w["p95"]   # an upper bound
        fits = r["fits"]
        fd = "–" if fits is None else f"{fits['completed_measured']} / {fits['due_measured']}"
        mode, model_max, total_max = r["mode"], _f(m["max"]), _f(t["max"])
        wave = r.get("wave") or {}
        if wave.get("estimated"):
            mode += " (est.)"
            est = wave["estimated_wave_period_ms"]
            model_max = f"≈{_f(est, 0)} (est.)"
            total_max = f"≈{_f(est + (sql_mean or 0), 0)} (est.)"
        lines.append(
            f"| {r['size']} | {mode} | {r['series']} | {r['periods']} | {r['failed_periods']} "
            f"| {_f(m['mean'])} | {_f(m['p50'])} | {_f(m['p95'])} | {model_max} "
            f"| {_f(sql_mean)} | {_f(sql_p95)} | {_f(t['mean'])} | {_f(t['p95'])} "
            f"| {total_max} | {fd} |")
    return "\n".join(lines)


def _notes(doc: dict) -> list[str]:
    s = doc["setup"]
    notes = []
    for r in doc["results"]:
        f, wave, tag = r["fits"], r.get("wave") or {}, f"N={r['size']} {r['mode']}"
        if r["failed_periods"] or r["failed_warmup_periods"]:
            errors = "; ".join(f"{n} x `{e}`" for e, n in
                               sorted(r["errors"].items(), key=lambda kv: -kv[1])[:3])
            notes.append(f"- {tag}: {r['failed_periods']} of {r['periods']} measured periods "
                         f"(and {r['failed_warmup_periods']} warm-up periods) FAILED in the model "
                         f"step ({errors}); the service would log \"profiler period failed\" "
                         f"and skip them. Failed periods are left out of the timings.")
        if f is None:
            continue
        if r["mode"] == "arma-worker":
            line = (f"- {tag}: {f['completed_measured']} of {f['due_measured']} due fits "
                    f"completed during the measured periods ({r['measured_wall_s']} s of wall "
                    f"time{', paced' if r['paced'] else ', back to back'}); "
                    f"{f['pending_at_end']} pending at the end; {f['series_never_fitted']} of "
                    f"{r['series']} series never fitted. ")
            if f.get("idle_mean_fit_ms"):
                line += (f"Steady state: with the period thread idle (as between periods in "
                         f"service) a fit takes {f['idle_mean_fit_ms']} ms in the worker "
                         f"({f['idle_calibration_fits']} timed), so one worker does about "
                         f"{f['idle_worker_capacity_fits_per_period']} fits per "
                         f"{s['period_s']:g} s period against {f['demand_fits_per_period']} due "
                         f"per period: "
                         + ("sustainable" if f["idle_sustainable"] else
                            f"NOT sustainable, each series would be refitted only every "
                            f"~{f['idle_effective_refit_every_periods']} periods instead of "
                            f"{s['arma']['refit_every']}")
                         + (f" (during the back-to-back run fits took {f['mean_fit_ms']} ms "
                            f"in the worker)." if f.get("mean_fit_ms") else "."))
            notes.append(line)
        elif wave.get("policy") == "one-wave":
            notes.append(
                f"- {tag}: measured {r['periods']} periods (one refit wave) instead of "
                f"{wave['requested_periods']}: their waves would take about "
                f"{wave['estimated_wave_s']} s each, over the {wave['budget_s']:g} s budget "
                f"(--inline-wave-budget-s). A fit takes {f['mean_fit_ms']} ms in the period "
                f"thread; the wave ran about {_f(f.get('refit_wave_ms'), 0)} ms of fits; "
                f"{f['completed_measured']} / {f['due_measured']} fits done / due.")
        elif wave.get("estimated"):
            notes.append(
                f"- {tag}: NOT measured directly. A refit wave would run {r['series']} fits in "
                f"one period, about {wave['estimated_wave_s']} s (fit time "
                f"{wave['calibration_mean_fit_ms']} ms, calibrated on "
                f"{wave['calibration_fits']} of the series' windows), over the "
                f"{wave['budget_s']:g} s budget (--inline-wave-budget-s). Measured: the "
                f"{r['periods']} periods before the next wave; the max column is their mean "
                f"plus series x fit time, an estimate of the wave period.")
        else:
            notes.append(
                f"- {tag}: a fit takes {f['mean_fit_ms']} ms in the period thread; every "
                f"{s['arma']['refit_every']} periods all {r['series']} series refit in the same "
                f"period (\"refit wave\", about {_f(f.get('refit_wave_ms'), 0)} ms of fits); "
                f"{f['completed_measured']} / {f['due_measured']} fits done / due.")
    return notes


def render_markdown(doc: dict) -> str:
    mach = doc["machine"]
    s = doc["setup"]
    out = [
        "# Profiler period benchmark",
        "",
        f"Command: `{doc['command']}`",
        "",
        f"Machine: {mach['cpu_count']} CPUs ({mach['processor']}), {mach['platform']}, "
        f"Python {mach['python']} ({mach['implementation']}), numpy {mach['numpy']}, "
        f"scipy {mach['scipy']}, statsmodels {mach['statsmodels']}, SQLite {mach['sqlite']}; "
        f"history store on {mach['store_filesystem'] or mach['store_dir']}. "
        f"Load average at start {mach['loadavg_start']}, at end {mach.get('loadavg_end')}: "
        f"other work may have been running, the timings are indicative. "
        f"Elapsed: {doc.get('elapsed_s')} s.",
        "",
        f"Setup: {s['servers']} servers, N microservices (one instance of each per server), "
        f"period {s['period_s']:g} s; RM window {s['rm']['window']}; "
        f"ARMA({s['arma']['order'][0]},{s['arma']['order'][1]}) window {s['arma']['window']}, "
        f"refit every {s['arma']['refit_every']} updates; {s['periods']} measured periods "
        f"after a warm-up of one window; seed {s['seed']}. *series* = 3 resources x "
        f"(microservices + servers), one predictor each.",
        "",
        "Times in milliseconds per period. *model* = `ingest_agent` for each server + "
        "`ProfilerModel.step` + the profiles/servers views (the period thread's work under the "
        "lock); *SQLite* = the `flow_durations` read + the `ProfilerService._record` writes "
        "(3 transactions, WAL, synchronous=FULL; its p95 adds the read and write p95s, an upper "
        "bound); *period* = both: `run_period` without the HTTP collection from the agents. "
        "*failed* = measured periods whose model step raised. *fits done / due* = ARMA fits "
        "completed vs due by the schedule during the measured periods.",
        "",
        results_table(doc),
        "",
    ]
    notes = _notes(doc)
    if notes:
        out += ["Notes:", "", *notes, ""]
    out += [
        "Method: synthetic agent answers shaped like `agents/agent.py` `_publish` (capacity, "
        "`server_totals`, one container per microservice and server with cpu_percent, "
        "memory_bytes, rx/tx bytes per s; noisy, with CPU peaks and a rare unreadable "
        "container), reproducible from the seed; a few completed flow durations per "
        "microservice for the flow classification (all microservices `flow_class: auto`). "
        "The arma-inline warm-up uses an instant stand-in fitter; measured periods always use "
        "the real statsmodels fit. `prune` (every 100 periods) is not reached. Periods run "
        "back to back unless `--pace`, so the worker completes fewer fits during the run than "
        "it would in service; the steady-state balance in the notes uses the worker's fit "
        "time measured at the end with the period thread idle. Failed periods (the model "
        "step raised) are excluded from the timings and listed in the notes.",
        "",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------------------- CLI

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = ArgumentParser(prog="python -m benchmarks.profiler_period",
                        description="Time one profiler period for N microservices.")
    ap.add_argument("--sizes", type=number_list(int, 1, 99999), default=list(DEFAULT_SIZES),
                    help="numbers of microservices (default 10,100,1000)")
    ap.add_argument("--periods", type=bounded(int, 1), default=DEFAULT_PERIODS,
                    help=f"measured periods per size and mode (default {DEFAULT_PERIODS})")
    ap.add_argument("--warmup", type=bounded(int, 0), default=None,
                    help="unmeasured periods first (default: the predictor's window)")
    ap.add_argument("--modes", type=choice_list(MODES), default=list(MODES),
                    help=f"comma-separated, from {', '.join(MODES)} (default all)")
    ap.add_argument("--inline-wave-budget-s", type=non_negative_float,
                    default=DEFAULT_WAVE_BUDGET_S,
                    help="arma-inline: when one refit wave would take longer, measure the "
                         "periods before it and estimate the wave period (default "
                         f"{DEFAULT_WAVE_BUDGET_S:g}; 0 = always measure)")
    ap.add_argument("--pace", action="store_true",
                    help="start periods every period_s (3 s) as the service does")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    ap.add_argument("--store-dir", default=None,
                    help="where the temporary SQLite history goes (default: system temp dir)")
    args = ap.parse_args(argv)
    exe = sys.executable
    if exe.startswith(os.getcwd() + os.sep):
        exe = os.path.relpath(exe)
    command = " ".join([exe, "-m", "benchmarks.profiler_period", *map(shlex.quote, argv)])
    doc = run_benchmark(args.sizes, args.periods, args.modes, args.out, args.warmup, args.seed,
                        args.pace, args.inline_wave_budget_s, args.store_dir, command,
                        log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(results_table(doc))
    notes = _notes(doc)
    if notes:
        print("\n" + "\n".join(notes))
    print(f"\nwritten: {os.path.join(args.out, 'profiler_period.json')}, "
          f"{os.path.join(args.out, 'profiler_period.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
