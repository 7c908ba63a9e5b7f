"""A fluid model of scenario 2 that drives the real policy and profiler code.

The testbed comparison (experiments/lb_comparison.py) needs 30 minutes for 3 runs of 4
policies, and its run-to-run noise is as large as the effects it looks for. This model plays
the same seeded workload (workload.workload_spec, loadgen.schedule) against four
modelled servers in 50 ms steps, in seconds per run, so that a question like "can any
policy be 35 % better than round robin in this workload?" gets an answer before a testbed
run is spent on it. What is real and what is modelled:

- real: the controller's PolicyCore (ryu_apps/policy_core.py, every policy, time passed in), the
  profiler's ProfilerModel (profiler/model.py: rolling mean or ARMA, weights, flow classes,
  per-flow costs, durations), the agents' server totals (agents/dockerstats.server_totals),
  the profiler answer as the controller applies it (ryu_apps/profiler_answers.py), the workload
  schedule and the evaluation (experiments/evaluation.py, experiments/significance.py);
- modelled: each server is a CPU share shared in proportion to demand when oversubscribed
  (processor sharing); each instance has its own link shared equally by its transfers; a
  back-end job wants its duty cycle of one core until its work is done (work mode) or its
  deadline passes; a ui object first runs its work loop (services/rom.py: one thread for
  `cpu_ms_per_mb` of wall-clock time per MB, so it gets no more than the server's share),
  then is sent at `send_ms_per_mb` of CPU per MB (fitted so that the model's ui CPU per MB
  matches the testbed's measured MEASURED_UI_MS_PER_MB, docs/experiments.md); a video
  stream sends at its rate, or its share of the link, for its duration; memory is flat.
  Agents sample every period; the profiler steps `profiler_delay` later; the controller
  applies its answer `controller_delay` later. Long flows end for the policy core when
  they end, as the controller's FIN watches tell it (ryu_apps/flowpath.py); the flow
  records the profiler gets are exact (the testbed's expire mid-job and come back).
- references, model only (no controller here can run them): `oracle` sends a back-end job
  to the server with the least CPU demand at that instant (it knows every job's demand)
  and a stream to the instance with the fewest; `oracle-ahead` as `oracle`, each job
  counting for the part of the next `lookahead_s` (malb's horizon) that its remaining work
  lasts at its demand; `least-jobs` sends a long flow to the
  instance with the fewest running flows relative to its server's CPU share (it knows when
  every flow ended); both take short flows, and ties, in turn.

    .venv/bin/python -m experiments.lb_model --runs 20
    .venv/bin/python -m experiments.lb_model --runs 20 --server-cpu 0.6,0.3,0.3,0.2 \
        --policies srr,ln,malb,malb-paper,oracle,least-jobs

It takes the comparison's flags (experiments/workload.py); writes model.json and model.md
(the headline figures per policy with 95 % intervals, and MALB against each other policy,
paired by run).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sqlite3
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlparse

from agents.dockerstats import Capacity, CpuReading, RawSample, cpu_percent, rates, \
    server_totals, whole_cores, window_base
from common import lab
from common.cli import fail, flag_config_error, non_negative_float, positive_float
from common.procs import git_commit
from common.config import POLICIES, ConfigError, config_path, parse_config_file_data
from experiments import decision_audit, evaluation, loadgen, report, sample_noise, \
    scenarios, significance, workload
from profiler.model import ProfilerModel
from profiler.predictors import make_predictor
from profiler.store import HistoryStore
from ryu_apps import dataplane, policies
from ryu_apps.policies.malb import LOOKAHEAD_S
from ryu_apps.policy_core import core_from_config
from ryu_apps.profiler_answers import apply_profiles

DT = 0.05
EPS = 1e-9                           # a step count in floats: 0.2 - 4 x 0.05 > 0
MB = 1_000_000
REFERENCES = ("oracle", "oracle-ahead", "least-jobs")
MEMORY_BYTES = 40 * 2 ** 20          # a container's flat footprint
# The testbed's ui CPU per MB sent, net of the idle process (--measure-ui measures it in a
# comparison's results), and the send cost that brings the model's ui to it
MEASURED_UI_MS_PER_MB = 8.1
SEND_MS_PER_MB = 1.9
# --rule-reports: how long a silent job's flow seemed to last when its rules idled out (its
# request; the testbed's such back-end flows lasted 0.06-0.43 s)
REQUEST_S = 0.2


@dataclass
class Task:
    seq: int
    cls: str
    ms: str
    instance: str
    server: str
    start: float
    kind: str                 # object | job | stream
    cores: float = 0.0        # job: the duty cycle it wants, in cores
    work: float = 0.0         # job: core-seconds left (work mode)
    deadline: float = 0.0     # job in deadline mode, stream: when it ends
    bytes_left: float = 0.0   # object
    cpu_per_byte: float = 0.0  # object: CPU (core-seconds) to send a byte
    prep: float = 0.0         # object: seconds of wall-clock work left before the first byte
    rate: float = 0.0         # stream: bytes/s wanted
    sent: float = 0.0
    first_byte: float | None = None
    used: float = field(default=0.0)   # cores used in the last step
    switched: bool = False    # balanced by the switch (--dataplane): the controller never sees it


def _param(path: str, name: str) -> float:
    return float(parse_qs(urlparse(path).query)[name][0])


class ModelAgents:
    """The host agents as the model has them: each instance's CPU (core-seconds) and bytes
    sent since the start, as Docker's counters hold them, the raw samples each agent took
    of them, and its /stats answer built from those as agents/agent.py builds it."""

    def __init__(self, cfg, opts, seed: int, agent_period: float):
        self.servers = {s.name: s for s in cfg.servers}
        self.inst = {i.name: i for i in cfg.instances}
        self.agent_period = agent_period
        self.acc = {i: {"cpu": 0.0, "tx": 0.0} for i in self.inst}
        self.window = cfg.profiler.agent_window_s
        self.raws = {i: deque([self._raw(i, 0.0)],
                              maxlen=int(self.window / self.agent_period) + 3)
                     for i in self.inst}
        # per server, CPU seconds used beside its containers (an antagonist there), and
        # the agent's readings of the whole server's counter (the server's cgroup)
        self.beside = {s.name: 0.0 for s in cfg.servers}
        self.whole = {s.name: deque([CpuReading(0.0, 0.0)],
                                    maxlen=int(self.window / self.agent_period) + 3)
                      for s in cfg.servers}
        # --sample-noise: the testbed's sampling error on the containers that run jobs
        self.noise = sample_noise.NoiseSeries(opts.sample_noise, opts.noise_common,
                                              opts.noise_lag1, seed) \
            if opts.sample_noise > 0 else None
        self.noisy_ms = {c["ms"] for c in workload.request_classes(opts)
                         if c["path"].startswith("/job")}

    def _raw(self, instance: str, now: float) -> RawSample:
        """An agent's raw sample of an instance: its counters as Docker reports them (the
        host clock at one CPU, so CPU % is core-seconds per second)."""
        a = self.acc[instance]
        return RawSample(now, round(a["cpu"] * 1e9), round(now * 1e9), 1, MEMORY_BYTES, None,
                         0, round(a["tx"]))

    def sample(self, name: str, now: float) -> None:
        """One server's agent samples its instances' counters."""
        for inst in (i for i in self.inst.values() if i.server == name):
            self.raws[inst.name].append(self._raw(inst.name, now))
        self.whole[name].append(CpuReading(now, self.beside[name] + sum(
            self.acc[i.name]["cpu"] for i in self.inst.values() if i.server == name)))

    def answer(self, name: str, window: float | None = None) -> dict:
        """The server's agent's /stats answer: its latest sample measured over `window`
        seconds (the profiler's by default; agents/agent.py, Agent.over_window), or over
        its own last period with no window (0)."""
        window = self.window if window is None else window
        srv = self.servers[name]
        cap = Capacity(srv.cpu, srv.memory_mb * 2 ** 20, srv.network_mbit * 125000.0,
                       "config")
        containers, spans = [], []
        clean_cores, noisy_cores = 0.0, 0.0
        for inst in (i for i in self.inst.values() if i.server == name):
            raws = list(self.raws[inst.name])
            base = window_base(raws, window if window > 0 else self.agent_period)
            cur = raws[-1]
            cpu, (rx, tx) = (cpu_percent(base, cur), rates(base, cur)) if base else \
                (None, (None, None))
            clean = cpu
            if self.noise is not None and cpu is not None and \
                    inst.microservice in self.noisy_ms:
                k = round(cur.time / self.agent_period)
                cpu = max(0.0, cpu + 100.0 * self.noise.value(inst.name, k))
            if cpu is None or noisy_cores is None:
                noisy_cores = None
            else:
                clean_cores += clean / 100.0
                noisy_cores += cpu / 100.0
            containers.append({
                "name": inst.name, "instance": inst.name,
                "microservice": inst.microservice, "readable": True, "state": "running",
                "cpu_percent": cpu, "memory_bytes": MEMORY_BYTES, "rx_bytes_per_s": rx,
                "tx_bytes_per_s": tx})
            spans.append(cur.time - base.time if base else 0.0)
        # The noise added to the containers' readings above would read as use beside them
        # against a noise-free whole counter; how the testbed's two readings err together
        # is not measured yet, so the whole passed on carries the containers' noise and the
        # outside figure is the beside antagonist's use alone.
        whole = list(self.whole[name])
        whole_base = window_base(whole, window if window > 0 else self.agent_period)
        cores = whole_cores(whole_base, whole[-1]) if whole_base is not None else None
        if cores is not None and noisy_cores is not None:
            cores += noisy_cores - clean_cores
        elif noisy_cores is None:
            cores = None
        return {"server": name, "time": cur.time, "period_s": max(spans),
                "capacity": {"cpu_cores": cap.cpu_cores,
                             "memory_bytes": cap.memory_bytes,
                             "network_bytes_per_s": cap.network_bytes_per_s},
                "totals": server_totals(containers, cap, cores), "containers": containers}


class FlowReports:
    """What the modelled controller tells the profiler of its flows."""

    def __init__(self, rule_reports: bool, idle_timeout_s: float):
        self.rule_reports, self.idle_timeout_s = rule_reports, idle_timeout_s
        self.ended: list[dict] = []      # flow records completed since the last report
        # --rule-reports: completed flows still counted until their rules idle out
        # (release time, record), and the silent jobs whose rules idled out already
        self.lingering: list[tuple[float, dict]] = []
        self.idled_out: set[int] = set()

    def report(self, tasks: list[Task], now: float) -> list[dict]:
        """The flow records the controller tells the profiler: every running flow, and the
        flows that ended since the last report. With --rule-reports, as the controller did
        before it reported watched flows to their FIN (docs/controller.md): a flow ended
        when its rules idled out, `idle_timeout_s` after its last packet. A job sends
        nothing while it computes: one longer than the idle timeout ended then, a few
        hundred ms long (its request), and ran again from its answer; every flow went on
        counting for the idle timeout after its end."""
        if not self.rule_reports:
            active = [{"flow_id": str(t.seq), "microservice": t.ms, "active": True,
                       "duration_s": now - t.start} for t in tasks]
            ended, self.ended = [{k: v for k, v in r.items() if k != "ended_at"}
                                 for r in self.ended], []
            return active + ended
        idle = self.idle_timeout_s
        out = []
        for t in tasks:
            rec = {"flow_id": str(t.seq), "microservice": t.ms, "active": True,
                   "duration_s": now - t.start}
            if t.kind == "job" and now - t.start >= idle:
                if t.seq not in self.idled_out:       # silent: its rules idled out
                    self.idled_out.add(t.seq)
                    out.append({**rec, "active": False, "duration_s": REQUEST_S})
            else:
                out.append(rec)
        for r in self.ended:
            self.lingering.append((r.pop("ended_at") + idle, r))
        self.ended = []
        still = []
        for release, r in self.lingering:
            if now >= release:
                out.append(r)
            else:
                out.append({**r, "active": True})
                still.append((release, r))
        self.lingering = still
        return out


class PolicyRun:
    """One run of one policy."""

    def __init__(self, cfg, opts, policy: str, seed: int):
        self.cfg, self.opts, self.policy = cfg, opts, policy
        self.period = opts.period
        # the agents' own period: each sample covers what was used since the previous one,
        # and the profiler takes the latest at its tick (the testbed's agents: 1 s)
        self.agent_period = opts.agent_period or cfg.agents.period_s
        # malb's horizon for long flows, which oracle-ahead takes too
        self.lookahead = LOOKAHEAD_S if opts.lookahead is None else opts.lookahead
        options = {k: v for k, v in opts.policy_option if policies.takes_option(policy, k)}
        if opts.lookahead is not None and policies.takes_option(policy, "lookahead_s"):
            options["lookahead_s"] = self.lookahead
        self.core = core_from_config(cfg, policy if policy in POLICIES else "srr",
                                     options=options or None)
        self.prof = ProfilerModel(cfg, lambda: make_predictor(
            cfg.profiler.predictor, cfg.profiler.window))
        self.servers = {s.name: s for s in cfg.servers}
        self.inst = {i.name: i for i in cfg.instances}
        self.link = {s.name: s.link_mbit * 125000.0 for s in cfg.servers}
        self.tasks: list[Task] = []
        self.done: list[Task] = []
        self.requests: list[dict] = []
        self.samples: dict[float, dict[str, dict]] = {}
        # every job's placement against the job demand each server carried at it, as
        # decision_audit judges the testbed's from the clients' records
        self.judged: list[dict] = []
        self.turn: dict[str, int] = {}
        self.answer: tuple[dict, dict] | None = None   # the profiler's latest
        spec = workload.workload_spec(cfg, opts, seed)
        self.antagonists = spec.get("antagonists", [])     # times from the load's start
        self.plan = loadgen.schedule(spec, 0, 1)
        self.ms_of = {c["name"]: c["ms"] for c in workload.request_classes(opts)}
        self.agents = ModelAgents(cfg, opts, seed, self.agent_period)
        self.acc = self.agents.acc       # what the servers' steps add to
        self.reports = FlowReports(opts.rule_reports, cfg.controller.idle_timeout_s)
        # per instance, (end, latency) of its requests: what its service's /latency tells
        # the agents' probes (a policy that reads probes: uses_probes)
        self.latencies: dict[str, deque] = {i: deque() for i in self.inst}
        # the select group's hash of each new 5-tuple, as independent draws per run
        self.hash_rng = random.Random(f"select group {seed}")
        # each agent's sampling phase against the profiler's: the same for every policy of
        # a run (seeded by the run), in whole steps
        phases = random.Random(f"agent phases {seed}") if opts.agent_phase == "random" else None
        self.agent_offset = {s: round(phases.uniform(0, self.agent_period) / DT) * DT
                             % self.agent_period if phases else 0.0 for s in self.servers}

    # ------------------------------------------------------------ decisions
    def switch_choice(self, ms: str, now: float):
        """Data-plane mode (--dataplane): a short-flow microservice's new flow goes where
        the select group hashes it, each instance by its share as the controller renders it
        (quantised as the slot table does); the controller sees nothing of it. None when
        the flow stays with the controller."""
        if not (self.opts.dataplane and self.policy in POLICIES
                and self.core.strategy.dataplane
                and self.core.profiles.flow_class(ms)[0] == "short"):
            return None
        shares = dataplane.quantise(self.core.short_flow_shares(ms, now))
        names = [n for n, w in shares.items() if w > 0]
        if not names:
            return None
        name = self.hash_rng.choices(names, [shares[n] for n in names])[0]
        return name, self.inst[name].server

    def choose(self, ms: str, now: float, seq: int):
        if self.policy in POLICIES:
            # as the controller does: a TCP flow is watched to its FIN (flowpath.py)
            watched = seq if self.core.watches(ms) else None
            d = self.core.choose(ms, now, watched=watched)
            return d.instance, d.server
        pool = [b for b in self.core.pools[ms] if self.core.in_service(b)]
        cap = {b.server: self.servers[b.server].cpu for b in pool}
        long = self.core.profiles.flow_class(ms)[0] == "long"
        jobs = any(t.kind == "job" for t in self.done + self.tasks if t.ms == ms)
        if long and self.policy == "oracle" and jobs:
            load = {b.name: sum(t.cores for t in self.tasks if t.server == b.server
                                and t.kind == "job") / cap[b.server] for b in pool}
        elif long and self.policy == "oracle-ahead" and jobs:
            ahead = self.lookahead               # 0: what they use now, as the oracle
            load = {b.name: sum(t.cores * (min(t.work / t.cores, ahead) / ahead
                                           if ahead > 0 and t.cores > 0 else 1.0)
                                for t in self.tasks if t.server == b.server
                                and t.kind == "job") / cap[b.server] for b in pool}
        elif long:      # least-jobs; the oracle's streams: the fewest on the instance's link
            load = {b.name: sum(1 for t in self.tasks if t.instance == b.name)
                    / (cap[b.server] if jobs else 1.0) for b in pool}
        else:
            load = {b.name: 0.0 for b in pool}
        n = len(pool)
        turn = self.turn[ms] = self.turn.get(ms, -1) + 1     # ties, and short flows: in turn
        best = min(range(n), key=lambda i: (round(load[pool[i].name], 9), (i - turn) % n))
        return pool[best].name, pool[best].server

    def arrive(self, req: dict, now: float) -> None:
        cls = req["class"]
        ms = self.ms_of[cls["name"]]
        switched = self.switch_choice(ms, now)
        instance, server = switched or self.choose(ms, now, req["seq"])
        path = cls["path"]
        t = Task(req["seq"], cls["name"], ms, instance, server, now, "object",
                 switched=switched is not None)
        if path.startswith("/object"):
            size = _param(path, "size")
            # services/rom.py: a loop of cpu_ms_per_mb of wall-clock time per MB (one thread,
            # whatever CPU the server's share leaves it), then the transfer
            t.bytes_left = size
            t.prep = self.opts.model_cpu_ms_per_mb * size / MB / 1000
            t.cpu_per_byte = self.opts.model_send_ms_per_mb / 1000 / MB
        elif path.startswith("/job"):
            self.judged.append({"time": now, "chosen": server, "demand": {
                b.server: 100.0 * sum(x.cores for x in self.tasks
                                      if x.server == b.server and x.kind == "job")
                / self.servers[b.server].cpu for b in self.core.pools[ms]}})
            secs, frac = _param(path, "seconds"), _param(path, "cpu")
            t.kind, t.cores, t.work = "job", frac, frac * secs
            t.deadline = now + secs if self.opts.job_mode == "deadline" else float("inf")
        else:
            t.kind, t.rate = "stream", _param(path, "rate") * 1000
            t.deadline = now + _param(path, "seconds")
        self.tasks.append(t)

    # ------------------------------------------------------------ the servers
    def step(self, now: float) -> None:
        for name, srv in self.servers.items():
            mine = [t for t in self.tasks if t.server == name]
            per_link: dict[str, list[Task]] = {}
            for t in mine:
                if t.kind == "stream" or (t.kind == "object" and t.prep <= EPS):
                    per_link.setdefault(t.instance, []).append(t)
            want = {}
            for ts in per_link.values():
                share = self.link[name] / len(ts)
                for t in ts:
                    t.first_byte = now if t.first_byte is None else t.first_byte
                    rate = min(share, t.rate) if t.kind == "stream" else share
                    want[id(t)] = rate
            demand = sum(t.cores for t in mine if t.kind == "job") + \
                sum(1.0 for t in mine if t.kind == "object" and t.prep > EPS) + \
                sum(want[id(t)] * t.cpu_per_byte for t in mine if id(t) in want
                    and t.kind == "object")
            busy = [a for a in self.antagonists if a["server"] == name
                    and a["start_s"] <= now < a["stop_s"]]
            demand += sum(a["cores"] for a in busy)
            scale = min(1.0, srv.cpu / demand) if demand > 0 else 1.0
            for a in busy:
                # a busy thread shares the server as a task does; inside a container its
                # agent counts it as that instance's CPU, beside them nobody sees it
                if a["where"] == "container":
                    inst = next(i.name for i in self.inst.values() if i.server == name
                                and i.microservice == a["microservice"])
                    self.acc[inst]["cpu"] += a["cores"] * scale * DT
                else:     # only the server's whole counter shows it
                    self.agents.beside[name] += a["cores"] * scale * DT
            for t in mine:
                if t.kind == "job":
                    t.used = t.cores * scale
                    t.work -= t.used * DT
                elif t.kind == "object" and t.prep > EPS:
                    t.used = scale
                    t.prep -= DT
                elif t.kind == "object":
                    rate = want[id(t)] * scale
                    t.used = rate * t.cpu_per_byte
                    t.bytes_left -= rate * DT
                    t.sent += rate * DT
                    self.acc[t.instance]["tx"] += rate * DT
                else:
                    rate = want[id(t)]
                    t.used = 0.0
                    t.sent += rate * DT
                    self.acc[t.instance]["tx"] += rate * DT
                self.acc[t.instance]["cpu"] += t.used * DT
        keep = []
        for t in self.tasks:
            finished = (t.kind == "job" and (t.work <= 0 or now >= t.deadline)) or \
                (t.kind == "object" and t.bytes_left <= 0) or \
                (t.kind == "stream" and now >= t.deadline)
            (self.done if finished else keep).append(t)
            if finished:
                self.finish(t, now)
        self.tasks = keep

    def finish(self, t: Task, now: float) -> None:
        if not t.switched:
            self.core.flow_ended(t.seq, now)    # its FIN reaches the controller
        first = t.first_byte if t.first_byte is not None else now
        row = {"seq": t.seq, "class": t.cls, "served_by": t.instance, "error": "",
               "latency_s": now - t.start, "bytes": t.sent, "throughput_kB_s": ""}
        if t.kind == "stream":
            row["throughput_kB_s"] = t.sent / 1000 / max(now - first, DT)
        self.requests.append(row)
        self.latencies[t.instance].append((now, now - t.start))
        if not t.switched:
            self.reports.ended.append({"flow_id": str(t.seq), "microservice": t.ms,
                                       "active": False, "duration_s": now - t.start,
                                       "ended_at": now})

    # ------------------------------------------------------------ monitoring
    def run(self, end: float) -> dict:
        """Plays the schedule until every request has ended; the evaluation's tables over
        the load phases (samples up to `end`) and every request."""
        plan = self.plan
        now, i, next_tick = 0.0, 0, self.period
        probing = self.policy in POLICIES and self.core.strategy.uses_probes
        probe_every = self.cfg.controller.probe_period_s
        next_probe = probe_every
        next_sample = {s: self.agent_period + self.agent_offset[s] for s in self.servers}
        events: list[tuple[float, str, object]] = []    # (when, what, data), in time order
        while (now < end or self.tasks or i < len(plan)) and now < end + 600:
            while i < len(plan) and plan[i]["offset"] <= now:
                self.arrive(plan[i], now)
                i += 1
            self.step(now)
            now = round(now + DT, 9)
            for name in self.servers:
                if now >= next_sample[name] - 1e-9:
                    self.agents.sample(name, now)
                    next_sample[name] += self.agent_period
            if probing and now >= next_probe - 1e-9:
                self.probe(now)
                next_probe += probe_every
            if now >= next_tick - 1e-9:
                # the profiler asks every agent for its latest sample over the window; with
                # agents out of phase (--agent-phase random), some are most of a second old
                samples = {name: self.agents.answer(name) for name in self.servers}
                # Table II from what the profiler got, or from another window of the same
                # counters (--metric-window: one metric for policies fed alike)
                measured = samples if self.opts.metric_window is None else {
                    name: self.agents.answer(name, self.opts.metric_window)
                    for name in self.servers}
                self.samples[now] = {
                    s: {"cpu": v["totals"]["cpu_percent"],
                        "mem": v["totals"]["memory_percent"],
                        "net": v["totals"]["network_percent"]} for s, v in measured.items()}
                events.append((now + self.opts.profiler_delay, "profiler", samples))
                events.append((now + self.opts.controller_delay, "controller", None))
                events.sort(key=lambda e: e[0])
                next_tick += self.period
            while events and events[0][0] <= now:
                _, kind, data = events.pop(0)
                if kind == "profiler":
                    self.answer = self.profiler_step(data, now)
                elif self.answer is not None:     # the controller polls the profiler
                    apply_profiles(self.core, *self.answer, now)
        # as the testbed's comparison: over the metric's periods (--metric-period), unless
        # --metric-window already gave each tick its own window; the load phases (to
        # `end`), and with the drain until the last request ended
        def periods(samples):
            if self.opts.metric_window is None:
                samples = evaluation.in_periods(samples, self.period,
                                                max(self.period, self.opts.metric_period))
            return samples
        load = periods({t: s for t, s in self.samples.items() if t <= end + 1e-9})
        servers = list(self.servers)
        return {"table2": evaluation.table2(load, servers=servers),
                "table2_with_drain": evaluation.table2(periods(self.samples), servers=servers),
                "fig3": evaluation.fig3(load),
                "table3": evaluation.table3(self.requests), "judged": self.judged}

    def probe(self, now: float) -> None:
        """The controller's probe poll: each instance's requests in flight, and the p50 and
        p99 of its requests that ended in the agents' probe window (agents/probes.py)."""
        window = self.cfg.agents.probe_window_s
        running: dict[str, int] = {}
        for t in self.tasks:
            running[t.instance] = running.get(t.instance, 0) + 1
        for name, ended in self.latencies.items():
            while ended and ended[0][0] < now - window:
                ended.popleft()
            lat = sorted(x for _, x in ended)
            p50 = lat[(len(lat) - 1) // 2] if lat else None
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None
            self.core.update_probe(name, float(running.get(name, 0)), p50, p99, now)

    def profiler_step(self, samples: dict, now: float) -> tuple[dict, dict]:
        """The profiler's period: the agents' samples and the controller's flow report in,
        its answer (profiles, servers) out."""
        for name, s in samples.items():
            self.prof.ingest_agent(name, s, None, now)
        self.prof.ingest_flows(self.reports.report(
            [t for t in self.tasks if not t.switched], now), None, now)
        self.prof.step(now)
        return self.prof.profiles(now), self.prof.servers_view(now)




def ui_cpu_per_mb(histories: list[str], microservice: str = "ui") -> dict:
    """What the testbed's ui instances used: CPU (ms) per MB sent, over every agent sample
    of the given profiler histories, less the idle process (the mean of the samples that
    sent under 1 kB/s). The model's send cost is fitted to it."""
    rows = []
    for path in histories:
        with HistoryStore.open_read_only(path) as store:
            rows += [(cpu, tx) for _t, ms, cpu, tx in store.rows(
                "container_samples", ("microservice", "cpu_percent", "tx_bytes_per_s"))
                if ms == microservice and cpu is not None and tx is not None]
    idle = [cpu for cpu, tx in rows if tx < 1000]
    idle_pct = sum(idle) / len(idle) if idle else 0.0
    busy_pct = sum(cpu - idle_pct for cpu, _tx in rows)     # % of a core, summed over samples
    mb_per_s = sum(tx for _cpu, tx in rows) / MB            # MB/s, summed over samples
    return {"samples": len(rows), "idle_cpu_percent": round(idle_pct, 4),
            "cpu_ms_per_mb": round(10.0 * busy_pct / mb_per_s, 2) if mb_per_s else None}


def policy_option(text: str) -> tuple[str, object]:
    """NAME=VALUE: true/false, a number, or text."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text[:40]!r}")
    v = value.strip()
    if v.lower() in ("true", "false"):
        return name.strip(), v.lower() == "true"
    try:
        return name.strip(), float(v) if "." in v or "e" in v.lower() else int(v)
    except ValueError:
        return name.strip(), v


def parser() -> argparse.ArgumentParser:
    p = workload.parser(prog="python -m experiments.lb_model", description="Scenario 2 as a "
                        "fluid model that drives the real policy and profiler code.")
    for a in p._actions:
        if a.dest == "policies":
            a.type = lambda s: [x for x in s.split(",") if x]
            a.default = ["srr", "ln", "malb", "malb-paper", *REFERENCES]
        elif a.dest == "resume":        # the testbed comparison's: a model run takes seconds
            a.help = argparse.SUPPRESS
    p.add_argument("--model-cpu-ms-per-mb", type=float, default=20.0,
                   help="ui objects' work before the transfer, ms of wall-clock time per MB "
                        "on one thread (default 20, as services/rom.py)")
    p.add_argument("--model-send-ms-per-mb", type=float, default=SEND_MS_PER_MB,
                   help="ui objects' CPU to send one MB (default %(default)s ms: fitted "
                        "so that the model's ui uses the testbed's measured CPU per MB)")
    p.add_argument("--measure-ui", metavar="RESULTS",
                   help="print the ui's CPU per MB in a testbed comparison's results "
                        "(every policy and run) and exit: what --model-send-ms-per-mb is "
                        "fitted to")
    p.add_argument("--lookahead", type=non_negative_float, default=None, metavar="SECONDS",
                   help="malb's horizon for long flows (default: the controller's "
                        "LOOKAHEAD_S; 0: what they use now)")
    p.add_argument("--agent-period", type=positive_float, default=None, metavar="SECONDS",
                   help="the agents' sampling period (default: agents.period_s of the "
                        "configuration, 1 s as on the testbed; the profiler takes each "
                        "agent's latest sample every --period)")
    p.add_argument("--agent-phase", choices=("aligned", "random"), default="aligned",
                   help="aligned: every agent samples at the profiler's tick (default); "
                        "random: each at its own phase, as agents started one by one do")
    p.add_argument("--metric-window", type=non_negative_float, default=None,
                   metavar="SECONDS",
                   help="Table II over this window of the agents' counters (default: what "
                        "the profiler gets, --agent-window; 0: the agents' latest samples)")
    p.add_argument("--rule-reports", action="store_true",
                   help="report flows to the profiler as the controller did before it "
                        "followed watched flows to their FIN: ended when their rules idle "
                        "out (docs/controller.md)")
    p.add_argument("--sample-noise", type=non_negative_float, default=0.0, metavar="CORES",
                   help="add to every agent sample of a container that runs jobs an error "
                        "of this rms, in cores (default 0; the testbed's: --measure-noise)")
    p.add_argument("--noise-common", type=non_negative_float, default=0.2, metavar="SHARE",
                   help="the share of the error's variance common to every server at a "
                        "sample (default 0.2)")
    p.add_argument("--noise-lag1", type=float, default=0.55, metavar="R",
                   help="the error's autocorrelation from one sample to the next "
                        "(default 0.55)")
    p.add_argument("--measure-noise", metavar="RESULTS",
                   help="print the size, common share and autocorrelation of the error of "
                        "the back-end containers' samples against their jobs' demand in a "
                        "testbed comparison's results, and exit: what --sample-noise, "
                        "--noise-common and --noise-lag1 take")
    p.add_argument("--policy-option", type=policy_option, action="append", default=[],
                   metavar="NAME=VALUE",
                   help="an option of the policies that take it (e.g. load_shares=false for "
                        "malb); repeatable")
    p.add_argument("--profiler-delay", type=float, default=0.5,
                   help="seconds from an agent sample to the profiler's step (default 0.5)")
    p.add_argument("--controller-delay", type=float, default=1.0,
                   help="seconds from an agent sample to the controller applying the answer")
    return p


def main(argv=None) -> int:
    p = parser()
    opts = p.parse_args(argv)
    if opts.resume:
        p.error("--resume: a model run takes seconds; it is run again, not resumed")
    if opts.measure_ui:
        paths = sorted(glob.glob(os.path.join(opts.measure_ui, "*", "run*", "history.sqlite")))
        if not paths:
            p.error(f"--measure-ui: no */run*/history.sqlite under {opts.measure_ui}")
        try:
            measured = ui_cpu_per_mb(paths)
        except ValueError as exc:        # a file that is not a profiler history
            p.error(f"--measure-ui: {exc}")
        print(json.dumps({"results": opts.measure_ui, "histories": len(paths), **measured}))
        return 0
    if opts.measure_noise:
        try:
            measured = sample_noise.measure(opts.measure_noise)
        except (ValueError, OSError, KeyError, sqlite3.Error) as exc:
            p.error(f"--measure-noise: {exc}")
        print(json.dumps({"results": opts.measure_noise, **measured}))
        return 0
    if opts.noise_common > 1 or not -1 < opts.noise_lag1 < 1:
        p.error("--noise-common: a share from 0 to 1; --noise-lag1: between -1 and 1")
    bad = [x for x in opts.policies if x not in POLICIES and x not in REFERENCES]
    if bad:
        p.error(f"--policies: unknown {', '.join(bad)}; choose from "
                f"{', '.join((*POLICIES, *REFERENCES))}")
    for name, _ in opts.policy_option:
        if not any(policies.takes_option(x, name) for x in opts.policies):
            p.error(f"--policy-option: none of {', '.join(opts.policies)} takes {name!r}")
    if scenarios.scenario_of(opts).call_graph:
        p.error(f"--scenario {opts.scenario}: the model has no call graph (services calling "
                "services); it plays the other scenarios")
    runs = opts.runs or 10
    opts.phase_seconds = opts.phase_seconds or (600.0 if opts.paper else 35.0)
    try:
        cfg = parse_config_file_data(workload.config_data(opts), config_path(opts.config))
    except ConfigError as exc:
        fail(flag_config_error(exc, workload.FLAG_OF_FIELD), code=2)
    end = 3 * opts.phase_seconds
    per_policy: dict[str, list[dict]] = {x: [] for x in opts.policies}
    t0 = time.time()
    for run in range(1, runs + 1):        # run k plays seed + k, as lb_comparison
        for policy in opts.policies:
            per_policy[policy].append(PolicyRun(cfg, opts, policy, opts.seed + run).run(end))
        print(f"run {run}/{runs} done ({time.time() - t0:.0f} s)", file=sys.stderr)
    candidate = "malb" if "malb" in per_policy else opts.policies[0]
    comparison = significance.compare(per_policy, candidate)
    out = lab.results_dir(opts.out, "model-", root="")     # results/ of the working directory
    command = "python -m experiments.lb_model " + " ".join(argv if argv is not None
                                                           else sys.argv[1:])
    servers = ", ".join(f"{s.name} {s.cpu:g} CPU / {s.link_mbit:g} Mbit/s" for s in cfg.servers)
    md = (f"# Scenario 2, fluid model ({runs} runs per policy)\n\n"
          f"Command: `{command}`\nCommit: {git_commit()}\n"
          f"Phases: 3 x {opts.phase_seconds:g} s, peak {opts.peak_rate:g} requests/s; "
          f"servers: {servers}; back-end jobs at {opts.cpu_scale:g} x the paper's CPU, "
          f"{opts.job_mode} mode; period {opts.period:g} s; seed {opts.seed} (run k: seed + k)."
          f"\nA model, not a measurement: docs/experiments.md, \"Scenario 2 as a model\".\n\n"
          + significance.markdown(comparison, candidate))
    md += report.per_server_markdown(
        {p: {"fig3": evaluation.mean_fig3([r["fig3"] for r in rs])}
         for p, rs in per_policy.items()}, "means over the runs")
    judge = {p: decision_audit.summarise_at_decision([row for r in rs for row in r["judged"]])
             for p, rs in per_policy.items()}
    if any(j.get("decisions") for j in judge.values()):
        md += ("\nEvery back-end decision against the job demand each server carried at it "
               "(as `experiments.decision_audit --at-decision-only` judges the testbed's):\n\n"
               + "\n".join(decision_audit.choice_table(judge, "job demand", "chose_least_demand",
                                                        "random_least_demand")) + "\n")
    lab.write_results(out, "model", {
        "command": command, "commit": git_commit(), "runs": runs, "comparison": comparison,
        "judge_at_decision": judge,
        "per_run": {p: [significance.headline_figures(r) for r in rs]
                    for p, rs in per_policy.items()},
        "per_server_cpu": {p: [(r["fig3"]["cpu"] or {}).get("per_server_average") for r in rs]
                           for p, rs in per_policy.items()}}, md)
    print(f"written: {out}/model.md, model.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
