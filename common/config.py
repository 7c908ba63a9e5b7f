"""One configuration shape for every part of the platform.

The testbed builder, the Ryu app, the agents, the profiler and the experiments all
read the same YAML file through :func:`load_config`, which validates it in one place
and raises :class:`ConfigError` naming the offending field (``servers[2].cpu: ...``).

Everything derived (instance addresses, switch ports, agent URLs) is computed here so
that every component agrees on it without talking to the others.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
from urllib.parse import urlsplit
from dataclasses import dataclass, asdict, field
from typing import Any

# the policy registry: a pure leaf package (no import of this module), read for the names
from ryu_apps.policies import names as policy_names

DEFAULT_CONFIG_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "configs", "paper.yaml")
CONFIG_ENV_VAR = "MALB_CONFIG"
TOKEN_ENV_VAR = "MALB_TOKEN"      # overrides security.token (configuration files only)

POLICIES = policy_names()
FLOW_CLASSES = ("short", "long", "auto")
PROTOCOLS = ("tcp", "udp")
DATAPATHS = ("auto", "user", "kernel")
CALLS_VIA = ("vip", "proxy")
HEALTH_METHODS = ("tcp", "arp", "none")
PREDICTORS = ("rm", "arma")
KINDS = ("rom", "callgraph")
MAX_SERVERS = 99           # 10.0.<server>.x stays below the clients' 10.0.200.x
MAX_MICROSERVICES = 254    # 10.0.x.<microservice>; 8 bits in the flow cookie
MAX_INSTANCES = 4095       # 12 bits in the flow cookie
LINUX_IFNAME_MAX = 15  # IFNAMSIZ - 1; Mininet names interfaces "<node>-eth<n>"
# The outside balancer's host (testbed.proxy), outside the clients' 10.0.200.0/24: the
# controller takes instances' answers to that block that no NAT rule rewrites (orphans)
# to itself, while answers to the proxy must go by plain L2.
PROXY_NAME, PROXY_IP = "prx1", "10.0.201.1"


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the field."""


# ---------------------------------------------------------------------------
# Dataclasses: plain data, safe to pass to pure cores and to serialise as JSON.
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Frequency:
    """A server's frequency range for the SLO loop (MHz; the cpufreq driver's or, emulated,
    the share of the CPU quota: f / max_mhz)."""
    min_mhz: int = 1000
    max_mhz: int = 2100
    step_mhz: int = 100


@dataclass(frozen=True)
class Slo:
    """A microservice's latency objective: its `percentile` latency over the loop's window
    at most `target_ms`; the hold band reaches `margin` below it."""
    target_ms: float
    percentile: float = 95.0
    margin: float = 0.10


@dataclass(frozen=True)
class Server:
    name: str
    index: int            # 1-based; used in addresses
    cpu: float            # CPU share in cores (CFS quota / period) for all its containers
    memory_mb: int        # memory limit shared by all its containers
    network_mbit: float   # network capacity: 100 % network utilization
    switch: str           # switch the server's containers attach to
    agent_url: str        # where its host agent answers
    cores: tuple[int, ...] = ()      # CPUs its containers are pinned to (empty: not pinned)
    frequency: Frequency = Frequency()
    link_mbit: float | None = None   # shaping of its instances' links (None: unlimited)


@dataclass(frozen=True)
class Call:
    """A downstream call a call-graph microservice makes for each request it serves."""
    service: str
    count: int = 1                  # fan-out: calls per request
    request_bytes: int = 0          # body sent with each call
    response_bytes: int = 1000      # what the callee answers to it


@dataclass(frozen=True)
class Microservice:
    name: str
    index: int
    abbrev: str           # short name used in node and interface names
    vip: str
    port: int             # L4 port; identifies the microservice at the controller
    protocol: str
    flow_class: str       # short | long | auto (auto: decided by the profiler)
    image: str
    command: str          # started inside each instance container; {port} is substituted
    kind: str = "rom"     # rom (services/rom.py) | callgraph (services/callgraph.py)
    servers: tuple[str, ...] = ()   # where its instances run at the start
    calls: tuple[Call, ...] = ()    # callgraph: what it calls per request
    cpu_ms: float = 0.0             # callgraph: CPU work per request
    response_bytes: int = 1000      # callgraph: its answer's size
    slo: Slo | None = None          # latency objective for the host SLO loop


CONTAINER_PREFIX = "mn."   # Containernet's and ours: node srv1-vid runs as container mn.srv1-vid


@dataclass(frozen=True)
class Instance:
    """One container running one microservice on one server. Every (server, microservice)
    pair has its own slot, whether an instance runs there or not: its address, MAC,
    switch port and cookie index are fixed, so an instance can be started in any slot at
    run time (a placement's move) and nothing else changes."""
    name: str             # Mininet node name, e.g. srv1-vid (container mn.srv1-vid)
    microservice: str
    server: str
    ip: str
    mac: str
    switch: str
    dpid: int
    switch_port: int      # OpenFlow port on its switch
    slot: int = 0         # (server index - 1) x microservices + microservice index - 1

    @property
    def container(self) -> str:
        return CONTAINER_PREFIX + self.name


@dataclass(frozen=True)
class Client:
    name: str
    ip: str
    mac: str
    switch: str
    dpid: int
    switch_port: int


@dataclass(frozen=True)
class Proxy(Client):
    """The outside balancer's host (testbed.proxy), placed as a client is: HAProxy runs in
    its namespace and connects to the instances' own addresses, outside the clients'
    block."""


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int


@dataclass(frozen=True)
class Trunk:
    a: str
    b: str
    a_port: int
    b_port: int
    bw_mbit: float | None


@dataclass(frozen=True)
class TestbedCfg:
    datapath: str
    controller: str | None          # "host:port", or None for standalone L2 switches
    prefix_len: int
    trunk_bw_mbit: float | None
    host_bw_mbit: float | None
    switches: tuple[Switch, ...]
    trunks: tuple[Trunk, ...]
    clients: tuple[Client, ...]
    control_port: int = 9300        # `topologies up`: start and stop instances (placement)
    client_bw_mbit: float | None = None    # client links (default: host_bw_mbit)
    proxy: Proxy | None = None      # the outside balancer's host (testbed.proxy: true)
    # where call-graph services send their calls: the callee's VIP (the controller
    # balances them) or the proxy (an outside balancer does)
    calls_via: str = "vip"


@dataclass(frozen=True)
class Health:
    method: str
    interval_s: float
    timeout_s: float
    unhealthy_after: int
    healthy_after: int


DATAPLANE_MODES = ("controller", "switch")


@dataclass(frozen=True)
class Dataplane:
    """short_flows: controller (a decision per flow) or switch (a select group rendering a
    Maglev table of table_size slots; ryu_apps/dataplane.py)."""
    short_flows: str = "controller"
    table_size: int = 257


@dataclass(frozen=True)
class ControllerCfg:
    policy: str
    monitoring_period_s: float
    idle_timeout_s: int
    hard_timeout_s: int
    rest_host: str
    rest_port: int
    ofp_port: int
    server_stale_after_s: float
    weights_stale_after_s: float
    pending_flow_cost: float
    vip_mac: str
    health: Health
    dataplane: Dataplane = Dataplane()
    packet_in_limit_per_s: int = 2000    # per switch, an OpenFlow meter; 0: none
    max_active_flows: int = 50000        # flow records; new flows beyond are dropped
    # every agent's GET /probes this often, while the policy reads probes (uses_probes)
    probe_period_s: float = 0.25


@dataclass(frozen=True)
class ProfilerCfg:
    url: str
    listen_host: str
    listen_port: int
    period_s: float
    predictor: str
    window: int
    arma_order: tuple[int, int]
    arma_refit_every: int
    flow_threshold_s: float
    flow_classification: str        # threshold | auto
    history_path: str
    retention_s: float
    agent_timeout_s: float
    graph_window_s: float = 30.0     # the communication graph's EWMA memory
    # what each agent measures for a period: its last agent_window_s seconds (the period by
    # default); 0: its latest sample alone (one agent period, as docker stats shows it)
    agent_window_s: float = 3.0


@dataclass(frozen=True)
class SloLoopCfg:
    """The host agents' SLO frequency loop (slo/frequency_controller.py has the rule)."""
    period_s: float = 1.0
    window_s: float = 5.0
    min_samples: int = 100
    band_mode: str = "safe"          # safe | paper (the literal band of paper 004)
    actuator: str = "auto"           # auto (cpufreq, else emulated) | cpufreq | emulated
    emergency: float = 0.5
    cooldown_s: float = 10.0
    dwell_s: float = 3.0
    guard: float = 0.4               # top share of the band that steps up early; 0: off


@dataclass(frozen=True)
class AgentsCfg:
    listen_host: str
    base_port: int
    period_s: float
    slo: SloLoopCfg = SloLoopCfg()
    # GET /probes: the latency window it reads by default, and how long one instance's
    # reading may take before it is reported as failed
    probe_window_s: float = 1.0
    probe_timeout_s: float = 0.25


@dataclass(frozen=True)
class SecurityCfg:
    """token: when set, every write route (POST, PUT, DELETE) of the controller's REST API,
    the profiler, the agents and the testbed's control API requires it (Authorization:
    Bearer <token> or X-MALB-Token), and the project's own clients send it. Never shown
    in a repr or an error."""
    token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Config:
    testbed: TestbedCfg
    servers: tuple[Server, ...]
    microservices: tuple[Microservice, ...]
    instances: tuple[Instance, ...]
    controller: ControllerCfg
    profiler: ProfilerCfg
    agents: AgentsCfg
    source: str = ""

    slots: tuple[Instance, ...] = ()     # every (server, microservice) pair, deployed or not
    security: SecurityCfg = SecurityCfg()

    # Lookups used by every component
    def slot(self, server: str, microservice: str) -> Instance:
        """The instance slot of a microservice on a server (running there or not)."""
        for i in self.slots:
            if i.server == server and i.microservice == microservice:
                return i
        raise KeyError(f"{microservice} on {server}")

    def microservice(self, name: str) -> Microservice:
        for m in self.microservices:
            if m.name == name:
                return m
        raise KeyError(name)

    def server(self, name: str) -> Server:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)

    def instances_of(self, microservice: str) -> list[Instance]:
        return [i for i in self.instances if i.microservice == microservice]

    def instances_on(self, server: str) -> list[Instance]:
        return [i for i in self.instances if i.server == server]

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------
# Validation helpers: each names the field path in its error.
# ---------------------------------------------------------------------------

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)[bB]?\s*$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*$")


def _mapping(value: Any, path: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(value).__name__}")
    return value


def _reject_unknown(data: dict, known: set[str], path: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        where = f"{path}." if path else ""
        raise ConfigError(f"{where}{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")


def _show(value: Any, limit: int = 60) -> str:
    """repr() of a value for an error, cut short (a YAML integer may have thousands of
    digits: more than 4,300 and repr() itself fails)."""
    try:
        text = repr(value)
    except ValueError:
        return "a number too long to print"
    return text if len(text) <= limit else text[:limit] + "..."


def _number(data: dict, key: str, path: str, default: Any, *, lo: float | None = None,
            hi: float | None = None, integer: bool = False, allow_none: bool = False):
    value = data.get(key, default)
    where = f"{path}.{key}" if path else key
    if value is None:
        if allow_none:
            return None
        raise ConfigError(f"{where}: required")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected a number, got {_show(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:          # an integer beyond a float's range
        finite = False
    if not finite:                 # YAML's .nan, .inf; NaN passes every comparison below
        raise ConfigError(f"{where}: expected a finite number, got {_show(value)}")
    if integer and int(value) != value:
        raise ConfigError(f"{where}: expected an integer, got {_show(value)}")
    if lo is not None and value < lo:
        raise ConfigError(f"{where}: must be >= {lo}, got {_show(value)}")
    if hi is not None and value > hi:
        raise ConfigError(f"{where}: must be <= {hi}, got {_show(value)}")
    return int(value) if integer else float(value)


def _choice(data: dict, key: str, path: str, default: str, choices: tuple[str, ...]) -> str:
    value = data.get(key, default)
    if value not in choices:
        raise ConfigError(f"{path}.{key}: must be one of {', '.join(choices)}, got {value!r}")
    return value


def _string(data: dict, key: str, path: str, default: str | None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}.{key}: expected a non-empty string, got {value!r}")
    return value


def _ipv4(value: Any, where: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except (ipaddress.AddressValueError, ValueError, TypeError):
        raise ConfigError(f"{where}: not an IPv4 address: {value!r}") from None


def _mac(value: Any, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}", value):
        raise ConfigError(f"{where}: not a MAC address: {value!r}")
    return value.lower()


def _host_port(value: Any, where: str) -> str:
    if not isinstance(value, str) or ":" not in value:
        raise ConfigError(f"{where}: expected 'host:port', got {value!r}")
    host, port = value.rsplit(":", 1)
    if not host or not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        raise ConfigError(f"{where}: expected 'host:port', got {_show(value)}")
    _host(host, f"{where} (host)")
    return value


_LABEL_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
WILDCARD_HOSTS = ("0.0.0.0", "::")


def _host(value: Any, where: str, ipv6: bool = False) -> str:
    """An address to listen on or to reach: an IPv4 address, a host name (RFC 1123), or,
    where ipv6, an IPv6 address. Digits and dots only must make an IPv4 address
    (999.999.1.1 is not a host name)."""
    what = "an IPv4 address" + (", an IPv6 address" if ipv6 else "") + " or a host name"
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected {what}, got {_show(value)}")
    if ":" in value:
        try:
            if ipv6:
                return str(ipaddress.IPv6Address(value))
        except ValueError:
            pass
        raise ConfigError(f"{where}: expected {what}, got {_show(value)}")
    if re.fullmatch(r"[0-9.]+", value):
        try:
            return str(ipaddress.IPv4Address(value))
        except ValueError:
            raise ConfigError(f"{where}: not a valid IPv4 address: {_show(value)}") from None
    name = value[:-1] if value.endswith(".") else value
    if len(name) > 253 or not all(_LABEL_RE.fullmatch(label) for label in name.split(".")):
        raise ConfigError(f"{where}: not a valid host name or IPv4 address: {_show(value)}")
    return value


def _url(value: Any, where: str) -> str:
    """An http(s) URL with a valid host and, if given, a valid port."""
    if not isinstance(value, str) or not re.match(r"https?://", value):
        raise ConfigError(f"{where}: expected an http URL, got {_show(value)}")
    try:
        parts = urlsplit(value)
        parts.port                     # ValueError when not a number from 0 to 65535
    except ValueError:
        raise ConfigError(f"{where}: not a valid URL (its port?): {_show(value)}") from None
    if parts.port == 0:
        raise ConfigError(f"{where}: port 0 is not a port to reach: {_show(value)}")
    _host(parts.hostname, f"{where} (host)", ipv6=True)
    return value.rstrip("/")


def parse_size_mb(value: Any, where: str) -> int:
    """'256m', '1g', 512 (MB) -> MB."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            mb = float(value)
        except OverflowError:
            mb = math.inf
    else:
        m = _SIZE_RE.match(str(value))
        if not m:
            raise ConfigError(f"{where}: expected a size like 256m or 1g, got {value!r}")
        number, unit = float(m.group(1)), m.group(2).lower()
        mb = number * {"": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1, "g": 1024}[unit]
    if not math.isfinite(mb):   # .nan, .inf, or digits past a float's range
        raise ConfigError(f"{where}: expected a finite size, got {_show(value)}")
    if mb < 6:  # Docker refuses limits below 6 MB
        raise ConfigError(f"{where}: must be at least 6 MB, got {value!r}")
    return int(mb)


def mac_for(kind: int, a: int, b: int) -> str:
    """Deterministic locally administered MACs: 02:00:00:<kind>:<a>:<b>."""
    return "02:00:00:%02x:%02x:%02x" % (kind, a, b)


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------

DEFAULT_MICROSERVICES = [
    {"name": "video", "abbrev": "vid", "port": 8001, "flow_class": "long",
     "command": "python3 -m services.rom video --port {port}"},
    {"name": "ui", "abbrev": "ui", "port": 8002, "flow_class": "short",
     "command": "python3 -m services.rom ui --port {port}"},
    {"name": "backend", "abbrev": "be", "port": 8003, "flow_class": "long",
     "command": "python3 -m services.rom backend --port {port}"},
]


def _parse_servers(raw: Any, switch_names: list[str], agent_host: str, agent_base: int,
                   default_net_mbit: float, default_link_mbit: float | None
                   ) -> tuple[Server, ...]:
    path = "servers"
    if raw is None:
        raw = {}
    if isinstance(raw, dict):
        # Shorthand: {count: 4, cpu: 0.4, memory: 256m, network_mbit: 100}
        _reject_unknown(raw, {"count", "cpu", "memory", "network_mbit", "link_mbit",
                              "frequency"}, path)
        count = _number(raw, "count", path, 4, lo=1, hi=MAX_SERVERS, integer=True)
        items = [{k: raw[k] for k in ("cpu", "memory", "network_mbit", "link_mbit",
                                      "frequency")
                  if k in raw} for _ in range(count)]
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
        item = _mapping(item, where)
        _reject_unknown(item, {"name", "cpu", "memory", "network_mbit", "link_mbit", "switch",
                               "agent_url", "cores", "frequency"}, where)
        index = k + 1
        name = item.get("name", f"srv{index}")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ConfigError(f"{where}.name: lowercase letters and digits, starting with a letter; "
                              f"got {name!r}")
        if name in seen:
            raise ConfigError(f"{where}.name: duplicate server name {name!r}")
        seen.add(name)
        cpu = _number(item, "cpu", where, 0.4, lo=0.01, hi=1024)
        memory_mb = parse_size_mb(item.get("memory", "256m"), f"{where}.memory")
        network_mbit = _number(item, "network_mbit", where, default_net_mbit, lo=0.1, hi=1e6)
        link_mbit = _number(item, "link_mbit", where, default_link_mbit, lo=0.1, hi=100000,
                            allow_none=True)
        # Servers are spread over the switches in order: srv1 -> s1, srv2 -> s2, ...
        switch = item.get("switch", switch_names[k % len(switch_names)])
        if switch not in switch_names:
            raise ConfigError(f"{where}.switch: unknown switch {switch!r} "
                              f"(have {', '.join(switch_names)})")
        agent_url = _url(item.get("agent_url", f"http://{agent_host}:{agent_base + k}"),
                         f"{where}.agent_url")
        servers.append(Server(name, index, cpu, memory_mb, network_mbit, switch,
                              agent_url.rstrip("/"), _parse_cores(item.get("cores"), where),
                              _parse_frequency(item.get("frequency"), f"{where}.frequency"),
                              link_mbit))
    return tuple(servers)


def _parse_cores(raw: Any, where: str) -> tuple[int, ...]:
    """CPUs a server's containers are pinned to: they must exist on this machine, where the
    testbed and its agents run."""
    if raw is None:
        return ()
    have = os.cpu_count() or 1
    if not isinstance(raw, list) or not raw or len(set(map(str, raw))) != len(raw):
        raise ConfigError(f"{where}.cores: expected a list of distinct CPU numbers, got "
                          f"{raw!r}")
    for c in raw:
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < have:
            raise ConfigError(f"{where}.cores: CPU {c!r} does not exist here (CPUs 0-"
                              f"{have - 1})")
    return tuple(raw)


def _parse_frequency(raw: Any, path: str) -> Frequency:
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"min_mhz", "max_mhz", "step_mhz"}, path)
    f = Frequency(_number(raw, "min_mhz", path, 1000, lo=100, hi=10000, integer=True),
                  _number(raw, "max_mhz", path, 2100, lo=100, hi=10000, integer=True),
                  _number(raw, "step_mhz", path, 100, lo=1, hi=5000, integer=True))
    if f.min_mhz > f.max_mhz:
        raise ConfigError(f"{path}: min_mhz {f.min_mhz} is above max_mhz {f.max_mhz}")
    return f


def _parse_slo(raw: Any, path: str) -> Slo | None:
    if raw is None:
        return None
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"target_ms", "percentile", "margin"}, path)
    percentile = _number(raw, "percentile", path, 95, integer=False)
    if percentile not in (90, 95, 99):
        raise ConfigError(f"{path}.percentile: must be 90, 95 or 99, got {raw['percentile']!r}")
    return Slo(target_ms=_number(raw, "target_ms", path, None, lo=0.1, hi=600_000),
               percentile=float(percentile),
               margin=_number(raw, "margin", path, 0.10, lo=0.01, hi=0.9))


def _parse_microservices(raw: Any, vip_default: str
                         ) -> tuple[tuple[Microservice, ...], dict[str, int | None]]:
    path = "microservices"
    if raw is None:
        raw = DEFAULT_MICROSERVICES
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: expected a non-empty list")
    result = []
    replicas_of: dict[str, int | None] = {}
    seen_names, seen_endpoints, seen_abbrev = set(), set(), set()
    for k, item in enumerate(raw):
        where = f"{path}[{k}]"
        item = _mapping(item, where)
        _reject_unknown(item, {"name", "abbrev", "vip", "port", "protocol", "flow_class", "image",
                               "command", "kind", "replicas", "servers", "calls", "cpu_ms",
                               "response_bytes", "slo"}, where)
        name = item.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ConfigError(f"{where}.name: lowercase letters and digits, starting with a letter; "
                              f"got {name!r}")
        if name in seen_names:
            raise ConfigError(f"{where}.name: duplicate microservice {name!r}")
        seen_names.add(name)
        abbrev = item.get("abbrev", name[:3])
        if not isinstance(abbrev, str) or not _NAME_RE.match(abbrev):
            raise ConfigError(f"{where}.abbrev: lowercase letters and digits, got {abbrev!r}")
        if abbrev in seen_abbrev:
            raise ConfigError(f"{where}.abbrev: duplicate abbreviation {abbrev!r}")
        seen_abbrev.add(abbrev)
        vip = _ipv4(item.get("vip", vip_default), f"{where}.vip")
        port = _number(item, "port", where, None, lo=1, hi=65535, integer=True)
        protocol = _choice(item, "protocol", where, "tcp", PROTOCOLS)
        if (vip, protocol, port) in seen_endpoints:
            raise ConfigError(f"{where}.port: {protocol} {vip}:{port} is already used by another "
                              f"microservice")
        seen_endpoints.add((vip, protocol, port))
        flow_class = _choice(item, "flow_class", where, "auto", FLOW_CLASSES)
        image = _string(item, "image", where, "malb/service:latest")
        kind = _choice(item, "kind", where, "rom", KINDS)
        default_command = "python3 -m services.callgraph --port {port}" \
            if kind == "callgraph" else f"python3 -m services.rom {name} --port {{port}}"
        command = _string(item, "command", where, default_command)
        calls = _parse_calls(item.get("calls"), f"{where}.calls") if kind == "callgraph" \
            else ()
        if kind != "callgraph":
            for key in ("calls", "cpu_ms", "response_bytes"):
                if key in item:
                    raise ConfigError(f"{where}.{key}: only for kind callgraph")
        cpu_ms = _number(item, "cpu_ms", where, 0.0, lo=0, hi=60000)
        response_bytes = _number(item, "response_bytes", where, 1000, lo=0, hi=1 << 30,
                                 integer=True)
        if "servers" in item and "replicas" in item:
            raise ConfigError(f"{where}.replicas: give servers or replicas, not both")
        servers = item.get("servers")
        if servers is not None and (not isinstance(servers, list) or not servers or not all(
                isinstance(x, str) for x in servers) or len(set(servers)) != len(servers)):
            raise ConfigError(f"{where}.servers: expected a list of distinct server names, "
                              f"got {servers!r}")
        replicas = _number(item, "replicas", where, None, lo=1, hi=MAX_SERVERS, integer=True,
                           allow_none=True)
        try:
            command.format(port=port, name=name, instance=f"srv1-{abbrev}")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"{where}.command: only {{port}}, {{name}} and {{instance}} may "
                              f"appear in braces (double a literal brace: {{{{ }}}}); "
                              f"{type(exc).__name__}: {exc}") from None
        result.append(Microservice(name, k + 1, abbrev, vip, port, protocol, flow_class, image,
                                   command, kind, tuple(servers or ()), calls, float(cpu_ms),
                                   response_bytes, _parse_slo(item.get("slo"), f"{where}.slo")))
        replicas_of[name] = replicas
    for k, ms in enumerate(result):
        for j, call in enumerate(ms.calls):
            if call.service not in seen_names:
                raise ConfigError(f"{path}[{k}].calls[{j}].service: unknown microservice "
                                  f"{call.service!r}")
    _check_acyclic(result)
    return tuple(result), replicas_of


def _parse_calls(raw: Any, path: str) -> tuple[Call, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of {{service, count, request_bytes, "
                          f"response_bytes}}")
    calls = []
    for j, item in enumerate(raw):
        where = f"{path}[{j}]"
        item = _mapping(item, where)
        _reject_unknown(item, {"service", "count", "request_bytes", "response_bytes"}, where)
        calls.append(Call(
            service=_string(item, "service", where, None),
            count=_number(item, "count", where, 1, lo=1, hi=100, integer=True),
            request_bytes=_number(item, "request_bytes", where, 0, lo=0, hi=1 << 30,
                                  integer=True),
            response_bytes=_number(item, "response_bytes", where, 1000, lo=0, hi=1 << 30,
                                   integer=True)))
    return tuple(calls)


def _check_acyclic(microservices) -> None:
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


def _parse_testbed(raw: Any) -> dict:
    path = "testbed"
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"switches", "clients", "datapath", "controller", "trunk_bw_mbit",
                          "host_bw_mbit", "client_bw_mbit", "vip", "control_port", "proxy",
                          "calls_via"}, path)
    n_switches = _number(raw, "switches", path, 1, lo=1, hi=4, integer=True)
    n_clients = _number(raw, "clients", path, 2, lo=1, hi=50, integer=True)
    datapath = _choice(raw, "datapath", path, "auto", DATAPATHS)
    controller = raw.get("controller", "127.0.0.1:6653")
    if controller not in (None, "none"):
        controller = _host_port(controller, f"{path}.controller")
    else:
        controller = None
    trunk_bw = _number(raw, "trunk_bw_mbit", path, 100, lo=0.1, hi=100000, allow_none=True)
    host_bw = _number(raw, "host_bw_mbit", path, None, lo=0.1, hi=100000, allow_none=True)
    client_bw = _number(raw, "client_bw_mbit", path, host_bw, lo=0.1, hi=100000,
                        allow_none=True)
    vip = _ipv4(raw.get("vip", "10.0.0.100"), f"{path}.vip")
    control_port = _number(raw, "control_port", path, 9300, lo=1, hi=65535, integer=True)
    proxy = raw.get("proxy", False)
    if not isinstance(proxy, bool):     # a quoted "yes" or a 1 is not a boolean
        raise ConfigError(f"{path}.proxy: expected true or false, got {_show(proxy)}")
    calls_via = _choice(raw, "calls_via", path, "vip", CALLS_VIA)
    if calls_via == "proxy" and not proxy:
        raise ConfigError(f"{path}.calls_via: proxy needs {path}.proxy: true")
    return dict(n_switches=n_switches, n_clients=n_clients, datapath=datapath,
                controller=controller, trunk_bw=trunk_bw, host_bw=host_bw,
                client_bw=client_bw, vip=vip,
                control_port=control_port, proxy=proxy, calls_via=calls_via)


def _parse_controller(raw: Any) -> ControllerCfg:
    path = "controller"
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"policy", "monitoring_period_s", "idle_timeout_s", "hard_timeout_s",
                          "rest_host", "rest_port", "ofp_port", "server_stale_after_s",
                          "weights_stale_after_s", "pending_flow_cost", "vip_mac", "health",
                          "dataplane", "packet_in_limit_per_s", "max_active_flows",
                          "probe_period_s"}, path)
    hraw = _mapping(raw.get("health"), f"{path}.health")
    hpath = f"{path}.health"
    _reject_unknown(hraw, {"method", "interval_s", "timeout_s", "unhealthy_after",
                           "healthy_after"}, hpath)
    health = Health(
        method=_choice(hraw, "method", hpath, "tcp", HEALTH_METHODS),
        interval_s=_number(hraw, "interval_s", hpath, 2.0, lo=0.1, hi=3600),
        timeout_s=_number(hraw, "timeout_s", hpath, 1.0, lo=0.05, hi=60),
        unhealthy_after=_number(hraw, "unhealthy_after", hpath, 2, lo=1, hi=100, integer=True),
        healthy_after=_number(hraw, "healthy_after", hpath, 1, lo=1, hi=100, integer=True),
    )
    if health.method != "none" and health.timeout_s >= health.interval_s:
        raise ConfigError(f"{hpath}.timeout_s: must be shorter than interval_s "
                          f"({health.interval_s}), got {health.timeout_s}: a probe is judged "
                          f"before the next one goes out")
    draw = _mapping(raw.get("dataplane"), f"{path}.dataplane")
    dpath = f"{path}.dataplane"
    _reject_unknown(draw, {"short_flows", "table_size"}, dpath)
    table_size = _number(draw, "table_size", dpath, 257, lo=257, hi=509, integer=True)
    if not all(table_size % k for k in range(2, int(table_size ** 0.5) + 1)):
        raise ConfigError(f"{dpath}.table_size: must be a prime number (Maglev), got "
                          f"{table_size}; for example 257, 263, 499 or 509")
    dataplane = Dataplane(short_flows=_choice(draw, "short_flows", dpath, "controller",
                                              DATAPLANE_MODES), table_size=table_size)
    period = _number(raw, "monitoring_period_s", path, 3.0, lo=0.1, hi=3600)
    idle = _number(raw, "idle_timeout_s", path, 10, lo=0, hi=65535, integer=True)
    hard = _number(raw, "hard_timeout_s", path, 0, lo=0, hi=65535, integer=True)
    if idle == 0 and hard == 0:
        raise ConfigError(f"{path}.idle_timeout_s: idle_timeout_s and hard_timeout_s are both "
                          f"0, so NAT rules would never expire and no flow would ever end")
    rest_port = _number(raw, "rest_port", path, 8080, lo=1, hi=65535, integer=True)
    ofp_port = _number(raw, "ofp_port", path, 6653, lo=1, hi=65535, integer=True)
    if rest_port == ofp_port:
        raise ConfigError(f"{path}.rest_port: {rest_port} is also {path}.ofp_port (OpenFlow); "
                          f"the REST API needs a port of its own")
    return ControllerCfg(
        policy=_choice(raw, "policy", path, "malb", POLICIES),
        monitoring_period_s=period,
        idle_timeout_s=idle,
        hard_timeout_s=hard,
        rest_host=_host(raw.get("rest_host", "127.0.0.1"), f"{path}.rest_host", ipv6=True),
        rest_port=rest_port,
        ofp_port=ofp_port,
        server_stale_after_s=_number(raw, "server_stale_after_s", path, 3 * period, lo=0.1),
        weights_stale_after_s=_number(raw, "weights_stale_after_s", path, 10 * period, lo=0.1),
        pending_flow_cost=_number(raw, "pending_flow_cost", path, 5.0, lo=0, hi=100),
        vip_mac=_mac(raw.get("vip_mac", mac_for(0, 0, 0x64)), f"{path}.vip_mac"),
        health=health,
        dataplane=dataplane,
        packet_in_limit_per_s=_number(raw, "packet_in_limit_per_s", path, 2000, lo=0,
                                      hi=1_000_000, integer=True),
        max_active_flows=_number(raw, "max_active_flows", path, 50000, lo=1,
                                 hi=10_000_000, integer=True),
        probe_period_s=_number(raw, "probe_period_s", path, 0.25, lo=0.05, hi=60),
    )


def _parse_profiler(raw: Any, base_dir: str) -> ProfilerCfg:
    path = "profiler"
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"url", "listen_host", "listen_port", "period_s", "predictor", "window",
                          "arma_order", "arma_refit_every", "flow_threshold_s",
                          "flow_classification", "history_path", "retention_s",
                          "agent_timeout_s", "graph_window_s", "agent_window_s"}, path)
    listen_host = _host(raw.get("listen_host", "127.0.0.1"), f"{path}.listen_host")
    listen_port = _number(raw, "listen_port", path, 9200, lo=1, hi=65535, integer=True)
    order = raw.get("arma_order", [2, 1])
    if (not isinstance(order, (list, tuple)) or len(order) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 10
                       for x in order) or order[0] + order[1] == 0):
        raise ConfigError(f"{path}.arma_order: expected [p, q] with 0 <= p, q <= 10 and p + q > 0, "
                          f"got {order!r}")
    history = raw.get("history_path", "results/profiler-history.sqlite")
    if not isinstance(history, str) or not history:
        raise ConfigError(f"{path}.history_path: expected a path, got {history!r}")
    if history != ":memory:" and not os.path.isabs(history):
        history = os.path.join(base_dir, history)
    url = _url(raw.get("url", f"http://{listen_host}:{listen_port}"), f"{path}.url")
    predictor = _choice(raw, "predictor", path, "rm", PREDICTORS)
    window = _number(raw, "window", path, 10, lo=1, hi=10000, integer=True)
    if predictor == "arma" and window < max(order[0] + order[1] + 2, 5):
        raise ConfigError(f"{path}.window: ARMA{tuple(order)} needs a window of at least "
                          f"{max(order[0] + order[1] + 2, 5)} samples, got {window}")
    period = _number(raw, "period_s", path, 3.0, lo=0.1, hi=3600)
    return ProfilerCfg(
        url=url.rstrip("/"),
        listen_host=listen_host,
        listen_port=listen_port,
        period_s=period,
        predictor=predictor,
        window=window,
        arma_order=(int(order[0]), int(order[1])),
        arma_refit_every=_number(raw, "arma_refit_every", path, 10, lo=1, hi=100000, integer=True),
        flow_threshold_s=_number(raw, "flow_threshold_s", path, 3.0, lo=0.0),
        flow_classification=_choice(raw, "flow_classification", path, "threshold",
                                    ("threshold", "auto")),
        history_path=history,
        retention_s=_number(raw, "retention_s", path, 7 * 24 * 3600.0, lo=1),
        agent_timeout_s=_number(raw, "agent_timeout_s", path, 1.0, lo=0.05, hi=60),
        graph_window_s=_number(raw, "graph_window_s", path, 30.0, lo=0.1, hi=86400),
        agent_window_s=_number(raw, "agent_window_s", path, period, lo=0, hi=600),
    )


_TOKEN_RE = re.compile(r"[\x21-\x7e]{16,256}")


def check_token(value: Any, where: str) -> str:
    """A shared token: 16 to 256 visible ASCII characters (it travels in an HTTP header).
    The error never quotes it."""
    if not isinstance(value, str) or not _TOKEN_RE.fullmatch(value):
        got = f"{len(value)} characters" + ("" if value.isascii() and value.isprintable()
                                            and " " not in value else
                                            ", not all visible ASCII") \
            if isinstance(value, str) else type(value).__name__
        raise ConfigError(f"{where}: expected 16 to 256 visible ASCII characters (no "
                          f"spaces), got {got}")
    return value


def _parse_security(raw: Any) -> SecurityCfg:
    path = "security"
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"token"}, path)
    token = raw.get("token")
    return SecurityCfg(None if token is None else check_token(token, f"{path}.token"))


def _parse_agents(raw: Any) -> AgentsCfg:
    path = "agents"
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"listen_host", "base_port", "period_s", "slo", "probe_window_s",
                          "probe_timeout_s"}, path)
    return AgentsCfg(
        listen_host=_host(raw.get("listen_host", "127.0.0.1"), f"{path}.listen_host"),
        base_port=_number(raw, "base_port", path, 9101, lo=1, hi=65000, integer=True),
        period_s=_number(raw, "period_s", path, 1.0, lo=0.1, hi=3600),
        slo=_parse_slo_loop(raw.get("slo")),
        # the services' GET /latency takes windows of 0.1 to 60 s
        probe_window_s=_number(raw, "probe_window_s", path, 1.0, lo=0.1, hi=60),
        probe_timeout_s=_number(raw, "probe_timeout_s", path, 0.25, lo=0.01, hi=10),
    )


def _parse_slo_loop(raw: Any) -> SloLoopCfg:
    path = "agents.slo"
    raw = _mapping(raw, path)
    _reject_unknown(raw, {"period_s", "window_s", "min_samples", "band_mode", "actuator",
                          "emergency", "cooldown_s", "dwell_s", "guard"}, path)
    return SloLoopCfg(
        period_s=_number(raw, "period_s", path, 1.0, lo=0.1, hi=600),
        window_s=_number(raw, "window_s", path, 5.0, lo=0.5, hi=60),
        min_samples=_number(raw, "min_samples", path, 100, lo=1, hi=1_000_000, integer=True),
        band_mode=_choice(raw, "band_mode", path, "safe", ("safe", "paper")),
        actuator=_choice(raw, "actuator", path, "auto", ("auto", "cpufreq", "emulated")),
        emergency=_number(raw, "emergency", path, 0.5, lo=0.05, hi=10),
        cooldown_s=_number(raw, "cooldown_s", path, 10.0, lo=0, hi=3600),
        dwell_s=_number(raw, "dwell_s", path, 3.0, lo=0, hi=3600),
        guard=_number(raw, "guard", path, 0.4, lo=0, hi=0.99))


def _place_microservices(microservices: tuple[Microservice, ...], replicas_of: dict,
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
        elif replicas_of.get(ms.name):
            r = replicas_of[ms.name]
            if r > len(names):
                raise ConfigError(f"{where}.replicas: {r} replicas for {len(names)} servers "
                                  f"(at most one instance of a microservice per server)")
            chosen = tuple(names[(ms.index - 1 + j) % len(names)] for j in range(r))
        else:
            chosen = tuple(names)
        out.append(dataclasses.replace(ms, servers=chosen))
    return tuple(out)


def _derive_topology(tb: dict, servers: tuple[Server, ...],
                     microservices: tuple[Microservice, ...]
                     ) -> tuple[TestbedCfg, tuple[Instance, ...], tuple[Instance, ...]]:
    """Addresses and switch ports, documented in docs/testbed.md.

    - switch s<k> has dpid k;
    - the slot of microservice j on server i: node srv<i>-<abbrev>, 10.0.<i>.<j>, MAC
      02:00:00:01:<i>:<j>, whether an instance runs there or not;
    - client k: node cli<k>, 10.0.200.<k>, MAC 02:00:00:02:00:<k>, on s1;
    - the proxy (testbed.proxy): node prx1, 10.0.201.1, MAC 02:00:00:03:00:01, on s1;
    - ports on each switch: slots first (server order, then microservice order), then
      clients (s1 only), then trunk ports, then the proxy (s1 only).
    Returns (testbed, the instances running at the start, every slot).
    """
    switches = tuple(Switch(f"s{k}", k) for k in range(1, tb["n_switches"] + 1))
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
    for k in range(1, tb["n_clients"] + 1):
        clients.append(Client(name=f"cli{k}", ip=f"10.0.200.{k}", mac=mac_for(2, 0, k),
                              switch="s1", dpid=1, switch_port=next_port["s1"]))
        next_port["s1"] += 1
    trunks = []
    for a, b in zip(switches, switches[1:]):  # a chain: s1 - s2 - s3 - s4
        trunks.append(Trunk(a.name, b.name, next_port[a.name], next_port[b.name], tb["trunk_bw"]))
        next_port[a.name] += 1
        next_port[b.name] += 1
    # the proxy last: every other port keeps its number whether there is a proxy or not
    proxy = Proxy(name=PROXY_NAME, ip=PROXY_IP, mac=mac_for(3, 0, 1), switch="s1", dpid=1,
                  switch_port=next_port["s1"]) if tb["proxy"] else None
    testbed = TestbedCfg(datapath=tb["datapath"], controller=tb["controller"], prefix_len=16,
                      trunk_bw_mbit=tb["trunk_bw"], host_bw_mbit=tb["host_bw"],
                      switches=switches, trunks=tuple(trunks), clients=tuple(clients),
                      control_port=tb["control_port"], client_bw_mbit=tb["client_bw"],
                      proxy=proxy, calls_via=tb["calls_via"])
    return testbed, tuple(instances), tuple(slots)


def parse_config(data: Any, source: str = "<dict>", base_dir: str | None = None, *,
                 microservices_required: bool = False) -> Config:
    """Validate a configuration mapping (as read from YAML) and derive the rest.

    Built in code (tests, benchmarks), a configuration without `microservices` gets the
    paper's three; read from a file (microservices_required, as parse_config_file_data
    does) it is an error: a file that forgot them must not quietly balance those."""
    data = _mapping(data, "configuration")
    _reject_unknown(data, {"testbed", "servers", "microservices", "controller", "profiler",
                           "agents", "security"}, "")
    base_dir = base_dir or os.getcwd()
    tb = _parse_testbed(data.get("testbed"))
    agents = _parse_agents(data.get("agents"))
    switch_names = [f"s{k}" for k in range(1, tb["n_switches"] + 1)]
    servers = _parse_servers(data.get("servers"), switch_names, agents.listen_host,
                             agents.base_port, tb["host_bw"] or 100.0, tb["host_bw"])
    if microservices_required and data.get("microservices") is None:
        raise ConfigError("microservices: required: the list of microservices to balance, "
                          "e.g. configs/paper.yaml's (docs/configuration.md)")
    microservices, replicas_of = _parse_microservices(data.get("microservices"), tb["vip"])
    microservices = _place_microservices(microservices, replicas_of, servers)
    testbed, instances, slots = _derive_topology(tb, servers, microservices)
    instance_ips = {i.ip for i in slots} | {c.ip for c in testbed.clients} | \
        ({testbed.proxy.ip} if testbed.proxy else set())
    subnet = ipaddress.ip_network(f"10.0.0.0/{testbed.prefix_len}")
    for ms in microservices:
        if ms.vip in instance_ips:
            raise ConfigError(f"microservices[{ms.index - 1}].vip: {ms.vip} collides with a "
                              f"host address")
        if ipaddress.ip_address(ms.vip) not in subnet or ms.vip in (
                str(subnet.network_address), str(subnet.broadcast_address)):
            # clients ARP for a VIP only when it is on their own link's subnet
            raise ConfigError(f"microservices[{ms.index - 1}].vip: {ms.vip} is not a host "
                              f"address in the testbed's subnet {subnet}")
    _check_slo_cores_exclusive(servers, microservices, instances)
    cfg = Config(testbed=testbed, servers=servers, microservices=microservices,
                 instances=instances, controller=_parse_controller(data.get("controller")),
                 profiler=_parse_profiler(data.get("profiler"), base_dir), agents=agents,
                 source=source, slots=slots, security=_parse_security(data.get("security")))
    _check_listeners(cfg)
    return cfg


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


def _check_listeners(cfg: Config) -> None:
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


def _check_slo_cores_exclusive(servers, microservices, instances) -> None:
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


def callgraph_spec(cfg: Config, ms: Microservice) -> dict:
    """What a call-graph instance needs to know (services/callgraph.py reads it from
    $MALB_SPEC): its own work and answer, and where each downstream service answers (its
    VIP and port, so every call is a flow the controller balances; with testbed.calls_via
    proxy, the proxy's address and the callee's port, where an outside balancer is)."""
    proxy = cfg.testbed.proxy.ip if cfg.testbed.calls_via == "proxy" else None
    return {"service": ms.name, "cpu_ms": ms.cpu_ms, "response_bytes": ms.response_bytes,
            "calls": [{"service": c.service, "host": proxy or cfg.microservice(c.service).vip,
                       "port": cfg.microservice(c.service).port, "count": c.count,
                       "request_bytes": c.request_bytes, "response_bytes": c.response_bytes}
                      for c in ms.calls]}


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


def config_path(path: str | None = None) -> str:
    """The file to read: the one given, else $MALB_CONFIG, else configs/paper.yaml."""
    return path or os.environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH


def load_config_data(path: str | None = None) -> dict:
    """The YAML mapping of a configuration file (default as config_path says), unvalidated:
    for tools that change a few fields before validating the whole (experiments)."""
    import yaml  # PyYAML comes with Ryu; imported here so pure users need not have it

    path = config_path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    except yaml.YAMLError as exc:       # its message spans lines: one line here
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    except ValueError as exc:     # e.g. an integer of more than 4,300 digits
        raise ConfigError(f"{path}: cannot be read: {str(exc)[:120]}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def parse_config_file_data(data: dict, path: str) -> Config:
    """Validate a mapping read from ``path`` (relative paths in it, such as the history,
    are relative to the repository root)."""
    base_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        cfg = parse_config(data, source=os.path.abspath(path), base_dir=base_dir,
                           microservices_required=True)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return with_token_from_environment(cfg)


def with_token_from_environment(cfg: Config, environ=os.environ) -> Config:
    """$MALB_TOKEN, when set and not empty, in place of security.token: every process of a
    run started with it (the controller, agents, profiler, testbed, experiments) then
    requires and sends the same token, whatever the file says."""
    token = environ.get(TOKEN_ENV_VAR)
    if not token:
        return cfg
    return dataclasses.replace(cfg, security=SecurityCfg(check_token(token, TOKEN_ENV_VAR)))


def load_config(path: str | None = None, overrides: dict | None = None) -> Config:
    """Load and validate a YAML file (default: $MALB_CONFIG, else configs/paper.yaml).

    ``overrides`` is merged section by section on top of the file (used by command-line
    flags such as ``--servers``)."""
    path = config_path(path)
    data = load_config_data(path)
    for section, values in (overrides or {}).items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            data[section] = {**data[section], **values}
        else:
            data[section] = values
    return parse_config_file_data(data, path)
