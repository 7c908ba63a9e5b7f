"""The policy core (plain Python: no Ryu, no I/O, time passed in): the state every
load-balancing policy reads, and the one entry that asks the chosen policy for a decision
(docs/controller.md: "Policies", "How a decision is made", "Degraded modes").

- PolicyCore: per microservice its pool and profile, per server its latest load and
  capacity, the probes and the shared estimators (ryu_apps/estimators/); `choose` hands the
  in-service instances and a read-only view of the rest (ryu_apps/load_view.py) to the
  policy chosen by name and records its decision;
- ServerLoad: a server's latest utilization, its sample time and parts;
- core_from_config, backends_of, controller_settings: a PolicyCore from a configuration.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from collections.abc import Callable, Hashable, Iterable

from common.numbers import finite_non_negative
from ryu_apps import policies
from ryu_apps.estimators.open_flows import InstanceFlows, OpenFlows
from ryu_apps.estimators.pending_assignments import DEFAULT_BUCKET_S, PendingFlows
from ryu_apps.estimators.unexplained_use import UnexplainedUse
from ryu_apps.estimators.running_flows import RunningFlows
from ryu_apps.estimators.running_load import RunningLoad
from ryu_apps.estimators.switch_connections import SwitchConnections
from ryu_apps.instance_pools import InstancePools
from ryu_apps.load_view import LoadView
from ryu_apps.microservice_profiles import MicroserviceProfiles
from ryu_apps.policies import Backend, Decision, Flow, NoBackend
from ryu_apps.policy_status import policy_status

# Pending flows are kept for the stale limit plus the prediction lag, but at least
# PENDING_KEEP_LAG_S (a lag reported later, e.g. the profiler's first, still finds the flows
# it fades) and at most PENDING_MAX_LAG_S, however long a lag the profiler reports: memory
# stays bounded (a longer lag still fades the flows that are kept).
PENDING_KEEP_LAG_S = 60.0
PENDING_MAX_LAG_S = 600.0


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
    # CPU used on the server beside its containers (% of its share), in that measurement
    outside_cpu: float | None = None


class PolicyCore:
    """`policy`: a registered name (ryu_apps/policies); `options` override its preset; the
    staleness limits, pending-flow cost and period as the controller's configuration has
    them (controller_settings)."""

    def __init__(self, pools: dict[str, list[Backend]], flow_classes: dict[str, str],
                 policy: str = "malb", *, server_stale_after_s: float,
                 weights_stale_after_s: float, pending_flow_cost: float,
                 period_s: float, clock=time.time, servers: list[str] | None = None,
                 pending_bucket_s: float = DEFAULT_BUCKET_S,
                 capacities: dict[str, tuple[float, float, float]] | None = None,
                 options: dict | None = None, sites: dict[str, str] | None = None):
        self._policies: dict[str, policies.Policy] = {}
        self.set_policy(policy, **(options or {}))
        # every server that may hold an instance (a placement can move one anywhere)
        self.servers = sorted(set(servers or ()) | {b.server for bs in pools.values()
                                                    for b in bs})
        self.instances = InstancePools(pools, self.servers)
        # the instances' state, shared with the policies under these names
        self.pools, self.healthy = self.instances.pools, self.instances.healthy
        self.draining, self.turn = self.instances.draining, self.instances.turn
        self.probes = self.instances.probes
        self.server_stale_after_s = server_stale_after_s
        self.pending_flow_cost = pending_flow_cost
        self.period_s = period_s
        self.clock = clock
        self.loads: dict[str, ServerLoad] = {s: ServerLoad() for s in self.servers}
        self.switch_net: dict[str, ServerLoad] = {s: ServerLoad() for s in self.servers}
        # what the configuration and the profiler say of each microservice
        self.profiles = MicroserviceProfiles(self.pools, flow_classes, weights_stale_after_s,
                                             period_s, clock)
        # recent assignments per server and microservice: the pending flows
        self.pending_flows = PendingFlows(pending_bucket_s)
        self._horizon: dict[str, float] = {}   # server -> flows at or before it are forgotten
        self.assigned_total: dict[tuple[str, str], int] = {}   # (server, microservice) -> n
        # server -> (CPU cores, memory MB, network Mbit/s): per-flow costs and weighted
        # choices; unknown: every server alike
        self.capacities = {s: tuple(float(x) for x in c)
                           for s, c in (capacities or {}).items()}
        # server -> the switch its containers attach to (unknown: no server is near another)
        self.sites = dict(sites or {})
        self.running = RunningFlows()
        # long flows whose end the controller sees
        self.open_flows = OpenFlows(cores={s: c[0] for s, c in self.capacities.items()})
        # every watched flow, per instance (an instance's flows are all of its
        # microservice's class: a short-flow instance's are malb's open short flows)
        self.connections = InstanceFlows()
        # short-flow instances: their use beyond what their flows explain
        self.unexplained_use = UnexplainedUse(self.connections.flow_seconds)
        # microservices whose short flows the switch balances (data-plane mode): the
        # controller does not see them, so it cannot tell their instances' use unexplained
        self.switch_balanced: frozenset[str] = frozenset()
        # and the connections open on their instances, as the switches count them
        self.switch_connections = SwitchConnections()
        self.loads_version = 0
        self.running_estimate = RunningLoad(self)
        # what the policies see: read-only, but for the round-robin turn
        self.view = LoadView(self)

    # ------------------------------------------------------------------ inputs
    def set_policy(self, policy: str, **options) -> None:
        """Decide by the policy of that name from now on (ValueError naming the problem for
        an unknown name or option; nothing changes). One object per name, kept: switching
        back goes on with its state (a hash table, credits)."""
        if options or policy not in self._policies:
            self._policies[policy] = policies.make(policy, **options)
        self.strategy = self._policies[policy]

    @property
    def policy(self) -> str:
        return self.strategy.name

    def update_server_load(self, server: str, cpu: float | None, mem: float | None,
                           net: float | None, sample_time: float, source: str = "profiler",
                           measured: tuple | None = None, parts: dict | None = None,
                           window: float | None = None,
                           outside_cpu: float | None = None) -> None:
        """Utilization of a server (predicted by the profiler, or measured) at sample_time;
        `measured`: the latest measurement (cpu, mem, net) itself, when the figures are a
        prediction; `parts`: each microservice's share of it and that share's recent mean
        ({ms: {cpu, net, cpu_mean, net_mean}}); `window`: the seconds the measurement
        covers, up to sample_time (None: the monitoring period); `outside_cpu`: the CPU
        used on the server beside its containers, when its agent reads the whole server."""
        if server not in self.loads:
            raise KeyError(f"unknown server {server!r}")
        if (self.loads[server].sample_time or 0.0) > sample_time:
            return  # an older sample arriving late
        load = ServerLoad(cpu, mem, net, sample_time, source, measured, parts,
                          window if finite_non_negative(window) and window > 0 else None,
                          outside_cpu if finite_non_negative(outside_cpu) else None)
        self.loads[server] = load
        self.loads_version += 1      # the short-flow levels average over every server
        if parts:
            self._attribute(server, parts, sample_time, self.window_of(load))
            self._observe_parts(server, parts, sample_time)
        self._prune_assignments(server)

    def _observe_parts(self, server: str, parts: dict, sample_time: float) -> None:
        """Each short-flow instance's part of the sample, beside the seconds of flow it has
        carried (estimators/unexplained_use.py)."""
        for ms, p in parts.items():
            if ms not in self.pools or self.profiles.flow_class(ms)[0] != "short" or \
                    not isinstance(p, dict) or not finite_non_negative(p.get("cpu")) or \
                    not finite_non_negative(p.get("net")):
                continue
            for b in self.pools[ms]:
                if b.server == server:
                    self.unexplained_use.observe(b.name, sample_time, float(p["cpu"]),
                                                 float(p["net"]))

    def set_switch_balanced(self, microservices: Iterable[str]) -> None:
        """The microservices whose short flows the switch balances from now on (data-plane
        mode): their instances' use is not compared with flows the controller never sees."""
        self.switch_balanced = frozenset(microservices)

    def update_network(self, server: str, net: float, sample_time: float) -> None:
        """Network utilization measured by the switches (port statistics)."""
        if server not in self.switch_net:
            raise KeyError(f"unknown server {server!r}")
        if (self.switch_net[server].sample_time or 0.0) > sample_time:
            return
        self.switch_net[server] = ServerLoad(None, None, net, sample_time, "switch")
        self._prune_assignments(server)

    def window_of(self, load: ServerLoad) -> float:
        """The seconds a server's measurement covers (the monitoring period when unsaid)."""
        return load.window or self.period_s

    def _attribute(self, server: str, parts: dict, sample_time: float,
                   window: float) -> None:
        """The long-flow microservices' parts of a sample go to the watched flows that ran
        in it (estimators/open_flows.OpenFlows.attribute): each keeps what it was measured
        to use."""
        long_parts = {}
        for ms, p in parts.items():
            if ms in self.pools and self.profiles.flow_class(ms)[0] == "long" and \
                    isinstance(p, dict) and finite_non_negative(p.get("cpu")) and \
                    finite_non_negative(p.get("net")):
                long_parts[ms] = (float(p["cpu"]), float(p["net"]))
        if long_parts:
            self.open_flows.attribute(
                server, long_parts, sample_time - window, sample_time,
                {ms: c for ms in long_parts if (c := self.flow_cost(ms, server)) is not None})

    def _prune_assignments(self, server: str) -> None:
        """Forget assignments that every view of the server already shows in full."""
        times = [x.sample_time for x in (self.loads[server], self.switch_net[server])
                 if x.sample_time is not None]
        if times:
            self._forget(server, min(times) - self.profiles.prediction_lag_s)

    def _forget(self, server: str, horizon: float) -> None:
        if horizon > self._horizon.get(server, float("-inf")):
            self._horizon[server] = horizon
            self.pending_flows.prune(server, horizon)

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
        self.pending_flows.add(server, microservice, t)
        short = self.profiles.flow_class(microservice)[0] == "short"
        if watched is None or short:
            self.running.add(server, microservice, t)
        if watched is not None and instance is not None:
            self.connections.add(watched, instance, t)
        if watched is not None and not short:
            self.open_flows.add(watched, server, microservice, t)
        keep = min(max(self.profiles.prediction_lag_s, PENDING_KEEP_LAG_S), PENDING_MAX_LAG_S)
        self._forget(server, t - self.server_stale_after_s - keep)

    def update_probe(self, instance: str, in_flight: float, latency_s: float | None,
                     latency_p99_s: float | None, sample_time: float) -> bool:
        return self.instances.update_probe(instance, in_flight, latency_s, latency_p99_s,
                                           sample_time)

    def set_health(self, instance: str, healthy: bool) -> None:
        self.instances.set_health(instance, healthy)

    # ------------------------------------------------------------------ pools
    def add_backend(self, backend: Backend, healthy: bool = False) -> None:
        self.instances.add(backend, healthy)

    def set_draining(self, instance: str, draining: bool = True) -> None:
        self.instances.set_draining(instance, draining)

    def remove_backend(self, instance: str) -> Backend:
        return self.instances.remove(instance)

    def in_service(self, b: Backend) -> bool:
        return self.instances.in_service(b)

    # ------------------------------------------------------------------ views
    def fresh(self, sample: ServerLoad, now: float) -> bool:
        return sample.sample_time is not None and now - sample.sample_time <= \
            self.server_stale_after_s

    def is_fresh(self, server: str, now: float) -> bool:
        return self.fresh(self.loads[server], now) or self.fresh(self.switch_net[server], now)

    def pending(self, server: str, since: float | None = None) -> int:
        """Flows assigned to the server after `since` (default: all still remembered)."""
        return self.pending_flows.count_after(server, self._horizon.get(server)
                                         if since is None else since)

    def pending_load(self, server: str, data_time: float, lag_s: float,
                     weights: tuple[float, float, float]) -> float:
        """The load the server's data does not show yet: each remembered assignment at its
        microservice's per-flow cost, fully if made after the data was sampled, fading
        linearly over lag_s before that (estimators/pending_assignments.py: exact but for
        the flows in the 0.1 s buckets holding data_time and data_time - lag_s)."""
        return self.cost(self.pending_flows.shares(server, data_time, lag_s), weights)

    def cost(self, shares: dict[str, float], weights: tuple[float, float, float]) -> float:
        total = 0.0
        for ms, share in shares.items():
            use = self.profiles.per_flow.get(ms)
            cost = self.pending_flow_cost if use is None else \
                sum(w * u for w, u in zip(weights, use))
            total += share * cost
        return total

    def flow_cost(self, ms: str, server: str) -> tuple[float, float] | None:
        """(CPU %, network %) of the server that one running flow of ms uses."""
        cap = self.capacities.get(server)
        use = self.profiles.per_flow_abs.get(ms)
        if cap is not None and use is not None and cap[0] > 0 and cap[2] > 0:
            return 100.0 * use[0] / cap[0], 100.0 * use[1] / (cap[2] * 125000.0)
        pct = self.profiles.per_flow.get(ms)
        return None if pct is None else (pct[0], pct[2])

    def running_load(self, server: str, at: float, skip: frozenset = frozenset(),
                     ahead_s: float = 0.0) -> tuple[float, float, float]:
        """(CPU %, network %, expected flows) of the flows still running on the server
        (estimators/running_load.py)."""
        return self.running_estimate.flows(server, at, skip, ahead_s)

    # ------------------------------------------------------------------ decision
    def choose(self, microservice: str, now: float | None = None,
               flow_key: Hashable | None = None, watched: Hashable | None = None,
               caller: str | None = None) -> Decision:
        """The instance for a new flow, as the current policy picks it. `flow_key` (e.g.
        protocol, client address and port, VIP and port) is what hashing policies hash;
        `watched`: the flow's key if the controller will tell its end (flow_ended);
        `caller`: the client's address. An instance calling its own microservice's VIP is
        never given itself: the switch cannot send a packet back out of the port it came
        in by, and the instance would drop a segment from its own address."""
        now = self.clock() if now is None else now
        pool = self.pools.get(microservice)
        if pool is None:
            raise KeyError(f"unknown microservice {microservice!r}")
        candidates = [b for b in pool if self.in_service(b)]
        if not candidates:
            raise NoBackend(f"no healthy instance of {microservice}")
        if caller is not None and any(b.ip == caller for b in candidates):
            candidates = [b for b in candidates if b.ip != caller]
            if not candidates:
                raise NoBackend(f"no healthy instance of {microservice} but the caller "
                                f"itself")
        decision = self.strategy.choose(self.view, microservice, candidates, now,
                                        Flow(flow_key, watched, caller))
        return self._record(decision, watched)

    def flow_ended(self, watched: Hashable, t: float, quiet_since: float | None = None
                   ) -> bool:
        """A watched flow ended (its FIN was seen); False if it was not open. `quiet_since`:
        it carried nothing after this, as far as the controller knows (a tracked
        connection whose end was never seen)."""
        ended = self.connections.end(watched, t, quiet_since)
        return self.open_flows.end(watched, t) or ended

    def flow_idle(self, watched: Hashable, t: float | None = None,
                  quiet_since: float | None = None) -> bool:
        """A watched flow's rules idled out at t: a short flow is over (it sent nothing for
        the idle timeout; a SYN flood's half-open flows end so), and carried nothing since
        `quiet_since` (its last traffic); a long one may be a job computing in silence,
        which runs until its FIN. False if no short flow was open."""
        instance = self.connections.instance_of(watched)
        backend = self.instances.backend(instance) if instance is not None else None
        if backend is None or self.profiles.flow_class(backend.microservice)[0] != "short":
            return False
        return self.connections.end(watched, t, quiet_since)

    def watches(self, microservice: str) -> bool:
        """Whether the controller should watch a new TCP flow of the microservice to its
        end (its FIN) and tell flow_ended: as the policy asks (long flows always)."""
        return self.strategy.watches(self.view, microservice)

    def short_flow_shares(self, microservice: str, now: float | None = None
                          ) -> dict[str, float]:
        """The share of a short-flow microservice's new flows each instance in service
        should get when the switch balances them (ryu_apps/dataplane.py renders these)."""
        now = self.clock() if now is None else now
        candidates = [b for b in self.pools.get(microservice, []) if self.in_service(b)]
        return self.strategy.short_flow_shares(self.view, microservice, candidates, now)

    def _record(self, d: Decision, watched: Hashable | None = None) -> Decision:
        self.note_assignment(d.server, d.microservice, d.time, watched, d.instance)
        key = (d.server, d.microservice)
        self.assigned_total[key] = self.assigned_total.get(key, 0) + 1
        return d

    # ------------------------------------------------------------------ status
    def status(self, now: float | None = None) -> dict:
        return policy_status(self, self.clock() if now is None else now)


def backends_of(cfg) -> dict[str, Backend]:
    """Every slot of the configuration (a microservice on a server) as a Backend: an
    instance can join a pool at run time (a placement's move, REST)."""
    return {i.name: Backend(i.name, i.microservice, i.server, i.ip, i.mac,
                            cfg.microservice(i.microservice).port, i.slot)
            for i in cfg.slots}


def controller_settings(c) -> dict:
    """A controller configuration's staleness limits, pending-flow cost and period, as
    PolicyCore takes them."""
    return dict(server_stale_after_s=c.server_stale_after_s,
                weights_stale_after_s=c.weights_stale_after_s,
                pending_flow_cost=c.pending_flow_cost, period_s=c.monitoring_period_s)


def core_from_config(cfg, policy: str, backends: dict[str, Backend] | None = None,
                     clock: Callable[[], float] = time.time,
                     options: dict | None = None) -> PolicyCore:
    """The PolicyCore of a validated configuration: the configured instances in their
    pools, the controller's staleness limits and the servers' capacities; `options`
    override the policy's preset."""
    backends = backends_of(cfg) if backends is None else backends
    pools: dict[str, list[Backend]] = {m.name: [] for m in cfg.microservices}
    for inst in cfg.instances:
        pools[inst.microservice].append(backends[inst.name])
    return PolicyCore(
        pools, {m.name: m.flow_class for m in cfg.microservices}, policy=policy,
        **controller_settings(cfg.controller), servers=[s.name for s in cfg.servers], clock=clock,
        capacities={s.name: (s.cpu, s.memory_mb, s.network_mbit) for s in cfg.servers},
        options=options, sites={s.name: s.switch for s in cfg.servers})
