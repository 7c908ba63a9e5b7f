"""ProfilerExchange: once a period, the flow records (in chunks), the port rates and who
sent what to which instance (the communication graph's edges) go to the profiler's /flows;
its /profiles and /servers come back as weights, predictions and flow classes for the
policy core (ryu_apps/profiler_answers.py). A failed exchange sends the same records again next
period. next_exchange_in: when the next exchange is due, in step with the profiler."""
from __future__ import annotations

from collections.abc import Iterator

from common.numbers import is_finite
from ryu_apps.managers.base import Manager
from ryu_apps.profiler_answers import apply_profiles
from ryu_apps.core_result import CoreResult

REPORT_CHUNK = 200    # flow records per POST: bounded JSON work between event-loop yields
# The profiler's answer is ready this long after its step's time: the next exchange with it
# is due then, so the controller acts on every period within a fraction of a second of the
# samples (not up to a period later, as a loop of its own phase would)
PROFILER_READY_S = 0.3


class ProfilerExchange(Manager):
    def __init__(self, cfg, plan, policy_core, flows, port_rates: dict, started: float):
        self.cfg, self.plan, self.policy_core, self.flows = cfg, plan, policy_core, flows
        self.port_rates = port_rates
        self._pairs_since = started      # the traffic in take_pairs() counts from here
        self._report: tuple[list, tuple[dict, dict]] = ([], ({}, {}))
        self.state = {"url": cfg.profiler.url, "reachable": None, "last_ok": None,
                      "last_error": None}

    def report(self, now: float) -> Iterator[dict | None]:
        """The bodies to POST to the profiler's /flows, in order (flow records in chunks;
        ports and pairs with the first), each built when the shell asks for it, so the JSON
        work stays bounded between its posts (which yield to the event loop); a None
        between them is a pause of the records' scan (FlowTable.report_scan), where the
        shell lets the event loop run. Then pairs_sent() once the first is accepted, and
        answer() or failed()."""
        pairs = self.flows.take_pairs()
        taken: list = []       # the records taken so far: a failed exchange restores them
        self._report = (taken, pairs)
        idle = self.cfg.controller.idle_timeout_s

        def body(chunk: list, first: bool) -> dict:
            out = {"source": "malb-controller", "time": now,
                   "flows": [r.as_record(idle, self.flows.epoch, now) for r in chunk]}
            if first:      # ports and pairs once per period, with the first chunk
                out["ports"] = list(self.port_rates.values())
                out["pairs"] = self._pairs_report(pairs, now)
            return out

        def bodies() -> Iterator[dict | None]:
            chunk, first = [], True
            for rec in self.flows.report_scan(now):
                if rec is None:
                    yield None
                    continue
                taken.append(rec)
                chunk.append(rec)
                if len(chunk) == REPORT_CHUNK:
                    yield body(chunk, first)
                    chunk, first = [], False
            if chunk or first:
                yield body(chunk, first)
        return bodies()

    def pairs_sent(self, now: float) -> None:
        """The first chunk arrived: its pairs count as reported, new ones from now on."""
        self._report = (self._report[0], ({}, {}))
        self._pairs_since = now

    def _pairs_report(self, pairs: tuple[dict, dict], now: float) -> dict:
        """Who sent how much to which instance since the last report: the edges of the
        microservice communication graph. A sender is an instance (a microservice calling
        another through its VIP) or a client host."""
        sent, started = pairs
        rows = []
        for (client_ip, instance) in sorted(set(sent) | set(started)):
            caller = self.plan.instance_ips.get(client_ip)
            rows.append({"src": caller.name if caller else
                         self.plan.client_names.get(client_ip, client_ip),
                         "dst": instance, "bytes": sent.get((client_ip, instance), 0),
                         "flows": started.get((client_ip, instance), 0)})
        return {"interval_s": round(now - self._pairs_since, 3), "edges": rows}

    def failed(self, error: str, now: float) -> CoreResult:
        """The exchange failed: the records and pairs go out again next period; the last
        weights stay (equal weights once they are stale)."""
        out = CoreResult()
        report, pairs = self._report
        self._report = ([], ({}, {}))
        self.flows.report_failed(report)
        self.flows.restore_pairs(pairs)
        if self.state["reachable"] is not False:
            out.warnings.append(f"profiler unreachable ({error}): keeping the last weights; "
                                f"equal weights after "
                                f"{self.cfg.controller.weights_stale_after_s:.0f} s")
        self.state.update(reachable=False, last_error=error)
        return out

    def answer(self, profiles, servers, now: float) -> CoreResult:
        """The profiler's /profiles and /servers. An answer that is not two JSON objects
        counts as a failed exchange; one with weights the policy core would refuse is
        rejected whole (nothing changes) with a warning."""
        if not isinstance(profiles, dict) or not isinstance(servers, dict):
            return self.failed("profiler answered something other than JSON objects", now)
        out = CoreResult()
        self._report = ([], ({}, {}))
        if self.state["reachable"] is False:
            out.infos.append("profiler reachable again")
        self.state.update(reachable=True, last_ok=now, last_error=None)
        out.warnings.extend(apply_profiles(self.policy_core, profiles, servers, now))
        out.next_in_s = next_exchange_in(servers.get("time"), now,
                                         self.cfg.controller.monitoring_period_s)
        return out


def next_exchange_in(step_time, now: float, period: float) -> float | None:
    """Seconds until the next exchange with the profiler: PROFILER_READY_S after one of
    its steps (every `period` from `step_time`, the time its answer carries), and at least
    a quarter of a period from now. None when the answer carries no usable time (the loop
    then waits a period)."""
    if not is_finite(step_time):
        return None
    delay = (step_time + PROFILER_READY_S - now) % period
    return delay + period if delay < period / 4 else delay
