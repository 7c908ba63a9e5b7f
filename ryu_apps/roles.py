"""A standby controller, by OpenFlow 1.3's roles: two controllers serve the same switches,
each started with the other's REST address (`--malb-peer`). One is master; the other asks
each switch for the slave role, so the switches send it nothing but port changes and refuse
its changes, and it keeps no state. The standby asks the master for its role every
`controller.failover.peer_poll_s`; when no master has answered for
`controller.failover.takeover_after_s`, it claims the master role on every switch with a
generation id above any seen and rebuilds its state from the switches as a restarted
controller does (base rules, NAT rules from their statistics, groups). A master superseded
on a switch (the switch refuses its changes, or its role request is stale) steps down and
starts afresh as standby. Without a peer a controller is master and asks no switch for a
role (each connection stays EQUAL, as OpenFlow starts it).

Plain Python, time passed in; the shell (ryu_apps/malb.py) sends, polls and gates.

- ROLES, MASTER, STANDBY: the roles a controller reports (GET /malb/role);
- Roles: the role, the decisions on the peer's answers and the switches' refusals, the
  generation ids, the status;
- role_request: the OpenFlow message; SUPERSEDED: the switches' errors that say another
  controller is master, and what each says.
"""
from __future__ import annotations

import struct

from ryu_apps import ofwire

MASTER, STANDBY = "master", "standby"
ROLES = (MASTER, STANDBY)

OFPT_ROLE_REQUEST = 24
OFPCR_ROLE_MASTER, OFPCR_ROLE_SLAVE = 2, 3
# errors that say another controller holds the master role: a change refused from a slave
# (OFPET_BAD_REQUEST, OFPBRC_IS_SLAVE) and a role request older than one the switch took
# (OFPET_ROLE_REQUEST_FAILED, OFPRRFC_STALE)
SUPERSEDED = {(1, 10): "the switch refused a change: this controller is its slave",
              (11, 0): "the switch refused the role request as stale: a newer master claimed it"}
GENERATION_MASK = (1 << 64) - 1


def role_request(xid: int, master: bool, generation: int) -> bytes:
    """OFPT_ROLE_REQUEST for the master or the slave role."""
    role = OFPCR_ROLE_MASTER if master else OFPCR_ROLE_SLAVE
    return ofwire.header(OFPT_ROLE_REQUEST, 24, xid) + \
        struct.pack("!I4xQ", role, generation & GENERATION_MASK)


class Roles:
    """preferred: the role this controller starts for (a master claims at once when its peer
    answers as standby; a standby waits for the master's absence); peer: the other
    controller's REST base URL (None: no peer, master for good)."""

    def __init__(self, preferred: str, peer: str | None, takeover_after_s: float, now: float):
        if preferred not in ROLES:
            raise ValueError(f"role: expected one of {', '.join(ROLES)}, got {preferred!r}")
        self.preferred, self.peer, self.takeover_after_s = preferred, peer, takeover_after_s
        self.role = MASTER if peer is None else STANDBY
        self.generation = 0             # the last this controller claimed the master role with
        self.peer_role: str | None = None
        self.peer_generation = 0
        self.peer_policy: str | None = None
        self.peer_answered: float | None = None
        self.peer_error: str | None = None
        self.master_seen = now          # a master peer last answered (or this one started)
        self.since = now                # in this role
        self.claims = self.step_downs = 0
        self.last_step_down: str | None = None

    @property
    def active(self) -> bool:
        """Master: it decides, sends and polls; a standby ignores what the switches send."""
        return self.role == MASTER

    @property
    def asks_roles(self) -> bool:
        return self.peer is not None

    # ---------------------------------------------------------------- the peer's answers
    def peer_answer(self, now: float, body) -> str | None:
        """The peer's GET /malb/role answer: "claim" when this controller should take the
        master role now (its peer is standby and it prefers master, or no master has
        answered for takeover_after_s), "step_down" when both are master and the peer's
        claim is the newer, else None. ValueError for an answer that is not a role."""
        if not isinstance(body, dict):
            raise ValueError("expected a JSON object")
        role, generation = body.get("role"), body.get("generation")
        if role not in ROLES:
            raise ValueError(f"role: expected one of {', '.join(ROLES)}, got {role!r:.40}")
        if not (isinstance(generation, int) and not isinstance(generation, bool)
                and 0 <= generation <= GENERATION_MASK):
            raise ValueError(f"generation: expected an integer >= 0, got {generation!r:.40}")
        policy = body.get("policy")
        self.peer_role, self.peer_generation = role, generation
        self.peer_policy = policy if isinstance(policy, str) else None
        self.peer_answered, self.peer_error = now, None
        if role == MASTER:
            self.master_seen = now
            return "step_down" if self.active and generation > self.generation else None
        if not self.active and (self.preferred == MASTER or self._master_gone(now)):
            return "claim"
        return None

    def peer_failed(self, now: float, error: str) -> str | None:
        """The peer did not answer (or not with a role): "claim" once no master has answered
        for takeover_after_s."""
        self.peer_error = error[:200]
        return "claim" if not self.active and self._master_gone(now) else None

    def _master_gone(self, now: float) -> bool:
        return now - self.master_seen >= self.takeover_after_s

    # ---------------------------------------------------------------- transitions
    def claim(self, now: float) -> int:
        """This controller takes the master role: the generation id to claim it with, above
        any it or its peer used, and from the clock, so a controller restarted later claims
        above it (both controllers' clocks must agree to within a takeover)."""
        self.role, self.since = MASTER, now
        self.claims += 1
        self.generation = max(int(now * 1000), self.generation + 1, self.peer_generation + 1)
        return self.generation

    def step_down(self, now: float, why: str) -> bool:
        """Another controller is master (a switch said so, or the peer's claim is newer):
        standby from now on, waiting takeover_after_s for a master before claiming again.
        True if it was master (the caller starts its state afresh); a controller without a
        peer stays master and only reports it."""
        self.last_step_down = why
        if self.peer is None or not self.active:
            return False
        self.role, self.since, self.master_seen = STANDBY, now, now
        self.step_downs += 1
        return True

    def on_connect(self, xid: int) -> bytes:
        """The role request a switch's new connection gets: the master role again with this
        controller's generation; the slave role with the master peer's (a slave request
        above the master's generation would make the master's own requests stale). No
        request without a peer."""
        if not self.asks_roles:
            return b""
        if self.active:
            return role_request(xid, True, self.generation)
        return role_request(xid, False, self.peer_generation)

    # ---------------------------------------------------------------- reporting
    def status(self, now: float) -> dict:
        return {"role": self.role, "generation": self.generation, "preferred": self.preferred,
                "peer": self.peer, "since_s": round(now - self.since, 3),
                "peer_role": self.peer_role, "peer_generation": self.peer_generation,
                "peer_answered_s_ago": None if self.peer_answered is None else
                round(now - self.peer_answered, 3),
                "peer_error": self.peer_error, "takeover_after_s": self.takeover_after_s,
                "claims": self.claims, "step_downs": self.step_downs,
                "last_step_down": self.last_step_down}
