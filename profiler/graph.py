"""The microservice communication graph (MCG of Ahmed et al., PLOS ONE), as plain Python, built
from what the platform measures already (docs/placement.md, "The communication graph").

- GraphBook: edges per (caller, callee) microservice from the controller's traffic pairs
  (clients: ``clients@<switch>``), response times per edge from the call-graph services'
  latency histograms, each instance's CPU and memory from the agents, all smoothed by an
  EWMA over window_s;
- Edge, InstanceUse: an edge's and an instance's smoothed figures;
- ewma_alpha: the weight of a new interval in an EWMA of a given memory;
- CLIENTS: the clients' caller prefix.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

CLIENTS = "clients"


def ewma_alpha(interval_s: float, window_s: float) -> float:
    """The weight of a new interval in an EWMA whose memory is window_s (time constant)."""
    return 1.0 - math.exp(-max(0.0, interval_s) / window_s) if window_s > 0 else 1.0


@dataclass
class Edge:
    bytes_per_s: float = 0.0
    flows_per_s: float = 0.0
    rt_ms: float | None = None         # mean response time of the calls, smoothed
    rt_p95_ms: float | None = None
    first_seen: float = 0.0
    last_seen: float = 0.0             # last report in which it carried traffic
    intervals: int = 0                 # reports it was smoothed over
    total_bytes: int = 0

    def as_dict(self, now: float) -> dict:
        return {"bytes_per_s": round(self.bytes_per_s, 3),
                "flows_per_s": round(self.flows_per_s, 4),
                "rt_ms": None if self.rt_ms is None else round(self.rt_ms, 3),
                "rt_p95_ms": None if self.rt_p95_ms is None else round(self.rt_p95_ms, 3),
                "intervals": self.intervals, "total_bytes": self.total_bytes,
                "age_s": round(now - self.last_seen, 3)}


@dataclass
class InstanceUse:
    server: str
    cpu_cores: float | None
    memory_mb: float | None
    time: float                        # the agent sample it was last updated from

    def as_dict(self) -> dict:
        return {"server": self.server,
                "cpu_cores": None if self.cpu_cores is None else round(self.cpu_cores, 4),
                "memory_mb": None if self.memory_mb is None else round(self.memory_mb, 4)}


def _smooth(old: float | None, new: float | None, alpha: float) -> float | None:
    if new is None or old is None:
        return new       # unknown now, or the first reading: the level is what was read
    return old + alpha * (new - old)


@dataclass
class GraphBook:
    """Edges between microservices (and clients), kept up to date from reports. An edge
    exists once it was observed: a pair never reported is unknown, not zero. A known edge
    that a report does not mention carried nothing in that interval (a report lists every
    pair that sent a byte); with no report at all, nothing changes and the edge's age
    grows. Instances' CPU and memory are smoothed too, so a graph read just after a burst
    still shows the load it carried.

    service_of: instance name -> microservice; client_switch: client host -> its switch."""
    service_of: dict[str, str]
    client_switch: dict[str, str]
    window_s: float = 30.0
    edges: dict[tuple[str, str], Edge] = field(default_factory=dict)
    last_report: float | None = None
    use: dict[str, InstanceUse] = field(default_factory=dict)   # instance -> smoothed use

    def caller(self, src: str) -> str | None:
        if src in self.service_of:
            return self.service_of[src]
        if src in self.client_switch:
            return f"{CLIENTS}@{self.client_switch[src]}"
        return None

    def add_report(self, pairs: dict, now: float) -> int:
        """One report of the controller's pairs ({"interval_s", "edges": [{"src", "dst",
        "bytes", "flows"}]}); returns how many edges it touched. Pairs naming neither a
        known instance nor a client are left out (a foreign host)."""
        interval = float(pairs.get("interval_s") or 0.0)
        sums: dict[tuple[str, str], list[float]] = {}
        for row in pairs.get("edges") or []:
            src, dst = self.caller(row["src"]), self.service_of.get(row["dst"])
            if src is None or dst is None:
                continue
            acc = sums.setdefault((src, dst), [0.0, 0.0])
            acc[0] += row["bytes"]
            acc[1] += row["flows"]
        self.last_report = now
        if interval <= 0:
            return 0
        alpha = ewma_alpha(interval, self.window_s)
        for key in set(self.edges) | set(sums):
            nbytes, nflows = sums.get(key, (0.0, 0.0))
            edge = self.edges.get(key)
            if edge is None:
                # the first observation is the level: nothing before it was known
                edge = self.edges[key] = Edge(nbytes / interval, nflows / interval,
                                              first_seen=now, last_seen=now)
            else:
                edge.bytes_per_s += alpha * (nbytes / interval - edge.bytes_per_s)
                edge.flows_per_s += alpha * (nflows / interval - edge.flows_per_s)
            if nbytes or nflows:
                edge.last_seen = now
            edge.intervals += 1
            edge.total_bytes += int(nbytes)
        return len(sums)

    def add_latency(self, caller: str, callee: str, mean_ms: float, p95_ms: float | None,
                    interval_s: float) -> None:
        """A caller's view of its calls to a callee over an interval (from its service's
        histogram). Only for edges already seen in the traffic."""
        edge = self.edges.get((caller, callee))
        if edge is None or not math.isfinite(mean_ms):
            return
        alpha = ewma_alpha(interval_s, self.window_s)
        edge.rt_ms = mean_ms if edge.rt_ms is None else edge.rt_ms + alpha * (mean_ms -
                                                                               edge.rt_ms)
        if p95_ms is not None and math.isfinite(p95_ms):
            edge.rt_p95_ms = p95_ms if edge.rt_p95_ms is None else \
                edge.rt_p95_ms + alpha * (p95_ms - edge.rt_p95_ms)

    def add_use(self, server: str, readings: dict[str, tuple[float | None, float | None]],
                sample_time: float) -> None:
        """One agent sample of a server: {instance: (cpu cores, memory MB)} for every
        instance it runs (None: unreadable). Instances the server no longer reports have
        left it (removed or moved) and leave the graph with it."""
        for name in [n for n, u in self.use.items()
                     if u.server == server and n not in readings]:
            del self.use[name]
        for name, (cpu, mem) in readings.items():
            u = self.use.get(name)
            if u is None or u.server != server:
                self.use[name] = InstanceUse(server, cpu, mem, sample_time)
                continue
            if sample_time <= u.time:
                continue     # the same sample again: one load, counted once
            alpha = ewma_alpha(sample_time - u.time, self.window_s)
            u.cpu_cores, u.memory_mb = _smooth(u.cpu_cores, cpu, alpha), \
                _smooth(u.memory_mb, mem, alpha)
            u.time = sample_time

    def vertices(self, microservices) -> dict[str, dict]:
        """Each microservice with its instances' smoothed use and the sums (None when no
        instance could be read)."""
        out = {}
        for ms in microservices:
            inst = {n: u for n, u in sorted(self.use.items()) if self.service_of.get(n) == ms}
            known = [u for u in inst.values() if u.cpu_cores is not None]
            out[ms] = {"instances": {n: u.as_dict() for n, u in inst.items()},
                       "cpu_cores": round(sum(u.cpu_cores or 0.0 for u in known), 4)
                       if known else None,
                       "memory_mb": round(sum(u.memory_mb or 0.0 for u in known), 2)
                       if known else None}
        return out

    def view(self, now: float, microservices) -> dict:
        """The graph as JSON: vertices (microservices, with their instances' smoothed use)
        and edges (caller -> callee), plus the clients' anchors."""
        return {"time": now, "window_s": self.window_s,
                "last_report_age_s": None if self.last_report is None
                else round(now - self.last_report, 3),
                "vertices": self.vertices(microservices),
                "edges": [{"caller": a, "callee": b, **e.as_dict(now)}
                          for (a, b), e in sorted(self.edges.items())]}
