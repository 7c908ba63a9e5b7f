"""Probe-based balancing in the spirit of Prequal (``prequal``; Wydrowski, Kleinberg, Rumble
and Fisher, "Load is not what you should balance: Introducing Prequal", NSDI 2024):
instances chosen by their requests in flight (RIF) and recent latency, as the services
themselves report them, not by CPU. What was taken from the paper and what differs:
docs/controller.md, "Policies".

- Prequal: the hot-cold rule over the instances' fresh probes; round robin without any;
- PrequalOptions: q_rif (the hot quantile), rif_history (the probes its distribution is
  estimated from), max_age_s, latency_memory_s;
- quantile: the q quantile of sorted values.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ryu_apps.policies import register
from ryu_apps.policies.base import Options, Policy
from ryu_apps.policies.shared_rules import round_robin


@dataclass(frozen=True)
class PrequalOptions(Options):
    q_rif: float = 0.8
    rif_history: int = 32              # probes received, across the microservice's instances
    max_age_s: float = 2.0
    latency_memory_s: float = 5.0      # a latency seen this recently stands in for none

    def __post_init__(self):
        if not isinstance(self.q_rif, (int, float)) or not 0 <= self.q_rif <= 1:
            raise ValueError(f"q_rif: a quantile from 0 to 1, got {self.q_rif!r}")
        if not isinstance(self.rif_history, int) or isinstance(self.rif_history, bool) or \
                self.rif_history < 1:
            raise ValueError(f"rif_history: a number of probes >= 1, got {self.rif_history!r}")
        for name in ("max_age_s", "latency_memory_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
                raise ValueError(f"{name}: seconds > 0, got {v!r}")


@register("prequal")
class Prequal(Policy):
    """An instance is hot when its requests in flight (its probe's, plus one per flow sent
    to it since that probe) are above the q_rif quantile of the RIF distribution, estimated
    from the last rif_history probes received of the microservice's instances that are
    younger than max_age_s; the cold one
    with the lowest latency takes the flow (ties: fewer in flight, then round-robin order);
    when all are hot (a burst has lifted every instance above what the recent probes
    showed), the one with the fewest in flight. A probe counts while younger than
    max_age_s; without a fresh probe of any instance, round robin."""
    title = "probe-based (Prequal)"
    Options = PrequalOptions
    options: PrequalOptions  # Policy.__init__ sets it: of this class's Options
    uses_probes = True

    def __init__(self, options=None):
        super().__init__(options)
        # instance -> (the probe time its count is since, flows sent since)
        self._sent: dict[str, tuple[float, int]] = {}
        # instance -> (its latest known p50 in s, the probe time it came with)
        self._latency: dict[str, tuple[float, float]] = {}
        # microservice -> (probe time, RIF) of its latest probes, each probe once, in
        # arrival order
        self._rif_seen: dict[str, deque] = {}
        self._probe_seen: dict[str, float] = {}      # instance -> its probe time recorded

    def _observe(self, ms: str, instance: str, probe) -> None:
        if self._probe_seen.get(instance) != probe.time:
            self._probe_seen[instance] = probe.time
            self._rif_seen.setdefault(ms, deque(maxlen=self.options.rif_history)).append(
                (probe.time, probe.in_flight))

    def choose(self, view, ms, candidates, now, flow):
        rif, latency = {}, {}
        for b in candidates:
            probe = view.probes.get(b.name)
            if probe is None or now - probe.time > self.options.max_age_s:
                continue
            self._observe(ms, b.name, probe)
            since, sent = self._sent.get(b.name, (probe.time, 0))
            rif[b.name] = probe.in_flight + (sent if since == probe.time else 0)
            if probe.latency_s is not None:
                self._latency[b.name] = (probe.latency_s, probe.time)
            known = self._latency.get(b.name)
            if known is not None and now - known[1] <= self.options.latency_memory_s:
                latency[b.name] = known[0]
        fresh = [b for b in candidates if b.name in rif]
        if not fresh:
            return round_robin(view, self, ms, candidates, now,
                               "prequal: no fresh probe, round robin")
        # No request of an instance ended lately (it may have been passed over since a slow
        # spell): as fast as the fastest known, so its few requests in flight decide, as a
        # replica of the paper estimates its latency at its current RIF.
        fastest = min(latency.values(), default=0.0)
        for b in fresh:
            latency.setdefault(b.name, fastest)
        # the distribution of late: the probes still fresh (the candidates' own always are)
        threshold = quantile(sorted(rif_ for t, rif_ in self._rif_seen[ms]
                                    if now - t <= self.options.max_age_s),
                             self.options.q_rif)
        cold = [b for b in fresh if rif[b.name] <= threshold]
        pool = view.pools[ms]
        pos = {b.name: i for i, b in enumerate(pool)}
        turn = view.turn(ms)

        def order(b):
            return (pos[b.name] - turn) % len(pool)
        if cold:
            best = min(cold, key=lambda b: (latency[b.name], rif[b.name], order(b)))
            how = f"the lowest latency of {len(cold)} cold"
        else:
            best = min(fresh, key=lambda b: (rif[b.name], latency[b.name], order(b)))
            how = "all hot: the fewest in flight"
        view.advance_turn(ms, pos[best.name] + 1)
        probe_time = view.probes[best.name].time
        since, sent = self._sent.get(best.name, (probe_time, 0))
        self._sent[best.name] = (probe_time, sent + 1 if since == probe_time else 1)
        left_out = len(candidates) - len(fresh)
        reason = f"prequal: {how}" + (f" ({left_out} without a fresh probe)" if left_out
                                       else "")
        return self.decision(best, "hot-cold-lexicographic", reason, now,
                             {b.server: round(rif[b.name], 3) for b in fresh})


def quantile(values: list[float], q: float) -> float:
    """The q quantile of sorted values, linear between order statistics."""
    if len(values) == 1:
        return values[0]
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)
