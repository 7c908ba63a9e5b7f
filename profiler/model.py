"""What the profiler knows and predicts, as plain Python (no HTTP, no Docker).

Every period :meth:`ProfilerModel.step` takes the agents' latest samples and the
controller's flow records, and produces:

- per microservice: its measured use of CPU, memory and network (the mean over its readable
  instances, each relative to its server's capacity, in percent), the predicted use for the
  next period, the weights alpha, beta, gamma (each resource's share of the predicted total,
  MALB paper section IV.A) and the short/long class of its flows;
- per server: measured and predicted utilization (percent of its CPU share, memory limit and
  network capacity), with the age of the data and whether it is stale.

A server's figures come only from complete samples (every running container read). A partial
sample (a container the agent could not read yet, or at all) updates the per-microservice
figures of the containers it did read, never the server's totals: those keep the last
complete reading with its age. A server with no complete sample within ``stale_after_s`` (its
agent silent, late, or only partial) is stale: its old numbers are never refreshed into
zeros, and a partial total is never served as a fresh reading.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from common.netuse import network_percent
from profiler.classify import classify_all
from profiler.predictors import ResourcePredictor
from profiler.weights import weights_from_usage

RESOURCES = ("cpu", "mem", "net")
# An active flow the controller has not reported for this long (at least; longer when the
# controller's rule timeouts are) is forgotten: its controller went away.
ACTIVE_FLOW_TTL_S = 300.0


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
    predicted: dict = field(default_factory=lambda: dict.fromkeys(RESOURCES))
    predictor: ResourcePredictor | None = None
    complete: bool = False            # whether the latest sample is complete
    missing: list = field(default_factory=list)
    seen_time: float | None = None    # time of the sample the last period looked at


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


class ProfilerModel:
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
        self.active_flows: dict[str, dict] = {}     # flow_id -> latest active record
        self.active_seen: dict[str, float] = {}     # flow_id -> when last reported
        # A live flow is reported again when it carries traffic; a quiet one may stay quiet
        # as long as its rules may live.
        c = cfg.controller
        self.active_flow_ttl_s = max(ACTIVE_FLOW_TTL_S, 3.0 * c.idle_timeout_s,
                                     c.hard_timeout_s + 3.0 * c.monitoring_period_s)
        self.ports: list[dict] = []
        self.steps = 0
        self.flows_dirty = True          # new flow records since the last classification

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

    def ingest_flows(self, flows: list[dict], ports: list[dict] | None,
                     now: float | None = None) -> list[dict]:
        """Keeps active flows in memory; returns the completed ones (to store). ports=None:
        the report carried no port list (a later chunk), the last one stays."""
        now = time.time() if now is None else now
        done = []
        if flows:
            self.flows_dirty = True
        for f in flows:
            if f["active"]:
                self.active_flows[f["flow_id"]] = f
                self.active_seen[f["flow_id"]] = now
            else:
                self.active_flows.pop(f["flow_id"], None)
                self.active_seen.pop(f["flow_id"], None)
                done.append(f)
        if ports is not None:
            self.ports = ports
        return done

    def expire_active_flows(self, now: float) -> int:
        """Forget active flows not reported for active_flow_ttl_s: the controller that
        owned them is gone (a quiet but live flow is reported again when it sends)."""
        old = [fid for fid, t in self.active_seen.items() if now - t > self.active_flow_ttl_s]
        for fid in old:
            del self.active_seen[fid]
            self.active_flows.pop(fid, None)
        if old:
            self.flows_dirty = True
        return len(old)

    # ---------------------------------------------------------------- period
    def server_stale(self, view: ServerView, now: float) -> bool:
        """No complete sample within stale_after_s: silent, late or only partial."""
        return view.measured_at is None or now - view.measured_at > self.stale_after_s

    def _timely(self, view: ServerView, now: float) -> bool:
        return view.last_ok is not None and now - view.last_ok <= self.stale_after_s

    def step(self, now: float, completed_durations: dict[str, list[float]] | None) -> None:
        """One period: update predictors with the latest fresh measurements; reclassify
        flows when given the completed durations (None: classes unchanged)."""
        self.steps += 1
        self.expire_active_flows(now)
        per_ms: dict[str, list[dict]] = {m: [] for m in self.microservices}
        any_new = False       # did any agent sample arrive since the last period?
        for view in self.servers.values():
            if not self._timely(view, now) or view.sample is None:
                view.predicted = dict.fromkeys(RESOURCES)
                continue
            new = view.sample.get("time") != view.seen_time
            view.seen_time = view.sample.get("time")
            any_new = any_new or new
            if view.complete and new:
                # a partial total would read as a drop in load: feed only complete ones;
                # and each sample once (an agent that missed a period is not a flat load)
                view.predictor.update(*(view.measured[r] for r in RESOURCES))
            view.predicted = _non_negative(view.predictor.predict()) \
                if view.predictor.samples and not self.server_stale(view, now) \
                else dict.fromkeys(RESOURCES)
            cap = view.sample.get("capacity", {})
            for c in view.sample.get("containers", []):
                ms = c.get("microservice")
                if ms in per_ms:
                    per_ms[ms].append({"readable": c.get("readable", False),
                                       **instance_usage(c, cap)})
        for name, view in self.microservices.items():
            rows = per_ms[name]
            view.instances = len(rows)
            readable = [r for r in rows if r["readable"]]
            view.readable = len(readable)
            view.measured = {r: _mean([x[r] for x in readable]) for r in RESOURCES}
            # fed when some agent sent something new (a late one adds its last reading):
            # a period in which none did is not another sample of the same load
            if any_new and any(v is not None for v in view.measured.values()):
                view.predictor.update(*(view.measured[r] for r in RESOURCES))
            if view.predictor.samples:
                view.predicted = _non_negative(view.predictor.predict())
                basis = {r: view.predicted[r] if view.predicted[r] is not None
                         else view.measured[r] for r in RESOURCES}
                view.weights = weights_from_usage(basis["cpu"], basis["mem"], basis["net"])
        if completed_durations is not None:
            self._classify(completed_durations)
            self.flows_dirty = False

    def _classify(self, completed: dict[str, list[float]]) -> None:
        p = self.cfg.profiler
        durations = {m: list(completed.get(m, [])) for m in self.microservices}
        # Flows still running past the threshold are evidence of long flows already: a
        # live video stream may not end within the run at all.
        for f in self.active_flows.values():
            if f["microservice"] in durations and f["duration_s"] > p.flow_threshold_s:
                durations[f["microservice"]].append(f["duration_s"])
        result = classify_all(durations, p.flow_threshold_s, p.flow_classification)
        for name, view in self.microservices.items():
            view.flows = result[name]

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
        active = sum(1 for f in self.active_flows.values() if f["microservice"] == name)
        if not active or view.readable == 0:
            return None
        per = {}
        for r in ("cpu", "net"):
            m = view.measured.get(r)
            if m is None:
                return None
            per[r] = round(m * view.readable / max(active, view.readable), 4)
        per["mem"] = 0.0
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
                                                      "threshold_s")},
                "samples": v.predictor.samples, "instances": v.instances,
                "instances_readable": v.readable, "per_flow": self.per_flow(name, v),
            }
        return {"time": now, "period_s": self.period_s,
                "prediction_lag_s": self.prediction_lag_s(), "microservices": out}

    def servers_view(self, now: float) -> dict:
        out = {}
        for name, v in self.servers.items():
            stale = self.server_stale(v, now)
            out[name] = {
                **_rounded(v.measured),
                "predicted": None if stale else _rounded(v.predicted),
                "sample_time": v.measured_time,
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
