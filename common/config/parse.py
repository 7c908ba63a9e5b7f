"""A configuration mapping (as read from YAML) validated into a Config:

- parse_config(): every section read by its declaration (model.py), lists of servers and
  microservices with the rules across items, then derivation (derive.py) and the checks
  across the whole (checks.py);
- DEFAULT_MICROSERVICES: the paper's three, for configurations built in code.
"""
from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from common.config.checks import (check_acyclic, check_end_to_end, check_listeners,
                                  check_slo_cores_exclusive, check_vips)
from common.config.derive import (declared_topology, derive_topology, place_microservices,
                                  switch_names)
from common.config.fields import ConfigError, mapping, read_section, reject_unknown, \
    settings
from common.config.model import (FILE_SECTIONS, KINDS, MAX_SERVERS, SERVER_COUNT_SHARES,
                                     AgentsCfg, Config, ControllerCfg, Microservice,
                                     NetworkSection, ProfilerCfg, SecurityCfg, Server,
                                     ServerCount, TestbedSection)

DEFAULT_MICROSERVICES = [
    {"name": "video", "abbrev": "vid", "port": 8001, "flow_class": "long",
     "command": "python3 -m services.rom video --port {port}"},
    {"name": "ui", "abbrev": "ui", "port": 8002, "flow_class": "short",
     "command": "python3 -m services.rom ui --port {port}"},
    {"name": "backend", "abbrev": "be", "port": 8003, "flow_class": "long",
     "command": "python3 -m services.rom backend --port {port}"},
]


def _file_keys(cls, only: tuple[str, ...] | None = None) -> set[str]:
    return {s.name(f) for f, s in settings(cls) if only is None or f.name in only}


def read_servers(raw: Any, tb: TestbedSection, agents: AgentsCfg) -> tuple[Server, ...]:
    """A list of servers, or the shorthand {count: N, cpu: ..., ...} of N alike."""
    path = "servers"
    if raw is None:
        raw = {}
    if isinstance(raw, dict):
        shares = _file_keys(Server, SERVER_COUNT_SHARES)
        reject_unknown(raw, _file_keys(ServerCount) | shares, path)
        count = read_section(ServerCount, {"count": raw["count"]} if "count" in raw else {},
                             path).count
        items = [{k: raw[k] for k in sorted(shares) if k in raw} for _ in range(count)]
    elif isinstance(raw, list):
        if not raw:
            raise ConfigError(f"{path}: at least one server is required")
        if len(raw) > MAX_SERVERS:   # 10.0.<server>.x, below the clients' 10.0.200.x
            raise ConfigError(f"{path}: at most {MAX_SERVERS} servers, got {len(raw)}")
        items = raw
    else:
        raise ConfigError(f"{path}: expected a list of servers or {{count: N, ...}}")
    servers = []
    seen = set()
    for k, item in enumerate(items):
        where = f"{path}[{k}]"
        context = SimpleNamespace(index=k + 1, switch_names=switch_names(tb),
                                  agent_host=agents.listen_host, agent_base=agents.base_port,
                                  host_bw=tb.host_bw_mbit)
        srv = read_section(Server, item, where, context, index=k + 1)
        if srv.name in seen:
            raise ConfigError(f"{where}.name: duplicate server name {srv.name!r}")
        seen.add(srv.name)
        servers.append(srv)
    return tuple(servers)


def read_microservices(raw: Any, vip_default: str) -> tuple[Microservice, ...]:
    """The list of microservices: names, abbreviations and endpoints unique, calls to
    microservices that exist, without cycles."""
    path = "microservices"
    if raw is None:
        raw = DEFAULT_MICROSERVICES
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: expected a non-empty list")
    result: list[Microservice] = []
    seen_names, seen_endpoints, seen_abbrev = set(), set(), set()
    for k, item in enumerate(raw):
        where = f"{path}[{k}]"
        item = mapping(item, where)
        if item.get("kind", "rom") in KINDS and item.get("kind", "rom") != "callgraph":
            for key in ("calls", "cpu_ms", "response_bytes"):
                if key in item:
                    raise ConfigError(f"{where}.{key}: only for kind callgraph")
        if "servers" in item and "replicas" in item:
            raise ConfigError(f"{where}.replicas: give servers or replicas, not both")
        ms = read_section(Microservice, item, where, SimpleNamespace(vip=vip_default),
                          index=k + 1)
        if ms.name in seen_names:
            raise ConfigError(f"{where}.name: duplicate microservice {ms.name!r}")
        seen_names.add(ms.name)
        if ms.abbrev in seen_abbrev:
            raise ConfigError(f"{where}.abbrev: duplicate abbreviation {ms.abbrev!r}")
        seen_abbrev.add(ms.abbrev)
        if (ms.vip, ms.protocol, ms.port) in seen_endpoints:
            raise ConfigError(f"{where}.port: {ms.protocol} {ms.vip}:{ms.port} is already "
                              f"used by another microservice")
        seen_endpoints.add((ms.vip, ms.protocol, ms.port))
        result.append(ms)
    for k, ms in enumerate(result):
        for j, call in enumerate(ms.calls):
            if call.service not in seen_names:
                raise ConfigError(f"{path}[{k}].calls[{j}].service: unknown microservice "
                                  f"{call.service!r}")
    check_acyclic(result)
    check_end_to_end(result)
    return tuple(result)


def parse_config(data: Any, source: str = "<dict>", base_dir: str | None = None, *,
                 microservices_required: bool = False) -> Config:
    """Validate a configuration mapping (as read from YAML) and derive the rest.

    Built in code (tests, benchmarks), a configuration without `microservices` gets the
    paper's three; read from a file (microservices_required, as parse_config_file_data
    does) it is an error: a file that forgot them must not quietly balance those."""
    data = mapping(data, "configuration")
    reject_unknown(data, set(FILE_SECTIONS), "")
    base_dir = base_dir or os.getcwd()
    tb = read_section(TestbedSection, data.get("testbed"), "testbed")
    agents = read_section(AgentsCfg, data.get("agents"), "agents")
    servers = read_servers(data.get("servers"), tb, agents)
    if microservices_required and data.get("microservices") is None:
        raise ConfigError("microservices: required: the list of microservices to balance, "
                          "e.g. configs/paper.yaml's (docs/configuration.md)")
    network = read_section(NetworkSection, data.get("network"), "network")
    listed = read_microservices(data.get("microservices"), tb.vip)
    if network.instances:
        # the user's own network: the instances are where the list says
        for ms in listed:
            if ms.servers or ms.replicas:
                key = "servers" if ms.servers else "replicas"
                raise ConfigError(f"microservices[{ms.index - 1}].{key}: with "
                                  f"network.instances, the instances listed there are "
                                  f"where {ms.name} runs")
        testbed, instances, microservices = declared_topology(tb, network, servers, listed)
        slots = instances
    else:
        if network.switches:
            raise ConfigError("network.switches: only with network.instances (the testbed "
                              "builds its own switches)")
        microservices = place_microservices(listed, servers)
        testbed, instances, slots = derive_topology(tb, servers, microservices)
    check_vips(microservices, testbed, slots, own_subnet=not network.instances)
    check_slo_cores_exclusive(servers, microservices, instances)
    cfg = Config(testbed=testbed, servers=servers, microservices=microservices,
                 instances=instances,
                 controller=read_section(ControllerCfg, data.get("controller"), "controller"),
                 profiler=read_section(ProfilerCfg, data.get("profiler"), "profiler",
                                       SimpleNamespace(base_dir=base_dir)),
                 agents=agents, source=source, slots=slots,
                 security=read_section(SecurityCfg, data.get("security"), "security"),
                 declared_network=bool(network.instances))
    check_listeners(cfg)
    if cfg.controller.health.method == "none":
        for k, inst in enumerate(cfg.slots):
            if inst.switch_port is None:
                raise ConfigError(f"network.instances[{k}].port: needed with "
                                  f"controller.health.method none (the controller finds an "
                                  f"instance from its answers to the health probes)")
    return cfg
