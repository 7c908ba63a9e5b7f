"""The shell's side of a standby pair (docs/controller.md, "A standby controller"; the
decisions are ryu_apps/roles.py's): this process's role from its flags, the loop that asks
the peer for its role, a takeover (the master role on every switch, then what a restart
sends) and a step-down (the state dropped for the master's).

- roles_of: --malb-role and --malb-peer (or MALB_ROLE, MALB_PEER) checked into a Roles;
- Standby: peer_loop, take_over, step_down, over the app (ryu_apps/malb.py's
  MalbController: its datapaths, core, metrics and logger).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import NoReturn

from common.config import POLICIES, ConfigError
from common.config.fields import url
from common.httpjson import HttpError, get_json
from ryu_apps.framework import hub
from ryu_apps.roles import MASTER, ROLES, Roles, role_request


def roles_of(role: str | None, peer: str | None, takeover_after_s: float, now: float,
             refuse: Callable[[str], NoReturn]) -> Roles:
    """This process's role beside its peer; a bad flag goes to refuse(message), which exits
    2 naming it."""
    if role is not None and role not in ROLES:
        refuse(f"malb: --malb-role (MALB_ROLE): expected one of {', '.join(ROLES)}, "
               f"got {role!r:.40}")
    if role is not None and peer is None:
        refuse("malb: --malb-role (MALB_ROLE) needs the other controller: --malb-peer "
               "<its REST URL> (MALB_PEER)")
    try:
        peer = url(peer, "--malb-peer (MALB_PEER)") if peer else None
    except ConfigError as exc:
        refuse(f"malb: {exc}")
    return Roles(role or MASTER, peer, takeover_after_s, now)


class Standby:
    def __init__(self, app):
        self.app = app
        self.told_shared = False     # a master without a peer superseded: said once
        self.slave_at = 0            # the master's generation the switches' slave requests had

    def step_down(self, why: str) -> None:
        """Another controller is master: standby from now on, with a fresh core (what this
        one knew is the master's to know), when there is a peer to yield to."""
        app, roles = self.app, self.app.roles
        if roles.step_down(time.time(), why):
            app.logger.warning("malb: standby from now on: %s; state dropped, the master "
                               "keeps it", why)
            app._start_core(app.policy_core.policy)
            app.controller_metrics.role.set(0)
        elif not roles.asks_roles and not self.told_shared:
            self.told_shared = True
            app.logger.warning("malb: %s, but no peer is configured (--malb-peer): another "
                               "controller shares the switches", why)

    def take_over(self) -> None:
        """The master role on every connected switch, and the state rebuilt from them as a
        restarted controller does; the peer's policy kept when it was another."""
        app, roles = self.app, self.app.roles
        now = time.time()
        generation = roles.claim(now)
        policy = roles.peer_policy
        if policy in POLICIES and policy != app.policy_core.policy:
            app._apply(app.core.set_policy(policy, now))
        app.logger.warning("malb: master from now on (generation %d, %d switches): %s",
                           generation, len(app.datapaths),
                           roles.peer_error or f"peer {roles.peer_role}")
        app.controller_metrics.role.set(1)
        app.controller_metrics.takeovers.inc()
        for dpid, dp in list(app.datapaths.items()):
            dp.send(role_request(app._xid(dpid), True, generation))
            app._apply(app.core.switch_connected(dpid, now))

    def peer_loop(self) -> None:
        """Every failover.peer_poll_s, the peer's GET /malb/role: claim or step down as
        Roles decides."""
        app, roles = self.app, self.app.roles
        f = app.cfg.controller.failover
        timeout = min(1.0, max(0.1, f.takeover_after_s / 2))
        while True:
            hub.sleep(f.peer_poll_s)
            try:
                body = get_json(f"{roles.peer}/malb/role", timeout=timeout)
                decision = roles.peer_answer(time.time(), body)
            except (HttpError, ValueError) as exc:
                decision = roles.peer_failed(time.time(), str(exc))
            except Exception as exc:   # the loop must outlive any one answer
                app.logger.exception("malb: the peer's role: %s", exc)
                continue
            if decision == "claim":
                self.take_over()
            elif decision == "step_down":
                self.step_down(f"the peer claimed the master role with a newer generation "
                               f"({roles.peer_generation})")
            else:
                self.follow_master()

    def follow_master(self) -> None:
        """While standby, every switch asked for the slave role again at the master's
        generation once it is known or changes: a request sent before was stale to a switch
        the master had claimed, which then keeps the connection EQUAL and sends this
        controller everything."""
        app, roles = self.app, self.app.roles
        if roles.active or roles.peer_role != MASTER or roles.peer_generation == self.slave_at:
            return
        self.slave_at = roles.peer_generation
        for dpid, dp in list(app.datapaths.items()):
            dp.send(roles.on_connect(app._xid(dpid)))
