"""AgentProbes: the host agents' GET /probes (each instance's requests in flight and recent
latency, read from the services' own metrics), polled while the policy reads them (a
probe-based policy), else once per health interval for the services' health: each reading
goes to the policy core at the time the agent took it, and whether the service answered to
the health checks; an agent that fails or answers in part is a warning at most once a
minute."""
from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from common.numbers import finite_non_negative
from ryu_apps.managers.base import Manager
from ryu_apps.core_result import CoreResult

# an agent whose GET /probes fails, or answers in part, fails at every poll (4 a second):
# its warnings are logged once per this many seconds, with how many were left out
PROBE_LOG_EVERY_S = 60.0
# what an agent's failed reading says of the service (its error_kind): it answered, though
# not as /latency should (True); its process is stopped or gone, or it did not answer (False);
# other kinds (the agent's own trouble, a reading still under way) say nothing
SERVICE_ALIVE = {"answer": True, "stopped": False, "not-running": False, "timeout": False,
                 "refused": False}
# failures that need no second reading: the process is stopped (SIGSTOP, docker pause) or
# its container is not running
SERVICE_CERTAIN = {"stopped", "not-running"}


class PollPlan(NamedTuple):
    """How the shell polls an agent's /probes: every period_s; at least every
    health_every_s (None: never) a poll asks for health_timeout_s, and only such a poll's
    timeouts count against a service's health (a probe-based policy's quick polls give up
    sooner than the health checks allow)."""
    period_s: float
    health_every_s: float | None
    health_timeout_s: float | None


class AgentProbes(Manager):
    def __init__(self, cfg, plan, policy_core,
                 service_reading: Callable[..., None] = lambda *a, **k: None):
        self.cfg, self.plan, self.policy_core = cfg, plan, policy_core
        self.service_reading = service_reading     # HealthChecks.service_reading
        # per server: last answer, last error, log rate limit
        self.agents: dict[str, dict[str, Any]] = {
            s.name: {"url": f"{s.agent_url}/probes", "last_ok": None, "last_error": None,
                     "logged": None, "unlogged": 0}
            for s in cfg.servers}

    def probing(self) -> bool:
        """Whether the agents' /probes should be polled: the current policy reads them
        (the shell asks every round, so a policy set over REST starts or stops it)."""
        return bool(self.policy_core.strategy.uses_probes)

    def poll_plan(self) -> PollPlan | None:
        """How to poll /probes (None: not at all): at the probe period while the policy
        reads probes; while the services' answers judge their health, a poll within the
        health timeout twice per health interval (every round judges a reading, whatever
        the two clocks' phase), alone or among the policy's."""
        c = self.cfg.controller
        health = c.health.service and c.health.method != "none"
        every = c.health.interval_s / 2 if health else None
        timeout = c.health.timeout_s if health else None
        if self.probing():
            return PollPlan(c.probe_period_s if every is None else
                            min(c.probe_period_s, every), every, timeout)
        return PollPlan(every, every, timeout) if every is not None else None   # health

    def probe_answer(self, server: str, body, now: float) -> CoreResult:
        """An agent's GET /probes answer, received at `now`: each instance's reading goes
        to the policy core at now - its age_s (the agent's clock need not agree with ours).
        Instances the agent could not read, or that are in no pool, keep their last probe;
        malformed parts are warnings (at most one line a minute per agent), the rest is
        applied."""
        out = CoreResult()
        agent = self.agents.get(server)
        if agent is None:
            out.warnings.append(f"/probes answer from an unknown server {server!r:.40}")
            return out
        instances = body.get("instances") if isinstance(body, dict) else None
        if not isinstance(instances, dict):
            return self.probe_failed(server, "its /probes answer has no 'instances' object",
                                     now, kind="malformed")
        if agent["last_error"] is not None:
            out.infos.append(f"agent {server}: /probes answers again")
        health_timeout = self.cfg.controller.health.timeout_s

        def gave_up_early(entry) -> bool:
            """A reading that gave up sooner than the health timeout allows says nothing
            of the service's health (each entry's own timeout; an older agent's: the
            answer's)."""
            waited = entry.get("timeout_s", body.get("timeout_s"))
            return not (finite_non_negative(waited) and waited >= health_timeout - 1e-9)
        agent.update(last_ok=now, last_error=None)
        out.metrics.append(("inc", "malb_probe_answers_total", (server,), 1))
        applied, failed, bad = 0, [], []
        for name, entry in instances.items():
            where = f"instances.{name!s:.40}"
            inst = self.plan.instances.get(name)
            if inst is None or inst.server != server:
                bad.append(f"{where}: not an instance of {server}")
                continue
            if not isinstance(entry, dict):
                bad.append(f"{where}: expected an object")
                continue
            if entry.get("error") is not None:      # the agent could not read it
                failed.append(f"{name}: {str(entry['error'])[:120]}")
                kind = entry.get("error_kind")
                kind = kind if isinstance(kind, str) else ""       # malformed: says nothing
                alive = None if kind == "timeout" and gave_up_early(entry) else \
                    SERVICE_ALIVE.get(kind)
                self.service_reading(out, name, alive,
                                     f"{str(entry['error'])[:120]} (host agent)", now,
                                     certain=kind in SERVICE_CERTAIN)
                continue
            self.service_reading(out, name, True, "answered", now)
            if name not in self.policy_core.healthy:       # in no pool (yet): nothing reads it
                continue
            values: dict[str, Any] = {}
            for key, optional in (("in_flight", False), ("p50_ms", True), ("p99_ms", True),
                                  ("age_s", False)):
                v = entry.get(key)
                if not (v is None and optional) and not finite_non_negative(v):
                    bad.append(f"{where}.{key}: expected a finite number >= 0"
                               f"{' or null' if optional else ''}, got {v!r:.40}")
                    break
                values[key] = v
            else:
                try:
                    self.policy_core.update_probe(
                        name, values["in_flight"],
                        None if values["p50_ms"] is None else values["p50_ms"] / 1000.0,
                        None if values["p99_ms"] is None else values["p99_ms"] / 1000.0,
                        now - values["age_s"])
                except (KeyError, ValueError) as exc:
                    bad.append(f"{where}: {exc}")
                    continue
                applied += 1
        if applied:
            out.metrics.append(("inc", "malb_probe_readings_total", (server,), applied))
        if failed:
            out.metrics.append(("inc", "malb_probe_failures_total", (server, "instance"),
                                len(failed)))
            self._log(out, server, f"agent {server}: could not read "
                                         f"{'; '.join(failed)}", now)
        if bad:
            out.metrics.append(("inc", "malb_probe_failures_total", (server, "malformed"),
                                len(bad)))
            more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
            self._log(out, server, f"agent {server}: /probes answer: "
                                         f"{'; '.join(bad[:3])}{more}; the rest applied", now)
        return out

    def probe_failed(self, server: str, error: str, now: float, kind: str = "poll") -> CoreResult:
        """An agent's GET /probes failed (kind poll) or answered no instances object
        (malformed): its instances keep their last probes, which age."""
        out = CoreResult()
        agent = self.agents.get(server)
        if agent is None:
            return out
        agent["last_error"] = error
        out.metrics.append(("inc", "malb_probe_failures_total", (server, kind), 1))
        self._log(out, server, f"agent {server}: /probes failed: {error}", now)
        return out

    def _log(self, out: CoreResult, server: str, text: str, now: float) -> None:
        """A warning about an agent's probes, at most one per PROBE_LOG_EVERY_S per agent
        (they come at every poll while the trouble lasts)."""
        agent = self.agents[server]
        if agent["logged"] is not None and now - agent["logged"] < PROBE_LOG_EVERY_S:
            agent["unlogged"] += 1
            return
        if agent["unlogged"]:
            text += (f" ({agent['unlogged']} more such problems with its probes in the last "
                     f"{now - agent['logged']:.0f} s were not logged)")
        out.warnings.append(text)
        agent.update(logged=now, unlogged=0)

    def status(self, now: float) -> dict:
        plan = self.poll_plan()
        return {"polling": self.probing(),
                "polling_for_health": bool(plan and plan.health_every_s),
                "period_s": plan.period_s if plan else self.cfg.controller.probe_period_s,
                "agents": {name: {"url": a["url"],
                                  "last_answer_age_s": None if a["last_ok"] is None else
                                  round(now - a["last_ok"], 3),
                                  "last_error": a["last_error"]}
                           for name, a in self.agents.items()}}
