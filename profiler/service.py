"""The profiler service: collects from the agents every period, runs the model, keeps the
history, and answers the controller over HTTP (API in docs/profiler.md).

    GET  /profiles   weights, predictions and flow class per microservice
    GET  /servers    measured and predicted utilization per server, with staleness
    GET  /graph      the microservice communication graph: edges (traffic, response times)
                     and vertices (the instances' use)
    POST /flows      flow records (and port utilization) from the controller
    GET  /links      the latest port utilization the controller sent
    GET  /history    ?kind=microservice|server|container&key=NAME&column=COL[&since=T]
    GET  /health, GET /metrics
"""
from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from common.httpjson import BadRequest, HttpError, get_json
from common.metrics import Registry
from profiler.model import FLOW_WINDOW_S, ProfilerModel
from profiler.predictors import make_predictor
from profiler.store import HistoryStore

log = logging.getLogger("malb.profiler")
PRUNE_EVERY = 100        # periods


def validate_flows(body) -> tuple[list[dict], list[dict]]:
    """Check a POST /flows body completely before anything is stored (400 names the field)."""
    if not isinstance(body, dict):
        raise BadRequest('body: expected {"flows": [...], "ports": [...]}')
    flows, ports = body.get("flows", []), body.get("ports")
    if not isinstance(flows, list):
        raise BadRequest("flows: expected a list")
    if ports is not None and not isinstance(ports, list):
        raise BadRequest("ports: expected a list")
    clean = []
    for k, f in enumerate(flows):
        where = f"flows[{k}]"
        if not isinstance(f, dict):
            raise BadRequest(f"{where}: expected an object")
        for key in ("flow_id", "microservice"):
            if not isinstance(f.get(key), str) or not f[key]:
                raise BadRequest(f"{where}.{key}: expected a non-empty string")
        d = f.get("duration_s")
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) \
                or d < 0:
            raise BadRequest(f"{where}.duration_s: expected a number >= 0, got {d!r}")
        for key in ("bytes", "packets"):
            v = f.get(key, 0)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 63:
                raise BadRequest(f"{where}.{key}: expected an integer from 0 to 2^63-1, "
                                 f"got {v!r}")
        for key in ("server", "instance", "client"):
            if f.get(key) is not None and not isinstance(f[key], str):
                raise BadRequest(f"{where}.{key}: expected a string, got {f[key]!r}")
        if not isinstance(f.get("active"), bool):
            raise BadRequest(f"{where}.active: expected true or false")
        clean.append({"flow_id": f["flow_id"], "microservice": f["microservice"],
                      "server": f.get("server"), "instance": f.get("instance"),
                      "client": f.get("client"), "duration_s": float(d),
                      "bytes": f.get("bytes", 0), "packets": f.get("packets", 0),
                      "active": f["active"]})
    for k, p in enumerate(ports or []):
        if not isinstance(p, dict):
            raise BadRequest(f"ports[{k}]: expected an object")
    return clean, ports


def validate_pairs(body) -> dict | None:
    """The optional "pairs" of a POST /flows body: {"interval_s": s, "edges": [{"src",
    "dst", "bytes", "flows"}]} (400 naming the field)."""
    pairs = body.get("pairs") if isinstance(body, dict) else None
    if pairs is None:
        return None
    if not isinstance(pairs, dict):
        raise BadRequest("pairs: expected {\"interval_s\": s, \"edges\": [...]}")
    interval = pairs.get("interval_s")
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or \
            not math.isfinite(interval) or interval < 0:
        raise BadRequest(f"pairs.interval_s: expected a number >= 0, got {interval!r}")
    edges = pairs.get("edges")
    if not isinstance(edges, list):
        raise BadRequest("pairs.edges: expected a list")
    clean = []
    for k, e in enumerate(edges):
        where = f"pairs.edges[{k}]"
        if not isinstance(e, dict):
            raise BadRequest(f"{where}: expected an object")
        for key in ("src", "dst"):
            if not isinstance(e.get(key), str) or not e[key]:
                raise BadRequest(f"{where}.{key}: expected a non-empty string")
        for key in ("bytes", "flows"):
            v = e.get(key)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 63:
                raise BadRequest(f"{where}.{key}: expected an integer from 0 to 2^63-1, "
                                 f"got {v!r}")
        clean.append({"src": e["src"], "dst": e["dst"], "bytes": e["bytes"],
                      "flows": e["flows"]})
    return {"interval_s": float(interval), "edges": clean}


class RespawningProcessPool(Executor):
    """A one-worker process pool for the ARMA fits that starts a new worker when the old
    one died (killed, out of memory) instead of failing every later fit."""

    def __init__(self):
        self._pool = ProcessPoolExecutor(max_workers=1)
        self.respawns = 0

    def submit(self, fn, /, *args, **kwargs) -> Future:
        try:
            return self._pool.submit(fn, *args, **kwargs)
        except BrokenProcessPool:
            log.warning("the ARMA fit worker died; starting a new one")
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ProcessPoolExecutor(max_workers=1)
            self.respawns += 1
            return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


class ProfilerService:
    """collector: what run_period() gathers the agents' samples with, () -> {server:
    (sample or None, error or None)}; the default asks every agent over HTTP. clock: the
    time of day (default time.time). Benchmarks give their own of both."""

    def __init__(self, cfg, store: HistoryStore | None = None, collector=None,
                 clock=time.time):
        self.cfg = cfg
        self.collector = collector or self.collect
        self.clock = clock
        p = cfg.profiler
        self.executor = RespawningProcessPool() if p.predictor == "arma" else None
        series = itertools.count()
        factory = lambda: make_predictor(p.predictor, p.window, p.arma_order,  # noqa: E731
                                         p.arma_refit_every, self.executor, next(series))
        self.model = ProfilerModel(cfg, factory)
        self.store = store or HistoryStore(p.history_path, p.retention_s)
        started = clock()
        self.model.add_completed(self.store.completed_flows(since=started - FLOW_WINDOW_S),
                                 started)
        self.fetcher = ThreadPoolExecutor(max_workers=max(1, len(cfg.servers)),
                                          thread_name_prefix="agent-fetch")
        self.lock = threading.Lock()          # guards model and snapshots
        self._stop = threading.Event()
        self.snapshot = {"profiles": self.model.profiles(started),
                         "servers": self.model.servers_view(started),
                         "graph": self.model.graph_view(started)}
        self.metrics = Registry()
        self.m_period = self.metrics.histogram(
            "malb_profiler_period_seconds", "Time one period takes (collection included).",
            (), (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5))
        self.m_agent = self.metrics.counter("malb_profiler_agent_requests_total",
                                            "Requests to the host agents.", ("server", "result"))
        self.m_flows = self.metrics.counter("malb_profiler_flow_records_total",
                                            "Flow records received.", ("state",))
        self.m_weight = self.metrics.gauge("malb_profiler_weight",
                                           "Weights per microservice.", ("microservice", "resource"))
        self.m_stale = self.metrics.gauge("malb_profiler_server_stale",
                                          "1 when a server's data is stale.", ("server",))

    # ---------------------------------------------------------------- period
    def collect(self) -> dict[str, tuple[dict | None, str | None]]:
        timeout = self.cfg.profiler.agent_timeout_s

        def fetch(server):
            try:
                return server.name, get_json(f"{server.agent_url}/stats", timeout), None
            except HttpError as exc:
                return server.name, None, str(exc)
        return {name: (sample, err) for name, sample, err in
                self.fetcher.map(fetch, self.cfg.servers)}

    def run_period(self, now: float | None = None) -> None:
        started = time.perf_counter()
        results = self.collector()
        now = self.clock() if now is None else now
        with self.lock:
            for name, (sample, err) in results.items():
                self.model.ingest_agent(name, sample, err, now)
                self.m_agent.inc(name, "ok" if sample else "error")
            self.model.step(now)
            profiles = self.model.profiles(now)
            servers = self.model.servers_view(now)
            graph = self.model.graph_view(now)
            self.snapshot = {"profiles": profiles, "servers": servers, "graph": graph}
        self._record(now, results, profiles, servers, graph)
        if self.model.steps % PRUNE_EVERY == 0:
            self.store.prune(now)
        self.m_period.observe(time.perf_counter() - started)

    def _record(self, now, results, profiles, servers, graph) -> None:
        rows = []
        for name, (sample, _err) in results.items():
            for c in (sample or {}).get("containers", []):
                rows.append({"server": name, "instance": c.get("instance") or c["name"],
                             "microservice": c.get("microservice") or "?",
                             "cpu_percent": c.get("cpu_percent"),
                             "memory_percent": c.get("memory_percent"),
                             "memory_bytes": c.get("memory_bytes"),
                             "rx_bytes_per_s": c.get("rx_bytes_per_s"),
                             "tx_bytes_per_s": c.get("tx_bytes_per_s")})
        if rows:
            self.store.add_container_samples(now, rows)
        self.store.add_server_samples(now, [
            {"server": n, "cpu": s["cpu"], "mem": s["mem"], "net": s["net"], "stale": s["stale"],
             "age_s": s["age_s"]} for n, s in servers["servers"].items()])
        ms_rows = []
        for n, p in profiles["microservices"].items():
            pred, meas, w = p["predicted"], p["measured"], p["weights"]
            ms_rows.append({"microservice": n, "cpu": meas["cpu"], "mem": meas["mem"],
                            "net": meas["net"], "pred_cpu": pred["cpu"], "pred_mem": pred["mem"],
                            "pred_net": pred["net"], "alpha": w["alpha"], "beta": w["beta"],
                            "gamma": w["gamma"], "flow_class": p["flow_class"]})
            for res, key in (("cpu", "alpha"), ("mem", "beta"), ("net", "gamma")):
                self.m_weight.set(n, res, value=w[key])
        self.store.add_microservice_samples(now, ms_rows)
        if graph["edges"]:
            self.store.add_edge_samples(now, [
                {"edge": f"{e['caller']}->{e['callee']}", "caller": e["caller"],
                 "callee": e["callee"], "bytes_per_s": e["bytes_per_s"],
                 "flows_per_s": e["flows_per_s"], "rt_ms": e["rt_ms"]}
                for e in graph["edges"]])
        for n, s in servers["servers"].items():
            self.m_stale.set(n, value=1 if s["stale"] else 0)

    def run(self) -> None:
        period = self.cfg.profiler.period_s
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.run_period()
            except Exception:  # keep the service alive; the period is logged as failed
                log.exception("profiler period failed")
            next_at += period
            delay = next_at - time.monotonic()
            if delay < 0:  # overran: skip the missed periods instead of bursting
                log.warning("period overran by %.2f s", -delay)
                next_at, delay = time.monotonic(), 0
            self._stop.wait(delay)

    def stop(self) -> None:
        self._stop.set()
        self.fetcher.shutdown(wait=False)
        if self.executor:
            self.executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    # ---------------------------------------------------------------- HTTP
    def post_flows(self, _query, body):
        flows, ports = validate_flows(body)
        pairs = validate_pairs(body)
        with self.lock:
            now = self.clock()
            completed = self.model.ingest_flows(flows, ports, now, pairs)
        if completed:
            self.store.add_flows(now, completed)
        self.m_flows.inc("completed", amount=len(completed))
        self.m_flows.inc("active", amount=len(flows) - len(completed))
        return 200, {"accepted": len(flows), "completed": len(completed)}

    def history(self, query, _body):
        def one(name):
            v = query.get(name)
            if not v:
                raise BadRequest(f"{name}: required query parameter")
            return v[0]
        since = query.get("since", [None])[0]
        try:
            since = float(since) if since is not None else None
        except ValueError:
            raise BadRequest(f"since: expected a number, got {since!r}") from None
        try:
            rows = self.store.series(one("kind"), one("key"), one("column"), since)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return 200, {"series": [[t, v] for t, v in rows]}

    def routes(self) -> dict:
        p = self.cfg.profiler
        return {
            ("GET", "/profiles"): lambda q, b: (200, {**self.snapshot["profiles"],
                                                      "predictor": {
                                                          "kind": p.predictor,
                                                          "window": p.window,
                                                          "arma_order": list(p.arma_order)}}),
            ("GET", "/servers"): lambda q, b: (200, self.snapshot["servers"]),
            ("GET", "/graph"): lambda q, b: (200, self.snapshot["graph"]),
            ("POST", "/flows"): self.post_flows,
            ("GET", "/links"): lambda q, b: (200, {"ports": self.model.ports}),
            ("GET", "/history"): self.history,
            ("GET", "/health"): lambda q, b: (200, {"status": "ok", "periods": self.model.steps,
                                                    "history": self.store.counts()}),
            ("GET", "/metrics"): lambda q, b: (200, self.metrics.render()),
        }
