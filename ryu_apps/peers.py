"""The controller shell's HTTP exchanges with its peers, each in a green thread of its own:
the profiler's (flows and ports reported; weights, flow classes and loads back) every
monitoring period, and each agent's GET /probes as the core's poll plan says. The core
decides and checks every answer (ryu_apps/core.py); these read the clock, do the HTTP,
count it and hand what the core returns to the shell's apply (ryu_apps/malb.py).

- PeerExchanges: profiler_loop, profiler_exchange, probe_loop, probe_poll.
"""
from __future__ import annotations

import time

from common.httpjson import HttpError, get_json, post_json
from ryu_apps.framework import hub

# an agent answers GET /probes within its per-instance timeout (agents.probe_timeout_s); this
# much more for its own work and the way here, then the poll counts as failed
PROBE_HTTP_SLACK_S = 0.5
PROBE_BUG_LOG_EVERY_S = 60.0   # an exception in the probe loop: logged this often at most


class PeerExchanges:
    """core: the controller core; metrics: its ControllerMetrics; apply(result): the shell's
    sending of what the core returns; token: the shared token the flow reports carry;
    active(): whether this controller is master (a standby reports nothing and polls no
    agent)."""

    def __init__(self, core, cfg, metrics, apply, token, logger, active=lambda: True):
        self.core, self.cfg, self.metrics = core, cfg, metrics
        self.apply, self.token, self.logger = apply, token, logger
        self.active = active

    def profiler_loop(self):
        """Every period, in step with the profiler's own (core.next_exchange_in)."""
        period = self.cfg.controller.monitoring_period_s
        delay = period
        while True:
            hub.sleep(delay)
            delay = period
            if not self.active():
                continue
            try:
                delay = self.profiler_exchange(time.time(),
                                               timeout=min(2.0, period / 2)) or period
            except Exception:   # the loop must outlive any one bad answer
                self.logger.exception("profiler exchange failed; trying again next period")
            # flow classes or weights may have changed, transitions may be over
            self.apply(self.core.sync_dataplane(time.time()))

    def profiler_exchange(self, now: float, timeout: float) -> float | None:
        """Report flows and ports to the profiler; hand its weights, classes and loads to
        the core (which checks them). Returns when the next exchange is due (None: in a
        period)."""
        base = self.cfg.profiler.url
        try:
            sent = 0
            started = time.perf_counter()
            for body in self.core.profiler_report(now):
                self.metrics.handler.labels("profiler_report").observe(
                    time.perf_counter() - started)
                if body is None:        # the core paused its scan of the flow records
                    hub.sleep(0)
                else:
                    post_json(f"{base}/flows", body, timeout, token=self.token)
                    if sent == 0:       # the pairs arrived: they count from now on
                        self.core.profiler_pairs_sent(now)
                    sent += 1
                started = time.perf_counter()
            self.metrics.profiler.labels("flows", "ok").inc()
            profiles = get_json(f"{base}/profiles", timeout)
            self.metrics.profiler.labels("profiles", "ok").inc()
            servers = get_json(f"{base}/servers", timeout)
            self.metrics.profiler.labels("servers", "ok").inc()
        except HttpError as exc:
            self.metrics.profiler.labels("any", "error").inc()
            self.apply(self.core.profiler_failed(str(exc), now))
            return None
        started = time.perf_counter()
        result = self.core.profiler_answer(profiles, servers, now)
        if self.core.profiler.state["last_error"] is not None:   # not JSON objects
            self.metrics.profiler.labels("any", "error").inc()
        self.apply(result)
        self.metrics.handler.labels("profiler_answer").observe(time.perf_counter() - started)
        return result.next_in_s

    def probe_loop(self, server: str):
        """The agent's GET /probes as the controller core's poll plan says: every probe
        period while the current policy reads probes, and twice per health interval within
        the health timeout while the services' answers judge their health (asked every
        round: a policy set over REST changes the pace)."""
        url = self.core.probes.agents[server]["url"]
        logged, last_health = None, float("-inf")
        while True:
            started = time.monotonic()
            plan = self.core.probe_poll_plan() if self.active() else None
            period = plan.period_s if plan else self.cfg.controller.probe_period_s
            if plan:
                health = plan.health_every_s is not None and \
                    started - last_health >= plan.health_every_s - period / 2
                if health:
                    last_health = started
                timeout = plan.health_timeout_s if health else self.cfg.agents.probe_timeout_s
                query = f"?timeout_s={timeout:g}" if health else ""
                try:
                    self.probe_poll(server, url + query, timeout + PROBE_HTTP_SLACK_S)
                except Exception:   # the loop must outlive any one bad answer
                    # a bug would repeat at every poll: logged once a minute at most
                    if logged is None or started - logged >= PROBE_BUG_LOG_EVERY_S:
                        self.logger.exception("probes of %s failed; polling goes on", server)
                        logged = started
            hub.sleep(max(0.0, period - (time.monotonic() - started)))

    def probe_poll(self, server: str, url: str, timeout: float) -> None:
        started = time.perf_counter()
        try:
            body = get_json(url, timeout)
        except HttpError as exc:
            result = self.core.probe_failed(server, str(exc), time.time())
        else:
            result = self.core.probe_answer(server, body, time.time())
        self.metrics.probe_poll.labels(server).observe(time.perf_counter() - started)
        self.apply(result)
