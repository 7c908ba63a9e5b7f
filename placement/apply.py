"""Carry a placement out on a running testbed, move by move, without losing a request: each
move starts the new instance, adds it to its pool, drains the old one and removes it when
its flows are done (docs/placement.md, "A move, live").

- apply_moves, MoveResult: the moves carried out in batches (one at a time by default), and
  how each went;
- ControllerClient: the controller's instance routes (join, drain, leave; the layout);
- InProcessTestbed, RemoteTestbed: the testbed of an experiment that holds it, or the
  control API of `python -m topologies up` (testbed.control_port);
- ApplyError: a move that could not be made.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from common.httpjson import HttpError, delete_json, get_json, post_json, put_json
from placement.problem import Move


class ApplyError(RuntimeError):
    """A move that could not be made; done: the moves of the batches before it, made;
    clean: its batch was undone whole, nothing of it left behind (the layout is the one
    before the batch)."""

    def __init__(self, message: str, done: list | None = None, clean: bool = False):
        super().__init__(message)
        self.done = done or []
        self.clean = clean


class ControllerClient:
    """token: the shared token (security.token), sent with every write."""

    def __init__(self, url: str, timeout_s: float = 5.0, token: str | None = None):
        self.url, self.timeout_s, self.token = url.rstrip("/"), timeout_s, token

    def instances(self) -> dict:
        return get_json(f"{self.url}/malb/instances", self.timeout_s)["instances"]

    def add(self, name: str) -> None:
        post_json(f"{self.url}/malb/instances", {"instance": name}, self.timeout_s,
                  token=self.token)

    def drain(self, name: str) -> None:
        put_json(f"{self.url}/malb/instances/{name}", {"draining": True}, self.timeout_s,
                 token=self.token)

    def remove(self, name: str, force: bool = False) -> None:
        delete_json(f"{self.url}/malb/instances/{name}" + ("?force=1" if force else ""),
                    self.timeout_s, token=self.token)

    def set_policy(self, name: str) -> None:
        """The controller decides by this policy from now on (PUT /malb/policy)."""
        put_json(f"{self.url}/malb/policy", {"policy": name}, self.timeout_s, token=self.token)

    def layout(self) -> dict[str, list[str]]:
        """Where each microservice runs: its instances in the pools, not draining."""
        out: dict[str, list[str]] = {}
        for v in self.instances().values():
            if v.get("draining") is False:
                out.setdefault(v["microservice"], []).append(v["server"])
        return {ms: sorted(servers) for ms, servers in out.items()}


class InProcessTestbed:
    """A Testbed object of this process (an experiment's)."""

    def __init__(self, testbed, ready_timeout_s: float = 20.0):
        self.testbed, self.ready_timeout_s = testbed, ready_timeout_s

    def start(self, instance) -> None:
        """The instance running and listening, or nothing left of it and ApplyError."""
        try:
            self.testbed.add_instance(instance)      # all or nothing
        except Exception as exc:   # Mininet, Docker, ovs-vsctl, a busy slot
            raise ApplyError(f"{instance.name}: the testbed did not start it: {exc}") from exc
        if self.testbed.wait_services(self.ready_timeout_s, [instance]):
            self.stop(instance.name)
            raise ApplyError(f"{instance.name}: its service did not start listening within "
                             f"{self.ready_timeout_s:.0f} s")

    def stop(self, name: str) -> None:
        try:
            self.testbed.remove_instance(name)
        except Exception as exc:   # as start
            raise ApplyError(f"{name}: the testbed did not remove it: {exc}") from exc


class RemoteTestbed:
    """`python -m topologies up`'s control API (token: the shared token, for its writes)."""

    def __init__(self, url: str, timeout_s: float = 60.0, token: str | None = None):
        self.url, self.timeout_s, self.token = url.rstrip("/"), timeout_s, token

    def start(self, instance) -> None:
        """The instance running and listening. The API's 504 (not listening in time) leaves
        it deployed, and no answer (a timeout) may have: it is stopped, and ApplyError
        (naming it if it could not be stopped); any other failure is the HttpError (the API
        leaves nothing of it; a 409 is an instance already running, not ours to stop)."""
        try:
            post_json(f"{self.url}/instances", {"instance": instance.name}, self.timeout_s,
                      token=self.token)
            return
        except HttpError as exc:
            if exc.status not in (504, None):
                raise
            failed = f"{instance.name}: the testbed did not start it: {exc}"
        try:
            self.stop(instance.name)
        except HttpError as exc:
            if exc.status != 404:            # 404: not running, nothing to stop
                failed += f"; left behind: {instance.name} (stopping it failed: {exc})"
        raise ApplyError(failed)

    def stop(self, name: str) -> None:
        delete_json(f"{self.url}/instances?instance={name}", self.timeout_s,
                    token=self.token)


@dataclass
class MoveResult:
    move: Move
    seconds: float = 0.0
    flows_left: int | None = 0    # active flows on the old instance when it was removed
                                  # (None: unknown, the controller did not answer)
    forced: bool = False          # removed at the drain timeout, flows still on it
    steps: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {**self.move.as_dict(), "seconds": round(self.seconds, 2),
                "flows_left": self.flows_left, "forced": self.forced}


def apply_moves(cfg, moves: list[Move], controller, testbed, drain_timeout_s: float = 60.0,
                health_timeout_s: float = 30.0, poll_s: float = 0.5, log=print,
                clock=time.monotonic, sleep=time.sleep, batch: int = 1) -> list[MoveResult]:
    """Carry the moves out, `batch` at a time (1: one after the other). A move of a
    microservice from one server to another is a live migration: (1) start the new instance
    in its slot on the target server (container, link, service) and wait until it listens;
    (2) tell the controller to add it to the pool: it takes new flows once its health probe
    answers; (3) drain the old instance: no new flows, those it has go on; (4) when it has
    no active flow left (or after drain_timeout_s), take it out of the pool and remove its
    container. In a batch, the new instances start one after the other and the waits of
    steps 2 and 4 overlap; no two moves share a slot (moves_between pairs the servers a
    microservice leaves with servers it did not run on), so they do not interfere. A batch
    whose new instance fails to start, is refused or is not healthy in time is undone
    whole: its new instances go (drained first when already healthy: they may carry flows),
    its old ones keep serving (the batches before it stay done). Time and
    sleeping are passed in, so the sequence is tested with fakes as on the real testbed."""
    if batch < 1:
        raise ValueError(f"batch: expected at least 1 move at a time, got {batch!r}")
    results = []
    for i in range(0, len(moves), batch):
        try:
            results += _apply_batch(cfg, moves[i:i + batch], controller, testbed,
                                    drain_timeout_s, health_timeout_s, poll_s, log, clock, sleep)
        except ApplyError as exc:
            exc.done = results
            raise
    return results


def _apply_batch(cfg, moves, controller, testbed, drain_timeout_s, health_timeout_s, poll_s,
                 log, clock, sleep) -> list[MoveResult]:
    news = [cfg.slot(m.target, m.microservice).name for m in moves]
    olds = [cfg.slot(m.source, m.microservice).name for m in moves]
    results = {old: MoveResult(m) for old, m in zip(olds, moves)}
    begun = clock()
    started, joined = [], []

    def undo(why: str):
        # a new instance already healthy may carry flows: it is drained like an old one;
        # one never healthy carries none and goes at once. The old ones were not drained.
        left_behind = []
        pool = _instances(controller)
        # unknown (the controller did not answer): each may carry flows, so each is drained
        healthy = [n for n in joined if pool is None or pool.get(n, {}).get("healthy")]
        for name in started:
            try:
                if name in joined and name not in healthy:
                    controller.remove(name, force=True)
                if name not in healthy:
                    testbed.stop(name)
            except (ApplyError, HttpError) as exc:
                left_behind.append(f"{name} ({exc})")
        if healthy:
            try:
                _retire(healthy, controller, testbed, drain_timeout_s, poll_s, clock, sleep)
            except (ApplyError, HttpError) as exc:
                left_behind.append(f"{', '.join(healthy)} ({exc})")
        several = len(moves) > 1
        raise ApplyError(f"{why}; the move{'s are' if several else ' is'} undone, "
                         f"{', '.join(olds)} keep{'' if several else 's'} serving"
                         + (f"; left behind: {'; '.join(left_behind)}" if left_behind else ""),
                         clean=not left_behind)

    for move, new in zip(moves, news):
        log(f"[placement] {move.microservice}: {move.source} -> {move.target}: starting "
            f"{new}")
        try:
            testbed.start(cfg.slot(move.target, move.microservice))
            failed = None
        except (ApplyError, HttpError) as exc:     # the adapters leave nothing behind
            failed = str(exc)
        if failed:
            undo(failed)
        started.append(new)
        try:
            controller.add(new)
            failed = None
        except HttpError as exc:
            failed = f"{new}: the controller refused it: {exc}"
        if failed:
            undo(failed)
        joined.append(new)
    deadline = clock() + health_timeout_s
    while True:
        pool = _instances(controller) or {}     # no answer: none known healthy yet
        unhealthy = [n for n in news if not pool.get(n, {}).get("healthy")]
        if not unhealthy:
            break
        if clock() > deadline:
            undo(f"{', '.join(unhealthy)}: not healthy within {health_timeout_s:.0f} s")
        sleep(poll_s)

    retired = []

    def done(old: str, left: int | None) -> None:
        result = results[old]
        result.flows_left, result.forced = left, left is None or left > 0
        result.seconds = clock() - begun
        retired.append(old)
        log(f"[placement] {result.move.microservice}: on {result.move.target} in "
            f"{result.seconds:.1f} s"
            + (f" ({left} flows still on {old} at the drain timeout)" if left else "")
            + (f" ({old} removed at the drain timeout, its flows unknown: the controller "
               f"did not answer)" if left is None else ""))

    try:
        _retire(olds, controller, testbed, drain_timeout_s, poll_s, clock, sleep, done)
    except (ApplyError, HttpError) as exc:
        raise ApplyError(f"{', '.join(news)} serve, but retiring the old instances failed: "
                         f"{exc}; left behind, draining: "
                         f"{', '.join(o for o in olds if o not in retired)}") from exc
    return list(results.values())


def _instances(controller) -> dict | None:
    """The controller's instances, or None when it did not answer (polls try again)."""
    try:
        return controller.instances()
    except HttpError:
        return None


def _retire(names, controller, testbed, drain_timeout_s, poll_s, clock, sleep,
            done=lambda name, left: None) -> None:
    """Drain the instances `names`, then take each out of its pool and remove its container
    once it has no active flow, or at the drain timeout with its flows (forced)."""
    for name in names:
        controller.drain(name)
    deadline = clock() + drain_timeout_s
    waiting = list(names)
    while waiting:
        pool = _instances(controller)
        late = clock() > deadline
        for name in list(waiting):
            if pool is None and not late:
                break                        # no answer: ask again
            # None: unknown at the timeout, removed as if flows were left
            left = pool.get(name, {}).get("active_flows", 0) if pool is not None else None
            if left != 0 and not late:
                continue
            controller.remove(name, force=left != 0)
            testbed.stop(name)
            done(name, left)
            waiting.remove(name)
        if waiting:
            sleep(poll_s)
