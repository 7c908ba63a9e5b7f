"""SLO-driven frequency against the usual governors (SLO-AEEM, Song et al.), in one run on the
testbed.

    sudo .venv/bin/python -m experiments.slo_energy                  # configs/slo.yaml
    sudo .venv/bin/python -m experiments.slo_energy --low 30 --high 70 --profiles step
    sudo .venv/bin/python -m experiments.slo_energy --policies max --loads 20-50,30-70,40-90

A latency-sensitive service pinned to a core with an SLO (configs/slo.yaml) under the
open-loop generator (Poisson). For each load profile (step: low, high, low; ramp: low to
high) and each policy in turn, the agent's loop is switched to the policy (PUT /slo) and
the profile is played:

- max: fixed maximum frequency (the paper's operators' "lock at peak F");
- min: fixed minimum;
- ondemand: Linux's ondemand rule on the measured load (emulated here);
- schedutil: Linux's schedutil rule (1.25 x the maximum x the frequency-invariant
  utilization, the lowest step at or above it; emulated here);
- slo: the SLO loop, the safe band (hold in [0.9 SLO, SLO]), on the service's own latency;
- slo-client: the same loop on the latency the clients measured end to end (`sli: client`:
  a relay here reads the load generators' records as they are written and reports each
  finished request to the agent, POST /slo/observations; a failed one as FAILED_MS);
- slo-paper: the SLO loop with the paper's literal band (10 % of the SLI around the SLO,
  whatever the configured margin);
- slo-predictive: the predictive loop (slo/predictive.py: the frequency from the service's
  queue, arrival rate and work per request, before the tail shows), corrected by the
  clients' latency as slo-client reads it.

`--short-flows` says how the switch carries the clients' connections to the service:
`controller` (a rule pair per connection from the controller, the default), `tracker` or
`switch` (data-plane mode: no packet to the controller), as controller.dataplane.short_flows.

On a call graph (a configuration whose entry has `slo.scope: end-to-end`, e.g.
configs/slo-callgraph.yaml: a loop on every service), the governors act on every loop and
the loops are compared two ways:

- slo-split: the profiler splits the entry's end-to-end target into budgets, the targets of
  the loops below it (slo/budgets.py, profiler/budget_feeder.py), every service's own part
  slowed alike;
- slo-priced: the same with the priced split (the MHz where a millisecond at the entry
  costs the fewest watts);
- predictive-priced: the priced split's budgets held by the predictive rule on every loop;
- slo-whole: one loop per service with the whole target each (the profiler's split paused).

The entry's loop reads its configured SLI (the clients' latency with `sli: client`) under
both; energy is every loop's, and compliance is judged on the entry's requests end to end.

Reported per policy: CPU energy (modelled unless RAPL is readable: every output says which)
and energy per request; the share of control intervals over the SLO, at the service (the
loop's own SLI) and at the client (the same percentile over the same window of the
requests the clients saw end in it), over all intervals and at the stable load (outside
the settling window after each change of load); p50/p95/p99 at the client, frequency
changes per minute, settling time after the step up; and where the clients' time goes: the
handshake (the switch, the controller for a new flow, the server's kernel), the time at the
server (from the connection made to the answer's first byte: the listen queue, the
service's threads, its work, the network both ways) and the service's own time (its
histogram, read each period through the agent's GET /probes). With --runs N the policies are played
N times, interleaved (run k of every policy before run k + 1 of any, the order rotated by
one place per run, run k's load on seed + k): each figure is a mean with its 95 % interval,
and each SLO loop is tested against max, ondemand and schedutil paired by run (energy,
energy per request, the share of stable intervals within the SLO at the client). With
--loads each profile is played at each load (low-high pairs) and reported as its own
profile (`step 20-50`); the calibration line then also takes the worst over them all: a
target the fixed maximum meets on every load. With --calibrate-each-run each run starts
with that calibration (the fixed maximum on every profile and load, on a schedule of its
own: seed + k + CALIBRATION_SEED_SHIFT), and the run's policies hold and are judged against
the target it gives instead of the configuration's: a target the maximum meets on the day
it runs, when the machine's speed moves between sittings. Results: summary.md (beside the paper's
Table 2), summary.json, per-policy CSVs, slo-<profile>.png; each play's figures in
plays/<tag>.json as it ends, so that `--resume --out DIR` (the same options) goes on with
an experiment cut off, on a fresh stack, from its first play without a result.
"""
from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import math
import os
import sys
import threading
import time

from common import lab
from common.cli import ArgumentParser, add_short_flows, bounded, choice_list, fail, \
    positive_float, require_testbed, with_short_flows
from common.config import ConfigError, config_path, load_config_data, parse_config_file_data
from common.httpjson import HttpError, get_json, post_json, put_json
from common.markdown import number, table
from common.paths import shipped
from common.procs import ROOT
from common.stats import quantile
from experiments import protocol, significance
from experiments.stack import Stack

DEFAULT_CONFIG = shipped("configs", "slo.yaml")
GOVERNORS = ("max", "min", "ondemand", "schedutil")
ONE_LOOP = ("slo", "slo-client", "slo-paper", "slo-predictive")   # one loop
CLIENT_SLI = ("slo-client", "slo-predictive")         # the loops read the clients' latency
# a configuration with an end-to-end objective
CALL_GRAPH = ("slo-split", "slo-priced", "predictive-priced", "slo-whole")
SPLIT_BY = {"slo-split": "uniform", "slo-priced": "priced",   # the profiler's split
            "predictive-priced": "priced"}
COMPARED_POLICIES = (*GOVERNORS, *ONE_LOOP, *CALL_GRAPH)
FAILED_MS = 10_000.0        # a failed request counts as this slow (the clients' timeout)
RELAY_EVERY_S = 0.5
MAX_REPORT = 5_000          # requests per report (slo/client_sli.py takes up to 10,000)
PROFILES = ("step", "ramp")
DEFAULT_LOW, DEFAULT_HIGH = 30.0, 70.0      # requests per second
STABLE_AFTER_S = 15.0       # intervals this soon after a change of load are settling
CALIBRATION_FACTOR = 1.2    # a target: the maximum's worst stable client tail x this,
CALIBRATION_STEP_MS = 5.0   # rounded up to a multiple of this
# --calibrate-each-run: run k's calibration plays schedule seed + k + this, a schedule of its
# own (the target is not fitted to the arrivals the policies are then judged on)
CALIBRATION_SEED_SHIFT = 500
PAPER_BAND = 0.10            # SLO-AEEM's Band_T = 10 % of TL_T
PAPER = ("SLO-AEEM (Song et al.), Table 2: 1.6 GHz against 2.1 GHz fixed, p90 86 vs 63 ms, "
         "12.6 % less CPU power (the paper: \"~15 %\"), 18.6 % less throughput (closed-loop "
         "wrk), 7.3 % more energy per request")


def slo_service(cfg):
    """The service whose latency the experiment judges: the entry of an end-to-end
    objective, else the one service with an SLO."""
    names = [m for m in cfg.microservices if m.slo is not None]
    if not names:
        raise ConfigError("microservices: no microservice has an slo")
    entries = [m for m in names if m.slo.scope == "end-to-end"]
    if len(entries) > 1:
        raise ConfigError(f"microservices: the experiment judges one end-to-end objective; "
                          f"{entries[0].name} and {entries[1].name} both have one")
    if not entries and len(names) > 1:
        raise ConfigError(f"microservices: {names[0].name} and {names[1].name} both have an "
                          f"slo; the experiment runs one loop, or an end-to-end objective "
                          f"over several (slo.scope: end-to-end)")
    return (entries or names)[0]


def loops_of(cfg) -> list[tuple[str, str]]:
    """(service, its agent's URL) for every loop: every instance of a service with an SLO,
    the judged service's first."""
    entry = slo_service(cfg)
    ordered = [entry, *(m for m in cfg.microservices if m.slo is not None and m is not entry)]
    return [(m.name, cfg.server(i.server).agent_url) for m in ordered
            for i in cfg.instances_of(m.name)]


def check_policies(cfg, policies) -> None:
    """ConfigError naming a policy the configuration cannot run: the one-loop variants
    need one loop, the call-graph ones an end-to-end objective."""
    call_graph = slo_service(cfg).slo.scope == "end-to-end"
    wrong = [p for p in policies if p in (ONE_LOOP if call_graph else CALL_GRAPH)]
    if wrong:
        raise ConfigError(f"--policies: {wrong[0]} runs on " + (
            "one loop; this configuration has an end-to-end objective (its policies: "
            f"{', '.join(GOVERNORS + CALL_GRAPH)})" if call_graph else
            "a call graph with an end-to-end objective (slo.scope: end-to-end); this "
            f"configuration has one loop (its policies: {', '.join(GOVERNORS + ONE_LOOP)})"))


def default_policies(cfg) -> list[str]:
    call_graph = slo_service(cfg).slo.scope == "end-to-end"
    return [*GOVERNORS, *(CALL_GRAPH if call_graph else ONE_LOOP)]


def profile_phases(profile: str, low: float, high: float, seconds: float) -> list[dict]:
    """The load profile's phases (requests per second), `seconds` long in all."""
    if profile == "step":
        a, b = round(seconds * 0.25), round(seconds * 0.45)
        return [{"name": "low", "seconds": a, "from": low, "to": low},
                {"name": "high", "seconds": b, "from": high, "to": high},
                {"name": "low-again", "seconds": seconds - a - b, "from": low, "to": low}]
    return [{"name": "ramp", "seconds": seconds, "from": low, "to": high}]


def load_changes(phases: list[dict]) -> list[float]:
    """Seconds from the start at which the offered load steps (a ramp never settles)."""
    out, t = [], 0.0
    for prev, ph in zip(phases, phases[1:]):
        t += prev["seconds"]
        if ph["from"] != prev["to"]:
            out.append(t)
    return out


def request_latency_ms(row: dict) -> float:
    """A request as its client saw it: its latency (from when it was due: open loop), a
    failed one as FAILED_MS."""
    return FAILED_MS if row["error"] else 1000.0 * float(row["latency_s"])


class ClientRelay:
    """The clients' end-to-end latencies to the service's agent: every RELAY_EVERY_S, the
    request records the load generators have written since (complete lines of
    requests-<tag>-*.csv) as POST /slo/observations [[ended, latency_ms], ...]. The
    clients run in the testbed's hosts, which do not reach the agent's address; a probe
    client or a user's load generator would report the same way."""

    def __init__(self, pattern: str, agent: str, service: str, token: str | None):
        self.pattern, self.url, self.service, self.token = pattern, f"{agent}/slo/observations", \
            service, token
        self.offsets: dict[str, int] = {}
        self.headers: dict[str, str] = {}
        self.sent = self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="client-relay", daemon=True)

    def new_observations(self) -> list[list[float]]:
        out = []
        for path in sorted(glob.glob(self.pattern)):
            with open(path, "rb") as fh:
                fh.seek(self.offsets.get(path, 0))
                data = fh.read()
            cut = data.rfind(b"\n") + 1      # a line being written waits for the next poll
            if not cut:
                continue
            self.offsets[path] = self.offsets.get(path, 0) + cut
            lines = data[:cut].decode()
            if path not in self.headers:
                self.headers[path], _, lines = lines.partition("\n")
            for r in csv.DictReader(io.StringIO(self.headers[path] + "\n" + lines)):
                if r.get("ended"):
                    out.append([float(r["ended"]), round(request_latency_ms(r), 3)])
        return out

    def poll(self) -> None:
        obs = self.new_observations()
        for k in range(0, len(obs), MAX_REPORT):
            try:
                post_json(self.url, {"service": self.service,
                                     "observations": obs[k:k + MAX_REPORT]}, 5.0,
                          token=self.token)
                self.sent += len(obs[k:k + MAX_REPORT])
            except HttpError:
                self.errors += 1

    def _run(self) -> None:
        while not self._stop.wait(RELAY_EVERY_S):
            self.poll()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()        # its poll in progress ends first: one poller at a time
        self.poll()


def client_sli(requests: list[dict], t0: float, t: float, window_s: float,
               percentile: float) -> float | None:
    """The loop's SLI as the clients saw it at t (s from t0): the percentile of the
    latencies of the requests that ended in (t - window_s, t], failed ones as FAILED_MS;
    None when none ended then."""
    values = sorted(request_latency_ms(r) for r in requests
                    if r.get("ended") and t - window_s < float(r["ended"]) - t0 <= t)
    return quantile(values, percentile / 100, is_sorted=True)


def time_split(requests: list[dict], service_rows: list[dict]) -> dict:
    """Where the clients' time went: the handshake's p95 (connection made), the p95 at the
    server (connection made to the answer's first byte), each over the requests that got
    that far; and the service's own p50 and p99, the median over the periods that had
    requests of its histogram's per-period values (service_rows: GET /probes readings)."""
    def p95(values):
        values = sorted(values)
        return round(quantile(values, 0.95, is_sorted=True), 2) if values else None

    def median(key):
        values = sorted(r[key] for r in service_rows if r.get(key) is not None)
        return round(quantile(values, 0.5, is_sorted=True), 2) if values else None
    return {
        "connect_p95_ms": p95(1000 * (float(q["connected"]) - float(q["started"]))
                              for q in requests if q.get("connected")),
        "server_p95_ms": p95(1000 * (float(q["first_byte"]) - float(q["connected"]))
                             for q in requests if q.get("connected") and q.get("first_byte")),
        "service_p50_ms": median("p50_ms"), "service_p99_ms": median("p99_ms")}


def analyse(rows: list[dict], requests: list[dict], target_ms: float, phases: list[dict],
            ramp: bool, t0: float = 0.0, window_s: float = 5.0,
            percentile: float = 95.0, service_rows: list[dict] | None = None) -> dict:
    """Per-policy figures from the loop's per-period rows (t from the profile's start at
    t0, sli_ms, samples, freq_mhz, energy_j) and the clients' requests; each row judged at
    the service (its sli_ms) and at the client (client_sli over the loop's window)."""
    seconds = sum(p["seconds"] for p in phases)
    rows = [r for r in rows if 0 <= r["t"] <= seconds]
    for r in rows:
        r["client_sli_ms"] = client_sli(requests, t0, r["t"], window_s, percentile)
    judged = [r for r in rows if r["sli_ms"] is not None]
    at_client = [r for r in rows if r["client_sli_ms"] is not None]
    changes = load_changes(phases)

    def stable(r):
        return not ramp and all(not 0 <= r["t"] - c < STABLE_AFTER_S for c in changes) \
            and r["t"] >= STABLE_AFTER_S
    steady = [r for r in judged if stable(r)]
    steady_client = [r for r in at_client if stable(r)]
    over = [r for r in judged if r["sli_ms"] > target_ms]
    ok = sorted(float(q["latency_s"]) * 1000 for q in requests if not q["error"])
    energy = rows[-1]["energy_j"] - rows[0]["energy_j"] if len(rows) > 1 else None
    floor = rows[-1]["floor_j"] - rows[0]["floor_j"] if len(rows) > 1 and \
        rows[0].get("floor_j") is not None and rows[-1].get("floor_j") is not None else None
    freq_changes = sum(1 for a, b in zip(rows, rows[1:]) if a["freq_mhz"] != b["freq_mhz"])
    settle = None
    if changes and not ramp:
        up = changes[0]
        end = up + phases[1]["seconds"]
        window = [r for r in judged if up <= r["t"] < end]
        for k, r in enumerate(window):
            if all(x["sli_ms"] <= target_ms for x in window[k:]):
                settle = round(r["t"] - up, 1)
                break
    return {
        "requests": len(requests), "failed": sum(1 for q in requests if q["error"]),
        "p50_ms": quantile(ok, 0.5, is_sorted=True), "p95_ms": quantile(ok, 0.95,
                                                                         is_sorted=True),
        "p99_ms": quantile(ok, 0.99, is_sorted=True),
        **time_split(requests, service_rows or []),
        "energy_j": None if energy is None else round(energy, 2),
        "energy_per_request_mj": None if energy is None or not ok else
        round(1000 * energy / len(ok), 3),
        # the same CPU work at the lowest frequency that carries each period's: the floor
        # of any rule's energy on the power model, whatever the latency
        "floor_per_request_mj": None if floor is None or not ok else
        round(1000 * floor / len(ok), 3),
        "intervals": len(judged), "over_slo_share": round(len(over) / len(judged), 4)
        if judged else None,
        "stable_intervals": len(steady),
        "stable_within_slo_share": round(sum(1 for r in steady if r["sli_ms"] <= target_ms)
                                         / len(steady), 4) if steady else None,
        "client_intervals": len(at_client),
        "client_over_slo_share": round(sum(1 for r in at_client
                                           if r["client_sli_ms"] > target_ms)
                                       / len(at_client), 4) if at_client else None,
        "client_stable_intervals": len(steady_client),
        # what a target must allow for this policy to meet it at the client in every stable
        # interval (docs/slo.md: the targets are chosen from the fixed maximum's)
        "client_stable_max_ms": round(max(r["client_sli_ms"] for r in steady_client), 2)
        if steady_client else None,
        "client_stable_within_slo_share": round(
            sum(1 for r in steady_client if r["client_sli_ms"] <= target_ms)
            / len(steady_client), 4) if steady_client else None,
        "mean_freq_mhz": round(sum(r["freq_mhz"] for r in rows) / len(rows)) if rows else None,
        "freq_changes_per_min": round(60 * freq_changes / seconds, 2),
        "settling_s": settle}


class LoopWatcher:
    """One loop's rows on its agent, polled every period and kept once each, each with the
    target the loop held when it was read."""

    def __init__(self, url: str, service: str):
        self.url, self.service, self.rows, self.seen = url, service, [], set()

    def poll(self) -> dict:
        doc = get_json(f"{self.url}/slo", 5.0)["services"][self.service]
        for r in doc["last_decisions"]:
            if r["time"] not in self.seen:
                self.seen.add(r["time"])
                self.rows.append({**r, "target_ms": doc["slo"]["target_ms"]})
        return doc


class ServiceWatcher:
    """The judged service's own latency as its histogram has it: each of its instances'
    reading through its agent's GET /probes over the last period (count, p50, p99 and the
    requests in flight), kept with the time it was read (Unix seconds)."""

    def __init__(self, cfg, service: str, period_s: float):
        self.period_s = min(60.0, max(0.1, period_s))
        self.targets = [(cfg.server(i.server).agent_url, i.container)
                        for i in cfg.instances_of(service)]
        self.rows: list[dict] = []

    def poll(self) -> None:
        for agent, container in self.targets:
            try:
                doc = get_json(f"{agent}/probes?window_s={self.period_s:g}", 5.0)
            except HttpError:
                continue        # a reading missed: the medians are over the others
            for entry in (doc.get("instances") or {}).values():
                if entry.get("container") == container and entry.get("error") is None \
                        and entry.get("count"):
                    self.rows.append({"time": entry.get("time"), "count": entry["count"],
                                      "p50_ms": entry.get("p50_ms"),
                                      "p99_ms": entry.get("p99_ms"),
                                      "in_flight": entry.get("in_flight")})


def policy_bodies(cfg, policy: str, target_ms: float | None = None
                  ) -> list[tuple[str, dict]]:
    """(agent URL, PUT /slo body) for every loop under `policy`; the entry's target
    `target_ms` (the configuration's unless given)."""
    entry = slo_service(cfg)
    target = entry.slo.target_ms if target_ms is None else target_ms
    out = []
    for name, agent in loops_of(cfg):
        slo = cfg.microservice(name).slo
        if entry.slo.scope != "end-to-end":
            # slo-paper is the paper's rule as written: its band is 10 % of the SLI,
            # whatever margin the configuration gives the safe rule
            rule = "predictive" if policy == "slo-predictive" else \
                "slo" if policy.startswith("slo") else policy
            body = {"service": name, "policy": rule,
                    "sli": "client" if policy in CLIENT_SLI else "service",
                    "band_mode": "paper" if policy == "slo-paper" else "safe",
                    "margin": PAPER_BAND if policy == "slo-paper" else slo.margin}
            if target_ms is not None:
                body["target_ms"] = target
        else:
            rule = "predictive" if policy == "predictive-priced" else \
                "slo" if policy in CALL_GRAPH else policy
            body = {"service": name, "policy": rule,
                    "sli": slo.sli, "band_mode": "safe", "margin": slo.margin}
            # the entry holds the whole target; under slo-whole every loop does, under
            # slo-split and slo-priced the profiler sets the others' (their budgets)
            if name == entry.name or policy == "slo-whole":
                body["target_ms"] = target
        out.append((agent, body))
    return out


def apply_policy(st: Stack, policy: str, target_ms: float | None = None) -> None:
    """Every loop under `policy`, the entry's target `target_ms` (the configuration's unless
    given; on a call graph the profiler's objective too)."""
    entry, token = slo_service(st.cfg), st.cfg.security.token
    if entry.slo.scope == "end-to-end":
        body = {"entry": entry.name, "active": policy in SPLIT_BY}
        if target_ms is not None:
            body["target_ms"] = target_ms
        if policy in SPLIT_BY:
            body["split"] = SPLIT_BY[policy]
        put_json(f"{st.cfg.profiler.url}/budgets", body, 5.0, token=token)
    for agent, body in policy_bodies(st.cfg, policy, target_ms):
        put_json(f"{agent}/slo", body, 5.0, token=token)


def with_total_energy(rows: list[dict], others: list[list[dict]]) -> list[dict]:
    """rows (the judged loop's, by its agent's monotonic `time`) with energy_j the sum of
    its own and each other loop's latest at or before that time (agents on one machine
    share the monotonic clock)."""
    out = []
    for r in rows:
        totals = {}
        for key in ("energy_j", "floor_j"):     # floor_j: none from an agent before it
            total = r.get(key)
            for other in others:
                before = [o.get(key) for o in other if o["time"] <= r["time"]]
                total = None if total is None or (before and before[-1] is None) else \
                    total + (before[-1] if before else 0.0)
            totals[key] = None if total is None else round(total, 3)
        out.append({**r, **totals})
    return out


def loop_figures(rows: list[dict], t_from: float, t_to: float) -> dict:
    """One loop over the measured profile (agent monotonic times): its energy, mean
    frequency and mean target."""
    rows = [r for r in rows if t_from <= r["time"] <= t_to]
    if len(rows) < 2:
        return {"energy_j": None, "mean_freq_mhz": None, "mean_target_ms": None}
    return {"energy_j": round(rows[-1]["energy_j"] - rows[0]["energy_j"], 2),
            "mean_freq_mhz": round(sum(r["freq_mhz"] for r in rows) / len(rows)),
            "mean_target_ms": round(sum(r["target_ms"] for r in rows) / len(rows), 2)}


def play_tag(label: str, policy: str, run: int, runs: int) -> str:
    """A play's name in file names: its profile and load, the policy, and the run."""
    return f"{label}-{policy}" + (f"-r{run + 1}" if runs > 1 else "")


def played(plays_dir: str, tag: str) -> dict | None:
    """A play that finished (plays/<tag>.json, written whole at its end), or None."""
    try:
        with open(os.path.join(plays_dir, f"{tag}.json")) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def keep_play(plays_dir: str, tag: str, result: dict) -> None:
    """plays/<tag>.json, whole or not at all: --resume takes a play whose file is there for
    finished, so an interruption must not leave half of one."""
    os.makedirs(plays_dir, exist_ok=True)
    path = os.path.join(plays_dir, f"{tag}.json")
    with open(path + ".part", "w") as fh:
        json.dump(result, fh)
    os.replace(path + ".part", path)


def stack_dir(out_dir: str) -> str:
    """The stack's directory: run/, or on resuming the first of run-2, run-3, ... not there
    yet, so that no file of an interrupted play is taken for one of today's."""
    path, n = os.path.join(out_dir, "run"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(out_dir, f"run-{n}")
    return path


def play(st: Stack, svc, policy: str, profile: str, phases, opts, log, run: int = 0,
         label: str | None = None, target_ms: float | None = None, seed_shift: int = 0
         ) -> dict:
    """One policy through one profile's phases; `label`: the profile and load in file
    names (default the profile); `target_ms`: the entry's target, held and judged (the
    configuration's unless given); the load on schedule seed + run + `seed_shift`."""
    target = svc.slo.target_ms if target_ms is None else target_ms
    apply_policy(st, policy, target_ms)
    agent = st.cfg.server(st.cfg.instances_of(svc.name)[0].server).agent_url
    tag = play_tag(label or profile, policy, run, opts.runs)
    # unmeasured warm-up at the first rate: every policy starts from where it settles, not
    # from where the one before it left the frequency (none asked for: none played, as the
    # load generator takes no phase of 0 s)
    warm = [{"name": "warmup", "seconds": opts.warmup, "from": phases[0]["from"],
             "to": phases[0]["from"]}] if opts.warmup > 0 else []
    spec = {"seed": opts.seed + run + seed_shift, "arrivals": "poisson",
            "phases": warm + phases,
            "classes": [{"name": "request", "weight": 1, "host": svc.vip, "port": svc.port,
                         "path": "/work"}]}
    path = os.path.join(st.run_dir, f"spec-{tag}.json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    watchers = [LoopWatcher(url, name) for name, url in loops_of(st.cfg)]   # svc's first
    own_time = ServiceWatcher(st.cfg, svc.name, opts.period)
    seconds = sum(p["seconds"] for p in phases)
    start = time.time() + 2
    # the clients' files of this tag only ("slo" is a prefix of "slo-client")
    relay = ClientRelay(os.path.join(st.run_dir, f"requests-{tag}-[0-9]*.csv"), agent,
                        svc.name, st.cfg.security.token)
    with relay:
        st.start_loadgen(path, start, tag=tag, timeout_s=FAILED_MS / 1000)
        t0 = start + opts.warmup                      # the measured profile starts here
        mono0 = time.monotonic() + (t0 - time.time())
        while time.time() < t0 + seconds + 2:
            try:
                doc = [w.poll() for w in watchers][0]
            except (HttpError, KeyError) as exc:
                raise RuntimeError(f"an agent's SLO loop does not answer: {exc}") from None
            if time.time() >= t0:
                own_time.poll()
            time.sleep(min(2.0, opts.period))
            if opts.progress:
                print(f"\r[slo] {tag}: {time.time() - t0:5.0f}/{seconds:.0f} s, "
                      f"{doc['frequency_mhz']} MHz, SLI {number(doc['sli_ms'], 1)} ms "
                      f"({doc['sli_source']})   ", end="", file=sys.stderr, flush=True)
        if opts.progress:
            print(file=sys.stderr)
        st.wait_for(lambda: len(st.loadgen_summaries(tag)) == len(st.cfg.testbed.clients),
                    seconds + 120, f"load {tag}", interval_s=1.0)
    requests = []
    for f in glob.glob(os.path.join(st.run_dir, f"requests-{tag}-[0-9]*.csv")):
        with open(f) as fh:
            requests += [r for r in csv.DictReader(fh) if r["phase"] != "warmup"]
    own = sorted(watchers[0].rows, key=lambda r: r["time"])
    others = [sorted(w.rows, key=lambda r: r["time"]) for w in watchers[1:]]
    rows = [{"t": round(r["time"] - mono0, 3), "sli_ms": r["sli_ms"],
             "samples": r["samples"], "freq_mhz": r["freq_mhz"], "action": r["action"],
             "load": r["load"], "energy_j": r["energy_j"], "floor_j": r["floor_j"]}
            for r in with_total_energy(own, others)]
    with open(os.path.join(st.run_dir, f"loop-{tag}.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["t"])
        w.writeheader()
        w.writerows(rows)
    measured = [r for r in own_time.rows if r["time"] is not None
                and t0 <= r["time"] <= t0 + seconds]
    result = analyse(rows, requests, target, phases, profile == "ramp", t0,
                     st.cfg.agents.slo.window_s, svc.slo.percentile, measured)
    result["target_ms"] = target
    result["client_reports"] = {"requests": relay.sent, "failed_posts": relay.errors}
    if len(watchers) > 1:
        result["loops"] = {f"{w.service}@{w.url}": loop_figures(w.rows, mono0, mono0 + seconds)
                           for w in watchers}
    log(f"[slo] {tag}: energy {result['energy_j']} J, "
        f"{result['energy_per_request_mj']} mJ/request, over SLO at the service "
        f"{result['over_slo_share']}, at the client {result['client_over_slo_share']}, "
        f"p95 {number(result['p95_ms'], 1)} ms, mean {result['mean_freq_mhz']} MHz")
    return {"result": result, "rows": rows}


def run(opts, data: dict, out_dir: str, log=print) -> dict:
    out: dict = {}
    data = with_short_flows(data, opts.short_flows)
    cfg = parse_config_file_data(data, config_path(opts.config))
    # a call graph's objective is split by the profiler
    call_graph = slo_service(cfg).slo.scope == "end-to-end"
    plays_dir = os.path.join(out_dir, "plays")
    with Stack(data, stack_dir(out_dir), policy="malb", profiler=call_graph) as st:
        svc = slo_service(st.cfg)
        loops = loops_of(st.cfg)
        for name, agent in loops:
            st.wait_for(lambda agent=agent, name=name: get_json(
                f"{agent}/slo", 5.0)["services"][name]["actuator"],
                        30, f"the actuator of {name}'s SLO loop")
        agent = loops[0][1]
        slo_doc = get_json(f"{agent}/slo", 5.0)
        targets: list[dict] = []
        for run in range(opts.runs):
            # interleaved: run k of every policy before run k + 1 of any, the order
            # rotated by one place per run, each run's load on its own seed
            order = protocol.run_order(opts.policies, run + 1)
            loads = loads_of(opts)
            target = None
            if opts.calibrate_each_run:
                targets.append(calibrate(st, svc, opts, plays_dir, run, log))
                target = targets[-1]["target_ms"]
            for profile in opts.profiles:
                for low, high in loads:
                    phases = profile_phases(profile, low, high, opts.seconds)
                    key = profile if len(loads) == 1 else f"{profile} {low:g}-{high:g}"
                    for policy in order:
                        tag = play_tag(key.replace(" ", "-"), policy, run, opts.runs)
                        done = played(plays_dir, tag) if opts.resume else None
                        if opts.runs > 1 or done:
                            log(f"[slo] run {run + 1} of {opts.runs}: {key}, {policy}"
                                + ("; played before, read back" if done else ""))
                        if done is None:
                            done = play(st, svc, policy, profile, phases, opts, log, run,
                                        key.replace(" ", "-"), target)
                            keep_play(plays_dir, tag, done)
                        out.setdefault(key, {}).setdefault(policy, []).append(done)
        backend = st.testbed.describe()
    return {"profiles": out, "loop": {k: slo_doc[k] for k in ("actuator", "energy_source",
                                                              "period_s")},
            "energy_model": slo_doc["services"][svc.name]["energy"]["model"],
            "service": svc.name, "loops": [name for name, _a in loops],
            "slo": {"target_ms": svc.slo.target_ms, "percentile": svc.slo.percentile,
                    "margin": svc.slo.margin, "scope": svc.slo.scope, "sli": svc.slo.sli},
            "testbed": backend, "short_flows": opts.short_flows,
            "run_targets": targets or None}


def calibrate(st: Stack, svc, opts, plays_dir: str, run: int, log) -> dict:
    """Run `run`'s target: the fixed maximum played on every profile and load the run
    plays, on a schedule of its own (CALIBRATION_SEED_SHIFT), and the calibration rule
    applied to its worst stable client percentile (calibrated_target). Each play is kept
    as the policies' are, so --resume reads it back. RuntimeError when no play of it had
    a stable interval at the client (no target to take)."""
    plays = []
    for profile in opts.profiles:
        for low, high in loads_of(opts):
            label = f"calibration-{profile}-{low:g}-{high:g}"
            tag = play_tag(label, "max", run, opts.runs)
            done = played(plays_dir, tag) if opts.resume else None
            log(f"[slo] run {run + 1} of {opts.runs}: calibration, {profile} "
                f"{low:g}-{high:g}, max" + ("; played before, read back" if done else ""))
            if done is None:
                done = play(st, svc, "max", profile, profile_phases(profile, low, high,
                                                                    opts.seconds),
                            opts, log, run, label, seed_shift=CALIBRATION_SEED_SHIFT)
                keep_play(plays_dir, tag, done)
            plays.append(done)
    found = calibrated_target({"max": plays})
    if found is None:
        raise RuntimeError(f"run {run + 1}'s calibration: the fixed maximum had no stable "
                           "interval at the client, so no target to take")
    worst, target = found
    log(f"[slo] run {run + 1} of {opts.runs}: the fixed maximum's worst stable client "
        f"p{svc.slo.percentile:g} {worst:g} ms: the run's target {target:g} ms")
    return {"run": run + 1, "seed": opts.seed + run + CALIBRATION_SEED_SHIFT,
            "worst_ms": worst, "target_ms": target,
            "failed": sum(p["result"].get("failed") or 0 for p in plays)}


# the summary's columns: (result key, label, digits, scale: 100 for shares shown in %);
# energy first, the energy against the maximum's in the same run follows it
TABLE = (("energy_j", "energy J", 1, 1), ("energy_per_request_mj", "mJ/request", 2, 1),
         ("floor_per_request_mj", "floor mJ/request", 2, 1),
         ("over_slo_share", "% over SLO at the service (all)", 1, 100),
         ("stable_within_slo_share", "% within SLO at the service (stable)", 1, 100),
         ("client_over_slo_share", "% over SLO at the client (all)", 1, 100),
         ("client_stable_within_slo_share", "% within SLO at the client (stable)", 1, 100),
         ("client_stable_max_ms", "worst stable client p ms", 1, 1),
         ("p50_ms", "p50 ms", 1, 1), ("p95_ms", "p95 ms", 1, 1), ("p99_ms", "p99 ms", 1, 1),
         ("connect_p95_ms", "handshake p95 ms", 1, 1),
         ("server_p95_ms", "at the server p95 ms", 1, 1),
         ("service_p50_ms", "service's own p50 ms", 1, 1),
         ("service_p99_ms", "service's own p99 ms", 1, 1),
         ("mean_freq_mhz", "mean MHz", 0, 1), ("freq_changes_per_min", "changes/min", 1, 1),
         ("settling_s", "settling s", 1, 1), ("failed", "failed", 0, 1))
# the loop's figures tested against each governor, paired by run: (figure, better)
TESTED = (("energy_j", "lower"), ("energy_per_request_mj", "lower"),
          ("client_stable_within_slo_share", "higher"))
LOOPS = (*ONE_LOOP, *CALL_GRAPH)


def loads_of(opts) -> list[tuple[float, float]]:
    """The (low, high) loads the options ask for: --loads, else --low and --high."""
    return opts.loads or [(opts.low or DEFAULT_LOW, opts.high or DEFAULT_HIGH)]


def loads_text(loads) -> str:
    return ", ".join(f"{low:g} -> {high:g}" for low, high in loads)


def load_pairs(text: str) -> list[tuple[float, float]]:
    """An argparse type: comma-separated `low-high` pairs of requests per second, each
    above 0, at least one."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        low, sep, high = item.partition("-")
        try:
            pair = (float(low), float(high)) if sep else None
        except ValueError:
            pair = None
        if pair is None or not all(math.isfinite(v) and v > 0 for v in pair):
            raise argparse.ArgumentTypeError(
                f"expected low-high pairs of requests per second above 0, separated by "
                f"commas (20-50,30-70), got {item[:40]!r}")
        out.append(pair)
    return out


def calibrated_target(res: dict) -> tuple[float, float] | None:
    """(the fixed maximum's worst stable client percentile over all its runs, the target
    the calibration rule takes from it), or None without such a run: a target the maximum
    meets on every load it was calibrated on, with room (docs/slo.md, the protocols)."""
    worst = [r["result"].get("client_stable_max_ms") for r in res.get("max", [])]
    worst = [w for w in worst if w is not None]
    if not worst:
        return None
    top = max(worst)
    step = CALIBRATION_STEP_MS
    return top, step * math.ceil(CALIBRATION_FACTOR * top / step - 1e-9)


def _calibration_lines(doc: dict, res: dict, lead: str) -> list[str]:
    """The calibration rule's target from the fixed maximum's runs in `res`, if any."""
    target = calibrated_target(res)
    if target is None:
        return []
    return [f"{lead}Calibration: the fixed maximum's worst stable p"
            f"{doc['slo']['percentile']:g} at the client over its {len(res['max'])} run(s) "
            f"was {target[0]:g} ms; the rule ({CALIBRATION_FACTOR:g} x that, rounded up to "
            f"{CALIBRATION_STEP_MS:g} ms) gives a target of {target[1]:g} ms.", ""]


def over_runs(results: list[dict], key: str, digits: int, scale: float) -> str:
    """One figure over the runs: the value (one run), or mean ± 95 % interval."""
    return significance.mean_ci_text(significance.mean_ci(
        [scale * r[key] for r in results if r.get(key) is not None]), digits)


def energy_vs_max(res: dict, policy: str) -> str:
    """A policy's energy against the fixed maximum's in the same run, in %: mean ± 95 %
    interval over the runs both played (– without a maximum)."""
    base = res.get("max", [])
    ratios = [100 * (mine["result"]["energy_j"] / theirs["result"]["energy_j"] - 1)
              for mine, theirs in zip(res[policy], base)
              if mine["result"].get("energy_j") is not None
              and theirs["result"].get("energy_j")]
    text = significance.mean_ci_text(significance.mean_ci(ratios))
    return text if text == "–" else f"{text} %"


def paired_tests(res: dict) -> list[list]:
    """Each SLO loop against each governor run in the same runs, paired by run, and the
    split budgets against the whole target on every loop."""
    rows = []
    for loop in (p for p in LOOPS if p in res):
        against = ("max", "ondemand", "schedutil",
                   *(("slo-whole",) if loop in SPLIT_BY else ()),
                   *(("slo-split",) if loop == "slo-priced" else ()))
        for base in (p for p in against if p in res):
            n = min(len(res[loop]), len(res[base]))
            if n < 2:
                continue
            for key, better in TESTED:
                a = [res[loop][k]["result"].get(key) for k in range(n)]
                b = [res[base][k]["result"].get(key) for k in range(n)]
                if None in a or None in b:
                    continue
                t = significance.paired(a, b, better=better)
                rows.append([loop, key, base, number(t["diff"], 3),
                             "–" if t["ratio"] is None else f"{100 * t['ratio']:+.1f} %",
                             f"± {number(t['ci'], 3)}", number(t["p"], 3), t["verdict"]])
    return rows


def _scope_text(doc: dict) -> str:
    slo = doc["slo"]
    if slo.get("scope") != "end-to-end":
        return ""
    return (f"; end to end at {slo.get('sli', 'service')} side, over the loops of "
            f"{', '.join(doc['loops'])}; energy is theirs together")


def _target_text(doc: dict) -> str:
    return "each run's calibrated target (below)" if doc.get("run_targets") else \
        f"{doc['slo']['target_ms']:g} ms"


def _run_target_lines(doc: dict) -> list[str]:
    """With --calibrate-each-run: each run's target, from its own calibration plays."""
    if not doc.get("run_targets"):
        return []
    rows = [[str(t["run"]), str(t["seed"]), number(t["worst_ms"], 1), number(t["target_ms"], 0),
             str(t["failed"])] for t in doc["run_targets"]]
    return [f"Each run's target: the fixed maximum played first on every profile and load "
            f"on a schedule of its own, {CALIBRATION_FACTOR:g} x its worst stable client "
            f"p{doc['slo']['percentile']:g}, rounded up to {CALIBRATION_STEP_MS:g} ms; that "
            "run's policies held and judged against it (the configuration's "
            f"{doc['slo']['target_ms']:g} ms unused).", "",
            table(["run", "calibration seed", "worst stable ms", "target ms", "failed"],
                  rows, "rrrrr", compact=True)]


def _loops_table(res: dict) -> list[str]:
    """On a call graph: each loop's mean target, mean frequency and energy per policy."""
    names = sorted({k for runs in res.values() for r in runs
                    for k in r["result"].get("loops", {})})
    if not names:
        return []
    rows = []
    for policy, runs in res.items():
        for name in names:
            got = [r["result"]["loops"][name] for r in runs if name in r["result"].get(
                "loops", {})]
            # a governor reads no target: the loop keeps whichever the last policy set
            target = (over_runs(got, "mean_target_ms", 1, 1) if policy in LOOPS
                      else "–")
            rows.append([policy, name.split("@")[0], target,
                         *(over_runs(got, key, digits, 1) for key, digits in (
                             ("mean_freq_mhz", 0), ("energy_j", 1)))])
    return ["Per loop (its mean target: the budget under slo-split and slo-priced; the "
            "governors use none):",
            "",
            table(["policy", "service", "mean target ms", "mean MHz", "energy J"], rows,
                  "llrrr", compact=True)]


def _floor_lines(res: dict, against: str = "ondemand") -> list[str]:
    """How far below `against` any rule could go on the power model: the floor of its own
    runs' work (the same CPU seconds at the lowest step that carries each period's)
    against its energy per request; nothing without both."""
    runs = [r["result"] for r in res.get(against, [])]
    pairs = [(r["floor_per_request_mj"], r["energy_per_request_mj"]) for r in runs
             if r.get("floor_per_request_mj") and r.get("energy_per_request_mj")]
    if not pairs:
        return []
    below = [100 * (1 - floor / spent) for floor, spent in pairs]
    return [f"The floor of {against}'s work (latency ignored) is "
            f"{significance.mean_ci_text(significance.mean_ci(below), 1)} % below its "
            "energy per request: no frequency rule saves more than that against it on this "
            "power model.", ""]


def summary_markdown(doc: dict, opts) -> str:
    energy_src = "measured (RAPL)" if doc["loop"]["energy_source"] == "rapl" else \
        "modelled (P = m V + C V^2 f, V linear in f: no RAPL here)"
    act = doc["loop"]["actuator"]
    lines = ["# SLO-driven frequency against fixed and ondemand (SLO-AEEM, Song et al.)", "",
             f"Command: `{doc['command']}`  ", f"Commit: {doc['commit']}; {doc['when']}  ",
             f"Testbed: {doc['testbed']['backend']}, {doc['testbed']['datapath']} datapath, "
             f"short flows: {doc.get('short_flows', 'controller')}; "
             f"service {doc['service']}, SLO p{doc['slo']['percentile']:g} <= "
             f"{_target_text(doc)} (margin {100 * doc['slo']['margin']:g} %"
             f"{_scope_text(doc)}); "
             f"frequency: {act}"
             f"{' (EMULATED: CPU quota scaled by f / f_max)' if act == 'emulated' else ''}; "
             f"energy: {energy_src}; load {loads_text(loads_of(opts))} requests/s, "
             f"{opts.seconds:g} s per profile and policy, each after {opts.warmup:g} s of "
             f"unmeasured warm-up at the first rate.", ""]
    lines += _run_target_lines(doc)
    for profile, res in doc["profiles"].items():
        rows = []
        for policy, runs in res.items():
            results = [r["result"] for r in runs]
            cells = [over_runs(results, key, digits, scale) for key, _l, digits, scale in TABLE]
            rows.append([policy, cells[0], energy_vs_max(res, policy), *cells[1:]])
        lines += [f"## Profile: {profile}" + (f" ({len(next(iter(res.values())))} runs, mean ± "
                                               "95 % interval)" if opts.runs > 1 else ""), "",
                  table(["policy", TABLE[0][1], "energy vs max",
                         *(label for _k, label, _d, _s in TABLE[1:])], rows,
                        "l".ljust(len(TABLE) + 2, "r"), compact=True)]
        lines += _loops_table(res)
        tests = paired_tests(res)
        if tests:
            lines += ["Paired by run (the loop against the governors; lower is better for "
                      "energy, higher for the shares within the SLO):", "",
                      table(["policy", "figure", "against", "difference", "ratio",
                             "95 % interval", "p", "verdict"], tests, "lllrrrrl",
                            compact=True)]
        lines += _calibration_lines(doc, res, "")
        lines += _floor_lines(res)
    if len(doc["profiles"]) > 1:
        every = {"max": [r for res in doc["profiles"].values() for r in res.get("max", [])]}
        lines += _calibration_lines(doc, every, "Over every profile and load: ")
    lines += [f"{PAPER}.", "",
              "Control intervals are the loop's periods with an SLI (enough requests in its "
              "window); at the client, the same percentile over the same window of the "
              f"requests the clients saw end in it (a failed one as {FAILED_MS / 1000:g} s); "
              "'stable' leaves out the first "
              f"{STABLE_AFTER_S:g} s of the profile and after each change of load (none in a "
              "ramp). Settling: seconds from the step up until the SLI stays within the SLO "
              "for the rest of the high phase."]
    return "\n".join(lines) + "\n"


def plot(doc: dict, out_dir: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    target = doc["slo"]["target_ms"]
    for profile, res in doc["profiles"].items():
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
        for policy, runs in res.items():
            rows = runs[-1]["rows"]          # the last run's trace
            line, = a1.plot([x["t"] for x in rows], [x["sli_ms"] for x in rows], label=policy,
                            lw=1)
            a1.plot([x["t"] for x in rows], [x.get("client_sli_ms") for x in rows], lw=0.8,
                    ls=":", color=line.get_color())
            a2.step([x["t"] for x in rows], [x["freq_mhz"] for x in rows], label=policy,
                    where="post", lw=1)
        a1.axhline(target, color="k", ls="--", lw=0.8, label="SLO")
        a1.set_ylabel(f"p{doc['slo']['percentile']:g} (ms): service, client dotted")
        a1.legend(fontsize=8, ncol=3)
        a2.set_ylabel("frequency (MHz)" + (" (emulated)" if doc["loop"]["actuator"] ==
                                           "emulated" else ""))
        a2.set_xlabel("seconds")
        fig.suptitle(f"SLO loop and baselines, {profile} load"
                     + (f" (run {len(next(iter(res.values())))})" if len(next(iter(
                         res.values()))) > 1 else ""))
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"slo-{profile.replace(' ', '-')}.png"), dpi=110)
        plt.close(fig)


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m experiments.slo_energy", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="service with an SLO and its pinned server (default configs/slo.yaml)")
    p.add_argument("--policies", type=choice_list(COMPARED_POLICIES), help=(
        "default: the governors and the loops the configuration runs (one loop: slo, "
        "slo-client, slo-paper, slo-predictive; an end-to-end objective: slo-split, "
        "slo-priced, predictive-priced, slo-whole)"))
    add_short_flows(p, "the clients' connections")
    p.add_argument("--profiles", type=choice_list(PROFILES), default=list(PROFILES))
    p.add_argument("--low", type=positive_float,
                   help="requests per second at low load (default 30)")
    p.add_argument("--high", type=positive_float,
                   help="requests per second at high load (default 70)")
    p.add_argument("--loads", type=load_pairs, help=(
        "instead of --low and --high, several loads as low-high pairs (20-50,30-70): each "
        "profile played at each, and the calibration taken over them all"))
    p.add_argument("--seconds", type=bounded(float, 30, 3600), default=90.0,
                   help="seconds per profile and policy (default 90)")
    p.add_argument("--margin", type=bounded(float, 0.01, 0.9),
                   help="the SLO's hold band below its target, as a share (default: the "
                        "configuration's)")
    p.add_argument("--warmup", type=bounded(float, 0, 600), default=30.0,
                   help="unmeasured seconds at the first rate before each policy's profile "
                        "(default 30)")
    p.add_argument("--period", type=positive_float, default=1.0,
                   help="how often the loop is read (default 1 s)")
    p.add_argument("--runs", type=bounded(int, 1, 50), default=1,
                   help="interleaved runs, the policies' order rotated by one place per run "
                        "and run k's load on seed + k (default 1; 3 or more for intervals)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--calibrate-each-run", action="store_true", help=(
        "start each run with the fixed maximum on every profile and load, on a schedule "
        f"of its own (seed + k + {CALIBRATION_SEED_SHIFT}), and hold and judge that run's "
        f"policies against {CALIBRATION_FACTOR:g} x its worst stable client percentile, "
        f"rounded up to {CALIBRATION_STEP_MS:g} ms, instead of the configuration's target"))
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.add_argument("--out", help="results directory (default results/slo-<time>)")
    p.add_argument("--resume", action="store_true", help=(
        "go on with the experiment in --out, cut off before its end, with the same options: "
        "the plays that finished there are read back, the others played"))
    return p


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.loads and (args.low is not None or args.high is not None):
        fail("--loads replaces --low and --high: give one or the other", code=2)
    args.loads = loads_of(args)
    if args.resume and lab.resume_problem(args.out):
        fail(lab.resume_problem(args.out), code=2)
    try:
        data = with_short_flows(load_config_data(args.config), args.short_flows)
        cfg = parse_config_file_data(data, config_path(args.config))
        args.short_flows = cfg.controller.dataplane.short_flows    # what runs, recorded
        args.policies = args.policies or default_policies(cfg)
        if args.margin is not None:
            for item in data["microservices"]:         # every loop's
                if item.get("slo"):
                    item["slo"]["margin"] = args.margin
            parse_config_file_data(data, config_path(args.config))
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
    try:
        check_policies(cfg, args.policies)
    except ConfigError as exc:
        fail(str(exc), code=2)
    require_testbed("the SLO experiment")
    out_dir = lab.results_dir(args.out, "slo-")
    command = lab.invocation("experiments.slo_energy", argv).strip()
    try:                            # the code and time the experiment started with
        stamp = lab.resumable_stamp(out_dir, command, vars(args), args.resume,
                                    {k: ap.get_default(k) for k in vars(args)})
    except ValueError as exc:
        fail(f"--resume: {exc}", code=2)
    lab.terminate_unwinds()         # between stacks too: a SIGTERM ends it as ^C does
    try:
        measured = run(args, data, out_dir, log=lambda m: print(m, flush=True))
    except KeyboardInterrupt:       # ^C or SIGTERM: the stack came down on its way out
        print(f"\n[slo] interrupted; the plays that finished are in {out_dir}/plays: the "
              "same command with --resume goes on from there", file=sys.stderr, flush=True)
        return 130
    doc = {**measured, **stamp,
           "config": os.path.relpath(config_path(args.config), ROOT),
           "options": vars(args)}
    slim = {**doc, "profiles": {p: {k: [run["result"] for run in v] for k, v in r.items()}
                                for p, r in doc["profiles"].items()}}
    text = lab.write_results(out_dir, "summary", slim, lambda: summary_markdown(doc, args),
                             echo=False)
    plot(doc, out_dir)
    print(text)
    print(f"[slo] results in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
