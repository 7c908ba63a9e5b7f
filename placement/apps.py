"""Generated call-graph applications for placement and load-balancing experiments: a seeded
DAG of call-graph microservices with heavy and light edges, written as a configuration file.

    python -m placement generate --services 30 --seed 7 --out configs/callgraph30.yaml

- generate: the configuration mapping of such an application (its shape: its docstring);
- entry_services: the services no other service calls, where the clients' requests enter;
- entry_mix: the shares of requests per entry service (a `# benchmark-mix:` line);
- expected_graph: the communication graph the profiler would measure under a given request
  rate at each entry service (for planning without a running stack: benchmarks, sizing).
"""
from __future__ import annotations

import random

from placement.problem import CLIENTS_PREFIX


def generate(services: int = 30, seed: int = 7, heavy_share: float = 0.2,
             heavy_bytes: int = 40000, light_bytes: int = 2000, cross: int = 3,
             switches: int = 4, servers: int = 8, server_cpu: float = 0.25,
             trunk_bw_mbit: float = 10.0, entries: int = 1, replicas: int = 1,
             heavy_cpu_share: float = 0.0, heavy_cpu_ms: float = 30.0) -> dict:
    """A configuration mapping (as YAML would hold it) for the application. `entries` entry
    services are called by the clients; every other service is called by one earlier
    service (a tree per entry, so a request fans out to every service of its tree once),
    plus `cross` calls from a service to a later leaf (a DAG, not only a tree). An edge
    answers `heavy_bytes` per call with probability `heavy_share`, else `light_bytes`. Every
    service does 1, 2 or 3 ms of CPU work per request, or `heavy_cpu_ms` with probability
    `heavy_cpu_share`; `replicas` instances each, spread round robin over the servers. The
    defaults give configs/callgraph30.yaml."""
    if not 2 <= services <= 99:
        raise ValueError(f"services: 2 to 99, got {services}")
    if not 1 <= entries < services:
        raise ValueError(f"entries: 1 to services - 1, got {entries}")
    if not 1 <= replicas <= servers:
        raise ValueError(f"replicas: 1 to servers ({servers}), got {replicas}")
    rng = random.Random(seed)
    names = [f"svc{k:02d}" for k in range(1, services + 1)]
    children: dict[str, list[dict]] = {n: [] for n in names}

    def edge(callee: str) -> dict:
        heavy = rng.random() < heavy_share
        return {"service": callee, "request_bytes": 200,
                "response_bytes": heavy_bytes if heavy else light_bytes}
    for k in range(entries, services):
        parent = names[rng.randrange(max(0, k - 6), k)]     # mostly recent: a deep graph
        children[parent].append(edge(names[k]))
    leaves = [n for n in names if not children[n] and names.index(n) >= entries]
    for _ in range(cross):
        callee = rng.choice(leaves)
        candidates = [n for n in names[:names.index(callee)]
                      if all(c["service"] != callee for c in children[n])]
        if candidates:
            children[rng.choice(candidates)].append(edge(callee))
    microservices = []
    for k, n in enumerate(names):
        cpu_ms = rng.choice([1, 2, 3])
        # drawn only when asked for, so the default draws stay the ones they always were
        if heavy_cpu_share > 0 and rng.random() < heavy_cpu_share:
            cpu_ms = heavy_cpu_ms
        item = {"name": n, "abbrev": f"s{k + 1:02d}", "port": 10001 + k, "kind": "callgraph",
                "flow_class": "short", "replicas": replicas, "cpu_ms": cpu_ms,
                "response_bytes": 20000 if k < entries else 1000}
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


def entry_services(data: dict) -> list[str]:
    """The services no other service calls, in order: where the clients' requests enter."""
    called = {c["service"] for ms in data["microservices"] for c in ms.get("calls", ())}
    return [ms["name"] for ms in data["microservices"] if ms["name"] not in called]


def entry_mix(path: str, entries: list[str]) -> dict[str, float]:
    """The shares of requests per entry service: a `# benchmark-mix: name=share, ...` line
    of the configuration file, else equal."""
    with open(path) as fh:
        for line in fh:
            if line.startswith("# benchmark-mix:"):
                mix = {}
                for part in line.split(":", 1)[1].split(","):
                    name, _, share = part.strip().partition("=")
                    if name not in entries:
                        raise ValueError(f"{path}: benchmark-mix names {name!r}, not an "
                                         f"entry service")
                    mix[name] = float(share)
                return mix
    return {e: 1.0 for e in entries}


def expected_graph(cfg, rates: dict[str, float], client_switch: str | None = None) -> dict:
    """The graph (as the profiler's GET /graph answers it) of a call-graph application
    under `rates` requests/s at its entry services: every request a service serves makes
    each of its calls `count` times, so a service's rate is the sum over its callers; an
    edge carries the call's request and response bytes; a service uses its `cpu_ms` per
    request; the clients (on `client_switch`, default the first client's) send the entry
    services their rates and receive their `response_bytes`. Unknown or non-entry services
    in `rates`: ValueError naming them."""
    by_name = {m.name: m for m in cfg.microservices}
    called = {c.service for m in cfg.microservices for c in (m.calls or ())}
    for name, r in rates.items():
        if name not in by_name or name in called:
            raise ValueError(f"rates: {name!r} is not an entry service of the configuration")
        if not r >= 0:
            raise ValueError(f"rates.{name}: expected requests/s >= 0, got {r!r}")
    rate = {name: 0.0 for name in by_name}
    for name, r in rates.items():
        rate[name] += r
    # callers before callees: the calls form a DAG (the configuration refuses a cycle)
    order, seen = [], set()

    def visit(n):
        if n not in seen:
            seen.add(n)
            for c in by_name[n].calls or ():
                visit(c.service)
            order.append(n)
    for n in by_name:
        visit(n)
    edges = []
    for n in reversed(order):
        for c in by_name[n].calls or ():
            calls = rate[n] * c.count
            rate[c.service] += calls
            if calls:
                edges.append({"caller": n, "callee": c.service,
                              "bytes_per_s": calls * (c.request_bytes + c.response_bytes)})
    switch = client_switch or cfg.testbed.clients[0].switch
    for name, r in rates.items():
        if r:
            edges.append({"caller": f"{CLIENTS_PREFIX}{switch}", "callee": name,
                          "bytes_per_s": r * (by_name[name].response_bytes or 0)})
    vertices = {n: {"cpu_cores": rate[n] * (by_name[n].cpu_ms or 0.0) / 1000.0,
                    "memory_mb": None} for n in by_name}
    return {"vertices": vertices, "edges": edges}
