"""What the profiler knows and predicts, as plain Python (no HTTP, no Docker): every period
ProfilerModel.step turns the agents' latest samples and the controller's flow records into
figures per microservice and per server (docs/profiler.md, "Profiler").

- ProfilerModel: the model and its step: per microservice its measured and predicted use,
  weights and flow class; per server its measured and predicted utilization, with the
  data's age and whether it is stale;
- ServerView, MicroserviceView: what it holds per server and per microservice;
- FlowBook: the flows it knows, kept so that a period costs the same whatever their number;
- instance_usage: a container's use relative to its server's capacity.
"""
from __future__ import annotations

import time
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass, field

from common.config import active_flow_ttl_s
from common.netuse import network_percent
from common.numbers import is_finite
from profiler.classify import classify_all
from profiler.graph import GraphBook
from profiler.predictors import ResourcePredictor
from profiler.weights import RESOURCES, weights_from_usage



@dataclass
class ServerView:
    name: str
    agent_url: str
    sample: dict | None = None        # the agent's latest timely /stats answer (maybe partial)
    last_ok: float | None = None      # when we got it
    error: str | None = None
    measured: dict = field(default_factory=lambda: dict.fromkeys(RESOURCES))
    measured_time: float | None = None   # the agent's time of the last complete sample
    measured_at: float | None = None     # when we got that one (staleness, our clock)
    measured_window: float | None = None  # the seconds that sample measured, up to its time
    # CPU used on the server beside its containers, % of its capacity, in that sample
    # (None: its agent cannot read the whole server)
    outside_cpu: float | None = None
    predicted: dict = field(default_factory=lambda: dict.fromkeys(RESOURCES))
    predictor: ResourcePredictor = field(kw_only=True)
    complete: bool = False            # whether the latest sample is complete
    missing: list = field(default_factory=list)
    seen_time: float | None = None    # time of the sample the last period looked at
    # per microservice on the server, from its complete samples: {"cpu", "net"} (% of the
    # server) at the latest, and the latest `window` of them (their mean is served)
    parts: dict = field(default_factory=dict)
    part_history: dict = field(default_factory=dict)


@dataclass
class MicroserviceView:
    name: str
    configured_class: str
    predictor: ResourcePredictor
    measured: dict = field(default_factory=lambda: dict.fromkeys(RESOURCES))
    predicted: dict = field(default_factory=lambda: dict.fromkeys(RESOURCES))
    weights: tuple | None = None
    readable: int = 0
    instances: int = 0
    flows: dict = field(default_factory=dict)
    # summed over readable instances, absolute: (cores, network bytes/s); per-flow costs on
    # servers of different sizes come from these
    absolute: tuple | None = None


def instance_usage(container: dict, capacity: dict) -> dict:
    """A container's use relative to its server's capacity (percent), None when unknown."""
    cpu = container.get("cpu_percent")
    mem = container.get("memory_bytes")
    rx, tx = container.get("rx_bytes_per_s"), container.get("tx_bytes_per_s")
    cores, mem_cap, net_cap = (capacity.get("cpu_cores"), capacity.get("memory_bytes"),
                               capacity.get("network_bytes_per_s"))
    return {
        "cpu": None if cpu is None or not cores else cpu / cores,   # cpu% of one core / cores
        "mem": None if mem is None or not mem_cap else 100.0 * mem / mem_cap,
        "net": network_percent(rx, tx, net_cap),
    }


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


FLOW_WINDOW_S = 600.0        # completed flows considered for classification
RECLASSIFY_EVERY = 20        # periods: old flows leave the window even when no new ones come


class FlowBook:
    """The flows the profiler knows, kept so that a period costs the same whatever their
    number: active ones by microservice (a count, and the durations of those already past
    the short/long threshold, the evidence of a long class), oldest report first for the
    expiry; completed durations per microservice over the classification window."""

    def __init__(self, threshold_s: float, ttl_s: float, window_s: float = FLOW_WINDOW_S):
        self.threshold_s, self.ttl_s, self.window_s = threshold_s, ttl_s, window_s
        self.seen: OrderedDict[str, float] = OrderedDict()   # active id -> last report
        self.ms_of: dict[str, str] = {}                      # active id -> microservice
        self.count: dict[str, int] = defaultdict(int)        # microservice -> active flows
        self.long: dict[str, dict[str, float]] = defaultdict(dict)   # ms -> {id: duration}
        self.completed: dict[str, deque] = defaultdict(deque)        # ms -> (t, duration)
        self.changed: set[str] = set()     # microservices whose evidence changed

    def __len__(self) -> int:
        return len(self.seen)

    def _forget(self, fid: str) -> None:
        ms = self.ms_of.pop(fid)
        del self.seen[fid]
        self.count[ms] -= 1
        if self.long[ms].pop(fid, None) is not None:
            self.changed.add(ms)

    def active(self, f: dict, now: float) -> None:
        fid, ms = f["flow_id"], f["microservice"]
        if fid in self.ms_of:
            if self.ms_of[fid] != ms:
                self._forget(fid)
            else:
                self.seen.move_to_end(fid)
        if fid not in self.ms_of:
            self.ms_of[fid] = ms
            self.count[ms] += 1
        self.seen[fid] = now
        if f["duration_s"] > self.threshold_s:
            self.long[ms][fid] = f["duration_s"]
            self.changed.add(ms)

    def complete(self, f: dict, now: float) -> None:
        if f["flow_id"] in self.ms_of:
            self._forget(f["flow_id"])
        self.completed[f["microservice"]].append((now, f["duration_s"]))
        self.changed.add(f["microservice"])

    def expire(self, now: float) -> int:
        """Forget active flows not reported for ttl_s: the controller that owned them is
        gone (it mentions a live one at least every fifth of that)."""
        n = 0
        while self.seen:
            fid, t = next(iter(self.seen.items()))
            if now - t <= self.ttl_s:
                break
            self._forget(fid)
            n += 1
        return n

    def durations(self, now: float, names) -> dict[str, list[float]]:
        """Per microservice: completed durations within the window, then those of its active
        flows already past the threshold (a live stream may not end within a run at all)."""
        out = {}
        for ms in names:
            done = self.completed[ms]
            while done and now - done[0][0] > self.window_s:
                done.popleft()
            out[ms] = [d for _t, d in done] + list(self.long[ms].values())
        return out


class ProfilerModel:
    """Every period `step` takes the agents' latest samples and the controller's flow
    records. Per microservice: its measured use (the mean over its readable instances, each
    relative to its server's capacity, in percent), the predicted use for the next period,
    the weights (each resource's share of the predicted total, paper IV.A) and its flow
    class. Per server: measured and predicted utilization, from complete samples only (every
    running container read): a partial sample updates the microservices it read, never the
    server's totals, which keep the last complete reading and its age; a server without a
    complete sample within stale_after_s is stale, its old numbers never turned into zeros
    and a partial total never served as a fresh reading."""

    def __init__(self, cfg, predictor_factory, stale_after_s: float | None = None):
        self.cfg = cfg
        p = cfg.profiler
        self.period_s = p.period_s
        self.stale_after_s = stale_after_s or 3 * p.period_s
        self.servers = {s.name: ServerView(s.name, s.agent_url,
                                           predictor=ResourcePredictor(predictor_factory))
                        for s in cfg.servers}
        self.microservices = {m.name: MicroserviceView(m.name, m.flow_class,
                                                       ResourcePredictor(predictor_factory))
                              for m in cfg.microservices}
        # The controller mentions every live flow at least every fifth of the TTL.
        self.active_flow_ttl_s = active_flow_ttl_s(cfg)
        self.flows = FlowBook(p.flow_threshold_s, self.active_flow_ttl_s)
        self.graph = GraphBook({i.name: i.microservice for i in cfg.slots},
                               {c.name: c.switch for c in cfg.testbed.clients},
                               window_s=p.graph_window_s)
        self.classified_at = -RECLASSIFY_EVERY     # step of the last full classification
        self.ports: list[dict] = []
        self.steps = 0

    # ---------------------------------------------------------------- inputs
    def ingest_agent(self, server: str, sample: dict | None, error: str | None,
                     now: float) -> None:
        view = self.servers[server]
        if sample is None:
            view.error = error or "no answer"
            return
        age = now - sample.get("time", 0)
        if age > self.stale_after_s:
            view.error = f"agent's latest sample is {age:.1f} s old"
            return
        view.sample, view.last_ok, view.error = sample, now, None
        totals = sample.get("totals") or {}
        view.complete, view.missing = bool(totals.get("complete")), totals.get("missing") or []
        if not view.complete:
            missing = ", ".join(map(str, view.missing[:5])) or "no running container"
            view.error = (f"partial sample ({missing}): server totals kept from the last "
                          f"complete sample")
            return
        if sample.get("time") != view.measured_time:
            view.measured = {"cpu": totals.get("cpu_percent"),
                             "mem": totals.get("memory_percent"),
                             "net": totals.get("network_percent")}
            view.measured_time, view.measured_at = sample.get("time"), now
            outside = totals.get("outside_cpu_percent")
            view.outside_cpu = float(outside) if is_finite(outside) and outside >= 0 else None
            window = sample.get("period_s")
            view.measured_window = float(window) if is_finite(window) and window > 0 \
                else None

    def ingest_flows(self, flows: list[dict], ports: list[dict] | None,
                     now: float | None = None, pairs: dict | None = None) -> list[dict]:
        """Takes a report's flows; returns the completed ones (to store). ports=None: the
        report carried no port list (a later chunk), the last one stays. pairs: the
        traffic between senders and instances since the last report (the graph's edges)."""
        now = time.time() if now is None else now
        if pairs is not None:
            self.graph.add_report(pairs, now)
        done = []
        for f in flows:
            if f["active"]:
                self.flows.active(f, now)
            else:
                self.flows.complete(f, now)
                done.append(f)
        if ports is not None:
            self.ports = ports
        return done

    def add_completed(self, rows, now: float) -> None:
        """Completed flows from the history, (t, microservice, duration) oldest first: a
        restarted profiler classifies with what the window held."""
        for t, ms, duration in rows:
            if now - t <= self.flows.window_s:
                self.flows.completed[ms].append((t, duration))
                self.flows.changed.add(ms)

    # ---------------------------------------------------------------- period
    def server_stale(self, view: ServerView, now: float) -> bool:
        """No complete sample within stale_after_s: silent, late or only partial."""
        return view.measured_at is None or now - view.measured_at > self.stale_after_s

    def _timely(self, view: ServerView, now: float) -> bool:
        return view.last_ok is not None and now - view.last_ok <= self.stale_after_s

    def step(self, now: float) -> None:
        """One period: update predictors with the latest fresh measurements; reclassify the
        microservices whose flows changed (all of them every RECLASSIFY_EVERY periods, as
        completed flows leave the window, or when the threshold is found automatically)."""
        self.steps += 1
        self.flows.expire(now)
        per_ms: dict[str, list[dict]] = {m: [] for m in self.microservices}
        any_new = False       # did any agent sample arrive since the last period?
        for view in self.servers.values():
            if not self._timely(view, now) or view.sample is None:
                view.predicted = dict.fromkeys(RESOURCES)
                continue
            new = view.sample.get("time") != view.seen_time
            view.seen_time = view.sample.get("time")
            any_new = any_new or new
            if new:
                self._take_call_latencies(view.sample)
            if view.complete and new:
                # a partial total would read as a drop in load: feed only complete ones;
                # and each sample once (an agent that missed a period is not a flat load)
                view.predictor.update(*(view.measured[r] for r in RESOURCES))
                self._take_parts(view)
            view.predicted = _non_negative(view.predictor.predict()) \
                if view.predictor.samples and not self.server_stale(view, now) \
                else dict.fromkeys(RESOURCES)
            cap = view.sample.get("capacity", {})
            readings = {}     # the graph's vertex weights: {instance: (cores, MB)}
            for c in view.sample.get("containers", []):
                ms = c.get("microservice")
                if ms in per_ms:
                    row = {"readable": c.get("readable", False),
                           "instance": c.get("instance"),
                           "cores": None if c.get("cpu_percent") is None
                           else c["cpu_percent"] / 100.0,
                           "memory_mb": None if c.get("memory_bytes") is None
                           else c["memory_bytes"] / 2 ** 20,
                           "net_bytes_per_s": None if c.get("rx_bytes_per_s") is None or
                           c.get("tx_bytes_per_s") is None
                           else max(c["rx_bytes_per_s"], c["tx_bytes_per_s"]),
                           **instance_usage(c, cap)}
                    per_ms[ms].append(row)
                    if row["readable"] and row["instance"]:
                        readings[row["instance"]] = (row["cores"], row["memory_mb"])
            if new:
                self.graph.add_use(view.name, readings, view.sample.get("time") or now)
        for name, mv in self.microservices.items():
            rows = per_ms[name]
            mv.instances = len(rows)
            readable = [r for r in rows if r["readable"]]
            mv.readable = len(readable)
            mv.measured = {r: _mean([x[r] for x in readable]) for r in RESOURCES}
            cores = [x["cores"] for x in readable]
            net = [x["net_bytes_per_s"] for x in readable]
            mv.absolute = None if not readable or None in cores or None in net else \
                (sum(cores), sum(net))
            # fed when some agent sent something new (a late one adds its last reading):
            # a period in which none did is not another sample of the same load
            if any_new and any(v is not None for v in mv.measured.values()):
                mv.predictor.update(*(mv.measured[r] for r in RESOURCES))
            if mv.predictor.samples:
                mv.predicted = _non_negative(mv.predictor.predict())
                basis = {r: mv.predicted[r] if mv.predicted[r] is not None
                         else mv.measured[r] for r in RESOURCES}
                mv.weights = weights_from_usage(basis["cpu"], basis["mem"], basis["net"])
        self._classify(now)

    def _take_parts(self, view: ServerView) -> None:
        """Each microservice's share of the server in a complete sample: the controller's
        malb policy takes the short-flow ones at their mean, not at the latest sample
        (docs/controller.md)."""
        sample = view.sample
        assert sample is not None           # step() passes the views with a sample
        cap = sample.get("capacity", {})
        parts: dict[str, dict] = {}
        for c in sample.get("containers", []):
            ms = c.get("microservice")
            if ms not in self.microservices or c.get("state", "running") != "running":
                continue
            use = instance_usage(c, cap)
            part = parts.setdefault(ms, {"cpu": 0.0, "net": 0.0})
            for r in ("cpu", "net"):
                part[r] = None if part[r] is None or use[r] is None else part[r] + use[r]
        view.parts = parts
        for ms in set(view.part_history) | set(parts):
            h = view.part_history.setdefault(ms, deque(maxlen=self.cfg.profiler.window))
            h.append(parts.get(ms, {"cpu": 0.0, "net": 0.0}))   # gone from the server: 0

    def parts_view(self, view: ServerView) -> dict:
        """{microservice: {cpu, net, cpu_mean, net_mean}} in % of the server."""
        out = {}
        for ms, part in view.parts.items():
            h = view.part_history.get(ms) or ()
            out[ms] = {**_rounded(part),
                       **{f"{r}_mean": None if any(x[r] is None for x in h) or not h
                          else round(sum(x[r] for x in h) / len(h), 4)
                          for r in ("cpu", "net")}}
        return out

    def _take_call_latencies(self, sample: dict) -> None:
        """The call latencies an agent read from its call-graph services: the graph's edge
        response times (each sample once)."""
        for c in sample.get("containers", []):
            calls, ms = c.get("calls"), c.get("microservice")
            if not calls or ms not in self.microservices or not calls.get("interval_s"):
                continue
            for row in calls.get("callees", []):
                self.graph.add_latency(ms, row["callee"], row["mean_ms"], row["p95_ms"],
                                       calls["interval_s"])

    def _classify(self, now: float) -> None:
        p = self.cfg.profiler
        every = self.steps - self.classified_at >= RECLASSIFY_EVERY
        if every or (p.flow_classification == "auto" and self.flows.changed):
            names = list(self.microservices)      # auto: one threshold from all of them
            self.classified_at = self.steps
        else:
            names = [m for m in self.flows.changed if m in self.microservices]
        self.flows.changed.clear()
        if not names:
            return
        result = classify_all(self.flows.durations(now, names), p.flow_threshold_s,
                              p.flow_classification)
        for name in names:
            self.microservices[name].flows = result[name]

    # ---------------------------------------------------------------- views
    def prediction_lag_s(self) -> float:
        """How long until a prediction shows a change in full: a rolling mean of w samples
        reaches a new level w periods later; ARMA follows within a few periods (we say 2)."""
        p = self.cfg.profiler
        return p.window * p.period_s if p.predictor == "rm" else 2 * p.period_s

    def per_flow(self, name: str, view: MicroserviceView) -> dict | None:
        """What one active flow of the microservice uses, in % of a server: its measured
        CPU and network over all its instances, divided by its active flows, counting at
        least one flow per instance: with fewer flows than instances, most of what they use
        is not the flows' (idle work, or load from elsewhere), and one short-lived flow must
        not be charged a whole busy instance. Memory is left at 0: an instance's memory is
        mostly its idle footprint, not its flows'."""
        active = self.flows.count.get(name, 0)
        if not active or view.readable == 0:
            return None
        per = {}
        for r in ("cpu", "net"):
            m = view.measured.get(r)
            if m is None:
                return None
            per[r] = round(m * view.readable / max(active, view.readable), 4)
        per["mem"] = 0.0
        if view.absolute is not None:
            flows = max(active, view.readable)
            per["cores"] = round(view.absolute[0] / flows, 6)
            per["net_bytes_per_s"] = round(view.absolute[1] / flows, 1)
        return per

    def profiles(self, now: float) -> dict:
        out = {}
        for name, v in self.microservices.items():
            a, b, g = v.weights or (1 / 3, 1 / 3, 1 / 3)
            configured = v.configured_class
            profiled = v.flows.get("flow_class")
            out[name] = {
                "measured": _rounded(v.measured), "predicted": _rounded(v.predicted),
                "weights": {"alpha": round(a, 6), "beta": round(b, 6), "gamma": round(g, 6)},
                "weights_source": "predicted use" if v.weights else "equal (no samples yet)",
                "flow_class": configured if configured != "auto" else profiled,
                "flow_class_source": "config" if configured != "auto" else
                v.flows.get("source", "insufficient"),
                "flows": {k: v.flows.get(k) for k in ("count", "median_s", "p90_s",
                                                      "threshold_s", "quantiles_s")},
                "samples": v.predictor.samples, "instances": v.instances,
                "instances_readable": v.readable, "per_flow": self.per_flow(name, v),
            }
        return {"time": now, "period_s": self.period_s,
                "prediction_lag_s": self.prediction_lag_s(), "microservices": out}

    def graph_view(self, now: float) -> dict:
        """The microservice communication graph with each microservice's instances and
        their smoothed use (the vertex weights)."""
        return self.graph.view(now, list(self.microservices))

    def servers_view(self, now: float) -> dict:
        out = {}
        for name, v in self.servers.items():
            stale = self.server_stale(v, now)
            out[name] = {
                **_rounded(v.measured),
                "outside_cpu": None if v.outside_cpu is None else round(v.outside_cpu, 3),
                "predicted": None if stale else _rounded(v.predicted),
                "by_microservice": None if stale else self.parts_view(v),
                "sample_time": v.measured_time, "sample_window_s": v.measured_window,
                "age_s": None if v.measured_time is None else round(now - v.measured_time, 3),
                "stale": stale, "complete": v.complete, "missing": v.missing,
                "agent": v.agent_url, "error": v.error,
            }
        return {"time": now, "servers": out}


def _non_negative(pred: dict) -> dict:
    """A utilization cannot be below zero; ARMA extrapolating a near-idle series can be."""
    return {k: (None if v is None else max(0.0, v)) for k, v in pred.items()}


def _rounded(d: dict) -> dict:
    return {k: (None if v is None else round(v, 4)) for k, v in d.items()}
