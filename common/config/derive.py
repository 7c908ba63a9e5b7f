"""What the platform derives from a configuration so every component agrees on it without
talking to the others (docs/testbed.md documents the rules):

- place_microservices(): each microservice's servers at the start;
- derive_topology(): switches, trunks, clients, the proxy, and every instance slot with its
  name, address, MAC and switch port;
- declared_topology(): the same from the user's own network (`network:`): its switches, and
  the instances where it has them;
- active_flow_ttl_s(), active_flow_refresh_s(): the profiler's and controller's flow
  keep-alive; callgraph_spec(): what a call-graph instance is told.
"""
from __future__ import annotations

import dataclasses

from common.config.fields import ConfigError
from common.config.model import (MAX_INSTANCES, TRACKER_ZONES, Client, Config, Instance,
                                 Microservice, NetworkSection, Proxy, Server, Switch,
                                 TestbedCfg, TestbedSection, Trunk, mac_for)

LINUX_IFNAME_MAX = 15  # IFNAMSIZ - 1; Mininet names interfaces "<node>-eth<n>"
# The outside balancer's host (testbed.proxy), outside the clients' 10.0.200.0/24: the
# controller takes instances' answers to that block that no NAT rule rewrites (orphans)
# to itself, while answers to the proxy must go by plain L2.
PROXY_NAME, PROXY_IP = "prx1", "10.0.201.1"
PREFIX_LEN = 16


def place_microservices(microservices: tuple[Microservice, ...],
                        servers: tuple[Server, ...]) -> tuple[Microservice, ...]:
    """Each microservice's servers at the start: as listed; or `replicas` of them, spread
    round robin from the microservice's own offset; or every server."""
    names = [s.name for s in servers]
    out = []
    for ms in microservices:
        where = f"microservices[{ms.index - 1}]"
        if ms.servers:
            unknown = [x for x in ms.servers if x not in names]
            if unknown:
                raise ConfigError(f"{where}.servers: unknown server {unknown[0]!r} (have "
                                  f"{', '.join(names)})")
            chosen = ms.servers
        elif ms.replicas:
            r = ms.replicas
            if r > len(names):
                raise ConfigError(f"{where}.replicas: {r} replicas for {len(names)} servers "
                                  f"(at most one instance of a microservice per server)")
            chosen = tuple(names[(ms.index - 1 + j) % len(names)] for j in range(r))
        else:
            chosen = tuple(names)
        out.append(dataclasses.replace(ms, servers=chosen))
    return tuple(out)


def switch_names(tb: TestbedSection) -> list[str]:
    return [f"s{k}" for k in range(1, tb.switches + 1)]


def derive_topology(tb: TestbedSection, servers: tuple[Server, ...],
                    microservices: tuple[Microservice, ...]
                    ) -> tuple[TestbedCfg, tuple[Instance, ...], tuple[Instance, ...]]:
    """Addresses and switch ports:

    - switch s<k> has dpid k;
    - the slot of microservice j on server i: node srv<i>-<abbrev>, 10.0.<i>.<j>, MAC
      02:00:00:01:<i>:<j>, whether an instance runs there or not;
    - client k: node cli<k>, 10.0.200.<k>, MAC 02:00:00:02:00:<k>, on s1;
    - the proxy (testbed.proxy): node prx1, 10.0.201.1, MAC 02:00:00:03:00:01, on s1;
    - ports on each switch: slots first (server order, then microservice order), then
      clients (s1 only), then trunk ports, then the proxy (s1 only).
    Returns (testbed, the instances running at the start, every slot).
    """
    switches = tuple(Switch(name, k) for k, name in enumerate(switch_names(tb), start=1))
    next_port = {s.name: 1 for s in switches}
    slots = []
    for srv in servers:
        for ms in microservices:
            name = f"{srv.name}-{ms.abbrev}"
            if len(name) + len("-eth0") > LINUX_IFNAME_MAX:
                raise ConfigError(
                    f"servers: node name {name!r} is too long for Linux interface names "
                    f"(<= {LINUX_IFNAME_MAX - 5} characters); shorten the server name or the "
                    f"microservice abbrev")
            sw = next(s for s in switches if s.name == srv.switch)
            slots.append(Instance(
                name=name, microservice=ms.name, server=srv.name,
                ip=f"10.0.{srv.index}.{ms.index}", mac=mac_for(1, srv.index, ms.index),
                switch=sw.name, dpid=sw.dpid, switch_port=next_port[sw.name],
                slot=(srv.index - 1) * len(microservices) + ms.index - 1))
            next_port[sw.name] += 1
    placed = {(ms.name, srv) for ms in microservices for srv in ms.servers}
    instances = [i for i in slots if (i.microservice, i.server) in placed]
    clients = []
    for k in range(1, tb.clients + 1):
        clients.append(Client(name=f"cli{k}", ip=f"10.0.200.{k}", mac=mac_for(2, 0, k),
                              switch="s1", dpid=1, switch_port=next_port["s1"]))
        next_port["s1"] += 1
    trunks = []
    for a, b in zip(switches, switches[1:]):  # a chain: s1 - s2 - s3 - s4
        trunks.append(Trunk(a.name, b.name, next_port[a.name], next_port[b.name],
                            tb.trunk_bw_mbit))
        next_port[a.name] += 1
        next_port[b.name] += 1
    # the proxy last: every other port keeps its number whether there is a proxy or not
    proxy = Proxy(name=PROXY_NAME, ip=PROXY_IP, mac=mac_for(3, 0, 1), switch="s1", dpid=1,
                  switch_port=next_port["s1"]) if tb.proxy else None
    testbed = TestbedCfg(datapath=tb.datapath, controller=tb.controller, prefix_len=PREFIX_LEN,
                         trunk_bw_mbit=tb.trunk_bw_mbit, host_bw_mbit=tb.host_bw_mbit,
                         switches=switches, trunks=tuple(trunks), clients=tuple(clients),
                         control_port=tb.control_port, client_bw_mbit=tb.client_bw_mbit,
                         proxy=proxy, calls_via=tb.calls_via)
    return testbed, tuple(instances), tuple(slots)


def declared_topology(tb: TestbedSection, network: NetworkSection, servers: tuple[Server, ...],
                      microservices: tuple[Microservice, ...]
                      ) -> tuple[TestbedCfg, tuple[Instance, ...], tuple[Microservice, ...]]:
    """The user's own network: its switches by datapath id, no trunks or clients (the
    controller finds the links between switches and where clients are), and the listed
    instances, each at its own address and MAC, on its switch and port where given (else
    located by the controller). Returns (testbed, instances, microservices placed where their
    instances are)."""
    if not network.switches:
        raise ConfigError("network.switches: required with network.instances: the switches "
                          "the controller serves, each {name, dpid}")
    if tb.proxy:
        raise ConfigError("testbed.proxy: the proxy host is built by the testbed; not with "
                          "network.instances")
    if len(network.instances) > MAX_INSTANCES:
        raise ConfigError(f"network.instances: at most {MAX_INSTANCES} instances, got "
                          f"{len(network.instances)}")
    switches: dict[str, Switch] = {}
    dpids = set()
    for k, sw in enumerate(network.switches):
        if sw.name in switches:
            raise ConfigError(f"network.switches[{k}].name: duplicate switch {sw.name!r}")
        if sw.dpid in dpids:
            raise ConfigError(f"network.switches[{k}].dpid: duplicate datapath id "
                              f"{sw.dpid:016x}")
        switches[sw.name] = Switch(sw.name, sw.dpid, sw.tracker_zone or 0)
        dpids.add(sw.dpid)
    zones: dict[int, str] = {}
    for k, declared in enumerate(switches.values()):
        if declared.tracker_zone in zones:
            raise ConfigError(
                f"network.switches[{k}]: switches {zones[declared.tracker_zone]!r} and "
                f"{declared.name!r} have the same connection-tracker zone "
                f"{declared.tracker_zone} (from their datapath ids unless set): give one "
                f"another tracker_zone (1-{TRACKER_ZONES})")
        zones[declared.tracker_zone] = declared.name
    by_name = {m.name: m for m in microservices}
    server_names = [s.name for s in servers]
    instances: list[Instance] = []
    seen: dict[str, set] = {"name": set(), "ip": set(), "mac": set(), "pair": set()}
    for k, d in enumerate(network.instances):
        where = f"network.instances[{k}]"
        ms = by_name.get(d.microservice)
        if ms is None:
            raise ConfigError(f"{where}.microservice: unknown microservice {d.microservice!r} "
                              f"(have {', '.join(by_name)})")
        if d.server not in server_names:
            raise ConfigError(f"{where}.server: unknown server {d.server!r} (have "
                              f"{', '.join(server_names)})")
        if d.switch is not None and d.switch not in switches:
            raise ConfigError(f"{where}.switch: unknown switch {d.switch!r} (have "
                              f"{', '.join(switches)})")
        name = d.name or f"{d.server}-{ms.abbrev}"
        for key, value, what in (("pair", (ms.name, d.server), None), ("name", name, "name"),
                                 ("ip", d.ip, "address"), ("mac", d.mac, "MAC")):
            if value in seen[key]:
                raise ConfigError(
                    f"{where}.{key if what else 'server'}: " +
                    (f"duplicate instance {what} {value!r}" if what else
                     f"a second instance of {ms.name} on {d.server} (at most one per server)"))
            seen[key].add(value)
        if int(d.mac[:2], 16) & 1:
            raise ConfigError(f"{where}.mac: {d.mac} is a multicast address")
        on = switches.get(d.switch) if d.switch else None
        instances.append(Instance(name=name, microservice=ms.name, server=d.server, ip=d.ip,
                                  mac=d.mac, switch=on.name if on else None,
                                  dpid=on.dpid if on else None, switch_port=d.port, slot=k))
    placed = []
    for ms in microservices:
        where_ = tuple(dict.fromkeys(i.server for i in instances if i.microservice == ms.name))
        if not where_:
            raise ConfigError(f"network.instances: no instance of {ms.name}; list at least one "
                              f"or remove it from microservices")
        placed.append(dataclasses.replace(ms, servers=where_))
    testbed = TestbedCfg(datapath=tb.datapath, controller=tb.controller, prefix_len=PREFIX_LEN,
                         trunk_bw_mbit=tb.trunk_bw_mbit, host_bw_mbit=tb.host_bw_mbit,
                         switches=tuple(switches.values()), trunks=(), clients=(),
                         control_port=tb.control_port, client_bw_mbit=tb.client_bw_mbit,
                         proxy=None, calls_via=tb.calls_via)
    return testbed, tuple(instances), tuple(placed)


# The profiler forgets an active flow the controller has not mentioned for this long (at
# least; longer when the rule timeouts are): its controller went away. The controller
# mentions every active flow at least every fifth of that (a keep-alive).
ACTIVE_FLOW_TTL_S = 300.0


def active_flow_ttl_s(cfg: Config) -> float:
    c = cfg.controller
    return max(ACTIVE_FLOW_TTL_S, 3.0 * c.idle_timeout_s,
               c.hard_timeout_s + 3.0 * c.monitoring_period_s)


def active_flow_refresh_s(cfg: Config) -> float:
    return active_flow_ttl_s(cfg) / 5


def callgraph_spec(cfg: Config, ms: Microservice, callee_host=None) -> dict:
    """What a call-graph instance needs to know (services/callgraph.py reads it from
    $MALB_SPEC): its own work and answer, the services that call it (its metrics' caller
    labels), and where each downstream service answers: its VIP and port, so every call is a
    flow the controller balances; with testbed.calls_via proxy, the proxy's address and the
    callee's port, where an outside balancer is; callee_host(call) in their place (a
    Kubernetes Service's name)."""
    proxy = None
    if cfg.testbed.calls_via == "proxy":
        assert cfg.testbed.proxy is not None    # calls_via proxy needs testbed.proxy (validated)
        proxy = cfg.testbed.proxy.ip
    host = callee_host or (lambda c: proxy or cfg.microservice(c.service).vip)
    return {"service": ms.name, "cpu_ms": ms.cpu_ms, "response_bytes": ms.response_bytes,
            "callers": sorted(m.name for m in cfg.microservices
                              if any(c.service == ms.name for c in m.calls)),
            "calls": [{"service": c.service, "host": host(c),
                       "port": cfg.microservice(c.service).port, "count": c.count,
                       "request_bytes": c.request_bytes, "response_bytes": c.response_bytes}
                      for c in ms.calls]}
