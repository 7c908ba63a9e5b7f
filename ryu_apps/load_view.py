"""What a policy sees of the policy core (ryu_apps/policy_core.py): LoadView.

A policy decides from the pools, the servers' loads, the profiles, the probes and the shared
estimators, but must not change them: the core alone takes in measurements and records
decisions. LoadView hands a policy exactly what it may read, as read-only mappings and
methods, and the one thing it may move: the microservice's round-robin turn, which the
core keeps for every policy so that one switched at run time goes on where the last left
off. Holds ProfileReader (the profiles' reading side) and LoadView.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ryu_apps.estimators.survival import Survival
    from ryu_apps.instance_pools import Probe
    from ryu_apps.policies.base import Backend
    from ryu_apps.policy_core import PolicyCore, ServerLoad


class ProfileReader(Protocol):
    """The reading side of ryu_apps/microservice_profiles.py's MicroserviceProfiles."""
    @property
    def survival(self) -> Mapping[str, Survival]: ...
    @property
    def prediction_lag_s(self) -> float: ...
    def flow_class(self, microservice: str) -> tuple[str, str]: ...
    def weights(self, microservice: str, now: float | None = None
                ) -> tuple[tuple[float, float, float], str]: ...
    def flow_weights(self, microservice: str, now: float | None = None
                     ) -> tuple[tuple[float, float, float], str]: ...


class LoadView:
    """A policy's window on a PolicyCore; built once per core, live (it reads the core's
    state as it is at each call)."""

    __slots__ = ("_core", "_turn", "pools", "loads", "switch_net", "probes", "capacities",
                 "sites", "profiles")

    def __init__(self, core: PolicyCore):
        self._core = core
        self._turn = core.instances.turn
        # the core's own dictionaries behind read-only proxies: a policy sees every change
        # the core makes and can make none
        self.pools: Mapping[str, Sequence[Backend]] = MappingProxyType(core.pools)
        self.loads: Mapping[str, ServerLoad] = MappingProxyType(core.loads)
        self.switch_net: Mapping[str, ServerLoad] = MappingProxyType(core.switch_net)
        self.probes: Mapping[str, Probe] = MappingProxyType(core.probes)
        # server -> (CPU cores, memory MB, network Mbit/s); server -> its switch
        self.capacities: Mapping[str, tuple] = MappingProxyType(core.capacities)
        self.sites: Mapping[str, str] = MappingProxyType(core.sites)
        self.profiles: ProfileReader = core.profiles

    # ------------------------------------------------------------------ the round robin
    def turn(self, microservice: str) -> int:
        """Where the microservice's round robin goes next: a position in its pool."""
        return self._turn[microservice]

    def advance_turn(self, microservice: str, position: int) -> None:
        """The round robin goes on from `position` of the pool (taken modulo its size)."""
        self._turn[microservice] = position % max(1, len(self._core.pools[microservice]))

    # ------------------------------------------------------------------ servers
    def fresh(self, sample: ServerLoad, now: float) -> bool:
        """Whether a server's sample is recent enough to decide on."""
        return self._core.fresh(sample, now)

    def unequal_servers(self, candidates: list[Backend]) -> bool:
        """Whether the candidates' servers have different, known capacities."""
        caps = {self.capacities.get(b.server) for b in candidates}
        return len(caps) > 1 and None not in caps

    def in_service(self, b: Backend) -> bool:
        return self._core.in_service(b)

    def site_of_address(self, address: str | None) -> str | None:
        """The switch of the instance with this address (None: none, or unknown)."""
        backend = self._core.instances.by_address(address) if address is not None else None
        return self.sites.get(backend.server) if backend is not None else None

    def flow_cost(self, microservice: str, server: str) -> tuple[float, float] | None:
        """(CPU %, network %) of the server that one running flow of the microservice uses."""
        return self._core.flow_cost(microservice, server)

    def cost(self, shares: dict[str, float], weights: tuple[float, float, float]) -> float:
        """The weighted load of so many flows per microservice."""
        return self._core.cost(shares, weights)

    # ------------------------------------------------------------------ estimators
    def pending(self, server: str, data_time: float, lag_s: float
                ) -> tuple[int, dict[str, float]]:
        """The flows assigned to the server that its data, sampled at data_time, does not
        show yet, and their shares per microservice (estimators/pending_assignments.py)."""
        return self._core.pending_flows.view(server, data_time, lag_s)

    def running_model(self) -> bool:
        """Whether the profiler has told durations and per-flow use of some microservice
        (or flows are watched to their end, which needs no durations): running flows can
        be estimated (estimators/running_load.py)."""
        core, profiles = self._core, self._core.profiles
        return any(ms in profiles.per_flow or ms in profiles.per_flow_abs
                   for ms in (*profiles.survival, *(() if not core.open_flows else core.pools)))

    def running_base(self, server: str, load: ServerLoad
                     ) -> tuple[tuple, float, float, frozenset]:
        return self._core.running_estimate.base(server, load)

    def running_flows(self, server: str, at: float, skip: frozenset = frozenset(),
                      ahead_s: float = 0.0) -> tuple[float, float, float]:
        """(CPU %, network %, expected flows) of the flows still running on the server."""
        return self._core.running_estimate.flows(server, at, skip, ahead_s)

    def open_connections(self, instance: str) -> int:
        """The watched flows open on the instance (estimators/open_flows.py)."""
        return self._core.connections.open_count(instance)

    def remaining_connections(self, instance: str, now: float,
                              survival: Survival | None) -> float:
        """The instance's open flows weighted by the time they still have to run."""
        return self._core.connections.remaining(instance, now, survival)

    def switch_connection_counts(self, instances: Iterable[str], now: float
                                 ) -> dict[str, int] | None:
        """The connections open on each instance as the switches last counted them, None
        when a count is not fresh (estimators/switch_connections.py)."""
        return self._core.switch_connections.fresh_counts(instances, now)
