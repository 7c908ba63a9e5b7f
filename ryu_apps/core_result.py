"""CoreResult: what the Ryu shell (ryu_apps/malb.py) does with one event the controller core
handled: messages to send per switch, packet-in kinds and metric updates to count, lines to
log, the decision made, when a loop's next step is due."""
from __future__ import annotations

from dataclasses import dataclass, field

from ryu_apps.policies import Decision


@dataclass
class CoreResult:
    sends: list[tuple[int, bytes]] = field(default_factory=list)   # (dpid, messages)
    kinds: list[str] = field(default_factory=list)     # malb_packet_in_total kinds
    decision: Decision | None = None
    choose_s: float | None = None       # choose()'s own time, when a timer was given
    no_backend: str | None = None       # the microservice that had no healthy instance
    warnings: list[str] = field(default_factory=list)
    handled: bool = True                # False: not a NATed flow's packet (plain L2)
    infos: list[str] = field(default_factory=list)     # lines to log at INFO
    # metric updates: ("set" | "inc", metric name, label values, value)
    metrics: list[tuple[str, str, tuple, float]] = field(default_factory=list)
    latency: bool = False               # a VIP packet: the shell times it to the send
    next_in_s: float | None = None      # a loop step: when the next one is due
