"""Host agent for one server.

    python -m agents --server srv1                      # testbed: the containers the
                                                        # configuration puts on srv1
    python -m agents --server web1 --all --port 9101    # a real machine: all its containers
    python -m agents --server web1 --label app=web --port 9101   # by label

Serves GET /stats (JSON), GET /probes (the instances' requests in flight and recent latency,
read when asked), GET /health and GET /metrics (Prometheus). See docs/profiler.md.
With microservices that have an SLO on this server, it also runs their SLO frequency loop
(GET /slo, PUT /slo; docs/slo.md).
"""
from __future__ import annotations

import argparse
import functools
import logging
import signal
import sys
import threading
import time
from urllib.parse import urlparse

from common.cgroups import detect_layout, read_server_cpu_seconds, read_server_limits
from common.cli import ArgumentParser, fail, log_level, port_number, positive_float, \
    regex
from common.config import ConfigError, load_config


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m agents", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True, help="server name (as in the configuration)")
    p.add_argument("--config", help="configuration file (default: $MALB_CONFIG or "
                                    "configs/paper.yaml)")
    p.add_argument("--host", help="listen address (default: agents.listen_host)")
    p.add_argument("--port", type=port_number,
                   help="listen port (default: from the server's agent_url)")
    p.add_argument("--period", type=positive_float, help="sampling period in seconds "
                                                         "(default: agents.period_s)")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--label", action="append", metavar="KEY=VALUE",
                     help="select containers by label (repeatable; default: "
                          "malb.server=<server>)")
    sel.add_argument("--name-regex", type=regex, help="select containers whose name matches")
    sel.add_argument("--all", action="store_true", help="every container on this machine")
    p.add_argument("--capacity", choices=("auto", "cgroup", "config", "host"), default="auto",
                   help="what 100%% means: the server's cgroup limits (testbed), the "
                        "configuration, or this machine (default auto: cgroup, then config); "
                        "with host, everything the machine runs beside the containers counts "
                        "as outside use: only for a machine that is one server")
    p.add_argument("--network-mbit", type=positive_float,
                   help="network capacity (default: the server's network_mbit)")
    p.add_argument("--slo-actuator", choices=("auto", "cpufreq", "emulated"),
                   help="what sets the frequency of services with an SLO (default: "
                        "agents.slo.actuator)")
    p.add_argument("--log-level", type=log_level, default="INFO")
    return p


@functools.cache
def cgroup_layout():
    import docker   # deferred, as every import of the Docker SDK here: a flag error needs none
    return detect_layout(docker.from_env().info())


def capacity_function(kind: str, server, network_mbit: float):
    from agents.agent import host_capacity
    from agents.dockerstats import Capacity
    net_bps = network_mbit * 1e6 / 8
    cache = {"t": 0.0, "cap": None}

    def from_cgroup():
        if server is None:
            return None
        limits = read_server_limits(cgroup_layout(), server.name)
        if limits is None or limits[0] == float("inf"):
            return None
        return Capacity(limits[0], limits[1], net_bps, "cgroup")

    def compute():
        if kind in ("auto", "cgroup"):
            cap = from_cgroup()
            if cap or kind == "cgroup":
                return cap or Capacity(0.0, 0, net_bps, "cgroup (missing)")
        if kind in ("auto", "config") and server is not None:
            return Capacity(server.cpu, server.memory_mb * 1024 * 1024, net_bps, "config")
        return host_capacity(network_mbit)

    def capacity():
        # limits can change at run time (updateCpuLimit); re-read every few seconds
        if cache["cap"] is None or time.monotonic() - cache["t"] > 5:
            cache["cap"], cache["t"] = compute(), time.monotonic()
        return cache["cap"]
    return capacity


def whole_cpu_function(capacity_fn, server):
    """The whole server's CPU-time counter, read from what its capacity is: the server's
    cgroup, or the machine; None with a configured capacity (nothing says what the server
    is then)."""
    from agents.agent import host_cpu_seconds

    def whole_cpu_seconds():
        source = capacity_fn().source
        if source == "cgroup" and server is not None:
            return read_server_cpu_seconds(cgroup_layout(), server.name)
        if source == "host":
            return host_cpu_seconds()
        return None
    return whole_cpu_seconds


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
    server = next((s for s in cfg.servers if s.name == args.server), None)
    if server is None and not (args.all or args.label or args.name_regex):
        fail(f"--server {args.server}: not in {cfg.source} (known: "
             f"{', '.join(s.name for s in cfg.servers)}); give --all, --label or --name-regex "
             f"to run outside the testbed", code=2)
    labels, names = None, None
    if args.label:
        labels = {}
        for item in args.label:
            key, _, value = item.partition("=")
            if not key:
                fail(f"--label {item!r}: expected KEY=VALUE", code=2)
            labels[key] = value
    elif not args.all and not args.name_regex:
        # the testbed's containers of this server, by name (Containernet drops labels):
        # every slot, since a placement may start an instance in any of them
        names = {i.container: (i.name, i.microservice) for i in cfg.slots
                 if i.server == args.server}
    url = urlparse(server.agent_url) if server else None
    host = args.host or (url.hostname if url else cfg.agents.listen_host)
    port = args.port or (url.port if url else None)
    if not port:
        fail("--port: required when the server is not in the configuration", code=2)
    network_mbit = args.network_mbit or (server.network_mbit if server else 1000.0)

    import docker      # deferred: the Docker SDK, once the flags are checked

    from agents.agent import MAX_PARALLEL, Agent, Selector, http_server, served_routes
    try:
        client = docker.from_env(timeout=10, max_pool_size=MAX_PARALLEL)
        client.ping()
    except Exception as exc:   # noqa: BLE001 -- the SDK raises DockerException, requests' errors, OSError
        fail(f"cannot reach the Docker engine: {type(exc).__name__}: {exc}")
    scrape = {i.container: cfg.microservice(i.microservice).port for i in cfg.slots
              if i.server == args.server and
              cfg.microservice(i.microservice).kind == "callgraph"} if names else {}
    # every slot's service answers GET /latency (rom and callgraph alike): GET /probes
    probe_ports = {i.container: cfg.microservice(i.microservice).port for i in cfg.slots
                   if i.server == args.server} if names else {}
    capacity = capacity_function(args.capacity, server, network_mbit)
    agent = Agent(args.server, Selector(labels, args.name_regex and args.name_regex.pattern,
                                        names), capacity,
                  args.period or cfg.agents.period_s, client=client, scrape=scrape,
                  probe_ports=probe_ports, probe_window_s=cfg.agents.probe_window_s,
                  probe_timeout_s=cfg.agents.probe_timeout_s,
                  whole_cpu_fn=whole_cpu_function(capacity, server))
    slo = None
    if server is not None and any(cfg.microservice(i.microservice).slo
                                  for i in cfg.instances_on(server.name)):
        from agents.slo import SloRunner    # deferred: only servers with an SLO
        slo = SloRunner(cfg, server.name, client, agent.metrics, args.slo_actuator)
    routes = served_routes(agent, slo)
    try:
        http = http_server((host, port), routes, name=f"agent-{args.server}",
                           token=cfg.security.token)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc}")
    agent.start()
    if slo is not None:
        slo.start()
    logging.getLogger("malb.agent").info("agent for %s on http://%s:%d (%s, every %.1f s)",
                                         args.server, host, port, agent.selector.describe(),
                                         agent.period_s)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    http.start_background()
    stop.wait()
    if slo is not None:
        slo.stop()          # frequencies back as they were
    agent.stop()
    http.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
