"""What every policy shares: the instance a flow may go to (Backend), the new flow (Flow),
the answer (Decision), the error when no instance can take it (NoBackend), the interface a
policy implements (Policy) and the named options a policy class takes (Options).

A policy is a strategy object: given a microservice, its in-service instances, the load
view (ryu_apps/load_view.py's LoadView: pools, server loads, profiles, probes and the
estimators, read-only, and the shared round-robin turn) and the time, it picks the instance
for a new flow. It keeps its own state (a random generator, a hash table, credits); the view
keeps what every policy may read.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar
from collections.abc import Hashable

if TYPE_CHECKING:        # the view is passed in at every call; no import at run time
    from ryu_apps.load_view import LoadView


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


@dataclass(frozen=True)
class Flow:
    """A new flow as the controller sees its first packet. `key` (protocol, client address
    and port, VIP and port) is what hashing policies hash; `watched`: the key the controller
    will report the flow's end with (PolicyCore.flow_ended), None if it will not; `caller`:
    the client's address (an instance's own when one microservice calls another), None if
    not known."""
    key: Hashable | None = None
    watched: Hashable | None = None
    caller: str | None = None


@dataclass(frozen=True)
class Decision:
    microservice: str
    instance: str
    server: str
    policy: str          # the registry name of the policy that decided
    algorithm: str       # the rule that decided: round-robin, weighted-least-load, ...
    reason: str
    scores: dict         # server -> the figure the choice compared (empty: none)
    weights: tuple[float, float, float] | None
    time: float


class NoBackend(LookupError):
    """No healthy instance can take the flow."""


@dataclass(frozen=True)
class Options:
    """A policy's options; each policy that has some declares its own subclass, with a
    default for every field (the registry's presets set the others)."""

    @classmethod
    def from_dict(cls, name: str, given: dict[str, Any]) -> Options:
        known = {f.name: f for f in fields(cls)}
        for key, _value in given.items():
            if key not in known:
                raise ValueError(f"policy {name}: unknown option {key!r}; it takes "
                                 f"{', '.join(sorted(known)) or 'none'}")
        return cls(**given)


_Options = Options      # in Policy's body, `Options` is its class attribute


class Policy:
    """The interface. Subclasses set `title` and implement `choose` (`name` is the
    registry name make() built the policy under); the rest has defaults most policies keep."""

    name: str = ""                     # make() sets it per policy object
    title: ClassVar[str] = ""          # how reports name it
    Options: ClassVar[type[Options]] = Options
    # its short flows can be left to the switch: a select group renders short_flow_shares
    dataplane: ClassVar[bool] = False
    # it reads the instances' probe answers (requests in flight, latency)
    uses_probes: ClassVar[bool] = False

    def __init__(self, options: _Options | None = None):
        self.options = options if options is not None else self.Options()

    def choose(self, view: LoadView, ms: str, candidates: list[Backend], now: float,
               flow: Flow) -> Decision:
        """The instance for a new flow of `ms`, from `candidates` (in service, in
        configuration order, never empty)."""
        raise NotImplementedError

    def watches(self, view: LoadView, ms: str) -> bool:
        """Whether the controller should follow a new TCP flow of `ms` to its FIN and report
        its end: long flows always (their load counts until they end)."""
        return view.profiles.flow_class(ms)[0] == "long"

    def short_flow_shares(self, view: LoadView, ms: str, candidates: list[Backend],
                          now: float) -> dict[str, float]:
        """The share of a short-flow microservice's new flows each instance should get when
        the switch balances them (dataplane policies): equal by default."""
        return {b.name: 1.0 for b in candidates}

    def decision(self, b: Backend, algorithm: str, reason: str, now: float,
                 scores: dict | None = None,
                 weights: tuple[float, float, float] | None = None) -> Decision:
        return Decision(b.microservice, b.name, b.server, self.name, algorithm, reason,
                        scores or {}, weights, now)
