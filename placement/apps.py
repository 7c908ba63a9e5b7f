"""Generated call-graph applications for placement experiments: a seeded DAG of call-graph
microservices with heavy and light edges, written as a configuration file.

    python -m placement generate --services 30 --seed 7 --out configs/callgraph30.yaml

Shape: one entry service (called by the clients); every other service is called by one
earlier service (a tree, so a request fans out to every service once); a few extra
``cross`` calls from a service to a later leaf (a DAG, not only a tree). An edge is heavy
(``heavy_bytes`` answered per call) with probability ``heavy_share``, else light. Every
service does ``cpu_ms`` of work per request, drawn from 1 to 3 ms. One instance each, spread
round robin over the servers at the start.
"""
from __future__ import annotations

import random


def generate(services: int = 30, seed: int = 7, heavy_share: float = 0.2,
             heavy_bytes: int = 40000, light_bytes: int = 2000, cross: int = 3,
             switches: int = 4, servers: int = 8, server_cpu: float = 0.25,
             trunk_bw_mbit: float = 10.0) -> dict:
    """A configuration mapping (as YAML would hold it) for the application."""
    if not 2 <= services <= 99:
        raise ValueError(f"services: 2 to 99, got {services}")
    rng = random.Random(seed)
    names = [f"svc{k:02d}" for k in range(1, services + 1)]
    children: dict[str, list[dict]] = {n: [] for n in names}

    def edge(callee: str) -> dict:
        heavy = rng.random() < heavy_share
        return {"service": callee, "request_bytes": 200,
                "response_bytes": heavy_bytes if heavy else light_bytes}
    for k in range(1, services):
        parent = names[rng.randrange(max(0, k - 6), k)]     # mostly recent: a deep graph
        children[parent].append(edge(names[k]))
    leaves = [n for n in names if not children[n]]
    for _ in range(cross):
        callee = rng.choice(leaves)
        candidates = [n for n in names[:names.index(callee)]
                      if all(c["service"] != callee for c in children[n])]
        if candidates:
            children[rng.choice(candidates)].append(edge(callee))
    microservices = []
    for k, n in enumerate(names):
        item = {"name": n, "abbrev": f"s{k + 1:02d}", "port": 10001 + k, "kind": "callgraph",
                "flow_class": "short", "replicas": 1, "cpu_ms": rng.choice([1, 2, 3]),
                "response_bytes": 20000 if k == 0 else 1000}
        if children[n]:
            item["calls"] = children[n]
        microservices.append(item)
    return {
        "testbed": {"switches": switches, "clients": 2, "trunk_bw_mbit": trunk_bw_mbit},
        "servers": {"count": servers, "cpu": server_cpu, "memory": "256m"},
        "microservices": microservices,
        "controller": {"monitoring_period_s": 3, "idle_timeout_s": 10},
        "profiler": {"period_s": 3, "graph_window_s": 30},
    }
