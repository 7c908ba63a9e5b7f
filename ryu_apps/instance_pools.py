"""The instances a microservice's flows may go to (plain Python): each microservice's pool in
a fixed order, which instances are healthy and which draining, where round robin goes next,
and each instance's latest probe.

- InstancePools: membership (add, remove), health, draining, in_service, probes, the
  instance with an address (by_address);
- Probe: an instance's latest probe reading.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.numbers import finite_non_negative, is_finite
from ryu_apps.policies import Backend


@dataclass(frozen=True)
class Probe:
    """An instance's latest probe (its agent's GET /probes, read from its service): requests
    in flight then, the p50 and p99 latency of its requests that ended in the agent's window
    (None: none ended in it, not a zero), and when it was read, on the controller's clock."""
    in_flight: float
    latency_s: float | None
    latency_p99_s: float | None
    time: float


class InstancePools:
    """`pools`: microservice -> its instances; `servers`: every server an instance may run
    on."""

    def __init__(self, pools: dict[str, list[Backend]], servers: list[str]):
        self.pools = {ms: sorted(b, key=lambda x: x.order) for ms, b in pools.items()}
        self.servers = servers
        self.healthy: dict[str, bool] = {b.name: True for bs in pools.values() for b in bs}
        self.draining: set[str] = set()    # instances that take no new flows
        # per microservice, where round robin goes next: shared by every policy, so one
        # switched at run time goes on where the last left off
        self.turn: dict[str, int] = {ms: 0 for ms in self.pools}
        self.probes: dict[str, Probe] = {}      # instance -> its latest probe (update_probe)

    def update_probe(self, instance: str, in_flight: float, latency_s: float | None,
                     latency_p99_s: float | None, sample_time: float) -> bool:
        """An instance's probe read at sample_time. A reading older than the one held is
        ignored (False); KeyError for an instance in no pool; ValueError naming the field
        for a bad value (nothing changes)."""
        if instance not in self.healthy:
            raise KeyError(f"unknown instance {instance!r}")
        for field, v, optional in (("in_flight", in_flight, False),
                                   ("latency_s", latency_s, True),
                                   ("latency_p99_s", latency_p99_s, True)):
            if not (v is None and optional) and not finite_non_negative(v):
                raise ValueError(f"{instance}: {field}: expected a finite number >= 0"
                                 f"{' or None' if optional else ''}, got {v!r:.40}")
        if not is_finite(sample_time):
            raise ValueError(f"{instance}: sample_time: expected a finite number, got "
                             f"{sample_time!r:.40}")
        held = self.probes.get(instance)
        if held is not None and held.time > sample_time:
            return False
        self.probes[instance] = Probe(float(in_flight),
                                      None if latency_s is None else float(latency_s),
                                      None if latency_p99_s is None else float(latency_p99_s),
                                      float(sample_time))
        return True

    def set_health(self, instance: str, healthy: bool) -> None:
        if instance not in self.healthy:
            raise KeyError(f"unknown instance {instance!r}")
        self.healthy[instance] = healthy

    def add(self, backend: Backend, healthy: bool = False) -> None:
        """An instance joins its microservice's pool (a placement started it); unhealthy
        until its health probe answers, unless told otherwise."""
        pool = self.pools.setdefault(backend.microservice, [])
        if any(b.name == backend.name for b in pool):
            raise ValueError(f"{backend.name}: already in the pool of {backend.microservice}")
        if backend.server not in self.servers:
            raise KeyError(f"unknown server {backend.server!r}")
        pool.append(backend)
        pool.sort(key=lambda x: x.order)
        self.healthy[backend.name] = healthy
        self.draining.discard(backend.name)
        self.turn.setdefault(backend.microservice, 0)

    def set_draining(self, instance: str, draining: bool = True) -> None:
        """A draining instance gets no new flows; those it has go on."""
        if instance not in self.healthy:
            raise KeyError(f"unknown instance {instance!r}")
        (self.draining.add if draining else self.draining.discard)(instance)

    def remove(self, instance: str) -> Backend:
        """The instance leaves its pool (after draining)."""
        for ms, pool in self.pools.items():
            for k, b in enumerate(pool):
                if b.name == instance:
                    del pool[k]
                    del self.healthy[instance]
                    self.draining.discard(instance)
                    if pool:
                        self.turn[ms] %= len(pool)
                    return b
        raise KeyError(f"unknown instance {instance!r}")

    def in_service(self, b: Backend) -> bool:
        return self.healthy[b.name] and b.name not in self.draining

    def backend(self, instance: str) -> Backend | None:
        return next((b for pool in self.pools.values() for b in pool if b.name == instance),
                    None)

    def by_address(self, address: str) -> Backend | None:
        """The instance in a pool with this IP address, None if none has it."""
        return next((b for pool in self.pools.values() for b in pool if b.ip == address), None)
