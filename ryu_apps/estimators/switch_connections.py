"""SwitchConnections: in data-plane mode, the TCP connections open on each short-flow
instance as the switches count them, with no packet-in per connection.

Beside each stateless reverse NAT rule (an instance's answers towards one block of callers
on a switch) the controller installs copies that match its SYN-ACKs, FINs and resets
(ryu_apps/dataplane.py, counter_rules). A connection's answers all pass the switch its
caller hangs on, so on each switch an instance's SYN-ACKs less its FINs and resets are the
connections it holds open there. The switches' packet counts arrive as complete
statistics replies (managers/dataplane_groups.py polls them); an instance's open
connections are the sum over the switches of their latest replies.

What the count misses: a connection the caller resets without an answer of the instance's
after it (a client killed) stays counted until the counter rules are installed again; a
retransmitted SYN-ACK or FIN counts twice. Connections under per-flow control (a moving
slot's flows under way, an instance calling its own VIP) pass the NAT rule pairs instead.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping


class SwitchConnections:
    def __init__(self, max_age_s: float = 1.0):
        # a count older than this is not used (the poller sets it from its period)
        self.max_age_s = max_age_s
        # dpid -> (reply time, instance -> (SYN-ACKs, FINs + resets))
        self.replies: dict[int, tuple[float, dict[str, tuple[int, int]]]] = {}
        self._totals: dict[str, int] | None = None

    def update(self, dpid: int, counts: Mapping[str, tuple[int, int]], now: float) -> None:
        """A switch's complete reply: per instance its counted (opened, closed)."""
        self.replies[dpid] = (now, dict(counts))
        self._totals = None

    def forget(self, dpid: int) -> None:
        """The switch went away (its counters start again with its rules)."""
        self.replies.pop(dpid, None)
        self._totals = None

    def totals(self) -> dict[str, int]:
        """Per instance counted, the connections the switches last counted open on it."""
        if self._totals is None:
            totals: dict[str, int] = {}
            for _, counts in self.replies.values():
                for name, (opened, closed) in counts.items():
                    totals[name] = totals.get(name, 0) + max(0, opened - closed)
            self._totals = totals
        return self._totals

    def open(self, instance: str) -> int:
        """The connections the switches last counted open on the instance."""
        return self.totals().get(instance, 0)

    def fresh_counts(self, instances: Iterable[str], now: float) -> dict[str, int] | None:
        """Each instance's open connections, or None unless every switch counted within
        max_age_s (a count from some switches only would favour the instances whose callers
        hang on the others)."""
        if not self.replies or any(now - t > self.max_age_s
                                   for t, _ in self.replies.values()):
            return None
        totals = self.totals()
        return {n: totals.get(n, 0) for n in instances}

    def status(self, now: float) -> dict:
        ages = [now - t for t, _ in self.replies.values()]
        return {"open": dict(sorted(self.totals().items())),
                "oldest_reply_s": round(max(ages), 3) if ages else None}
