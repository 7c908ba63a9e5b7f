"""What an instance uses while none of the controller's flows is open on it (plain Python).

A short-flow microservice's part of a server's samples swings with the objects it happens to
serve; `malb` takes that part at the microservice's level over all servers
(estimators/running_load.py). Load that no flow of ours caused, such as a noisy neighbour
inside the container, must not be averaged away with it. Under a policy that watches
every short flow to its end, a sample taken when the instance had no flow open since the
previous one (and none started or ended in between) shows exactly that load. The latest
such sample is kept per instance for `keep_s`; an instance's excess is what it uses then
above the quietest other instance of its microservice (their idle processes).
"""
from __future__ import annotations

DEFAULT_KEEP_S = 60.0


class QuietUse:
    def __init__(self, keep_s: float = DEFAULT_KEEP_S):
        self.keep_s = keep_s
        self._mark: dict[str, tuple[int, int]] = {}           # instance -> (events, open)
        self._quiet: dict[str, tuple[float, float, float]] = {}   # -> (cpu %, net %, time)

    def observe(self, instance: str, events: int, open_now: int, cpu: float, net: float,
                t: float) -> None:
        """A sample of the instance's use at t; `events`: how many of its flows have
        started or ended so far, `open_now`: how many are open."""
        before = self._mark.get(instance)
        self._mark[instance] = (events, open_now)
        if events > 0 and open_now == 0 and before == (events, 0):
            self._quiet[instance] = (cpu, net, t)

    def excess(self, instance: str, peers: list[str], now: float) -> tuple[float, float]:
        """(CPU %, network %) the instance used in its latest quiet sample above the
        quietest of its peers' (0 when the instance has none within keep_s)."""
        own = self._fresh(instance, now)
        if own is None:
            return 0.0, 0.0
        others = [q for p in peers if p != instance and (q := self._fresh(p, now))]
        base_cpu = min((q[0] for q in others), default=0.0)
        base_net = min((q[1] for q in others), default=0.0)
        return max(0.0, own[0] - base_cpu), max(0.0, own[1] - base_net)

    def latest(self, instance: str) -> tuple[float, float, float] | None:
        return self._quiet.get(instance)

    def _fresh(self, instance: str, now: float) -> tuple[float, float, float] | None:
        q = self._quiet.get(instance)
        return q if q is not None and now - q[2] <= self.keep_s else None
