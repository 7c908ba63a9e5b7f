"""How far the testbed's CPU samples of the back-end stray from the jobs' demand, and the same
error played into the fluid model (one reason the model's MALB can look better than the
testbed's).

A work-mode job keeps its thread at a known fraction of a core (services/rom.py), so what a
back-end container should use over an agent's window is known from the clients' records:
the jobs that ran on its instance then, each at its CPU fraction. An agent's sample differs
from that by the host's scheduling (two cores shared by four servers, the switch, the
controller and the clients), by where its window really falls, and by the job's own pacing.
`measure` reads a comparison's runs and gives that error's size (rms, in cores), the share of
it common to every server at a profiler tick (host-wide), and its lag-1 autocorrelation
between ticks; `NoiseSeries` makes errors of that size, share and autocorrelation for the
model (`lb_model --sample-noise`).
"""
from __future__ import annotations

import glob
import math
import os
import random
import sqlite3
from collections import defaultdict

from common.config import load_config
from experiments import decision_audit

NOMINAL_POINTS = 20     # points of the window at which the running jobs are summed


def deviation_stats(rows: list[tuple[float, str, float]]) -> dict:
    """rows: (profiler tick, instance, measured less nominal CPU in cores). Their mean and
    rms, the share of their variance common to the instances at a tick, and their lag-1
    autocorrelation along each instance's ticks."""
    if len(rows) < 3:
        raise ValueError("fewer than 3 samples")
    devs = [d for _, _, d in rows]
    n = len(devs)
    mean = sum(devs) / n
    var = sum((d - mean) ** 2 for d in devs) / n
    by_tick: dict[float, list[float]] = defaultdict(list)
    by_instance: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for t, inst, d in rows:
        by_tick[t].append(d - mean)
        by_instance[inst].append((t, d - mean))
    # d = c + e_i: the variance of a tick's mean over k instances is var_c + var_e / k
    ticks = [v for v in by_tick.values() if len(v) >= 2]
    common = None
    if ticks and var > 0:
        k = sum(len(v) for v in ticks) / len(ticks)
        var_mean = sum((sum(v) / len(v)) ** 2 for v in ticks) / len(ticks)
        common = min(1.0, max(0.0, (k * var_mean - var) / (k - 1) / var))
    pairs = []
    for series in by_instance.values():
        series.sort()
        pairs += [(a, b) for (_, a), (_, b) in zip(series, series[1:])]
    lag1 = sum(a * b for a, b in pairs) / len(pairs) / var if pairs and var > 0 else None
    return {"samples": n, "mean_cores": round(mean, 5), "rms_cores": round(math.sqrt(var), 5),
            "common_share": None if common is None else round(common, 3),
            "lag1": None if lag1 is None else round(lag1, 3)}


def job_deviations(run: str) -> list[tuple[float, str, float]]:
    """One run's back-end container samples against the jobs its server ran over each
    sample's window (the agent's window, ending at the sample: the tick less its age)."""
    cfg = load_config(os.path.join(run, "config.yaml"))
    window = cfg.profiler.agent_window_s
    share = {srv.name: srv.cpu for srv in cfg.servers}
    jobs, servers = decision_audit.jobs_of(run)      # demand in % of the server's share
    spans: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for srv, start, end, pct in jobs:
        spans[srv].append((start, end, pct))
    db = sqlite3.connect(f"file:{os.path.join(run, 'history.sqlite')}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT c.t, c.server, c.instance, c.cpu_percent, s.age_s FROM container_samples c "
            "JOIN server_samples s ON s.t = c.t AND s.server = c.server "
            "WHERE c.microservice = 'backend' AND c.cpu_percent IS NOT NULL "
            "AND s.age_s IS NOT NULL").fetchall()
    finally:
        db.close()
    out = []
    for t, server, inst, cpu, age in rows:
        if server not in servers:
            continue
        end = t - age
        points = [end - window + (k + 0.5) * window / NOMINAL_POINTS
                  for k in range(NOMINAL_POINTS)]
        # jobs that want more than the server's share get the share between them (and run
        # longer, as the records show)
        pct = sum(min(100.0, sum(p for a, b, p in spans[server] if a <= x < b))
                  for x in points) / NOMINAL_POINTS
        out.append((t, inst, cpu / 100.0 - pct / 100.0 * share[server]))
    return out


def measure(results: str) -> dict:
    """Every run of a comparison (results/<comparison>/<policy>/run<k>/)."""
    runs = sorted(os.path.dirname(p) for p in
                  glob.glob(os.path.join(results, "*", "run*", "history.sqlite")))
    if not runs:
        raise ValueError(f"no */run*/history.sqlite under {results}")
    rows = []
    for run in runs:
        # ticks of different runs never mix: each run's own clock times
        rows += [(t, f"{run}:{inst}", d) for t, inst, d in job_deviations(run)]
    return {"runs": len(runs), **deviation_stats(rows)}


class NoiseSeries:
    """Errors for each instance's samples: rms `rms` (cores), a `common` share of the
    variance shared by every instance at the same sample index, each part autoregressive
    with lag-1 autocorrelation `lag1`. Deterministic for a seed."""

    def __init__(self, rms: float, common: float, lag1: float, seed: object):
        if rms < 0 or not 0 <= common <= 1 or not -1 < lag1 < 1:
            raise ValueError("rms >= 0, 0 <= common <= 1, -1 < lag1 < 1")
        self.rms, self.common, self.lag1, self.seed = rms, common, lag1, seed
        # each series draws from its own generator: its values do not depend on the order
        # in which the instances ask
        self.series: dict[str, tuple[random.Random, list[float]]] = {}

    def _at(self, name: str, k: int) -> float:
        if name not in self.series:
            rng = random.Random(f"sample noise {self.seed} {name}")
            self.series[name] = (rng, [rng.gauss(0, 1)])
        rng, s = self.series[name]
        innovation = math.sqrt(1 - self.lag1 ** 2)
        while len(s) <= k:
            s.append(self.lag1 * s[-1] + innovation * rng.gauss(0, 1))
        return s[k]

    def value(self, instance: str, k: int) -> float:
        """The error of the instance's k-th sample (cores)."""
        return self.rms * (math.sqrt(self.common) * self._at("", k)
                           + math.sqrt(1 - self.common) * self._at(instance, k))
