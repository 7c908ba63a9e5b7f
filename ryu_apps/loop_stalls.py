"""The controller's event-loop stalls, into its metrics: how late a timer fires every
LAG_TIMER_S (how long an event, Ryu's parsing or a REST call held the loop before it) and
each pause of Python's cyclic garbage collector.

- LoopStalls: gc_watch (a gc.callbacks entry), lag_loop (a hub thread).
"""
from __future__ import annotations

import collections
import time

from ryu_apps.framework import hub

LAG_TIMER_S = 0.01             # the event-loop lag timer's period


class LoopStalls:
    """metrics: the controller's ControllerMetrics (loop_lag, gc_pause)."""

    def __init__(self, metrics):
        self.metrics = metrics
        # the collector's pauses, as long as it runs: kept here, observed by the lag loop (a
        # callback that took the metric's lock could meet it held by the code the collection
        # interrupted)
        self.pauses: collections.deque = collections.deque(maxlen=10000)
        self.started = 0.0

    def lag_loop(self) -> None:
        """A timer every LAG_TIMER_S, its lateness observed; the collector's pauses since
        the last tick too."""
        while True:
            started = time.perf_counter()
            hub.sleep(LAG_TIMER_S)
            self.metrics.loop_lag.observe(max(0.0, time.perf_counter() - started - LAG_TIMER_S))
            while self.pauses:
                generation, took = self.pauses.popleft()
                self.metrics.gc_pause.labels(generation).observe(took)

    def gc_watch(self, phase: str, info: dict) -> None:
        """gc.callbacks: a collection's start and stop."""
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.pauses.append((str(info["generation"]), time.perf_counter() - self.started))
