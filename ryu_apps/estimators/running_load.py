"""A server's load now, from its latest sample and the flows it runs (plain Python): what
`malb`'s long-flow choice compares (policies/malb.py), and the running-flow figures of the
controller's status (docs/controller.md, "How a decision is made", step 3).

- RunningLoad: `base` (the figures an estimate starts from, and what the running flows
  explain in them), `flows` (what the flows still running at a time use), and the
  short-flow microservices' parts (short_parts), levels (short_levels) and an instance's
  use beyond its flows' (own_load).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from common.numbers import finite_non_negative

if TYPE_CHECKING:
    from ryu_apps.policy_core import PolicyCore, ServerLoad


class RunningLoad:
    """A server's load now: its base, less what the flows running then explain, plus what
    the flows running now cost; the base is cached per server until its data or the
    profile changes."""

    def __init__(self, view: PolicyCore):
        self.view = view
        # server -> (the inputs' versions, base()): the same for every decision until the
        # server's data or the profile changes (10 estimates over the window would
        # otherwise run on every packet-in)
        self._cache: dict[str, tuple] = {}

    def flows(self, server: str, at: float, skip: frozenset = frozenset(),
              ahead_s: float = 0.0) -> tuple[float, float, float]:
        """(CPU %, network %, expected flows) that the flows still running at `at` use: the
        watched ones at what their server's samples measured them to use
        (estimators/open_flows.py), the others as expected running flows
        (estimators/running_flows.py) at the profiler's per-flow use; leaving out the
        microservices in `skip`; with `ahead_s` (at the latest time: a
        decision's), what they use over the next `ahead_s` seconds, the watched flows
        measured counting as they are expected to end (OpenFlows.shortfall)."""
        v = self.view
        horizon = max(v.profiles.prediction_lag_s, 2 * v.period_s)
        survival = {ms: v.profiles.survival.get(ms, horizon) for ms in
                    set(v.profiles.per_flow) | set(v.profiles.per_flow_abs)}
        cpu = net = flows = 0.0
        counts = v.running.expected(server, at, survival)
        for ms, (unmeasured, measured, m_cpu, m_net) in v.open_flows.costs(server,
                                                                              at).items():
            # watched flows: each at what it was measured to use, if it was
            counts[ms] = counts.get(ms, 0.0) + unmeasured
            if measured and ms not in skip:
                cpu, net, flows = cpu + m_cpu, net + m_net, flows + measured
        if ahead_s > 0:
            for ms, (less_cpu, less_net) in v.open_flows.shortfall(server, at,
                                                                   ahead_s).items():
                if ms not in skip:
                    cpu, net = max(0.0, cpu - less_cpu), max(0.0, net - less_net)
        for ms, n in counts.items():
            if ms in skip:
                continue
            cost = v.flow_cost(ms, server)
            if cost is not None:
                cpu += n * cost[0]
                net += n * cost[1]
                flows += n
        return cpu, net, flows

    def base(self, server: str, load: ServerLoad) -> tuple[tuple, float, float, frozenset]:
        """(the figures the base load is taken from (CPU, memory, network), the CPU % and
        network % that the running flows explain in them, the microservices left out of
        the running flows). CPU from the latest measurement (a rolling mean lags the jobs by
        tens of seconds: experiments/decision_audit.py measures how far); network and memory
        from the prediction, as smooth as it. When the profiler splits the sample by
        microservice, CPU and network both from the latest sample, each short-flow
        microservice's part taken at its level (short_levels) plus what its instance uses
        beyond what our flows on it explain (own_load), and its flows left out of the
        running ones. Without a lag or a prediction, the latest measurement for all three."""
        v = self.view
        key = (load.sample_time, v.profiles.prediction_lag_s, v.profiles.version, v.loads_version)
        cached = self._cache.get(server)
        if cached is not None and cached[0] == key:
            return cached[1]
        value = self._base(server, load)
        self._cache[server] = (key, value)
        return value

    def short_parts(self, load: ServerLoad) -> dict | None:
        """The short-flow microservices' parts of the server's measurement, when the
        profiler sent them complete for every short-flow microservice it names."""
        if not load.parts:
            return None
        v = self.view
        short = {}
        for ms, p in load.parts.items():
            if ms in v.pools and v.profiles.flow_class(ms)[0] == "short":
                if not all(finite_non_negative(p.get(k)) for k in
                           ("cpu", "net", "cpu_mean", "net_mean")):
                    return None
                short[ms] = p
        return short

    def short_levels(self) -> dict[str, tuple[float, float]]:
        """Per short-flow microservice, (CPU %, network %) that its flows will bring a server
        over a long flow's life: its recent mean, averaged over the servers that run it.
        The same on every server: round robin spreads the coming flows evenly (by capacity
        on unequal servers, which evens out their percentages), whichever server happened to
        get the big objects of the last half minute."""
        sums: dict[str, list[float]] = {}
        for load in self.view.loads.values():
            for ms, p in (self.short_parts(load) or {}).items():
                acc = sums.setdefault(ms, [0.0, 0.0, 0])
                acc[0] += p["cpu_mean"]
                acc[1] += p["net_mean"]
                acc[2] += 1
        return {ms: (c / n, t / n) for ms, (c, t, n) in sums.items()}

    def own_load(self, server: str, ms: str, now: float) -> tuple[float, float]:
        """(CPU %, network %) that ms's instance on the server used of late beyond what our
        flows on it explain, above its peers' median (estimators/unexplained_use.py)."""
        v = self.view
        pool = v.pools[ms]
        mine = next((b.name for b in pool if b.server == server), None)
        if mine is None or ms in v.switch_balanced or not v.watches(ms):
            # its flows are not followed to their ends: what they carried is unknown, and
            # all its use would count as unexplained, the short-flow imbalance with it
            return 0.0, 0.0
        server_of = {b.name: b.server for b in pool}
        keep = max(3 * v.period_s, v.server_stale_after_s)
        return v.unexplained_use.excess(mine, list(server_of),
                                        lambda inst: v.flow_cost(ms, server_of[inst]),
                                        now, keep)

    def _base(self, server: str, load: ServerLoad) -> tuple[tuple, float, float, frozenset]:
        v = self.view
        t = load.sample_time
        assert t is not None            # base() is asked of fresh loads only
        lag = v.profiles.prediction_lag_s
        meas = load.measured or (load.cpu, load.mem, load.net)
        short = self.short_parts(load)
        window = v.window_of(load)
        if short is not None and meas[0] is not None and meas[2] is not None:
            # Split by flow class: a long flow's horizon is tens of seconds, over which the
            # short flows in the latest sample (a ui object lasts 0.1-4 s) are gone and the
            # round robin brings the same mean to every server. So the short-flow part counts
            # at its recent mean, the rest at the latest sample less what its long flows
            # explain (network too: the ui's transfers move its latest sample the same way).
            # What the instance used beyond what our flows on it explain (a noisy neighbour
            # in its container) is not the flows' and stays in full.
            skip = frozenset(short)
            cpu_then, net_then, _ = self.flows(server, t - window / 2, skip)
            level = self.short_levels()
            above_cpu = above_net = 0.0
            for ms, p in short.items():
                own_cpu, own_net = self.own_load(server, ms, t)
                above_cpu += p["cpu"] - level[ms][0] - own_cpu
                above_net += p["net"] - level[ms][1] - own_net
            mem = load.mem if load.mem is not None else meas[1]
            return (meas[0] - above_cpu, mem, meas[2] - above_net), cpu_then, net_then, skip
        cpu_then, net_then, _ = self.flows(server, t - window / 2)
        if lag <= 0 or load.net is None or load.mem is None:
            return meas, cpu_then, net_then, frozenset()
        n = max(1, round(lag / v.period_s))
        net = 0.0
        for i in range(n):
            net += self.flows(server, t - lag + (i + 0.5) * lag / n)[1] / n
        return (meas[0], load.mem, load.net), cpu_then, net, frozenset()


