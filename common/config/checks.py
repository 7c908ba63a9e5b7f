"""Checks across a whole configuration, beyond each field's own:

- check_acyclic(): call graphs are DAGs;
- reachable(), check_end_to_end(): the services a request reaches; an end-to-end
  objective's services all have loops, and no service is under two of them;
- check_vips(): every VIP a free host address of the testbed's subnet;
- check_slo_cores_exclusive(): a service with an SLO has its cores alone;
- listeners(), check_listeners(): no two of the platform's services on one port;
- check_deployable(): what a testbed and the controller need beyond a valid configuration;
  check_testbed_builds(): what only the testbed needs (its own network).
"""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from common.config.fields import ConfigError
from common.config.model import MAX_INSTANCES, MAX_MICROSERVICES, Config

WILDCARD_HOSTS = ("0.0.0.0", "::")


def check_acyclic(microservices) -> None:
    """Calls must form a DAG: a cycle would make requests call each other for ever."""
    calls = {m.name: [c.service for c in m.calls] for m in microservices}
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = trail[trail.index(name):] + [name]
            raise ConfigError(f"microservices: calls form a cycle: {' -> '.join(cycle)}")
        state[name] = 1
        for callee in calls[name]:
            visit(callee, trail + [name])
        state[name] = 2
    for m in microservices:
        visit(m.name, [])


def reachable(microservices, entry: str) -> list[str]:
    """The services a request to entry reaches (itself excluded), in the order met."""
    calls = {m.name: [c.service for c in m.calls] for m in microservices}
    out: list[str] = []
    stack = list(reversed(calls[entry]))
    while stack:
        name = stack.pop()
        if name not in out:
            out.append(name)
            stack.extend(reversed(calls[name]))
    return out


def check_end_to_end(microservices) -> None:
    """An end-to-end objective is split into budgets for the loops of the services its entry
    calls (slo/budgets.py): each of them needs a loop, and one owner of its target."""
    by_name = {m.name: m for m in microservices}
    owner: dict[str, str] = {}
    for m in microservices:
        if m.slo is not None and m.slo.scope != "end-to-end" and m.slo.split != "uniform":
            raise ConfigError(f"microservices[{m.index - 1}].slo.split: only an end-to-end "
                              f"objective is split into budgets; {m.name}'s scope is "
                              f"{m.slo.scope}")
        if m.slo is None or m.slo.scope != "end-to-end":
            continue
        where = f"microservices[{m.index - 1}].slo.scope"
        below = reachable(microservices, m.name)
        if not below:
            raise ConfigError(f"{where}: end-to-end needs calls to split the objective over; "
                              f"{m.name} calls nothing (use scope: service)")
        for name in below:
            callee = by_name[name]
            if callee.slo is None:
                raise ConfigError(f"{where}: {m.name}'s objective is split over the services "
                                  f"it calls, and {name} has no slo (give it one: its "
                                  f"target_ms is where its loop starts)")
            if callee.slo.scope == "end-to-end":
                raise ConfigError(f"{where}: {name}, called by {m.name}, has an end-to-end "
                                  f"objective of its own; only the entry's is split")
            if name in owner:
                raise ConfigError(f"{where}: {name} is under both {owner[name]}'s and "
                                  f"{m.name}'s end-to-end objectives (one target per loop)")
            owner[name] = m.name


def check_vips(microservices, testbed, slots, own_subnet: bool = True) -> None:
    """Clients ARP for a VIP only when it is on their own link's subnet, and no host may
    have its address. In the user's own network (not own_subnet) the subnet is theirs to
    choose."""
    taken = {i.ip for i in slots} | {c.ip for c in testbed.clients} | \
        ({testbed.proxy.ip} if testbed.proxy else set())
    subnet = ipaddress.ip_network(f"10.0.0.0/{testbed.prefix_len}")
    for ms in microservices:
        if ms.vip in taken:
            raise ConfigError(f"microservices[{ms.index - 1}].vip: {ms.vip} collides with a "
                              f"host address")
        if own_subnet and ipaddress.ip_address(ms.vip) not in subnet or ms.vip in (
                str(subnet.network_address), str(subnet.broadcast_address)):
            raise ConfigError(f"microservices[{ms.index - 1}].vip: {ms.vip} is not a host "
                              f"address in the testbed's subnet {subnet}")


def check_slo_cores_exclusive(servers, microservices, instances) -> None:
    """A service with an SLO sets the frequency of the cores it runs on, so it must have them
    alone (spec F7): no other service on its server, no other server pinned to them."""
    by_name = {m.name: m for m in microservices}
    for srv in servers:
        here = [i.microservice for i in instances if i.server == srv.name]
        with_slo = [m for m in here if by_name[m].slo is not None]
        if not with_slo:
            continue
        where = f"servers[{srv.index - 1}]"
        if len(here) > 1:
            raise ConfigError(f"{where}: {with_slo[0]} has an SLO, so it needs its server's "
                              f"cores alone; also placed on {srv.name}: "
                              f"{', '.join(m for m in here if m != with_slo[0])}")
        for other in servers:
            shared = sorted(set(srv.cores) & set(other.cores))
            if other is not srv and shared:
                raise ConfigError(f"{where}.cores: CPU {shared[0]} is also pinned to "
                                  f"{other.name}; {with_slo[0]} has an SLO and needs its "
                                  f"cores alone (its frequency is theirs)")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listeners(cfg: Config) -> list[tuple[str, str, int, bool]]:
    """Every port the platform's own processes listen on: (the field that sets it, host,
    port, local). Local: on the machine of the controller, profiler and testbed (an agent
    whose address is a loopback or wildcard one is there too); other agents run on their
    own machines. Ryu listens for OpenFlow on every address."""
    c, p = cfg.controller, cfg.profiler
    out = [("controller.rest_port", c.rest_host, c.rest_port, True),
           ("controller.ofp_port", "0.0.0.0", c.ofp_port, True),
           ("profiler.listen_port", p.listen_host, p.listen_port, True),
           ("testbed.control_port", "127.0.0.1", cfg.testbed.control_port, True)]
    for srv in cfg.servers:
        url = urlsplit(srv.agent_url)
        if url.port is None:           # agents then need --port: nothing to compare
            continue
        host = url.hostname or ""
        out.append((f"servers[{srv.index - 1}].agent_url", host, url.port,
                    host in WILDCARD_HOSTS or _loopback(host)))
    return out


def check_listeners(cfg: Config) -> None:
    """No two of the platform's services on one port of one machine: the second would fail
    to start (or, with SO_REUSEPORT, share the port with the first)."""
    seen: list[tuple[str, str, int, bool]] = []
    for where, host, port, local in listeners(cfg):
        for other, ohost, oport, olocal in seen:
            if port != oport:
                continue
            same = host == ohost or (local and olocal and (
                host in WILDCARD_HOSTS or ohost in WILDCARD_HOSTS or
                (_loopback(host) and _loopback(ohost))))
            if same:
                raise ConfigError(f"{where}: port {port} is also {other}'s ({ohost}:{oport}); "
                                  f"two services cannot listen on one port")
        seen.append((where, host, port, local))


def check_deployable(cfg: Config) -> None:
    """What a testbed and the controller need beyond a valid configuration (the profiler
    alone, e.g. its benchmark, scales further): addresses 10.0.<server>.<microservice> and
    flow cookies with 8 bits for the microservice and 12 for the instance."""
    if len(cfg.microservices) > MAX_MICROSERVICES:
        raise ConfigError(f"microservices: a testbed or controller takes at most "
                          f"{MAX_MICROSERVICES} microservices, got {len(cfg.microservices)}")
    if len(cfg.slots) > MAX_INSTANCES:
        raise ConfigError(f"servers x microservices: a testbed or controller takes at most "
                          f"{MAX_INSTANCES} instances, got {len(cfg.servers)} x "
                          f"{len(cfg.microservices)}")


def check_testbed_builds(cfg: Config) -> None:
    """The testbed builds its own network; a configuration of the user's (`network:`) is
    the controller's to serve, not the testbed's to build."""
    check_deployable(cfg)
    if cfg.declared_network:
        raise ConfigError("network.instances: this configuration describes your own network; "
                          "the testbed builds only its own (run the controller on your "
                          "network: docs/configuration.md, \"Your own network\")")
