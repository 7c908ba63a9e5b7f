"""End-to-end objectives turned into the targets of the SLO loops below them: the shell
around slo/budgets.py's BudgetPlanner, run by the profiler each period (docs/slo.md,
"Budgets on a call graph").

For every microservice whose `slo.scope` is `end-to-end` (the configuration checks that each
service it calls has a loop), each period:

1. GET /slo of every agent: each loop's latency reading (its SLI; for a service with
   replicas, the slowest of them, with that replica's frequency and busy share) and its
   current target;
2. the planner smooths the readings, takes each call's latency from the profiler's graph
   (its callers' p95) and splits the objective (slo.budgets.split, or priced_split with
   `slo.split: priced`);
3. PUT /slo {"service", "target_ms"} to every agent running a loop of a service whose budget
   moved by slo.budgets.RESEND_SHARE or whose loop holds another target (a new replica, a
   restarted agent, a hand-made change), and to the entry's when it holds another than the
   objective's: the objective owns those targets.

- objectives(cfg): the configuration's end-to-end objectives;
- BudgetFeeder: the loop above; status() is GET /budgets, change() is PUT /budgets (an
  objective's target, its split, or whether the profiler sets its loops' targets at all).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import replace

from prometheus_client import Counter, Gauge

from common.config.checks import reachable
from common.httpjson import BadRequest, HttpError, get_json, put_json, quote
from common.numbers import is_finite
from slo.budgets import SPLITS, BudgetPlanner, Objective
from slo.energy import CorePowerModel

log = logging.getLogger("malb.profiler.budgets")
# a target an agent reports within this of what was sent is the one sent (JSON rounding)
SAME_TARGET_MS = 1e-3


def objectives(cfg) -> list[Objective]:
    out = []
    for m in cfg.microservices:
        if m.slo is None or m.slo.scope != "end-to-end":
            continue
        names = [m.name, *reachable(cfg.microservices, m.name)]
        calls = {n: [(c.service, c.count) for c in cfg.microservice(n).calls]
                 for n in names}
        # the priced split's watts: the entry's server's frequency range (the model sets
        # the scale; what it compares is V(f) and f)
        freq = cfg.server(cfg.instances_of(m.name)[0].server).frequency
        out.append(Objective(m.name, m.slo.target_ms, calls, m.slo.split,
                             CorePowerModel(freq.min_mhz, freq.max_mhz), freq.step_mhz))
    return out


class BudgetFeeder:
    """fetcher: an executor for the agents' requests (the profiler's); registry: where its
    metrics go."""

    def __init__(self, cfg, fetcher, registry):
        self.cfg, self.fetcher = cfg, fetcher
        self.planners = [BudgetPlanner(o, window_s=cfg.profiler.graph_window_s)
                         for o in objectives(cfg)]
        self.errors: list[str] = []
        self.time: float | None = None
        # entries whose loops' targets the profiler leaves alone (PUT /budgets active: false)
        self.paused: set[str] = set()
        # step() (the profiler's period) against change() and status() (HTTP threads)
        self.lock = threading.RLock()
        self.m_budget = Gauge("malb_profiler_budget_seconds", "The latency target the "
                              "profiler set for a service's SLO loops, its share of an "
                              "end-to-end objective.", ("service",), registry=registry)
        self.m_factor = Gauge("malb_profiler_budget_factor_ratio", "The split's factor on "
                              "every own part under an end-to-end objective (below 1: the "
                              "services must be faster than measured).", ("entry",),
                              registry=registry)
        self.m_sent = Counter("malb_profiler_budget_updates_total", "Targets sent to the "
                              "agents' SLO loops, by result.", ("service", "result"),
                              registry=registry)

    def read_loops(self, errors: list[str]) -> tuple[dict[str, float],
                                                      dict[str, dict[str, float]],
                                                      dict[str, tuple]]:
        """(latency ms per service: the slowest replica's reading, {service: {agent URL:
        its loop's target}}, {service: (frequency MHz, busy share) of that replica}) from
        every agent's GET /slo; an agent that does not answer is in errors."""
        timeout = self.cfg.profiler.agent_timeout_s

        def fetch(server):
            try:
                return server, get_json(f"{server.agent_url}/slo", timeout), None
            except HttpError as exc:
                return server, None, f"{server.name}: GET /slo: {exc}"
        latency: dict[str, float] = {}
        targets: dict[str, dict[str, float]] = {}
        ran_at: dict[str, tuple] = {}
        for server, answer, err in self.fetcher.map(fetch, self.cfg.servers):
            if err:
                errors.append(err)
                continue
            for name, loop in ((answer or {}).get("services") or {}).items():
                targets.setdefault(name, {})[server.agent_url] = loop["slo"]["target_ms"]
                if loop.get("sli_ms") is not None and \
                        float(loop["sli_ms"]) >= latency.get(name, 0.0):
                    latency[name] = float(loop["sli_ms"])
                    ran_at[name] = (loop.get("frequency_mhz"), loop.get("load"))
        return latency, targets, ran_at

    def step(self, now: float, graph: dict) -> None:
        """One period: graph is the profiler's GET /graph answer. The agents are read
        outside the lock (PUT and GET /budgets do not wait for them); planning and sending,
        usually nothing, inside it, so that no target goes out after a pause returned."""
        if not self.planners:
            return
        errors: list[str] = []
        latency, targets, ran_at = self.read_loops(errors)
        with self.lock:
            self.errors, self.time = errors, now
            self._step(now, graph, latency, targets, ran_at)

    def _step(self, now: float, graph: dict, latency: dict[str, float],
              targets: dict[str, dict[str, float]], ran_at: dict[str, tuple]) -> None:
        edges = {(e["caller"], e["callee"]): e["rt_p95_ms"] for e in graph.get("edges", ())
                 if e.get("rt_p95_ms") is not None}
        for planner in self.planners:
            o = planner.objective
            if o.entry in self.paused:
                continue
            # the entry holds the objective's target (PUT /budgets may have changed it)
            wrong = {url: t for url, t in targets.get(o.entry, {}).items()
                     if abs(t - o.target_ms) > SAME_TARGET_MS}
            if wrong:
                self._send(planner, o.entry, o.target_ms, wrong)
            for service in planner.objective.services:
                sent = planner.sent.get(service)
                if sent is not None and any(abs(t - sent) > SAME_TARGET_MS
                                            for t in targets.get(service, {}).values()):
                    planner.forget(service)
            mine = [s for s in [o.entry, *o.services] if s in latency]
            planner.observe(now, {s: latency[s] for s in mine},
                            {s: ran_at[s][0] for s in mine if ran_at[s][0] is not None},
                            {s: ran_at[s][1] for s in mine if ran_at[s][1] is not None})
            plan = planner.plan(edges)
            if plan.split is not None:
                self.m_factor.labels(planner.objective.entry).set(plan.split.factor)
            for service, target in plan.send.items():
                self._send(planner, service, target, targets.get(service, {}))

    def _send(self, planner: BudgetPlanner, service: str, target_ms: float,
              agents: dict[str, float]) -> None:
        if not agents:
            self.errors.append(f"{service}: no agent runs a loop for it")
            return
        token, timeout = self.cfg.security.token, self.cfg.profiler.agent_timeout_s
        failed = False
        for url in agents:
            try:
                put_json(f"{url}/slo", {"service": service, "target_ms": target_ms},
                         timeout, token=token)
                self.m_sent.labels(service, "ok").inc()
            except HttpError as exc:
                failed = True
                self.m_sent.labels(service, "error").inc()
                self.errors.append(f"{service}: PUT {url}/slo: {exc}")
        if service == planner.objective.entry:
            return                      # the objective's own target, not a budget
        if failed:
            planner.forget(service)
        else:
            planner.confirm(service, target_ms)
            self.m_budget.labels(service).set(target_ms / 1000)

    def status(self) -> dict:
        with self.lock:
            return self._status()

    def _status(self) -> dict:
        out = []
        for p in self.planners:
            o, plan = p.objective, p.last
            s = plan.split if plan else None
            out.append({
                "entry": o.entry, "target_ms": o.target_ms, "services": o.services,
                "split": o.split,
                "freq_mhz": None if s is None else s.freq_mhz,
                "latency_ms": {k: round(v, 3) for k, v in p.latency_ms.items()},
                "waiting_for": plan.waiting_for if plan else None,
                "factor": None if s is None else round(s.factor, 4),
                "feasible": None if s is None else s.feasible,
                "reason": None if s is None else s.reason,
                "budgets_ms": None if s is None else
                {k: round(v, 3) for k, v in s.budgets_ms.items()},
                "own_ms": None if s is None else {k: round(v, 3) for k, v in s.own_ms.items()},
                "sent_ms": dict(p.sent), "active": o.entry not in self.paused})
        return {"time": self.time, "objectives": out, "errors": list(self.errors)}

    def change(self, body) -> dict:
        """PUT /budgets {"entry": name, "target_ms": ms, "active": bool}: BadRequest naming
        the field, and nothing changed, on a bad body. Paused, the loops keep the targets
        they hold; active again, every budget is sent at the next period."""
        with self.lock:
            return self._change(body)

    def _change(self, body) -> dict:
        if not isinstance(body, dict):
            raise BadRequest('body: expected {"entry": ..., "target_ms": ..., "active": ...}')
        unknown = sorted(set(body) - {"entry", "target_ms", "active", "split"})
        if unknown:
            raise BadRequest(f"{quote(unknown[0])}: unknown field (entry, target_ms, active, "
                             f"split)")
        by_entry = {p.objective.entry: p for p in self.planners}
        entry = body.get("entry")
        if not isinstance(entry, str) or entry not in by_entry:
            raise BadRequest(f"entry: {quote(entry)} has no end-to-end objective (have: "
                             f"{', '.join(sorted(by_entry)) or 'none'})")
        if len(body) == 1:
            raise BadRequest("body: nothing to change (target_ms, active, split)")
        target = body.get("target_ms", by_entry[entry].objective.target_ms)
        if isinstance(target, bool) or not isinstance(target, (int, float)) or \
                not is_finite(target) or not 0.1 <= target <= 600_000:
            raise BadRequest(f"target_ms: expected a number from 0.1 to 600000, got "
                             f"{quote(target)}")
        active = body.get("active", entry not in self.paused)
        if not isinstance(active, bool):
            raise BadRequest(f"active: expected true or false, got {quote(active)}")
        how = body.get("split", by_entry[entry].objective.split)
        if not isinstance(how, str) or how not in SPLITS:
            raise BadRequest(f"split: expected one of {', '.join(SPLITS)}, got {quote(how)}")
        planner = by_entry[entry]
        planner.objective = replace(planner.objective, target_ms=float(target), split=how)
        if active and entry in self.paused:
            planner.sent.clear()
        (self.paused.discard if active else self.paused.add)(entry)
        return next(x for x in self._status()["objectives"] if x["entry"] == entry)
