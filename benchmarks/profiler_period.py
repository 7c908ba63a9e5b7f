"""Benchmark: the profiler's CPU per period on its real code path, at 10 to 1000
microservices and up to 20,000 active flows.

    .venv/bin/python -m benchmarks.profiler_period [--sizes 10,100,1000] [--flows 0,20000]
        [--predictors rm,arma] [--periods 20] [--out results/bench]

What runs is the profiler service itself (profiler/service.py, ProfilerService):

- its period, ``run_period()``, with an injected collector that hands over each server's
  ``/stats`` answer as JSON text, parsed there as the HTTP client parses it. The answers are
  shaped like the real agent's (``SyntheticAgents``: the agent's own ``server_totals`` over
  one container per microservice and server, slowly varying noisy loads, a rare unreadable
  container);
- its ``POST /flows`` handler behind its real HTTP server on loopback, fed by the
  controller's own flow table (ryu_apps/flows.py: ``FlowTable.take_report`` and
  ``as_record``, in chunks of ``REPORT_CHUNK`` records as ryu_apps/core.py builds them). The
  table holds ``--flows`` active flows (video and back-end types, their lengths drawn around
  ``MEAN_ACTIVE_S``), replaces those that end, and adds ``SHORT_PER_PERIOD`` short flows
  that start and end within a period, every period;
- its history, a real SQLite file (WAL, synchronous=FULL) in a temporary directory, and
  for ARMA its real fit worker process.

The service runs on a simulated clock, one period after the other without the 3 s sleeps
(the CPU a period needs does not depend on them; how many ARMA fits the worker completes
does, so those are reported as done against due). Per configuration, after a warm-up of
one predictor window, over ``--periods`` periods:

- period CPU: the thread CPU time of ``run_period`` (ms), and its wall time;
- flow-report CPU: the CPU of every other thread of the process, i.e. the profiler's HTTP
  threads taking the period's reports (ms per period);
- share of one core: both together over the period length. The target: under 10 % at 1000
  microservices with 20,000 active flows;
- ARMA: fits done and due, and the fit worker's own CPU share.

The benchmark's own thread (generating samples and flows, encoding and sending the
reports) is measured apart and not counted.
"""
from __future__ import annotations

import http.client
import json
import math
import os
import platform
import shlex
import sys
import tempfile
import time

import numpy as np

from agents.dockerstats import Capacity, server_totals
from common import lab
from common.cli import ArgumentParser, bounded, choice_list, number_list
from common.config import active_flow_refresh_s, parse_config
from common.httpjson import JsonServer
from common.markdown import number, table
from common.procs import git_commit
from profiler.predictors import fit_arma
from profiler.service import ProfilerService
from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FlowRecord, FlowTable

PREDICTORS = ("rm", "arma")
DEFAULT_SIZES = (10, 100, 1000)
DEFAULT_FLOWS = (0, 20000)
DEFAULT_PERIODS = 20
DEFAULT_OUT = os.path.join("results", "bench")
N_SERVERS = 4
PERIOD_S = 3.0
SEED = 20240501
REPORT_CHUNK = 200          # ryu_apps/core.py: flow records per POST
MEAN_ACTIVE_S = 120.0       # how long an active (video, back-end) flow lasts on average
SHORT_PER_PERIOD = 300      # short (ui) flows that start and end within one period
TARGET_SHARE = 0.10         # of one core, at 1000 microservices and 20,000 active flows

# Per-container use at "scale 1" (three microservices per server, as in the paper), by the
# paper's three microservice types: video is network-bound, backend CPU-bound, ui moderate.
# cpu: percent of one core; mem: MB; net: bytes/s (rx, tx).
PROFILES = {
    "video": {"cpu": 3.0, "mem": 40.0, "rx": 40e3, "tx": 1.5e6},
    "ui": {"cpu": 6.0, "mem": 30.0, "rx": 60e3, "tx": 350e3},
    "backend": {"cpu": 15.0, "mem": 50.0, "rx": 10e3, "tx": 15e3},
}
KINDS = tuple(PROFILES)


def build_config(size: int, predictor: str, history_path: str = ":memory:"):
    """4 servers and ``size`` microservices m1..mN (abbrev = name, <= 5 characters so node
    names srv<i>-<abbrev> stay <= 10 characters), unique ports from 10000, all with their
    flow class found by the profiler."""
    microservices = [{"name": f"m{j}", "abbrev": f"m{j}", "port": 10000 + j - 1,
                      "flow_class": "auto"} for j in range(1, size + 1)]
    profiler = {"predictor": predictor, "period_s": PERIOD_S, "history_path": history_path}
    if predictor == "arma":
        profiler.update(window=20, arma_order=[2, 1], arma_refit_every=10)
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
                     "state": "running", "readable": True, "error": None,
                     "cpu_percent": None, "memory_bytes": None, "memory_percent": None,
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


class SyntheticController:
    """The controller's flow table (ryu_apps/flows.py) with a steady population of active
    flows, and the reports it makes of them, period by period."""

    def __init__(self, cfg, active: int, seed: int = SEED) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng(seed + 1)
        self.table = FlowTable(idle_timeout=cfg.controller.idle_timeout_s,
                               threshold_s=cfg.profiler.flow_threshold_s,
                               refresh_s=active_flow_refresh_s(cfg))
        self.microservices = list(cfg.microservices)
        self.kind = {m.name: KINDS[(m.index - 1) % len(KINDS)] for m in self.microservices}
        self.long_ms = [m for m in self.microservices if self.kind[m.name] != "ui"] or \
            self.microservices
        self.short_ms = [m for m in self.microservices if self.kind[m.name] == "ui"] or \
            self.microservices
        self.instances = {m.name: cfg.instances_of(m.name) for m in self.microservices}
        self.index = {i.name: k for k, i in enumerate(cfg.instances)}
        self.ends: dict[int, float] = {}         # active flow id -> when it ends
        self.bytes: dict[int, int] = {}
        self.active_target = active
        self.port = 1024

    def _new(self, ms, now: float, lasts_s: float) -> FlowRecord:
        inst = self.instances[ms.name][int(self.rng.integers(len(self.instances[ms.name])))]
        self.port = self.port + 1 if self.port < 65535 else 1024
        fid = self.table.new_flow_id(ms.index, self.index[inst.name])
        rec = FlowRecord(flow_id=fid, dpid=1, protocol="tcp", client_ip="10.0.200.1",
                         client_port=self.port, client_in_port=1, vip=ms.vip, vport=ms.port,
                         microservice=ms.name, instance=inst.name, server=inst.server,
                         created=now, last_active=now, backend_ip=inst.ip,
                         backend_port=ms.port)
        self.table.add(rec)
        self.ends[fid] = now + lasts_s
        self.bytes[fid] = 0
        return rec

    def _end(self, fid: int, now: float) -> None:
        for direction in (DIR_FORWARD, DIR_REVERSE):
            self.table.on_removed(fid | (direction << 44), 0.0, self.bytes[fid], 1,
                                  "idle_timeout", now)
        del self.ends[fid], self.bytes[fid]

    def period(self, now: float) -> list[dict]:
        """Advance to ``now``: traffic on every active flow, those due end (and as many new
        ones start), short flows come and go; then the report, as the controller makes it."""
        for fid in [f for f, end in self.ends.items() if end <= now]:
            self._end(fid, now)
        while len(self.ends) < self.active_target:
            ms = self.long_ms[int(self.rng.integers(len(self.long_ms)))]
            self._new(ms, now - float(self.rng.uniform(0, PERIOD_S)),
                      float(self.rng.exponential(MEAN_ACTIVE_S)))
        for fid in self.ends:
            self.bytes[fid] += 50_000
            self.table.on_stats(fid | (DIR_FORWARD << 44), 1.0, self.bytes[fid], 10, now)
        if self.active_target:
            for _ in range(SHORT_PER_PERIOD):
                ms = self.short_ms[int(self.rng.integers(len(self.short_ms)))]
                rec = self._new(ms, now - 2.0, 0.3)
                self.bytes[rec.flow_id] = 1_000_000
                self._end(rec.flow_id, now)
        idle = self.table.idle_timeout
        return [r.as_record(idle, self.table.epoch) for r in self.table.take_report(now, 0.0)]


def _worker_cpu_s(service: ProfilerService) -> float:
    """CPU seconds of the ARMA fit worker process(es), from /proc."""
    pool = getattr(service.executor, "_pool", None)
    total = 0.0
    for pid in list(getattr(pool, "_processes", {}) or {}):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def _post(port: int, body: bytes) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/flows", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        payload = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"POST /flows: HTTP {answer.status} {payload[:200]!r}")
    finally:
        conn.close()


def summarize(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "p50": None, "p95": None, "max": None}
    a = np.asarray(values, dtype=float)
    return {"mean": round(float(a.mean()), 2), "p50": round(float(np.percentile(a, 50)), 2),
            "p95": round(float(np.percentile(a, 95)), 2), "max": round(float(a.max()), 2)}


def run_config(size: int, flows: int, predictor: str, periods: int,
               seed: int = SEED, store_dir: str | None = None, pace: bool = False) -> dict:
    """Warm up one window, then measure ``periods`` periods of the real service (pace:
    each period takes its real length, as in service: the ARMA worker then has the time it
    would have)."""
    tmp = tempfile.mkdtemp(prefix="malb-bench-", dir=store_dir)
    cfg = build_config(size, predictor, os.path.join(tmp, "history.sqlite"))
    agents = SyntheticAgents(cfg, seed)
    controller = SyntheticController(cfg, flows, seed)
    clock = {"now": 1_700_000_000.0}
    texts: dict[str, str] = {}
    service = ProfilerService(
        cfg, collector=lambda: {name: (json.loads(text), None) for name, text in texts.items()},
        clock=lambda: clock["now"])
    http_server = JsonServer(("127.0.0.1", 0), service.routes(), name="bench-profiler")
    http_server.start_background()
    port = http_server.server_address[1]
    p = cfg.profiler
    warmup = p.window
    cpu = {"period": [], "reports": [], "wall": [], "records": [], "posts": []}
    worker_start = None
    try:
        if service.executor is not None:     # the fit worker's cold start, up front
            service.executor.submit(fit_arma, np.array([1.0, 2.0, 1.5, 2.5, 1.0, 3.0]),
                                    p.arma_order).result(timeout=300)
        for k in range(warmup + periods):
            measure = k >= warmup
            if measure and worker_start is None:
                worker_start, fits_start = _worker_cpu_s(service), _fits(service)
                wall_start = time.perf_counter()
            period_started = time.perf_counter()
            clock["now"] += p.period_s
            now = clock["now"]
            # what the agents and the controller produce: the benchmark's own work
            texts = {name: json.dumps(s) for name, s in agents.sample(k, now).items()}
            records = controller.period(now - 0.5)
            bodies = [json.dumps({"source": "benchmark", "time": now,
                                  "flows": records[i:i + REPORT_CHUNK],
                                  **({"ports": []} if i == 0 else {})}).encode()
                      for i in range(0, max(1, len(records)), REPORT_CHUNK)]
            # the reports: the process's CPU but this (the sending) thread's
            proc0, mine0 = time.process_time(), time.thread_time()
            for body in bodies:
                _post(port, body)
            proc1, mine1 = time.process_time(), time.thread_time()
            wall = time.perf_counter()
            service.run_period(now)                      # the period: all of it the service's
            wall = time.perf_counter() - wall
            proc2 = time.process_time()
            if pace:
                time.sleep(max(0.0, p.period_s - (time.perf_counter() - period_started)))
            if measure:
                cpu["reports"].append(((proc1 - proc0) - (mine1 - mine0)) * 1e3)
                cpu["period"].append((proc2 - proc1) * 1e3)
                cpu["wall"].append(wall * 1e3)
                cpu["records"].append(len(records))
                cpu["posts"].append(len(bodies))
        measured_wall = time.perf_counter() - wall_start
        worker_cpu = _worker_cpu_s(service) - worker_start
        fits_done = _fits(service) - fits_start
        counts = service.store.counts()
        active_seen = len(service.model.flows)
        classes = {}
        for prof in service.snapshot["profiles"]["microservices"].values():
            classes[str(prof["flow_class"])] = classes.get(str(prof["flow_class"]), 0) + 1
    finally:
        http_server.shutdown()
        http_server.server_close()
        service.stop()
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    total = [a + b for a, b in zip(cpu["period"], cpu["reports"])]
    mean_total = float(np.mean(total))
    series = 3 * (len(cfg.microservices) + len(cfg.servers))
    out = {
        "size": size, "active_flows": flows, "predictor": predictor,
        "servers": len(cfg.servers), "instances": len(cfg.instances), "series": series,
        "warmup_periods": warmup, "periods": periods, "period_s": p.period_s,
        "period_cpu_ms": summarize(cpu["period"]), "report_cpu_ms": summarize(cpu["reports"]),
        "total_cpu_ms": summarize(total), "period_wall_ms": summarize(cpu["wall"]),
        "records_per_period": summarize(cpu["records"]),
        "posts_per_period": summarize(cpu["posts"]),
        "core_share": round(mean_total / 1e3 / p.period_s, 4),
        "active_flows_known": active_seen, "flow_classes": classes,
        "history_rows": counts,
    }
    if predictor == "arma":
        due = series * periods / p.arma_refit_every
        out["arma"] = {"fits_done": fits_done, "fits_due": round(due),
                       "worker_cpu_share": round(worker_cpu / measured_wall, 4)
                       if measured_wall > 0 else None,
                       "measured_wall_s": round(measured_wall, 2),
                       "paced": pace}
    return out


def _fits(service: ProfilerService) -> int:
    model = service.model
    views = list(model.servers.values()) + list(model.microservices.values())
    return sum(getattr(pred, "fits", 0) for v in views
               for pred in v.predictor.predictors.values())


def machine_info() -> dict:
    return {"cpu_count": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "processor": platform.processor() or
            platform.machine(), "loadavg_start": [round(x, 2) for x in os.getloadavg()]}


def run_benchmark(sizes, flows, predictors, periods: int, out_dir: str | None,
                  seed: int = SEED, store_dir: str | None = None, command: str = "",
                  log=None, pace: bool = False) -> dict:
    doc = {"benchmark": "profiler_period", "command": command, "commit": git_commit(),
           "machine": machine_info(),
           "setup": {"servers": N_SERVERS, "period_s": PERIOD_S, "seed": seed,
                     "periods": periods, "report_chunk": REPORT_CHUNK,
                     "mean_active_s": MEAN_ACTIVE_S, "short_per_period": SHORT_PER_PERIOD,
                     "target_core_share": TARGET_SHARE, "paced": pace},
           "results": []}
    started = time.perf_counter()
    for size in sizes:
        for n_flows in flows:
            for predictor in predictors:
                if log:
                    log(f"{size} microservices, {n_flows} active flows, {predictor} ...")
                t = time.perf_counter()
                r = run_config(size, n_flows, predictor, periods, seed, store_dir, pace)
                r["elapsed_s"] = round(time.perf_counter() - t, 1)
                doc["results"].append(r)
                if log:
                    log(f"  {r['total_cpu_ms']['mean']} ms CPU per period "
                        f"({100 * r['core_share']:.1f} % of a core), {r['elapsed_s']} s")
    doc["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["elapsed_s"] = round(time.perf_counter() - started, 1)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        lab.write_results(out_dir, "profiler_period", doc, lambda: render_markdown(doc),
                          echo=False, default=None)
    return doc


def results_table(doc: dict) -> str:
    rows = []
    for r in doc["results"]:
        a = r.get("arma")
        arma = "–" if not a else (f"{a['fits_done']} / {a['fits_due']}, "
                                  f"{100 * (a['worker_cpu_share'] or 0):.0f} %")
        rows.append([r["size"], f"{r['active_flows']:,}", r["predictor"],
                     number(r["records_per_period"]["mean"], 0),
                     f"{number(r['period_cpu_ms']['mean'])} / "
                     f"{number(r['period_cpu_ms']['p95'])}",
                     number(r["report_cpu_ms"]["mean"]), number(r["total_cpu_ms"]["mean"]),
                     f"{100 * r['core_share']:.1f} %", arma])
    return table(["microservices", "active flows", "predictor", "records / period",
                  "period CPU ms (mean / p95)", "report CPU ms", "total CPU ms",
                  "share of a core", "ARMA fits done / due, worker CPU"], rows, "rrlrrrrrl",
                 compact=True).rstrip("\n")


def render_markdown(doc: dict) -> str:
    m, s = doc["machine"], doc["setup"]
    return "\n".join([
        "# Profiler period benchmark", "",
        f"Command: `{doc['command']}` at commit {doc['commit']}", "",
        f"Machine: {m['cpu_count']} CPUs ({m['processor']}), {m['platform']}, Python "
        f"{m['python']}; load average {m['loadavg_start']} at the start, "
        f"{m.get('loadavg_end')} at the end. Elapsed {doc.get('elapsed_s')} s.", "",
        f"The real ProfilerService: run_period() with an injected collector (agents' JSON), "
        f"POST /flows through its HTTP server fed by the controller's FlowTable in chunks of "
        f"{s['report_chunk']}; {s['servers']} servers, period {s['period_s']:g} s, "
        f"{s['periods']} measured periods after one window. Active flows last "
        f"{s['mean_active_s']:g} s on average (exponential); {s['short_per_period']} short "
        f"flows a period come and go when flows are on. *period CPU*: run_period's thread; "
        f"*report CPU*: the HTTP threads taking the period's reports; *share of a core*: "
        f"both over the period length (target under {100 * s['target_core_share']:.0f} % at "
        f"1000 microservices and 20,000 active flows).", "",
        results_table(doc), ""])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = ArgumentParser(prog="python -m benchmarks.profiler_period",
                        description="The profiler's CPU per period on its real code path.")
    ap.add_argument("--sizes", type=number_list(int, 1, 99999), default=list(DEFAULT_SIZES),
                    help="numbers of microservices (default 10,100,1000)")
    ap.add_argument("--flows", type=number_list(int, 0, 1_000_000),
                    default=list(DEFAULT_FLOWS), help="active flows (default 0,20000)")
    ap.add_argument("--predictors", type=choice_list(PREDICTORS), default=list(PREDICTORS),
                    help="rm, arma or both (default)")
    ap.add_argument("--periods", type=bounded(int, 1, 10000), default=DEFAULT_PERIODS,
                    help=f"measured periods per configuration (default {DEFAULT_PERIODS})")
    ap.add_argument("--pace", action="store_true",
                    help="give each period its real length (3 s), as in service; ARMA fit "
                         "counts are only meaningful then")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    ap.add_argument("--store-dir", default=None,
                    help="where the temporary SQLite history goes (default: system temp dir)")
    args = ap.parse_args(argv)
    command = lab.invocation("benchmarks.profiler_period", [shlex.quote(a) for a in argv],
                             sudo=False)
    doc = run_benchmark(args.sizes, args.flows, args.predictors, args.periods, args.out,
                        args.seed, args.store_dir, command,
                        log=lambda msg: print(msg, file=sys.stderr, flush=True), pace=args.pace)
    print(results_table(doc))
    print(f"\nwritten: {os.path.join(args.out, 'profiler_period.json')}, "
          f"{os.path.join(args.out, 'profiler_period.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
