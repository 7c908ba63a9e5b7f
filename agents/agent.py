"""The host agent: per-container CPU, memory and network from the Docker SDK, and the server's
totals relative to its capacity, served as JSON and Prometheus metrics. A background thread
samples every period, so answering never waits for Docker (docs/profiler.md, "Host agent":
GET /stats and its window, unreadable containers and partial totals, GET /probes).

- Agent: the sampler, the raw counters behind GET /stats?window_s=W, the call-graph
  services' call latencies, and the probes (agents/probes.py);
- SampleCollector: its readings on /metrics, from the latest sample when scraped;
- Selector: which containers belong to this server;
- agent_routes: its own routes; served_routes: all its server answers (with the SLO
  runner's, and /openapi.json); sample_over_window: a sample over a window, from the kept
  raw counters;
- http_server: its JSON server; host_capacity: a real machine's CPUs and memory;
  host_cpu_seconds: a real machine's CPU time so far (the whole server's counter).
"""
from __future__ import annotations

import logging
import math
import os
import re
import subprocess
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import docker
from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from agents.dockerstats import Capacity, CpuReading, RawSample, cpu_percent, parse_stats, \
    proc_net_dev, rates, server_totals, whole_cores, window_base
from agents.latency import call_deltas, parse_calls
from agents.probes import MAX_WINDOW_S as MAX_PROBE_WINDOW_S, MIN_WINDOW_S as \
    MIN_PROBE_WINDOW_S, NetnsSockets, Prober, Target, read_latency
from common.config.model import MAX_SERVICE_CHECK_TIMEOUT_S
from common import openapi
from common.httpjson import BadRequest, JsonServer, field_name, quote
from common.metrics import new_registry, render

log = logging.getLogger("malb.agent")
MAX_PARALLEL = 32
# PUT /slo is a few fields; POST /slo/observations up to 10,000 requests of ~30 bytes each
MAX_BODY_BYTES = 512 * 1024
MAX_WINDOW_S = 600.0            # the longest window GET /stats?window_s= measures
# GET /probes?timeout_s=: what agents.probe_timeout_s allows, up to the longest health timeout
# with service checks
MIN_PROBE_TIMEOUT_S, MAX_PROBE_TIMEOUT_S = 0.01, MAX_SERVICE_CHECK_TIMEOUT_S


class Selector:
    """Which containers belong to this server: the instances the configuration places on
    it (by container name: that holds on every backend, where labels do not: Containernet
    drops them), or by labels, by a name pattern, or all.

    names: {container name: (instance, microservice)}."""

    def __init__(self, labels: dict[str, str] | None = None, name_regex: str | None = None,
                 names: dict[str, tuple[str, str]] | None = None):
        self.labels = labels or {}
        self.name_re = re.compile(name_regex) if name_regex else None
        self.names = names

    def docker_filters(self) -> dict:
        if self.names is not None:   # Docker matches parts of names; matches() is exact
            return {"name": sorted(self.names)}
        return {"label": [f"{k}={v}" if v else k for k, v in self.labels.items()]} \
            if self.labels else {}

    def matches(self, name: str) -> bool:
        if self.names is not None:
            return name in self.names
        return self.name_re is None or bool(self.name_re.search(name))

    def identity(self, name: str, labels: dict) -> tuple[str, str | None]:
        """(instance, microservice) of a selected container: the configuration's, else its
        labels', else its name without Mininet's prefix."""
        if self.names and name in self.names:
            return self.names[name]
        return (labels.get("malb.instance", name.removeprefix("mn.")),
                labels.get("malb.microservice"))

    def describe(self) -> str:
        if self.names is not None:
            return f"the configured containers {', '.join(sorted(self.names))}"
        parts = [f"label {k}={v}" for k, v in self.labels.items()]
        if self.name_re:
            parts.append(f"name ~ /{self.name_re.pattern}/")
        return ", ".join(parts) or "all containers"



def sample_over_window(s: dict, raws: dict[str, list[RawSample]], whole: list[CpuReading],
                       window_s: float) -> dict:
    """A sample measured over the last window_s seconds: each container's CPU and traffic
    from its kept raw sample nearest window_s back (`raws`, oldest first; memory is the
    sample's), the whole server's CPU from `whole` likewise; period_s the window measured,
    on average over the containers."""
    containers, spans = [], []
    for c in s["containers"]:
        kept = raws.get(c["name"])
        base = window_base(kept, window_s) if c["readable"] and kept else None
        if base is None:
            containers.append(c)
            continue
        cur = kept[-1]
        cpu, (rx, tx) = cpu_percent(base, cur), rates(base, cur)
        containers.append({**c, "cpu_percent": None if cpu is None else round(cpu, 3),
                           "rx_bytes_per_s": None if rx is None else round(rx, 1),
                           "tx_bytes_per_s": None if tx is None else round(tx, 1)})
        spans.append(cur.time - base.time)
    cap = Capacity(**{k: s["capacity"][k] for k in
                      ("cpu_cores", "memory_bytes", "network_bytes_per_s", "source")})
    whole_base = window_base(whole, window_s)
    cores = whole_cores(whole_base, whole[-1]) if whole_base is not None else None
    return {**s, "containers": containers, "totals": server_totals(containers, cap, cores),
            "period_s": round(sum(spans) / len(spans), 3) if spans else s["period_s"],
            "window_s": window_s}


def window_query(query: dict, lo: float, hi: float, lo_open: bool = False,
                 name: str = "window_s", known: tuple[str, ...] = ("window_s",)
                 ) -> float | None:
    """?name= of a GET (window_s; /probes also takes timeout_s): None when absent;
    BadRequest naming the parameter for one not in `known`, or for a value that is not
    seconds from lo (exclusive when lo_open) to hi."""
    unknown = set(query) - set(known)
    if unknown:
        raise BadRequest(f"{field_name(min(unknown))}: unknown query parameter "
                         f"(known: {', '.join(known)})")
    raw = query.get(name, [None])[0]
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not ((lo < value) if lo_open else (lo <= value)) or not value <= hi:
        span = f"({lo:g}, {hi:g}]" if lo_open else f"[{lo:g}, {hi:g}]"
        raise BadRequest(f"{name}: expected seconds in {span}, got {quote(raw, 40)}")
    return value


class SampleCollector:
    """The agent's readings on /metrics, made from its latest sample when scraped: the
    containers' own counters as counters (docker's CPU time and network bytes: PromQL's
    rate() gives the use over any window), memory and the server's shares as gauges. A
    container that went away is gone from the next scrape."""

    LABELS = ("server", "container", "microservice")

    def __init__(self, agent: Agent):
        self.agent = agent
        # (container, "rx" | "tx") -> (docker's last reading, the total exported): a
        # container's bytes are a sum over its interfaces, which falls when one goes away
        # (not a restart); the exported counter only takes the increases
        self._net: dict[tuple[str, str], tuple[int, int]] = {}
        self._lock = threading.Lock()

    def _network_total(self, container: str, way: str, reading: int) -> int:
        last = self._net.get((container, way))
        total = reading if last is None else last[1] + max(0, reading - last[0])
        self._net[(container, way)] = (reading, total)
        return total

    def collect(self):
        sample, raws = self.agent.metric_readings()
        server = self.agent.server
        cpu = CounterMetricFamily("malb_agent_container_cpu_seconds", "CPU time the container "
                                  "used (docker's counter; its rate is cores in use).",
                                  labels=self.LABELS)
        rx = CounterMetricFamily("malb_agent_container_network_receive_bytes",
                                 "Bytes the container received.", labels=self.LABELS)
        tx = CounterMetricFamily("malb_agent_container_network_transmit_bytes",
                                 "Bytes the container sent.", labels=self.LABELS)
        mem = GaugeMetricFamily("malb_agent_container_memory_bytes",
                                "Memory use without inactive page cache.", labels=self.LABELS)
        share = GaugeMetricFamily("malb_agent_server_utilization_ratio",
                                  "The server's use of a resource over the sampling window, "
                                  "relative to its capacity (what the profiler receives).",
                                  labels=("server", "resource"))
        outside = GaugeMetricFamily("malb_agent_server_outside_cpu_ratio",
                                    "CPU used on the server beside its containers, relative "
                                    "to its capacity (no container's statistics show it).",
                                    labels=("server",))
        unreadable = GaugeMetricFamily("malb_agent_unreadable_containers",
                                       "Containers that could not be read.", labels=("server",))
        with self._lock:          # two scrapes at once must not both add an increase
            containers = (sample or {}).get("containers", [])
            for key in [k for k in self._net if k[0] not in raws]:
                del self._net[key]            # a container gone: its counters go with it
            for c in containers:
                labels = [server, c["name"], c["microservice"] or ""]
                raw = raws.get(c["name"])
                if raw is not None:
                    cpu.add_metric(labels, raw.cpu_total_ns / 1e9)
                    if raw.rx_bytes is not None and raw.tx_bytes is not None:
                        rx.add_metric(labels, self._network_total(c["name"], "rx",
                                                                  raw.rx_bytes))
                        tx.add_metric(labels, self._network_total(c["name"], "tx",
                                                                  raw.tx_bytes))
                if c["memory_bytes"] is not None:
                    mem.add_metric(labels, c["memory_bytes"])
        if sample is not None:
            t = sample["totals"]
            for res, field in (("cpu", "cpu_percent"), ("memory", "memory_percent"),
                               ("network", "network_percent")):
                if t.get(field) is not None:
                    share.add_metric([server, res], t[field] / 100)
            if t.get("outside_cpu_percent") is not None:
                outside.add_metric([server], t["outside_cpu_percent"] / 100)
            unreadable.add_metric([server], sample["unreadable"])
        yield from (cpu, rx, tx, mem, share, outside, unreadable)

    def describe(self):
        return []      # registered before any sample: nothing to check names against yet


class Agent:
    """scrape: {container name: port} of the call-graph services whose call latencies are
    read from their /metrics (inside the container's network namespace) every scrape_s.
    probe_ports: {container name: port} of the services GET /probes reads (their
    /latency), over probe_window_s by default, each within probe_timeout_s.
    whole_cpu_fn: () -> the CPU seconds the whole server (its cgroup, or the machine) used
    so far, or None when unreadable: the totals' outside_cpu_percent, what runs on the
    server beside the containers."""

    def __init__(self, server: str, selector: Selector, capacity_fn, period_s: float = 1.0,
                 client=None, scrape: dict[str, int] | None = None, scrape_s: float = 5.0,
                 probe_ports: dict[str, int] | None = None, probe_window_s: float = 1.0,
                 probe_timeout_s: float = 0.25, prober: Prober | None = None,
                 whole_cpu_fn=None):
        self.server = server
        self.selector = selector
        self.capacity_fn = capacity_fn          # () -> Capacity (re-read: limits may change)
        self.period_s = period_s
        self.client = client or docker.from_env(timeout=10, max_pool_size=MAX_PARALLEL)
        # Docker's stats collector ticks once a second and a one-shot read waits for the
        # next tick: read every container at once, or N containers take N seconds.
        self.pool = ThreadPoolExecutor(max_workers=MAX_PARALLEL, thread_name_prefix="stats")
        # container name -> its raw samples, oldest first, enough for MAX_WINDOW_S; changed
        # under the lock together with the latest sample, so a window always ends at it
        self._raws: dict[str, deque[RawSample]] = {}
        self._raws_kept = int(MAX_WINDOW_S / period_s) + 2
        self._pids: dict[str, int] = {}
        self.whole_cpu_fn = whole_cpu_fn
        # the whole server's CPU-time readings, oldest first, taken with the raw samples
        self._whole: deque[CpuReading] = deque(maxlen=self._raws_kept)
        self._lock = threading.Lock()
        self._latest: dict | None = None
        self._stop = threading.Event()
        self.scrape, self.scrape_s = scrape or {}, scrape_s
        self._scraped: dict[str, tuple[float, dict]] = {}    # container -> (time, histograms)
        self._last_scrape = 0.0
        self.probe_ports, self.probe_window_s = probe_ports or {}, probe_window_s
        # container name -> its Target as of the latest sample (GET /probes reads these)
        self._probe_targets: dict[str, Target] = {}
        # threads are started when the first reading is asked for; the namespace handle too
        self._prober = prober or Prober(self._read_probe, probe_timeout_s)
        self._netns: NetnsSockets | None = None
        self.errors = 0
        self.metrics = r = new_registry("agent")
        r.register(SampleCollector(self))
        self.m_sample = Histogram("malb_agent_sample_seconds", "Time to sample every container.",
                                  ("server",), registry=r,
                                  buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
        self.m_probe = Histogram(
            "malb_agent_probe_answer_seconds", "Time to answer GET /probes (every instance "
            "read).", ("server",), registry=r,
            buckets=(0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
        self.m_probe_failed = Counter(
            "malb_agent_probe_failures_total", "Instance readings of GET /probes that failed.",
            ("server", "container"), registry=r)

    # ---------------------------------------------------------------- sampling
    def sample_once(self) -> dict:
        started = time.monotonic()
        wall = time.time()
        try:
            listed = self.client.containers.list(all=True,
                                                 filters=self.selector.docker_filters())
        except Exception as exc:  # noqa: BLE001 -- Docker itself unreachable: every container unreadable
            self.errors += 1
            return self._publish(wall, [], f"docker: {exc}", started)
        mine = [c for c in listed if self.selector.matches(c.name)]
        seen = {c.id for c in mine}
        docs = {c.id: self.pool.submit(self._stats, c) for c in mine if c.status == "running"}
        scrape = self.scrape and time.monotonic() - self._last_scrape >= self.scrape_s
        calls = {c.name: self.pool.submit(self._calls, c) for c in mine
                 if scrape and c.status == "running" and c.name in self.scrape}
        if scrape:
            self._last_scrape = time.monotonic()
        fresh: dict[str, RawSample | None] = {}
        containers = [self._read(c, docs.get(c.id), fresh) for c in mine]
        # right after the containers' counters: the same stretch of time (the metrics
        # scrape below may take seconds)
        whole = self._read_whole()
        for entry in containers:
            if entry["name"] in calls:
                entry["calls"] = calls[entry["name"]].result()
        wall = time.time()  # the data is from now (reads waited for Docker's next tick)
        for gone in set(self._pids) - seen:     # containers that disappeared
            self._pids.pop(gone, None)
        self._note_probe_targets(mine)
        return self._publish(wall, containers, None, started, fresh, whole)

    def _read_whole(self) -> CpuReading | None:
        if self.whole_cpu_fn is None:
            return None
        try:
            seconds = self.whole_cpu_fn()
        except Exception as exc:   # noqa: BLE001 -- optional: a failed read costs its figure, not the sample
            log.warning("the server's CPU time could not be read: %s", exc)
            return None
        return None if seconds is None else CpuReading(time.monotonic(), float(seconds))

    def _note_probe_targets(self, mine: list) -> None:
        """The containers GET /probes reads, with their processes as the list shows them now
        (list() inspects each container: a restarted one has its new pid here)."""
        targets = {}
        for c in mine:
            if c.name not in self.probe_ports:
                continue
            instance, microservice = self.selector.identity(c.name, c.labels or {})
            pid = (c.attrs.get("State") or {}).get("Pid") if c.status == "running" else None
            targets[c.name] = Target(c.name, instance, microservice, self.probe_ports[c.name],
                                     pid or None, c.status)
        with self._lock:
            self._probe_targets = targets

    def _read(self, c, doc_future, fresh: dict) -> dict:
        """A container's entry; its raw sample goes to ``fresh`` (None: forget its
        counters), to be kept when the sample is published."""
        instance, microservice = self.selector.identity(c.name, c.labels or {})
        entry = {"name": c.name, "id": c.id[:12], "instance": instance,
                 "microservice": microservice,
                 "state": c.status, "readable": True, "error": None, "cpu_percent": None,
                 "memory_bytes": None, "memory_percent": None, "rx_bytes_per_s": None,
                 "tx_bytes_per_s": None}
        if doc_future is None:
            # not running: it uses nothing, but that is not a measurement of zero either
            entry.update(readable=False, error=f"container is {c.status}")
            fresh[c.name] = None
            return entry
        try:
            doc = doc_future.result()
            raw = parse_stats(doc, time.monotonic(), self._net_from_proc(c)
                              if not doc.get("networks") else None)
        except Exception as exc:  # noqa: BLE001 -- a container unreadable, not the sample
            self.errors += 1
            entry.update(readable=False, error=f"{type(exc).__name__}: {exc}")
            fresh[c.name] = None
            return entry
        kept = self._raws.get(c.name)
        prev = kept[-1] if kept else None
        fresh[c.name] = raw
        entry["memory_bytes"] = raw.memory_bytes
        cap = self.capacity_fn()
        if raw.memory_bytes is not None and cap.memory_bytes:
            entry["memory_percent"] = round(100.0 * raw.memory_bytes / cap.memory_bytes, 3)
        if prev is not None:
            cpu = cpu_percent(prev, raw)
            entry["cpu_percent"] = None if cpu is None else round(cpu, 3)
            rx, tx = rates(prev, raw)
            entry["rx_bytes_per_s"] = None if rx is None else round(rx, 1)
            entry["tx_bytes_per_s"] = None if tx is None else round(tx, 1)
        else:
            entry["error"] = "first sample: rates need a second one"
        return entry

    def _calls(self, c) -> dict | None:
        """The calls the container's service made since the last scrape, per callee (count,
        mean and p95 in ms, over interval_s), or None when it could not be read."""
        pid = self._pid(c)
        if not pid:
            return None
        try:
            res = subprocess.run(["nsenter", "-t", str(pid), "-n", "curl", "-s", "-m", "2",
                                  f"http://127.0.0.1:{self.scrape[c.name]}/metrics"],
                                 capture_output=True, text=True, timeout=5)
            now, hist = time.monotonic(), parse_calls(res.stdout) if res.returncode == 0 \
                else None
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            log.warning("%s: its service's metrics could not be read: %s", c.name, exc)
            return None
        if hist is None:
            return None
        before = self._scraped.get(c.name)
        self._scraped[c.name] = (now, hist)
        if before is None:
            return {"interval_s": None, "callees": []}     # the first scrape: a baseline
        return {"interval_s": round(now - before[0], 3),
                "callees": call_deltas(before[1], hist)}

    def _pid(self, c) -> int:
        pid = self._pids.get(c.id)
        if pid is None:
            c.reload()
            pid = c.attrs.get("State", {}).get("Pid") or 0
            self._pids[c.id] = pid
        return pid

    def _stats(self, c) -> dict:
        try:
            return self.client.api.stats(c.id, stream=False, one_shot=True)
        except TypeError:       # docker SDK without one_shot (< 6.1): two cycles, ~2 s
            return self.client.api.stats(c.id, stream=False)

    def _net_from_proc(self, c) -> tuple[int, int] | None:
        """Containers with network_mode=none have no Docker network stats; read their
        namespace's counters (the topology's veth) from /proc/<pid>/net/dev."""
        pid = self._pid(c)
        if not pid:
            return None
        try:
            with open(f"/proc/{pid}/net/dev") as fh:
                return proc_net_dev(fh.read())
        except OSError:
            self._pids.pop(c.id, None)
            return None

    def _publish(self, wall: float, containers: list[dict], error: str | None,
                 started: float, fresh: dict[str, RawSample | None] | None = None,
                 whole: CpuReading | None = None) -> dict:
        cap = self.capacity_fn()
        totals = server_totals(containers, cap, whole_cores(
            self._whole[-1] if self._whole and whole is not None else None, whole))
        if error:
            totals.update(complete=False, missing=["*"])
        sample = {
            "server": self.server, "time": wall, "period_s": self.period_s,
            "selector": self.selector.describe(), "error": error,
            "capacity": {"cpu_cores": cap.cpu_cores, "memory_bytes": cap.memory_bytes,
                         "network_bytes_per_s": cap.network_bytes_per_s, "source": cap.source},
            "totals": totals, "containers": containers,
            "unreadable": sum(1 for c in containers if not c["readable"]) + (1 if error else 0),
        }
        with self._lock:
            self._latest = sample
            if fresh is not None:      # None: Docker unreachable, the counters stay
                for name in set(self._raws) - set(fresh):     # containers that went away
                    del self._raws[name]
                for name, raw in fresh.items():
                    if raw is None:
                        self._raws.pop(name, None)
                        continue
                    kept = self._raws.setdefault(name, deque(maxlen=self._raws_kept))
                    if kept and raw.cpu_total_ns < kept[-1].cpu_total_ns:
                        kept.clear()      # its counters started again: it restarted
                    kept.append(raw)
                if whole is None or (self._whole and whole.seconds < self._whole[-1].seconds):
                    self._whole.clear()    # unreadable, or its counter started again
                if whole is not None:
                    self._whole.append(whole)
        self.m_sample.labels(self.server).observe(time.monotonic() - started)
        return sample

    def metric_readings(self) -> tuple[dict | None, dict[str, RawSample]]:
        """The latest sample and each container's latest raw counters, for /metrics."""
        with self._lock:
            return self._latest, {n: raws[-1] for n, raws in self._raws.items() if raws}

    def run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.sample_once()
            except Exception:  # keep sampling; the error is in the log and the counters
                self.errors += 1
                log.exception("sampling failed")
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - started)))

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.run, name=f"agent-{self.server}", daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self._stop.set()
        self._prober.shutdown()

    # ---------------------------------------------------------------- probes
    def _read_probe(self, pid: int, port: int, window_s: float, timeout_s: float) -> dict:
        with self._lock:        # readings run in parallel: one handle for them all
            if self._netns is None:
                self._netns = NetnsSockets()
        return read_latency(self._netns, pid, port, window_s, timeout_s)

    def probes(self, window_s: float | None = None, timeout_s: float | None = None
               ) -> dict | None:
        """Every instance container's reading, now (None before the first sample), each
        within timeout_s (None: probe_timeout_s)."""
        started = time.monotonic()
        with self._lock:
            if self._latest is None:
                return None
            targets = sorted(self._probe_targets.values(), key=lambda t: t.container)
        answer = self._prober.answer(self.server, targets, window_s or self.probe_window_s,
                                     timeout_s)
        for _name, entry in answer["instances"].items():
            if entry["error"] is not None:
                self.m_probe_failed.labels(self.server, entry["container"]).inc()
        self.m_probe.labels(self.server).observe(time.monotonic() - started)
        return answer

    def latest(self) -> dict | None:
        with self._lock:
            return self._latest

    def over_window(self, window_s: float) -> dict | None:
        """The latest sample measured over the last ``window_s`` seconds: each container's
        CPU and traffic from the kept raw sample nearest ``window_s`` back (memory is the
        latest reading); ``period_s`` is the window measured, on average over the
        containers (shorter while the agent has not sampled that long)."""
        with self._lock:
            s = self._latest
            raws = {name: list(kept) for name, kept in self._raws.items()}
            whole = list(self._whole)
        if s is None or s["error"]:
            return s
        return sample_over_window(s, raws, whole, window_s)


def agent_routes(agent: Agent) -> dict:
    """The agent's own routes: /stats (the latest sample, or one over ?window_s), /probes,
    /health, /metrics."""
    def stats(query, _b):
        window = window_query(query, 0.0, MAX_WINDOW_S, lo_open=True)
        s = agent.latest() if window is None else agent.over_window(window)
        if s is None:
            return 503, {"error": "no sample yet", "server": agent.server}
        return 200, {**s, "age_s": round(time.time() - s["time"], 3)}

    def probes(query, _b):
        known = ("window_s", "timeout_s")
        window = window_query(query, MIN_PROBE_WINDOW_S, MAX_PROBE_WINDOW_S, known=known)
        timeout = window_query(query, MIN_PROBE_TIMEOUT_S, MAX_PROBE_TIMEOUT_S,
                               name="timeout_s", known=known)
        answer = agent.probes(window, timeout)
        if answer is None:
            return 503, {"error": "no sample yet: the instance containers are not known",
                         "server": agent.server}
        return 200, answer

    def health(_q, _b):
        s = agent.latest()
        age = None if s is None else round(time.time() - s["time"], 3)
        ok = age is not None and age < 5 * agent.period_s
        return (200 if ok else 503), {"status": "ok" if ok else "stale",
                                      "server": agent.server, "last_sample_age_s": age,
                                      "errors": agent.errors}

    return {("GET", "/stats"): stats, ("GET", "/health"): health, ("GET", "/probes"): probes,
            ("GET", "/metrics"): lambda _q, _b: (200, render(agent.metrics))}


def served_routes(agent: Agent, slo=None) -> dict:
    """Everything the agent's server answers: the agent's routes, its SLO runner's when it
    has one, and /openapi.json describing those (docs/api/agent.yaml), the services named
    in its SLO bodies being those it runs loops for."""
    routes = agent_routes(agent)
    if slo is not None:
        routes.update(slo.routes())

    def services(spec: dict) -> None:
        for path, method in (("/slo", "put"), ("/slo/observations", "post")):
            if path in spec["paths"]:
                openapi.body_schema(spec, path, method)["properties"]["service"]["enum"] = \
                    sorted(slo.loops)
    routes[("GET", "/openapi.json")] = openapi.served("agent", routes,
                                                      services if slo is not None else None)
    return routes


def http_server(address, routes: dict, name: str, token: str | None = None) -> JsonServer:
    """The agent's HTTP server: common/httpjson's JsonServer (JSON-only errors, 404, 405
    with Allow, 413, 415, depth, finite numbers, valid Unicode, timeouts, the shared token
    on PUT /slo when there is one), with a body limit to fit what an agent takes."""
    return JsonServer(address, routes, name=name, max_body_bytes=MAX_BODY_BYTES,
                      token=token)


def host_capacity(network_mbit: float) -> Capacity:
    """A real machine: all its CPUs and memory."""
    with open("/proc/meminfo") as fh:
        mem_kb = next(int(line.split()[1]) for line in fh if line.startswith("MemTotal:"))
    return Capacity(float(os.cpu_count() or 1), mem_kb * 1024, network_mbit * 1e6 / 8, "host")


def host_cpu_seconds(stat_text: str | None = None) -> float:
    """A real machine's busy CPU time so far, in seconds: every CPU's time but idle, iowait
    and steal (what a hypervisor gave others), from /proc/stat's first line (guest time is
    inside user time already)."""
    if stat_text is None:
        with open("/proc/stat") as fh:
            stat_text = fh.readline()
    fields = stat_text.split()
    if not fields or fields[0] != "cpu":
        raise ValueError("/proc/stat: no aggregate cpu line")
    ticks = [int(v) for v in fields[1:9]]      # user .. steal
    busy = sum(ticks) - ticks[3] - ticks[4] - ticks[7]    # less idle, iowait and steal
    return busy / os.sysconf("SC_CLK_TCK")
