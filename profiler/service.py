"""The profiler service: collects from the agents every period, runs the model, keeps the
history, and answers the controller over HTTP (API in docs/profiler.md).

    GET  /profiles   weights, predictions and flow class per microservice
    GET  /servers    measured and predicted utilization per server, with staleness
    GET  /graph      the microservice communication graph: edges (traffic, response times)
                     and vertices (the instances' use)
    POST /flows      flow records (and port utilization) from the controller
    GET  /links      the latest port utilization the controller sent
    GET  /history    ?kind=microservice|server|container&key=NAME&column=COL[&since=T]
    GET  /budgets    end-to-end objectives split into the targets of the loops below them
    PUT  /budgets    an objective's target, or whether its loops' targets are set at all
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

from prometheus_client import Counter, Gauge, Histogram

from common import openapi
from common.httpjson import BadRequest, HttpError, get_json, quote
from common.metrics import new_registry, render
from common.numbers import finite_non_negative
from profiler.budget_feeder import BudgetFeeder
from profiler.model import FLOW_WINDOW_S, ProfilerModel
from profiler.predictors import make_predictor
from profiler.store import HistoryStore

log = logging.getLogger("malb.profiler")
PRUNE_EVERY = 100        # periods
HISTORY_QUERY = frozenset({"kind", "key", "column", "since"})


# What the controller's records hold (ryu_apps/flows.py as_record, malb.py port_rates and
# _pairs_report); anything else is a 400, so that a typo is not silently dropped.
BODY_FIELDS = frozenset({"source", "time", "flows", "ports", "pairs"})
FLOW_FIELDS = frozenset({"flow_id", "microservice", "server", "instance", "client",
                         "protocol", "duration_s", "bytes", "bytes_to_server",
                         "bytes_to_client", "packets", "active", "end_reason"})
PORT_FIELDS = frozenset({"dpid", "port", "time", "rx_bytes_per_s", "tx_bytes_per_s",
                         "instance", "server"})
PAIRS_FIELDS = frozenset({"interval_s", "edges"})
EDGE_FIELDS = frozenset({"src", "dst", "bytes", "flows"})


def _known(where: str, record: dict, fields: frozenset) -> None:
    extra = set(record) - fields
    if extra:
        name = _short_name(min(extra))
        raise BadRequest(f"{where}{'.' if where else ''}{name}: unknown field (known: "
                         f"{', '.join(sorted(fields))})")


def _short_name(name: str) -> str:
    """A field's name as an error may print it: printable, at most 40 characters."""
    name = name.encode("utf-8", "backslashreplace").decode()
    return name if len(name) <= 40 else name[:40] + "..."


def _storable(where: str, value) -> str:
    """A non-empty string SQLite can store: a lone surrogate ("s\\ud800") passes json.loads
    but fails the UTF-8 encoding at the INSERT, after the model has changed."""
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{where}: expected a non-empty string, got {quote(value)}")
    _text(where, value)
    return value


def _text(where: str, value) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"{where}: not valid Unicode (a lone surrogate), got "
                         f"{quote(value.encode('utf-8', 'backslashreplace').decode())}") from None


def _count(where: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 63:
        raise BadRequest(f"{where}: expected an integer from 0 to 2^63-1, got {quote(value)}")
    return value


def _seconds(where: str, value) -> float:
    if not finite_non_negative(value):
        raise BadRequest(f"{where}: expected a finite number >= 0, got {quote(value)}")
    return float(value)


def validate_flows(body) -> tuple[list[dict], list[dict]]:
    """Check a POST /flows body completely before anything is stored or changed (400
    names the field): the whole batch is taken, or none of it."""
    if not isinstance(body, dict):
        raise BadRequest('body: expected {"flows": [...], "ports": [...]}')
    _known("", body, BODY_FIELDS)
    if body.get("source") is not None:
        if not isinstance(body["source"], str):
            raise BadRequest(f"source: expected a string, got {quote(body['source'])}")
        _text("source", body["source"])
    if body.get("time") is not None:
        _seconds("time", body["time"])
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
        _known(where, f, FLOW_FIELDS)
        for key in ("flow_id", "microservice"):
            _storable(f"{where}.{key}", f.get(key))
        d = _seconds(f"{where}.duration_s", f.get("duration_s"))
        for key in ("bytes", "packets", "bytes_to_server", "bytes_to_client"):
            _count(f"{where}.{key}", f.get(key, 0))
        for key in ("server", "instance", "client"):      # stored: none, or not empty
            if f.get(key) is not None:
                _storable(f"{where}.{key}", f[key])
        for key in ("protocol", "end_reason"):
            if f.get(key) is not None:
                if not isinstance(f[key], str):
                    raise BadRequest(f"{where}.{key}: expected a string, got {quote(f[key])}")
                _text(f"{where}.{key}", f[key])
        if not isinstance(f.get("active"), bool):
            raise BadRequest(f"{where}.active: expected true or false")
        clean.append({"flow_id": f["flow_id"], "microservice": f["microservice"],
                      "server": f.get("server"), "instance": f.get("instance"),
                      "client": f.get("client"), "duration_s": d,
                      "bytes": f.get("bytes", 0), "packets": f.get("packets", 0),
                      "active": f["active"]})
    for k, p in enumerate(ports or []):
        where = f"ports[{k}]"
        if not isinstance(p, dict):
            raise BadRequest(f"{where}: expected an object")
        _known(where, p, PORT_FIELDS)
        if "dpid" in p:       # OpenFlow's datapath ids are unsigned 64-bit
            v = p["dpid"]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 64:
                raise BadRequest(f"{where}.dpid: expected an integer from 0 to 2^64-1, got "
                                 f"{quote(v)}")
        if "port" in p:
            _count(f"{where}.port", p["port"])
        for key in ("time", "rx_bytes_per_s", "tx_bytes_per_s"):
            if key in p:
                _seconds(f"{where}.{key}", p[key])      # a finite number >= 0
        for key in ("instance", "server"):
            if p.get(key) is not None:
                if not isinstance(p[key], str):
                    raise BadRequest(f"{where}.{key}: expected a string, got {quote(p[key])}")
                _text(f"{where}.{key}", p[key])
    return clean, ports


def validate_pairs(body) -> dict | None:
    """The optional "pairs" of a POST /flows body: {"interval_s": s, "edges": [{"src",
    "dst", "bytes", "flows"}]} (400 naming the field)."""
    pairs = body.get("pairs") if isinstance(body, dict) else None
    if pairs is None:
        return None
    if not isinstance(pairs, dict):
        raise BadRequest("pairs: expected {\"interval_s\": s, \"edges\": [...]}")
    _known("pairs", pairs, PAIRS_FIELDS)
    interval = _seconds("pairs.interval_s", pairs.get("interval_s"))
    edges = pairs.get("edges")
    if not isinstance(edges, list):
        raise BadRequest("pairs.edges: expected a list")
    clean = []
    for k, e in enumerate(edges):
        where = f"pairs.edges[{k}]"
        if not isinstance(e, dict):
            raise BadRequest(f"{where}: expected an object")
        _known(where, e, EDGE_FIELDS)
        for key in ("src", "dst"):
            _storable(f"{where}.{key}", e.get(key))
        for key in ("bytes", "flows"):
            _count(f"{where}.{key}", e.get(key))
        clean.append({"src": e["src"], "dst": e["dst"], "bytes": e["bytes"],
                      "flows": e["flows"]})
    return {"interval_s": interval, "edges": clean}


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
        factory = lambda: make_predictor(p.predictor, p.window, p.arma_order,
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
        self.metrics = r = new_registry("profiler")
        self.m_period = Histogram(
            "malb_profiler_period_seconds", "Time one period takes (collection included).",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5), registry=r)
        self.m_agent = Counter("malb_profiler_agent_requests_total",
                               "Requests to the host agents.", ("server", "result"), registry=r)
        self.m_flows = Counter("malb_profiler_flow_records_total", "Flow records received.",
                               ("state",), registry=r)
        self.m_weight = Gauge("malb_profiler_weight_ratio",
                              "A microservice's weight of a resource in its load (alpha, beta, "
                              "gamma: they add up to 1).", ("microservice", "resource"),
                              registry=r)
        self.m_stale = Gauge("malb_profiler_server_stale", "1 when a server's data is stale.",
                             ("server",), registry=r)
        self.budgets = BudgetFeeder(cfg, self.fetcher, r)

    # ---------------------------------------------------------------- period
    def collect(self) -> dict[str, tuple[dict | None, str | None]]:
        timeout = self.cfg.profiler.agent_timeout_s
        # each agent measures the whole period (its raw counters that far back), not only
        # the last of its own one-second samples
        window = self.cfg.profiler.agent_window_s
        path = f"/stats?window_s={window:g}" if window > 0 else "/stats"

        def fetch(server):
            try:
                return server.name, get_json(f"{server.agent_url}{path}", timeout), None
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
                self.m_agent.labels(name, "ok" if sample else "error").inc()
            self.model.step(now)
            profiles = self.model.profiles(now)
            servers = self.model.servers_view(now)
            graph = self.model.graph_view(now)
            self.snapshot = {"profiles": profiles, "servers": servers, "graph": graph}
        self._record(now, results, profiles, servers, graph)
        if self.model.steps % PRUNE_EVERY == 0:
            self.store.prune(now)
        self.budgets.step(now, graph)
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
                self.m_weight.labels(n, res).set(w[key])
        self.store.add_microservice_samples(now, ms_rows)
        if graph["edges"]:
            self.store.add_edge_samples(now, [
                {"edge": f"{e['caller']}->{e['callee']}", "caller": e["caller"],
                 "callee": e["callee"], "bytes_per_s": e["bytes_per_s"],
                 "flows_per_s": e["flows_per_s"], "rt_ms": e["rt_ms"]}
                for e in graph["edges"]])
        for n, s in servers["servers"].items():
            self.m_stale.labels(n).set(1 if s["stale"] else 0)

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
        """All or nothing: the whole batch is checked, then the completed flows are
        committed to the history, and only then is the model changed (a failed write
        leaves both as they were; the model's ingest cannot fail on checked input)."""
        flows, ports = validate_flows(body)
        pairs = validate_pairs(body)
        now = self.clock()
        completed = [f for f in flows if not f["active"]]
        if completed:
            self.store.add_flows(now, completed)
        with self.lock:
            self.model.ingest_flows(flows, ports, now, pairs)
        self.m_flows.labels("completed").inc(len(completed))
        self.m_flows.labels("active").inc(len(flows) - len(completed))
        return 200, {"accepted": len(flows), "completed": len(completed)}

    def history(self, query, _body):
        def one(name):
            v = query.get(name)
            if not v:
                raise BadRequest(f"{name}: required query parameter")
            return v[0]
        unknown = set(query) - HISTORY_QUERY
        if unknown:
            raise BadRequest(f"{_short_name(min(unknown))}: unknown query parameter (known: "
                             f"{', '.join(sorted(HISTORY_QUERY))})")
        since = query.get("since", [None])[0]
        try:
            since = float(since) if since is not None else None
            if since is not None and not math.isfinite(since):
                raise ValueError(since)
        except ValueError:
            raise BadRequest(f"since: expected a finite time in seconds, got "
                             f"{quote(query['since'][0])}") from None
        try:
            rows = self.store.series(one("kind"), one("key"), one("column"), since)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return 200, {"series": [[t, v] for t, v in rows]}

    def put_budgets(self, _query, body):
        return 200, self.budgets.change(body)

    def routes(self) -> dict:
        p = self.cfg.profiler
        table = {
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
            ("GET", "/budgets"): lambda q, b: (200, self.budgets.status()),
            ("GET", "/health"): lambda q, b: (200, {"status": "ok", "periods": self.model.steps,
                                                    "history": self.store.counts()}),
            ("GET", "/metrics"): lambda q, b: (200, render(self.metrics)),
        }
        entries = [p.objective.entry for p in self.budgets.planners]
        if entries:          # PUT /budgets where there is an end-to-end objective to change
            table[("PUT", "/budgets")] = self.put_budgets

        def own_entries(spec: dict) -> None:
            if "put" in spec["paths"].get("/budgets", {}):
                openapi.body_schema(spec, "/budgets", "put")["properties"]["entry"]["enum"] \
                    = entries
        table[("GET", "/openapi.json")] = openapi.served("profiler", table, own_entries)
        return table
