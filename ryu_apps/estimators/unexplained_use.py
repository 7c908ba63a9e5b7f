"""What a short-flow instance uses that the controller's flows on it do not explain (plain
Python): load no flow of ours caused, such as a noisy neighbour inside the container, which
`malb` must not average away with the microservice's level (estimators/running_load.py;
docs/controller.md, "How a decision is made", step 3).

- UnexplainedUse: per instance its last `samples` samples, beside the seconds of flow it
  carried (read when asked, so a flow found later to have ended earlier counts so);
  `unexplained`: its use beyond them at the per-flow cost; `excess`: that use above its
  peers' median;
- DEFAULT_SAMPLES: how many samples (5).
"""
from __future__ import annotations

from collections import deque
from statistics import median
from collections.abc import Callable

DEFAULT_SAMPLES = 5


class UnexplainedUse:
    """Under a policy that follows every short flow to its end, the controller knows how
    many seconds of flow each instance carried (estimators/open_flows.InstanceFlows.
    flow_seconds); at the per-flow cost that is the CPU and network its flows explain. What
    it used beyond that over its last `samples` samples is unexplained; its excess is that
    above its peers' median (their idle processes, and whatever the per-flow cost misses
    everywhere alike)."""

    def __init__(self, flow_seconds: Callable[[str, float], float],
                 samples: int = DEFAULT_SAMPLES):
        # flow_seconds(instance, t): the seconds of flow it carried from the start up to t
        self.flow_seconds = flow_seconds
        self.samples = samples
        # instance -> its recent samples: (time, CPU %, network %)
        self._seen: dict[str, deque] = {}

    def observe(self, instance: str, t: float, cpu: float, net: float) -> None:
        """A sample of the instance's use over the period up to t."""
        q = self._seen.setdefault(instance, deque(maxlen=self.samples + 1))
        if q and t <= q[-1][0]:
            return                      # an older or repeated sample
        q.append((t, cpu, net))

    def unexplained(self, instance: str, cost: tuple[float, float] | None,
                    now: float, keep_s: float) -> tuple[float, float] | None:
        """(CPU %, network %) the instance used on average over its recent samples beyond
        what its flows explain at `cost` (per running flow, % of its server), or None
        without two samples within keep_s or without a cost."""
        q = self._seen.get(instance)
        if cost is None or not q or len(q) < 2 or now - q[-1][0] > keep_s:
            return None
        used = list(q)[1:]              # the first only marks where the flows count from
        span = q[-1][0] - q[0][0]
        carried = self.flow_seconds(instance, q[-1][0]) - self.flow_seconds(instance, q[0][0])
        busy = carried / span if span > 0 else 0.0      # flows running, on average
        cpu = sum(s[1] for s in used) / len(used) - busy * cost[0]
        net = sum(s[2] for s in used) / len(used) - busy * cost[1]
        return max(0.0, cpu), max(0.0, net)

    def excess(self, instance: str, peers: list[str], cost_of, now: float,
               keep_s: float) -> tuple[float, float]:
        """The instance's unexplained use above its peers' median (0 when either is
        unknown); cost_of(instance) gives the per-flow cost on that instance's server."""
        own = self.unexplained(instance, cost_of(instance), now, keep_s)
        if own is None:
            return 0.0, 0.0
        others = [u for p in peers if p != instance
                  and (u := self.unexplained(p, cost_of(p), now, keep_s)) is not None]
        # the peers' median: one noisy neighbour does not move it, and unlike their least
        # it does not set every instance's sampling noise above a baseline of its own
        return (max(0.0, own[0] - (median(u[0] for u in others) if others else 0.0)),
                max(0.0, own[1] - (median(u[1] for u in others) if others else 0.0)))
