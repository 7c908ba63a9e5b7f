"""The load-balancing decision, as plain Python (no Ryu, no I/O).

Given, per microservice, its pool of instances, and per server its latest utilization, pick
the instance that serves a new flow:

- ``srr`` (baseline): simple round robin over the microservice's healthy instances;
- ``ln`` (baseline): least network load, the server with the lowest network utilization;
- ``malb-paper``: the paper's rule (section III.C): short-flow microservices get round robin;
  long-flow ones the server with the least weighted load ``alpha*cpu + beta*mem +
  gamma*net`` of the profiler's predictions, with the microservice's weights from the
  profiler (and the pending-flow correction below);
- ``malb``: weights from what one flow uses (the profiler's per-flow use: `flow_weights`),
  on a load estimate without the predictions' lag (issue 12, docs/experiments.md): each
  server's base load (CPU: its latest measurement; network: the
  prediction) less what the long flows it was running then explain, plus what the long
  flows it runs now cost. When the profiler splits the measurement by microservice, CPU and
  network both start from the latest sample, with each short-flow microservice's part
  replaced by its level (its recent mean, averaged over the servers that run it): what
  round robin will bring any server over a long flow's life, not the objects that happened
  to be in flight at the sample.
  Running flows are estimated from the controller's own assignments and each
  microservice's flow durations (ryu_apps/running.py), a flow's cost from the profiler's
  per-flow use scaled to the server's capacity; a flow whose end the controller watches
  costs what its server's samples measured it to use, once one has (a back-end port takes
  jobs of two sizes: running.OpenFlows.attribute), for the part of the next LOOKAHEAD_S
  that it is expected still to run, from the durations of ended flows measured at a
  similar cost (running.OpenFlows.shortfall). On unequal servers a long flow goes where
  its own cost (per-flow use over the server's capacity) raises the variance of the
  servers' loads least, not simply to the least loaded one. A short flow whose end the
  controller watches goes to the instance with the least flow time still to carry (its
  open short flows at their expected remaining lives, from the profiled durations; over
  the server's capacity share on unequal servers); unwatched ones get round robin weighted
  by the servers' capacities (plain round robin on equal servers). Before the profiler knows
  durations and per-flow use, ``malb`` decides long flows as ``malb-paper``;
- ``maglev``: the flow's 5-tuple looked up in the Maglev table (ryu_apps/maglev.py) of the
  microservice's in-service instances, equal weights: a flow always lands on the same instance
  while the pool stands, and an instance going or coming moves about 1/N of the flows. The
  table is rebuilt only when the in-service set changes. Without a flow key, round robin.

Least-load choices correct each server's load for the flows assigned to it that the load does
not show yet, so a burst of new long flows does not all land on the server that looked
idlest a moment ago. A flow assigned after the data was sampled counts fully; one assigned
before counts less and less as the data ages past it, over the prediction's lag (a rolling
mean of w samples shows a new flow fully only w periods later; switch counters at once).
A flow counts for what one flow of its microservice costs (the profiler's per-flow use,
weighted by the deciding microservice's weights), or ``pending_flow_cost`` load points while
that is unknown. Ties break on fewer pending flows, then on instance order: the same inputs
always give the same choice. The pending flows are kept as running sums in time buckets
(ryu_apps/pending.py): a decision costs the same at 10 or 10,000 pending flows, and memory
is bounded whatever the profiler does, because flows older than any fresh data can still
need (``server_stale_after_s`` plus the lag, kept at least 60 s, at most 600 s) are dropped
as new ones come.

Degraded modes: a server whose sample is older than ``server_stale_after_s`` (or that has
none) is left out of least-load choices but still served by round robin; when no candidate
has fresh data, least-load falls back to round robin. Profiler weights older than
``weights_stale_after_s`` give way to equal weights; manual weights override both.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Hashable

from common.config import POLICIES  # noqa: F401 -- re-exported: the policy names live there
from profiler.weights import EQUAL_WEIGHTS
from ryu_apps import maglev
from ryu_apps.pending import DEFAULT_BUCKET_S, PendingFlows
from ryu_apps.running import InstanceFlows, OpenFlows, RunningFlows, Survival

# Pending flows are kept for the stale limit plus the prediction lag, but at least
# PENDING_KEEP_LAG_S (a lag reported later, e.g. the profiler's first, still finds the flows
# it fades) and at most PENDING_MAX_LAG_S, however long a lag the profiler reports: memory
# stays bounded (a longer lag still fades the flows that are kept).
PENDING_KEEP_LAG_S = 60.0
PENDING_MAX_LAG_S = 600.0
# malb's long-flow choice counts each measured running flow for the part of the next
# LOOKAHEAD_S it is expected still to run (running.OpenFlows.shortfall). In the fluid model
# of Scenario 2 (lb_model --lookahead, data/model-lookahead) 3 to 15 s did about as well
# (CPU STDEV 30-31.5 % below round robin's, 26 % without), and 5 s best for the omniscient
# reference: long enough to see the jobs about to end, short enough that the load a new
# flow will meet still counts.
LOOKAHEAD_S = 5.0


@dataclass(frozen=True)
class Backend:
    """An instance of a microservice: where new flows may be sent."""
    name: str
    microservice: str
    server: str
    ip: str
    mac: str
    port: int          # L4 port the instance listens on
    order: int         # position in the configuration (tie-break)


@dataclass
class ServerLoad:
    cpu: float | None = None       # percent of the server's CPU share
    mem: float | None = None       # percent of its memory limit
    net: float | None = None       # percent of its network capacity
    sample_time: float | None = None
    source: str = ""
    measured: tuple | None = None  # the latest measurement (cpu, mem, net) behind the estimate
    # per microservice: its share of the measurement, {cpu, net, cpu_mean, net_mean} (% of
    # the server; the profiler's by_microservice)
    parts: dict | None = None
    window: float | None = None    # the seconds the measurement covers, up to sample_time


@dataclass(frozen=True)
class Decision:
    microservice: str
    instance: str
    server: str
    policy: str          # malb | malb-paper | srr | ln | maglev
    algorithm: str       # round-robin | weighted-round-robin | weighted-least-load |
    #                      least-network-load | maglev
    reason: str
    scores: dict         # server -> corrected load used for the choice (least-load only)
    weights: tuple[float, float, float] | None
    time: float


class NoBackend(LookupError):
    """No healthy instance can take the flow."""


@dataclass
class _Weights:
    values: tuple[float, float, float]
    updated: float


class PolicyCore:
    def __init__(self, pools: dict[str, list[Backend]], flow_classes: dict[str, str],
                 policy: str = "malb", server_stale_after_s: float = 9.0,
                 weights_stale_after_s: float = 30.0, pending_flow_cost: float = 5.0,
                 period_s: float = 3.0, clock=time.time, servers: list[str] | None = None,
                 maglev_table_size: int = maglev.DEFAULT_TABLE_SIZE,
                 pending_bucket_s: float = DEFAULT_BUCKET_S,
                 capacities: dict[str, tuple[float, float, float]] | None = None):
        if policy not in POLICIES:
            raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {policy!r}")
        if not maglev.is_prime(maglev_table_size):
            raise ValueError(f"maglev_table_size: must be a prime number, "
                             f"got {maglev_table_size!r}")
        self.pools = {ms: sorted(b, key=lambda x: x.order) for ms, b in pools.items()}
        # every server that may hold an instance (a placement can move one anywhere)
        self.servers = sorted(set(servers or ()) | {b.server for bs in pools.values()
                                                    for b in bs})
        self.draining: set[str] = set()    # instances that take no new flows
        self.configured_class = dict(flow_classes)      # short | long | auto
        self.profiled_class: dict[str, str] = {}
        self.policy = policy
        self.server_stale_after_s = server_stale_after_s
        self.weights_stale_after_s = weights_stale_after_s
        self.pending_flow_cost = pending_flow_cost
        self.period_s = period_s
        self.clock = clock
        self.loads: dict[str, ServerLoad] = {s: ServerLoad() for s in self.servers}
        self.switch_net: dict[str, ServerLoad] = {s: ServerLoad() for s in self.servers}
        self.healthy: dict[str, bool] = {b.name: True for bs in pools.values() for b in bs}
        self.profiler_weights: dict[str, _Weights] = {}
        self.manual_weights: dict[str, tuple[float, float, float]] = {}
        self._rr_next: dict[str, int] = {ms: 0 for ms in self.pools}
        # recent assignments per server and microservice: the pending flows
        self._pending = PendingFlows(pending_bucket_s)
        self._horizon: dict[str, float] = {}   # server -> flows at or before it are forgotten
        self.per_flow: dict[str, tuple[float, float, float]] = {}  # ms -> use of one flow
        self.prediction_lag_s = 0.0
        self.assigned_total: dict[tuple[str, str], int] = {}   # (server, microservice) -> n
        self.maglev_table_size = maglev_table_size
        # microservice -> (the in-service instances it was built from, the table)
        self._maglev: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        # server -> (CPU cores, memory MB, network Mbit/s): the malb policy's per-flow costs
        # and weighted round robin; unknown: every server alike
        self.capacities = {s: tuple(float(x) for x in c)
                           for s, c in (capacities or {}).items()}
        self.running = RunningFlows()
        # long flows whose end the controller sees
        self.open_flows = OpenFlows(cores={s: c[0] for s, c in self.capacities.items()})
        self.open_short = InstanceFlows()        # malb: short ones, per instance
        self.survival: dict[str, Survival] = {}     # ms -> its flows' durations
        self.per_flow_abs: dict[str, tuple[float, float]] = {}   # ms -> (cores, bytes/s)
        self._wrr_credit: dict[str, dict[str, float]] = {}       # ms -> instance -> credit
        self.lookahead_s = LOOKAHEAD_S     # malb's long flows: the horizon of a decision
        self._profile_version = 0          # bumped by update_profiles: costs may change
        self._base_cache: dict[str, tuple] = {}
        self._loads_version = 0

    # ------------------------------------------------------------------ inputs
    def set_policy(self, policy: str) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.policy = policy

    def update_server_load(self, server: str, cpu: float | None, mem: float | None,
                           net: float | None, sample_time: float, source: str = "profiler",
                           measured: tuple | None = None, parts: dict | None = None,
                           window: float | None = None) -> None:
        """Utilization of a server (predicted by the profiler, or measured) at sample_time;
        `measured`: the latest measurement (cpu, mem, net) itself, when the figures are a
        prediction; `parts`: each microservice's share of it and that share's recent mean
        ({ms: {cpu, net, cpu_mean, net_mean}}); `window`: the seconds the measurement
        covers, up to sample_time (None: the monitoring period)."""
        if server not in self.loads:
            raise KeyError(f"unknown server {server!r}")
        if (self.loads[server].sample_time or 0.0) > sample_time:
            return  # an older sample arriving late
        load = ServerLoad(cpu, mem, net, sample_time, source, measured, parts,
                          window if _finite_non_negative(window) and window > 0 else None)
        self.loads[server] = load
        self._loads_version += 1      # the short-flow levels average over every server
        if parts:
            self._attribute(server, parts, sample_time, self._window(load))
        self._prune_assignments(server)

    def update_network(self, server: str, net: float, sample_time: float) -> None:
        """Network utilization measured by the switches (port statistics)."""
        if server not in self.switch_net:
            raise KeyError(f"unknown server {server!r}")
        if (self.switch_net[server].sample_time or 0.0) > sample_time:
            return
        self.switch_net[server] = ServerLoad(None, None, net, sample_time, "switch")
        self._prune_assignments(server)

    def _window(self, load: ServerLoad) -> float:
        """The seconds a server's measurement covers (the monitoring period when unsaid)."""
        return load.window or self.period_s

    def _attribute(self, server: str, parts: dict, sample_time: float,
                   window: float) -> None:
        """The long-flow microservices' parts of a sample go to the watched flows that ran
        in it (running.OpenFlows.attribute): each keeps what it was measured to use."""
        long_parts = {}
        for ms, p in parts.items():
            if ms in self.pools and self.flow_class(ms)[0] == "long" and \
                    isinstance(p, dict) and _finite_non_negative(p.get("cpu")) and \
                    _finite_non_negative(p.get("net")):
                long_parts[ms] = (float(p["cpu"]), float(p["net"]))
        if long_parts:
            self.open_flows.attribute(
                server, long_parts, sample_time - window, sample_time,
                {ms: c for ms in long_parts if (c := self._flow_cost(ms, server)) is not None})

    def _prune_assignments(self, server: str) -> None:
        """Forget assignments that every view of the server already shows in full."""
        times = [x.sample_time for x in (self.loads[server], self.switch_net[server])
                 if x.sample_time is not None]
        if times:
            self._forget(server, min(times) - self.prediction_lag_s)

    def _forget(self, server: str, horizon: float) -> None:
        if horizon > self._horizon.get(server, float("-inf")):
            self._horizon[server] = horizon
            self._pending.prune(server, horizon)

    def note_assignment(self, server: str, microservice: str, t: float,
                        watched: Hashable | None = None, instance: str | None = None
                        ) -> None:
        """A flow of the microservice went to the server at t: pending until its data shows
        it. Forgets what no fresh data can still miss (older than the stale limit and the
        lag before t), so memory does not depend on the profiler's samples arriving.
        `watched`: the flow's key when the controller will see it end (flow_ended): it
        counts as running until then, not by the profiled durations; a short flow's (with
        its `instance`) counts for malb's next short-flow choices, and by the profiled
        durations for the long-flow ones, as an unwatched flow."""
        self._pending.add(server, microservice, t)
        short = self.flow_class(microservice)[0] == "short"
        if watched is None or short:
            self.running.add(server, microservice, t)
        if watched is not None and short and instance is not None:
            self.open_short.add(watched, instance, t)
        elif watched is not None and not short:
            self.open_flows.add(watched, server, microservice, t)
        keep = min(max(self.prediction_lag_s, PENDING_KEEP_LAG_S), PENDING_MAX_LAG_S)
        self._forget(server, t - self.server_stale_after_s - keep)

    def update_profiles(self, weights: dict[str, tuple[float, float, float]],
                        flow_classes: dict[str, str | None], updated: float,
                        per_flow: dict[str, tuple[float, float, float]] | None = None,
                        prediction_lag_s: float | None = None,
                        per_flow_abs: dict[str, tuple[float, float]] | None = None,
                        durations: dict[str, list[float]] | None = None) -> None:
        """Weights and flow classes per microservice; optionally what one flow of each uses
        (cpu, mem, net in % of a server; and absolute: CPU cores, network bytes/s), how long
        its flows last (quantiles of their durations) and how long the predictions take to
        show a change. Weights are checked first: refused ones change nothing."""
        checked = {ms: normalise_weights(w, ms) for ms, w in weights.items() if ms in self.pools}
        for ms, use in (per_flow or {}).items():
            if ms in self.pools and all(_finite_non_negative(v) for v in use):
                self.per_flow[ms] = tuple(float(v) for v in use)
        for ms, use in (per_flow_abs or {}).items():
            if ms in self.pools and len(use) == 2 and all(_finite_non_negative(v) for v in use):
                self.per_flow_abs[ms] = (float(use[0]), float(use[1]))
        self._profile_version += 1
        for ms, qs in (durations or {}).items():
            if ms in self.pools:
                try:
                    self.survival[ms] = Survival(qs)
                except (TypeError, ValueError):
                    pass
        if prediction_lag_s is not None and prediction_lag_s >= 0:
            self.prediction_lag_s = float(prediction_lag_s)
        for ms, w in checked.items():
            self.profiler_weights[ms] = _Weights(w, updated)
        for ms, cls in flow_classes.items():
            if ms in self.pools and cls in ("short", "long"):
                self.profiled_class[ms] = cls

    def set_manual_weights(self, microservice: str,
                           weights: tuple[float, float, float] | None) -> None:
        if microservice not in self.pools:
            raise KeyError(f"unknown microservice {microservice!r}")
        if weights is None:
            self.manual_weights.pop(microservice, None)
        else:
            self.manual_weights[microservice] = normalise_weights(weights, microservice)

    def set_health(self, instance: str, healthy: bool) -> None:
        if instance not in self.healthy:
            raise KeyError(f"unknown instance {instance!r}")
        self.healthy[instance] = healthy

    # ------------------------------------------------------------------ pools
    def add_backend(self, backend: Backend, healthy: bool = False) -> None:
        """An instance joins its microservice's pool (a placement started it); unhealthy
        until its health probe answers, unless told otherwise."""
        pool = self.pools.setdefault(backend.microservice, [])
        if any(b.name == backend.name for b in pool):
            raise ValueError(f"{backend.name}: already in the pool of {backend.microservice}")
        if backend.server not in self.loads:
            raise KeyError(f"unknown server {backend.server!r}")
        pool.append(backend)
        pool.sort(key=lambda x: x.order)
        self.healthy[backend.name] = healthy
        self.draining.discard(backend.name)
        self._rr_next.setdefault(backend.microservice, 0)

    def set_draining(self, instance: str, draining: bool = True) -> None:
        """A draining instance gets no new flows; those it has go on."""
        if instance not in self.healthy:
            raise KeyError(f"unknown instance {instance!r}")
        (self.draining.add if draining else self.draining.discard)(instance)

    def remove_backend(self, instance: str) -> Backend:
        """The instance leaves its pool (after draining)."""
        for ms, pool in self.pools.items():
            for k, b in enumerate(pool):
                if b.name == instance:
                    del pool[k]
                    del self.healthy[instance]
                    self.draining.discard(instance)
                    if pool:
                        self._rr_next[ms] %= len(pool)
                    return b
        raise KeyError(f"unknown instance {instance!r}")

    def in_service(self, b: Backend) -> bool:
        return self.healthy[b.name] and b.name not in self.draining

    # ------------------------------------------------------------------ views
    def flow_class(self, microservice: str) -> tuple[str, str]:
        """(short|long, where it comes from). Unknown 'auto' classes count as long: the
        least-load choice is the safe one until the profiler has seen flows."""
        configured = self.configured_class.get(microservice, "auto")
        if configured in ("short", "long"):
            return configured, "config"
        if microservice in self.profiled_class:
            return self.profiled_class[microservice], "profiler"
        return "long", "default (not profiled yet)"

    def weights(self, microservice: str, now: float | None = None
                ) -> tuple[tuple[float, float, float], str]:
        now = self.clock() if now is None else now
        if microservice in self.manual_weights:
            return self.manual_weights[microservice], "manual"
        w = self.profiler_weights.get(microservice)
        if w is None:
            return EQUAL_WEIGHTS, "equal (no profile yet)"
        age = now - w.updated
        if age > self.weights_stale_after_s:
            return EQUAL_WEIGHTS, f"equal (profile {age:.0f} s old)"
        if age <= 2 * self.period_s:
            return w.values, "profiler"
        return w.values, f"profiler, stale (last update {age:.0f} s ago)"

    def flow_weights(self, microservice: str, now: float | None = None
                     ) -> tuple[tuple[float, float, float], str]:
        """The weights of `malb`'s long-flow choice: each resource's share of what one flow
        of the microservice uses (the profiler's per-flow use), not of what its instances
        use. The paper's shares count an instance's idle footprint: its memory, which no
        flow moves, took 7-99 % of the back-end's weight in the testbed's decisions (issue
        12, docs/experiments.md), so a job's server was chosen on memory figures that differ
        by tenths of a percent. Manual weights still win; without a per-flow use, the
        profiler's weights."""
        if microservice in self.manual_weights:
            return self.manual_weights[microservice], "manual"
        use = self.per_flow.get(microservice)
        if use is not None and sum(use) > 0:
            return normalise_weights(use, microservice), "per-flow use"
        return self.weights(microservice, now)

    def _fresh(self, sample: ServerLoad, now: float) -> bool:
        return sample.sample_time is not None and now - sample.sample_time <= \
            self.server_stale_after_s

    def is_fresh(self, server: str, now: float) -> bool:
        return self._fresh(self.loads[server], now) or self._fresh(self.switch_net[server], now)

    def pending(self, server: str, since: float | None = None) -> int:
        """Flows assigned to the server after `since` (default: all still remembered)."""
        return self._pending.count_after(server, self._horizon.get(server)
                                         if since is None else since)

    def pending_load(self, server: str, data_time: float, lag_s: float,
                     weights: tuple[float, float, float]) -> float:
        """The load the server's data does not show yet: each remembered assignment at its
        microservice's per-flow cost, fully if made after the data was sampled, fading
        linearly over lag_s before that (pending.py: exact but for the flows in the 0.1 s
        buckets holding data_time and data_time - lag_s)."""
        return self._cost(self._pending.shares(server, data_time, lag_s), weights)

    def _cost(self, shares: dict[str, float], weights: tuple[float, float, float]) -> float:
        total = 0.0
        for ms, share in shares.items():
            use = self.per_flow.get(ms)
            cost = self.pending_flow_cost if use is None else \
                sum(w * u for w, u in zip(weights, use))
            total += share * cost
        return total

    # ------------------------------------------------------------------ decision
    def choose(self, microservice: str, now: float | None = None,
               flow_key: Hashable | None = None, watched: Hashable | None = None
               ) -> Decision:
        """The instance for a new flow. `flow_key` (e.g. protocol, client address and port,
        VIP and port) is what the maglev policy hashes; the others ignore it. `watched`:
        the flow's key if the controller will tell its end (flow_ended)."""
        now = self.clock() if now is None else now
        pool = self.pools.get(microservice)
        if pool is None:
            raise KeyError(f"unknown microservice {microservice!r}")
        candidates = [b for b in pool if self.in_service(b)]
        if not candidates:
            raise NoBackend(f"no healthy instance of {microservice}")
        if self.policy == "srr":
            decision = self._round_robin(microservice, candidates, now, "srr baseline")
        elif self.policy == "maglev":
            if flow_key is None:
                decision = self._round_robin(microservice, candidates, now,
                                             "maglev: no flow key given, round robin")
            else:
                decision = self._maglev_pick(microservice, candidates, now, flow_key)
        elif self.policy == "ln":
            decision = self._least_load(microservice, candidates, now, "least-network-load",
                                        (0.0, 0.0, 1.0))
        else:
            cls, _src = self.flow_class(microservice)
            weights = self.weights(microservice, now)[0]
            if cls == "short":
                if self.policy == "malb" and watched is not None:
                    decision = self._least_remaining(microservice, candidates, now, weights)
                elif self.policy == "malb" and self._unequal_servers(candidates):
                    decision = self._weighted_round_robin(microservice, candidates, now,
                                                          weights)
                else:
                    decision = self._round_robin(microservice, candidates, now,
                                                 "short flows: round robin")
            elif self.policy == "malb" and self._running_model():
                decision = self._least_running_load(
                    microservice, candidates, now, self.flow_weights(microservice, now)[0])
            else:
                decision = self._least_load(microservice, candidates, now,
                                            "weighted-least-load", weights)
        return self._record(decision, watched)

    def flow_ended(self, watched: Hashable, t: float) -> bool:
        """A watched flow ended (its FIN was seen); False if it was not open."""
        return self.open_flows.end(watched, t) or self.open_short.end(watched)

    def flow_idle(self, watched: Hashable) -> bool:
        """A watched flow's rules idled out: a short flow is over (it sent nothing for the
        idle timeout; a SYN flood's half-open flows end so); a long one may be a job
        computing in silence, which runs until its FIN. False if no short flow was open."""
        return self.open_short.end(watched)

    def watches(self, microservice: str) -> bool:
        """Whether the controller should watch a new TCP flow of the microservice to its
        end (its FIN) and tell flow_ended: long flows always (their load is counted until
        they end); under malb short ones too, which its short-flow choice counts."""
        return self.policy == "malb" or self.flow_class(microservice)[0] == "long"

    def _record(self, d: Decision, watched: Hashable | None = None) -> Decision:
        self.note_assignment(d.server, d.microservice, d.time, watched, d.instance)
        key = (d.server, d.microservice)
        self.assigned_total[key] = self.assigned_total.get(key, 0) + 1
        return d

    def _round_robin(self, ms: str, candidates: list[Backend], now: float,
                     reason: str) -> Decision:
        pool = self.pools[ms]
        start = self._rr_next[ms]
        for step in range(len(pool)):
            b = pool[(start + step) % len(pool)]
            if self.in_service(b):
                self._rr_next[ms] = (start + step + 1) % len(pool)
                return Decision(ms, b.name, b.server, self.policy, "round-robin", reason, {},
                                None, now)
        raise NoBackend(f"no healthy instance of {ms}")  # unreachable: candidates non-empty

    def maglev_table(self, microservice: str,
                     candidates: list[Backend] | None = None) -> tuple[str, ...]:
        """The Maglev table of the microservice's in-service instances, rebuilt only when that
        set changes (health, draining, pool): a rebuild takes tens of ms at M=65537."""
        if candidates is None:
            candidates = [b for b in self.pools[microservice] if self.in_service(b)]
        names = tuple(b.name for b in candidates)
        cached = self._maglev.get(microservice)
        if cached is None or cached[0] != names:
            cached = (names, maglev.build_table(names, None, self.maglev_table_size))
            self._maglev[microservice] = cached
        return cached[1]

    def _maglev_pick(self, ms: str, candidates: list[Backend], now: float,
                     flow_key: Hashable) -> Decision:
        table = self.maglev_table(ms, candidates)
        slot = maglev.slot_of(table, flow_key)
        b = next(c for c in candidates if c.name == table[slot])
        return Decision(ms, b.name, b.server, self.policy, "maglev",
                        f"maglev: slot {slot} of {len(table)}, {len(candidates)} in service",
                        {}, None, now)

    def _least_load(self, ms: str, candidates: list[Backend], now: float, algorithm: str,
                    weights: tuple[float, float, float]) -> Decision:
        measured = {b.server: self._measure(b.server, weights, algorithm, now)
                    for b in candidates}
        fresh = [b for b in candidates if measured[b.server] is not None]
        if not fresh:
            return self._round_robin(ms, candidates, now,
                                     f"{algorithm}: no fresh load data, round robin")
        pending, scores = {}, {}
        for b in fresh:
            load, data_time, lag = measured[b.server]
            pending[b.server], shares = self._pending.view(b.server, data_time, lag)
            scores[b.server] = load + self._cost(shares, weights)
        best = min(fresh, key=lambda b: (scores[b.server], pending[b.server], b.order))
        left_out = len(candidates) - len(fresh)
        reason = f"{algorithm}: {best.server} lowest of {len(fresh)}" + \
            (f" ({left_out} without fresh load data left out)" if left_out else "")
        return Decision(ms, best.name, best.server, self.policy, algorithm, reason,
                        {s: round(v, 3) for s, v in scores.items()}, weights, now)

    # ------------------------------------------------------------------ malb (issue 12)
    def _unequal_servers(self, candidates: list[Backend]) -> bool:
        caps = {self.capacities.get(b.server) for b in candidates}
        return len(caps) > 1 and None not in caps

    def _capacity_shares(self, candidates: list[Backend],
                         weights: tuple[float, float, float]) -> dict[str, float]:
        caps = [self.capacities[b.server] for b in candidates]
        means = [sum(c[i] for c in caps) / len(caps) for i in range(3)]
        return {b.name: sum(w * c[i] / means[i] for i, w in enumerate(weights) if means[i] > 0)
                for b, c in zip(candidates, caps)}

    def short_flow_shares(self, microservice: str, now: float | None = None
                          ) -> dict[str, float]:
        """The share of a short-flow microservice's new flows each instance in service
        should get, as the malb policy spreads them: by server capacity on unequal servers,
        else equal (the switch's select group renders these; ryu_apps/dataplane.py)."""
        candidates = [b for b in self.pools.get(microservice, []) if self.in_service(b)]
        if self.policy == "malb" and self._unequal_servers(candidates):
            return self._capacity_shares(candidates, self.weights(microservice, now)[0])
        return {b.name: 1.0 for b in candidates}

    def _weighted_round_robin(self, ms: str, candidates: list[Backend], now: float,
                              weights: tuple[float, float, float]) -> Decision:
        """Smooth weighted round robin (nginx's): each instance's share of the flows is its
        server's capacity relative to the others', in the microservice's weights."""
        share = self._capacity_shares(candidates, weights)
        credit = self._wrr_credit.setdefault(ms, {})
        for name in list(credit):
            if name not in share:
                del credit[name]
        for name, w in share.items():
            credit[name] = credit.get(name, 0.0) + w
        best = max(candidates, key=lambda b: (credit[b.name], -b.order))
        credit[best.name] -= sum(share.values())
        return Decision(ms, best.name, best.server, self.policy, "weighted-round-robin",
                        "short flows: round robin weighted by server capacity",
                        {b.server: round(share[b.name], 3) for b in candidates}, weights, now)

    def _least_remaining(self, ms: str, candidates: list[Backend], now: float,
                         weights: tuple[float, float, float]) -> Decision:
        """malb's short-flow choice when their ends are watched: the instance with the
        least flow time still to carry, its open flows each at the expected remaining life
        of a flow of its age (the profiled durations; one per open flow until they are
        known), with the new flow's own expected life, over the server's capacity share on
        unequal servers. The model of Scenario 2 (docs/experiments.md): round robin lets
        10 MB objects queue on one instance's link while another's is idle; this cuts the
        ui's RT spread. Ties go in round-robin order."""
        survival = self.survival.get(ms)
        new = survival.expected_remaining(0.0) if survival is not None else 1.0
        share = self._capacity_shares(candidates, weights) \
            if self._unequal_servers(candidates) else {}
        n, start = len(self.pools[ms]), self._rr_next[ms]
        pos = {b.name: i for i, b in enumerate(self.pools[ms])}
        scores = {b.name: (self.open_short.remaining(b.name, now, survival) + new)
                  / max(share.get(b.name, 1.0), 1e-9) for b in candidates}
        best = min(candidates, key=lambda b: (round(scores[b.name], 9),
                                              (pos[b.name] - start) % n))
        self._rr_next[ms] = (pos[best.name] + 1) % n
        basis = "profiled durations" if survival is not None else "open flows"
        return Decision(ms, best.name, best.server, self.policy, "least-remaining",
                        f"short flows: least flow time still to carry ({basis})",
                        {b.server: round(scores[b.name], 3) for b in candidates}, weights,
                        now)

    def _running_model(self) -> bool:
        """Whether the profiler has told durations and per-flow use of some microservice
        (or flows are watched to their end, which needs no durations)."""
        return any(ms in self.per_flow or ms in self.per_flow_abs
                   for ms in (*self.survival, *(() if not self.open_flows else self.pools)))

    def _flow_cost(self, ms: str, server: str) -> tuple[float, float] | None:
        """(CPU %, network %) of the server that one running flow of ms uses."""
        cap = self.capacities.get(server)
        use = self.per_flow_abs.get(ms)
        if cap is not None and use is not None and cap[0] > 0 and cap[2] > 0:
            return 100.0 * use[0] / cap[0], 100.0 * use[1] / (cap[2] * 125000.0)
        pct = self.per_flow.get(ms)
        return None if pct is None else (pct[0], pct[2])

    def running_load(self, server: str, at: float, skip: frozenset = frozenset(),
                     ahead_s: float = 0.0) -> tuple[float, float, float]:
        """(CPU %, network %, expected flows) that the flows still running at `at` use,
        leaving out the microservices in `skip`; with `ahead_s` (at the latest time: a
        decision's), what they use over the next `ahead_s` seconds, the watched flows
        measured counting as they are expected to end (OpenFlows.shortfall)."""
        horizon = max(self.prediction_lag_s, 2 * self.period_s)
        survival = {ms: self.survival.get(ms, horizon) for ms in
                    set(self.per_flow) | set(self.per_flow_abs)}
        cpu = net = flows = 0.0
        counts = self.running.expected(server, at, survival)
        for ms, (unmeasured, measured, m_cpu, m_net) in self.open_flows.costs(server,
                                                                                 at).items():
            # watched flows: each at what it was measured to use, if it was
            counts[ms] = counts.get(ms, 0.0) + unmeasured
            if measured and ms not in skip:
                cpu, net, flows = cpu + m_cpu, net + m_net, flows + measured
        if ahead_s > 0:
            for ms, (less_cpu, less_net) in self.open_flows.shortfall(server, at,
                                                                      ahead_s).items():
                if ms not in skip:
                    cpu, net = max(0.0, cpu - less_cpu), max(0.0, net - less_net)
        for ms, n in counts.items():
            if ms in skip:
                continue
            cost = self._flow_cost(ms, server)
            if cost is not None:
                cpu += n * cost[0]
                net += n * cost[1]
                flows += n
        return cpu, net, flows

    def _explained_then(self, server: str, load: ServerLoad
                        ) -> tuple[tuple, float, float, frozenset]:
        """The figures the base load is taken from, and the (CPU %, network %) that the
        running flows explain in them. CPU: the latest measurement against the flows of its
        period (decision_audit: the rolling mean's 30 s lag makes its picks no better than
        chance, the latest sample's are the best of the estimators). Network and memory:
        the prediction against the flows' mean over its window, as smooth as the
        prediction (a server's network samples swing with the ui's 10 MB transfers, which
        long flows do not share a link with). Without a lag or a prediction, the latest
        measurement for all three. When the profiler sends each microservice's part of the
        measurement: the latest measurement for CPU and network, with the short-flow
        microservices' parts at their recent mean, and their flows left out of the running
        ones (returned: the microservices left out)."""
        # the same for every decision until the server's data or the profile changes: kept
        # (10 estimates over the window would otherwise run on every packet-in)
        key = (load.sample_time, self.prediction_lag_s, self._profile_version,
               self._loads_version)
        cached = self._base_cache.get(server)
        if cached is not None and cached[0] == key:
            return cached[1]
        value = self._explained_then_uncached(server, load)
        self._base_cache[server] = (key, value)
        return value

    def _short_parts(self, load: ServerLoad) -> dict | None:
        """The short-flow microservices' parts of the server's measurement, when the
        profiler sent them complete for every short-flow microservice it names."""
        if not load.parts:
            return None
        short = {}
        for ms, p in load.parts.items():
            if ms in self.pools and self.flow_class(ms)[0] == "short":
                if not all(_finite_non_negative(p.get(k)) for k in
                           ("cpu", "net", "cpu_mean", "net_mean")):
                    return None
                short[ms] = p
        return short

    def _short_levels(self) -> dict[str, tuple[float, float]]:
        """Per short-flow microservice, (CPU %, network %) that its flows will bring a server
        over a long flow's life: its recent mean, averaged over the servers that run it.
        The same on every server: round robin spreads the coming flows evenly (by capacity
        on unequal servers, which evens out their percentages), whichever server happened to
        get the big objects of the last half minute."""
        sums: dict[str, list[float]] = {}
        for load in self.loads.values():
            for ms, p in (self._short_parts(load) or {}).items():
                acc = sums.setdefault(ms, [0.0, 0.0, 0])
                acc[0] += p["cpu_mean"]
                acc[1] += p["net_mean"]
                acc[2] += 1
        return {ms: (c / n, t / n) for ms, (c, t, n) in sums.items()}

    def _explained_then_uncached(self, server: str, load: ServerLoad
                                 ) -> tuple[tuple, float, float, frozenset]:
        lag = self.prediction_lag_s
        meas = load.measured or (load.cpu, load.mem, load.net)
        short = self._short_parts(load)
        if short is not None and meas[0] is not None and meas[2] is not None:
            # Split by flow class: a long flow's horizon is tens of seconds, over which the
            # short flows in the latest sample (a ui object lasts 0.1-4 s) are gone and the
            # round robin brings the same mean to every server. So the short-flow part counts
            # at its recent mean, the rest at the latest sample less what its long flows
            # explain (network too: the ui's transfers were why it took the prediction).
            skip = frozenset(short)
            cpu_then, net_then, _ = self.running_load(
                server, load.sample_time - self._window(load) / 2, skip)
            level = self._short_levels()
            excess_cpu = sum(p["cpu"] - level[ms][0] for ms, p in short.items())
            excess_net = sum(p["net"] - level[ms][1] for ms, p in short.items())
            mem = load.mem if load.mem is not None else meas[1]
            return (meas[0] - excess_cpu, mem, meas[2] - excess_net), cpu_then, net_then, skip
        cpu_then, net_then, _ = self.running_load(server,
                                                  load.sample_time - self._window(load) / 2)
        if lag <= 0 or load.net is None or load.mem is None:
            return meas, cpu_then, net_then, frozenset()
        n = max(1, round(lag / self.period_s))
        net = 0.0
        for i in range(n):
            net += self.running_load(server, load.sample_time - lag + (i + 0.5) * lag / n)[1] / n
        return (meas[0], load.mem, load.net), cpu_then, net, frozenset()

    def _least_running_load(self, ms: str, candidates: list[Backend], now: float,
                            weights: tuple[float, float, float]) -> Decision:
        """Weighted least load on (the server's base load, what its flows do not explain,
        + what the flows it runs now cost)."""
        a, b, g = weights
        scores, running = {}, {}
        for c in candidates:
            load = self.loads[c.server]
            if not self._fresh(load, now):
                continue
            meas, then_cpu, then_net, skip = self._explained_then(c.server, load)
            if any(w > 0 and v is None for w, v in zip(weights, meas)):
                continue
            now_cpu, now_net, running[c.server] = self.running_load(c.server, now, skip,
                                                                    self.lookahead_s)
            cpu = max(0.0, (meas[0] or 0.0) - then_cpu) + now_cpu
            net = max(0.0, (meas[2] or 0.0) - then_net) + now_net
            scores[c.server] = a * cpu + b * (meas[1] or 0.0) + g * net
        fresh = [c for c in candidates if c.server in scores]
        if not fresh:
            return self._round_robin(ms, candidates, now,
                                     "weighted-least-load: no fresh load data, round robin")
        rank = self._spread_raise(ms, fresh, scores, weights)
        best = min(fresh, key=lambda c: ((rank or scores)[c.server], running[c.server],
                                         c.order))
        left_out = len(candidates) - len(fresh)
        how = "raises the spread least" if rank else "lowest"
        reason = f"weighted-least-load (running flows): {best.server} {how} of {len(fresh)}" \
            + (f" ({left_out} without fresh load data left out)" if left_out else "")
        return Decision(ms, best.name, best.server, self.policy, "weighted-least-load", reason,
                        {s: round(v, 3) for s, v in scores.items()}, weights, now)

    def _spread_raise(self, ms: str, fresh: list[Backend], loads: dict[str, float],
                      weights: tuple[float, float, float]) -> dict[str, float] | None:
        """On unequal servers, per server how much the new flow would raise the variance
        of the servers' loads if it went there (times n), or None on equal servers or while
        a flow's cost is unknown. A flow of d load points on server s (its per-flow use
        over s's capacity) changes the variance by d/n * (2 * (load_s - mean) + d * (1 -
        1/n)). On equal servers d is the same everywhere and this orders the servers as
        their loads do. On unequal ones the least loaded server is often a small one, where
        a job is a big step: least load keeps the small servers' lows level with the big
        ones' and so their means above (Scenario 2 at 0.6/0.3/0.3/0.2 cores on the
        testbed: the 0.2-core server 9-11 points above the 0.6-core one,
        docs/experiments.md)."""
        if len(fresh) < 2 or not self._unequal_servers(fresh):
            return None
        a, _b, g = weights
        step = {}
        for c in fresh:
            own = self._flow_cost(ms, c.server)
            if own is None:
                return None
            step[c.server] = a * own[0] + g * own[1]
        n = len(fresh)
        mean = sum(loads[c.server] for c in fresh) / n
        return {s: d * (2 * (loads[s] - mean) + d * (1 - 1 / n)) for s, d in step.items()}

    def _measure(self, server: str, weights: tuple[float, float, float], algorithm: str,
                 now: float) -> tuple[float, float, float] | None:
        """(load, time of the data it rests on, how long that data takes to show a new flow
        in full), or None without fresh data.

        Least network load reads the switches' port statistics first (the reactive baseline
        of the paper); weighted least load reads the profiler's per-server estimates, with the
        switches' network figure when the profiler has none."""
        prof, switch = self.loads[server], self.switch_net[server]
        prof_ok, switch_ok = self._fresh(prof, now), self._fresh(switch, now)
        if algorithm == "least-network-load":
            if switch_ok and switch.net is not None:
                return switch.net, switch.sample_time, 0.0
            if prof_ok and prof.net is not None:
                return prof.net, prof.sample_time, self.prediction_lag_s
            return None
        if not prof_ok:
            return None
        net = prof.net if prof.net is not None else (switch.net if switch_ok else None)
        a, b, g = weights
        parts = ((a, prof.cpu), (b, prof.mem), (g, net))
        if any(w > 0 and v is None for w, v in parts):
            return None
        return sum(w * v for w, v in parts if w > 0), prof.sample_time, self.prediction_lag_s

    # ------------------------------------------------------------------ status
    def status(self, now: float | None = None) -> dict:
        now = self.clock() if now is None else now
        servers = {}
        for s in self.servers:
            load = self.loads[s]
            sw = self.switch_net[s]
            servers[s] = {
                "cpu": load.cpu, "mem": load.mem, "net": load.net, "source": load.source,
                "by_microservice": load.parts,
                "sample_age_s": _age(load.sample_time, now), "sample_window_s": load.window,
                "net_switch": sw.net, "net_switch_age_s": _age(sw.sample_time, now),
                "fresh": self.is_fresh(s, now),
                "pending_flows": self.pending(s),
                "running_flows_estimate": round(self.running_load(s, now)[2], 2),
                "watched_flows": self.open_flows.running(s, now),
                # what the watched flows that samples have measured use (% of the server)
                "watched_flows_measured": {
                    ms: {"flows": k, "cpu": round(cpu, 3), "net": round(net, 3)}
                    for ms, (_, k, cpu, net) in self.open_flows.costs(s, now).items() if k},
                "flows_assigned": {ms: n for (srv, ms), n in sorted(self.assigned_total.items())
                                   if srv == s},
                "instances": {b.name: {"microservice": b.microservice,
                                       "healthy": self.healthy[b.name],
                                       "draining": b.name in self.draining,
                                       # malb: short flows open, watched to their FIN
                                       "open_short_flows": self.open_short.open_count(b.name)}
                              for bs in self.pools.values() for b in bs if b.server == s},
            }
        microservices = {}
        for ms, pool in self.pools.items():
            w, wsrc = self.weights(ms, now)
            fw, fwsrc = self.flow_weights(ms, now)
            cls, csrc = self.flow_class(ms)
            microservices[ms] = {
                "weights": {"alpha": round(w[0], 6), "beta": round(w[1], 6),
                            "gamma": round(w[2], 6)},
                "weights_source": wsrc, "flow_class": cls, "flow_class_source": csrc,
                # what malb's long-flow choice weighs with (flow_weights)
                "flow_weights": {"alpha": round(fw[0], 6), "beta": round(fw[1], 6),
                                 "gamma": round(fw[2], 6)},
                "flow_weights_source": fwsrc,
                "instances": [b.name for b in pool],
                "healthy_instances": [b.name for b in pool if self.healthy[b.name]],
            }
        for ms, info in microservices.items():
            use = self.per_flow.get(ms)
            info["per_flow"] = None if use is None else dict(zip(("cpu", "mem", "net"), use))
        return {"policy": self.policy, "servers": servers, "microservices": microservices,
                "prediction_lag_s": self.prediction_lag_s}


def _finite_non_negative(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf")


def _age(t: float | None, now: float) -> float | None:
    return None if t is None else round(now - t, 3)


def normalise_weights(weights, microservice: str = "") -> tuple[float, float, float]:
    """Three non-negative numbers, scaled to sum to 1 (all zero: equal weights).

    Scaled by the largest first, so that the sum cannot overflow: 1e308, 1e308, 0 is
    0.5, 0.5, 0 (their plain sum is inf, which made each share 0 and so equal weights)."""
    try:
        a, b, g = (float(x) + 0.0 for x in weights)     # + 0.0: -0.0 is 0.0
    except (TypeError, ValueError):
        raise ValueError(f"{microservice}: weights must be three numbers") from None
    except OverflowError:             # an int past 1.8e308 (JSON allows one)
        raise ValueError(f"{microservice}: weights must be finite numbers >= 0, one is "
                         f"too large for a float") from None
    for name, v in (("alpha", a), ("beta", b), ("gamma", g)):
        if not v >= 0 or v == float("inf"):
            raise ValueError(f"{microservice}: {name} must be a finite number >= 0, got {v}")
    top = max(a, b, g)
    if top == 0:
        return EQUAL_WEIGHTS
    a, b, g = a / top, b / top, g / top         # each in [0, 1], one of them 1
    total = a + b + g
    return a / total, b / total, g / total


def backends_of(cfg) -> dict[str, Backend]:
    """Every slot of the configuration (a microservice on a server) as a Backend: an
    instance can join a pool at run time (a placement's move, REST)."""
    return {i.name: Backend(i.name, i.microservice, i.server, i.ip, i.mac,
                            cfg.microservice(i.microservice).port, i.slot)
            for i in cfg.slots}


def core_from_config(cfg, policy: str, backends: dict[str, Backend] | None = None,
                     clock=time.time) -> PolicyCore:
    """The PolicyCore of a validated configuration: the configured instances in their
    pools, the controller's staleness limits and the servers' capacities."""
    backends = backends_of(cfg) if backends is None else backends
    pools: dict[str, list[Backend]] = {m.name: [] for m in cfg.microservices}
    for inst in cfg.instances:
        pools[inst.microservice].append(backends[inst.name])
    c = cfg.controller
    return PolicyCore(
        pools, {m.name: m.flow_class for m in cfg.microservices}, policy=policy,
        server_stale_after_s=c.server_stale_after_s,
        weights_stale_after_s=c.weights_stale_after_s,
        pending_flow_cost=c.pending_flow_cost, period_s=c.monitoring_period_s,
        servers=[s.name for s in cfg.servers], clock=clock,
        capacities={s.name: (s.cpu, s.memory_mb, s.network_mbit) for s in cfg.servers})
