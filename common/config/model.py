"""The configuration file's fields, each declared once with its type, default, range and
help (the docs' reference tables and the JSON Schema are generated from here), and the
plain data the platform passes around.

- file sections: TestbedSection, Server (and ServerCount, the shorthand), Frequency,
  Microservice, Call, Slo, ControllerCfg, Health, Dataplane, ProfilerCfg, AgentsCfg,
  SloLoopCfg, SecurityCfg, NetworkSection (NetworkSwitch, DeclaredInstance: the user's own
  network); FILE_SECTIONS maps the file's top level to them;
- derived data: Instance, Client, Proxy, Switch, Trunk, TestbedCfg, and Config (the whole);
- the names and limits the fields refer to (POLICIES, MAX_SERVERS, ...).
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from common.config import fields as F
from common.config.fields import ConfigError, setting
# every load-balancing policy by name, in the order reports list them: ryu_apps/policies/
# registers a class under each, and refuses a name not here (the configuration is read by
# every part; the policies' package, which imports it, is not)
POLICIES = ("srr", "ln", "malb-paper", "malb", "malb-near", "maglev", "lc", "wlc", "lc-cpu",
            "wrr", "p2c", "prequal")
# every rule an SLO loop can run, by name (agents.slo.policy, PUT /slo), which
# slo/frequency_controller.py implements: the windowed SLI, the predictive loop, the governors
LOOP_POLICIES = ("slo", "predictive", "max", "min", "ondemand", "schedutil")
FLOW_CLASSES = ("short", "long", "auto")
PROTOCOLS = ("tcp", "udp")
DATAPATHS = ("auto", "user", "kernel")
CALLS_VIA = ("vip", "proxy")
HEALTH_METHODS = ("tcp", "arp", "none")
# the longest reading a host agent's GET /probes?timeout_s= waits for (agents/agent.py)
MAX_SERVICE_CHECK_TIMEOUT_S = 10.0
PREDICTORS = ("rm", "arma")
KINDS = ("rom", "callgraph")
DATAPLANE_MODES = ("controller", "switch", "tracker")
# in-switch transitions: Open vSwitch's userspace tracker may forget a connection it sees
# one way 30 s after its SYN; a transition must end before (ryu_apps/dataplane.py)
MAX_SWITCH_TRANSITION_S = 25.0
MAX_SERVERS = 99           # 10.0.<server>.x stays below the clients' 10.0.200.x
MAX_MICROSERVICES = 254    # 10.0.x.<microservice>; 8 bits in the flow cookie
MAX_INSTANCES = 4095       # 12 bits in the flow cookie
# tracker mode's zones: 16 bits, but 0 (shared) and 0xFFFF (data-plane mode's transitions)
TRACKER_ZONES = 0xFFFE
CONTAINER_PREFIX = "mn."   # Containernet's and ours: node srv1-vid runs as container mn.srv1-vid


def mac_for(kind: int, a: int, b: int) -> str:
    """Deterministic locally administered MACs: 02:00:00:<kind>:<a>:<b>."""
    return "02:00:00:%02x:%02x:%02x" % (kind, a, b)


# ---------------------------------------------------------------------------
# Custom values: checked by a function, described to editors by a JSON Schema.
# ---------------------------------------------------------------------------

def _controller_address(value: Any, where: str) -> str | None:
    return None if value in (None, "none") else F.host_port(value, where)


def _cores(raw: Any, where: str) -> tuple[int, ...]:
    """CPUs a server's containers are pinned to: they must exist on this machine, where the
    testbed and its agents run."""
    if raw is None or raw == ():
        return ()
    have = os.cpu_count() or 1
    if not isinstance(raw, list) or not raw or len(set(map(str, raw))) != len(raw):
        raise ConfigError(f"{where}: expected a list of distinct CPU numbers, got {raw!r}")
    for c in raw:
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < have:
            raise ConfigError(f"{where}: CPU {c!r} does not exist here (CPUs 0-{have - 1})")
    return tuple(raw)


def _switch(value: Any, where: str, ctx) -> str:
    if value not in ctx.switch_names:
        raise ConfigError(f"{where}: unknown switch {value!r} (have "
                          f"{', '.join(ctx.switch_names)})")
    return value


def _abbrev(value: Any, where: str) -> str:
    if not isinstance(value, str) or not F.NAME_RE.match(value):
        raise ConfigError(f"{where}: lowercase letters and digits, got {value!r}")
    return value


def _server_names(value: Any, where: str) -> tuple[str, ...]:
    if value is None or value == ():
        return ()
    if not isinstance(value, list) or not value or not all(
            isinstance(x, str) for x in value) or len(set(value)) != len(value):
        raise ConfigError(f"{where}: expected a list of distinct server names, got {value!r}")
    return tuple(value)


def _percentile(raw: Any, where: str) -> float:
    if raw is None:
        raise ConfigError(f"{where}: required")
    value = F.number(raw, where)
    if value not in (90, 95, 99):
        raise ConfigError(f"{where}: must be 90, 95 or 99, got {raw!r}")
    return value


def _prime(value: int, where: str) -> None:
    if not all(value % k for k in range(2, int(value ** 0.5) + 1)):
        raise ConfigError(f"{where}: must be a prime number (Maglev), got {value}; for "
                          f"example 257, 263, 499 or 509")


def _arma_order(order: Any, where: str) -> tuple[int, int]:
    if (not isinstance(order, (list, tuple)) or len(order) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 10
                       for x in order) or order[0] + order[1] == 0):
        raise ConfigError(f"{where}: expected [p, q] with 0 <= p, q <= 10 and p + q > 0, "
                          f"got {order!r}")
    return int(order[0]), int(order[1])


def _history_path(value: Any, where: str, ctx) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a path, got {value!r}")
    if value != ":memory:" and not os.path.isabs(value):
        return os.path.join(ctx.base_dir, value)
    return value


HOST = {"type": "string", "minLength": 1}
NAME = {"type": "string", "pattern": "^[a-z][a-z0-9]*$"}
PORT: dict[str, Any] = {"lo": 1, "hi": 65535, "type": "integer"}


# ---------------------------------------------------------------------------
# The file's sections
# ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class TestbedSection:
    """The file's `testbed:`; TestbedCfg is what is derived from it."""
    switches: int = setting(1, type="integer", lo=1, hi=4,
                            help="1: the paper testbed; 2..4: a chain of switches")
    clients: int = setting(2, type="integer", lo=1, hi=50, help="client hosts `cli1..` on `s1`")
    datapath: str = setting("auto", type="choice", choices=DATAPATHS,
                            help="the Open vSwitch datapath")
    controller: str | None = setting(
        "127.0.0.1:6653", type="custom", parse=_controller_address, nullable=True,
        what="`host:port`, `none` or null",
        schema={"anyOf": [{"type": "string", "pattern": r"^.+:[0-9]{1,5}$"},
                          {"const": "none"}, {"type": "null"}]},
        help="the remote OpenFlow controller, `host:port`; `none`: standalone L2 switches")
    vip: str = setting("10.0.0.100", type="custom", parse=F.ipv4, schema={"type": "string"},
                       what="IPv4 address",
                       help="default virtual IP of every microservice")
    trunk_bw_mbit: float | None = setting(100.0, lo=0.1, hi=100000, nullable=True,
                                          help="bandwidth of inter-switch links (null: "
                                               "unlimited)")
    host_bw_mbit: float | None = setting(None, lo=0.1, hi=100000, nullable=True,
                                         help="bandwidth limit on every host link")
    client_bw_mbit: float | None = setting(
        lo=0.1, hi=100000, nullable=True, default_from=lambda v, ctx: v["host_bw_mbit"],
        default_doc="`host_bw_mbit`", help="bandwidth limit on the client links")
    control_port: int = setting(9300, **PORT, help="`topologies up` serves its control API "
                                "here (placement moves start and stop instances)")
    proxy: bool = setting(False, type="bool", help=(
        "`true`: a host `prx1` (10.0.201.1) on `s1` for an outside balancer, HAProxy "
        "([haproxy.md](haproxy.md), [testbed.md](testbed.md#the-proxy-host)); no VIP may "
        "take its address"))
    calls_via: str = setting("vip", type="choice", choices=CALLS_VIA, help=(
        "where call-graph services send their calls: `vip` (the callee's VIP; the "
        "controller balances each call) or `proxy` (the proxy's address and the callee's "
        "port, where an outside balancer takes them; needs `proxy: true`)"))

    def validate(self, path: str) -> None:
        if self.calls_via == "proxy" and not self.proxy:
            raise ConfigError(f"{path}.calls_via: proxy needs {path}.proxy: true")


@dataclass(frozen=True, kw_only=True)
class Frequency:
    """A server's frequency range for the SLO loop (MHz; the cpufreq driver's or, emulated,
    the share of the CPU quota: f / max_mhz)."""
    min_mhz: int = setting(1000, type="integer", lo=100, hi=10000, help="lowest frequency")
    max_mhz: int = setting(2100, type="integer", lo=100, hi=10000, help="highest frequency")
    step_mhz: int = setting(100, type="integer", lo=1, hi=5000, help="one step of the loop")

    def validate(self, path: str) -> None:
        if self.min_mhz > self.max_mhz:
            raise ConfigError(f"{path}: min_mhz {self.min_mhz} is above max_mhz "
                              f"{self.max_mhz}")


@dataclass(frozen=True, kw_only=True)
class Server:
    """A server: an isolated CPU share and memory limit its containers share."""
    name: str = setting(type="custom", parse=F.name, what="name",
                        default_from=lambda v, ctx: f"srv{ctx.index}", default_doc="`srv<k>`",
                        schema=NAME,
                        help="lowercase letters and digits, starting with a letter")
    index: int            # 1-based; used in addresses
    cpu: float = setting(0.4, lo=0.01, hi=1024, help=(
        "CPU share in cores (CFS quota / period), shared by all of the server's containers"))
    memory_mb: int = setting(256, key="memory", type="custom", parse=F.size_mb,
                             schema={"type": ["string", "number"]}, what="size",
                             default_doc="`256m`",
                             help="memory limit shared by all of its containers: MB, or "
                                  "a size like `256m` or `1g`")
    network_mbit: float = setting(
        lo=0.1, hi=1e6, default_from=lambda v, ctx: ctx.host_bw or 100.0,
        default_doc="`testbed.host_bw_mbit`, else 100",
        help="the capacity network utilization is a percentage of, in each direction")
    link_mbit: float | None = setting(
        lo=0.1, hi=100000, nullable=True, default_from=lambda v, ctx: ctx.host_bw,
        default_doc="`testbed.host_bw_mbit`", help="shaping of its instances' links "
                                                    "(null: unlimited)")
    switch: str = setting(type="custom", parse=_switch, contextual=True, what="switch name",
                          default_from=lambda v, ctx: ctx.switch_names[
                              (ctx.index - 1) % len(ctx.switch_names)],
                          default_doc="servers spread over the switches in order",
                          schema={"type": "string"}, help="the switch its containers attach to")
    agent_url: str = setting(type="custom", parse=F.url, what="http(s) URL",
                             default_from=lambda v, ctx: f"http://{ctx.agent_host}:"
                                                         f"{ctx.agent_base + ctx.index - 1}",
                             default_doc="`http://<agents.listen_host>:<base_port + k - 1>`",
                             schema={"type": "string", "pattern": "^https?://"},
                             help="where its host agent answers")
    cores: tuple[int, ...] = setting((), type="custom", parse=_cores, what="list of CPU numbers",
                                     schema={
        "type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1,
        "uniqueItems": True}, help="the CPUs its containers are pinned to (they must exist "
                                   "on this machine); list form only")
    frequency: Frequency = setting(Frequency(), type="section", section=Frequency,
                                   help="the range the SLO loop moves in ([slo.md](slo.md))")


@dataclass(frozen=True, kw_only=True)
class ServerCount:
    """The shorthand `servers: {count, cpu, memory, ...}`: servers srv1..srvN alike."""
    count: int = setting(4, type="integer", lo=1, hi=MAX_SERVERS, help="how many servers")


SERVER_COUNT_SHARES = ("cpu", "memory_mb", "network_mbit", "link_mbit", "frequency")


@dataclass(frozen=True, kw_only=True)
class Call:
    """A downstream call a call-graph microservice makes for each request it serves."""
    service: str = setting(type="string", help="the microservice called")
    count: int = setting(1, type="integer", lo=1, hi=100, help="fan-out: calls per request")
    request_bytes: int = setting(0, type="integer", lo=0, hi=1 << 30,
                                 help="body sent with each call")
    response_bytes: int = setting(1000, type="integer", lo=0, hi=1 << 30,
                                  help="what the callee answers to it")


SLI_SOURCES = ("service", "client")
SLO_SCOPES = ("service", "end-to-end")
BUDGET_SPLITS = ("uniform", "priced")


@dataclass(frozen=True, kw_only=True)
class Slo:
    """A microservice's latency objective: its `percentile` latency over the loop's window
    at most `target_ms`; the hold band reaches `margin` below it."""
    percentile: float = setting(95.0, type="custom", parse=_percentile, what="90, 95 or 99",
                                schema={"enum": [90, 95, 99]}, help="90, 95 or 99")
    target_ms: float = setting(lo=0.1, hi=600_000, help="the latency objective")
    margin: float = setting(0.10, lo=0.01, hi=0.9, help="the hold band below the target, "
                                                         "a share of it")
    sli: str = setting("service", type="choice", choices=SLI_SOURCES, help=(
        "where the latency is measured: `service` (its own histogram) or `client` (what "
        "clients report to its agent, `POST /slo/observations`: end to end)"))
    scope: str = setting("service", type="choice", choices=SLO_SCOPES, help=(
        "`service`: its own loop holds it; `end-to-end` (a service that calls others): the "
        "whole request's objective, which the profiler splits into budgets, the targets of "
        "the loops of the services it calls (each needs an `slo`; its `target_ms` is the "
        "start) ([slo.md](slo.md#budgets-on-a-call-graph-slobudgetspy))"))
    split: str = setting("uniform", type="choice", choices=BUDGET_SPLITS, help=(
        "an end-to-end objective's split into budgets: `uniform` (every service's own part "
        "slowed alike) or `priced` (the MHz go where a millisecond at the entry costs the "
        "fewest watts); `PUT /budgets` changes it"))


def _default_command(v: dict, ctx) -> str:
    if v["kind"] == "callgraph":
        return "python3 -m services.callgraph --port {port}"
    return f"python3 -m services.rom {v['name']} --port {{port}}"


@dataclass(frozen=True, kw_only=True)
class Microservice:
    name: str = setting(type="custom", parse=F.name, what="name",
                        schema=NAME,
                        help="lowercase letters and digits")
    index: int
    abbrev: str = setting(type="custom", parse=_abbrev, what="name",
                          default_from=lambda v, ctx: v["name"][:3],
                          default_doc="first 3 letters", schema=NAME,
                          help="used in node names (`srv1-<abbrev>`)")
    vip: str = setting(type="custom", parse=F.ipv4, what="IPv4 address",
                       default_from=lambda v, ctx: ctx.vip,
                       default_doc="`testbed.vip`", schema={"type": "string"},
                       help="virtual IP clients connect to")
    port: int = setting(**PORT, help="L4 port: identifies the microservice at the controller")
    protocol: str = setting("tcp", type="choice", choices=PROTOCOLS, help="`tcp` or `udp`")
    flow_class: str = setting("auto", type="choice", choices=FLOW_CLASSES,
                              help="`short`, `long`, or `auto` (the profiler decides)")
    image: str = setting("malb/service:latest", type="string", help="container image")
    kind: str = setting("rom", type="choice", choices=KINDS, help=(
        "`rom` (services/rom.py: video, ui, backend) or `callgraph` (services/callgraph.py)"))
    command: str = setting(type="string", default_from=_default_command, default_doc=(
        "`python3 -m services.rom <name> --port {port}` (callgraph: `python3 -m "
        "services.callgraph --port {port}`)"), help=(
        "started in each instance container; `{port}`, `{name}` (the microservice) and "
        "`{instance}` (e.g. `srv1-vid`) are filled in, a literal brace is doubled (`{{`)"))
    replicas: int | None = setting(None, type="integer", lo=1, hi=MAX_SERVERS, nullable=True,
                                   default_doc="every server", help=(
        "instances at the start, spread round robin from the microservice's own offset"))
    servers: tuple[str, ...] = setting((), type="custom", parse=_server_names,
                                      what="list of server names", schema={
        "type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
        help="or the servers they start on, listed (not with `replicas`)")
    calls: tuple[Call, ...] = setting((), type="sections", section=Call,
                                      help="callgraph: what it calls per request; a DAG")
    cpu_ms: float = setting(0.0, lo=0, hi=60000, help="callgraph: CPU time per request")
    response_bytes: int = setting(1000, type="integer", lo=0, hi=1 << 30,
                                  help="callgraph: its answer's size")
    slo: Slo | None = setting(None, type="section", section=Slo, nullable=True, help=(
        "its agent's SLO loop keeps the service's p`percentile` latency at most "
        "`target_ms`, holding in the band `margin` below it ([slo.md](slo.md))"))

    def validate(self, path: str) -> None:
        try:
            self.command.format(port=self.port, name=self.name,
                                instance=f"srv1-{self.abbrev}")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"{path}.command: only {{port}}, {{name}} and {{instance}} may "
                              f"appear in braces (double a literal brace: {{{{ }}}}); "
                              f"{type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class Health:
    method: str = setting("tcp", type="choice", choices=HEALTH_METHODS,
                          help="how instances are probed (`none`: not at all)")
    interval_s: float = setting(2.0, lo=0.1, hi=3600, help="between probes")
    timeout_s: float = setting(1.0, lo=0.05, hi=60, help="a probe's; below `interval_s`")
    unhealthy_after: int = setting(2, type="integer", lo=1, hi=100,
                                   help="failed probes before an instance is out")
    healthy_after: int = setting(1, type="integer", lo=1, hi=100,
                                 help="good probes before it is back")
    service: bool = setting(True, type="bool", help=(
        "also judge each instance by its service's own answer, as its host agent reads it "
        "(`GET /probes` twice per `interval_s`, within `timeout_s`): a process not answering "
        "is out after `unhealthy_after` such readings in a row, a stopped one at once, "
        "though its kernel still answers the SYN probes ([reliability.md](reliability.md))"))
    service_readmit_s: float = setting(10.0, lo=0, hi=3600, help=(
        "an instance its service's readings took out is back only after they have all been "
        "good for this long (a process starved of CPU answers some in time); doubled each "
        "time it is taken out again soon after, up to 16 times; 0: at `healthy_after` good "
        "readings"))

    def validate(self, path: str) -> None:
        if self.method != "none" and self.timeout_s >= self.interval_s:
            raise ConfigError(f"{path}.timeout_s: must be shorter than interval_s "
                              f"({self.interval_s}), got {self.timeout_s}: a probe is judged "
                              f"before the next one goes out")
        if self.method != "none" and self.service and \
                self.timeout_s > MAX_SERVICE_CHECK_TIMEOUT_S:
            raise ConfigError(f"{path}.timeout_s: at most {MAX_SERVICE_CHECK_TIMEOUT_S:g} s "
                              f"with service checks on (the agents wait no longer for a "
                              f"reading), got {self.timeout_s}; or set {path}.service: false")


@dataclass(frozen=True, kw_only=True)
class Dataplane:
    short_flows: str = setting("controller", type="choice", choices=DATAPLANE_MODES, help=(
        "`controller`: a decision per flow; `switch`: short-flow microservices are balanced "
        "by the switch, an OpenFlow select group rendering a Maglev table, with no packet-in "
        "per connection, under policies malb, malb-paper and maglev (the others keep "
        "per-flow decisions) ([controller.md](controller.md#data-plane-mode-short-flows-"
        "balanced-by-the-switch)); `tracker`: a decision per connection, but a short-flow "
        "TCP connection's address translation is kept by Open vSwitch's connection tracker, "
        "with no rule per connection, under every policy ([controller.md](controller.md#"
        "tracker-mode-short-flows-translated-by-the-connection-tracker))"))
    table_size: int = setting(127, type="integer", lo=61, hi=509, check=_prime, help=(
        "Maglev slots = select-group buckets: a prime below OpenFlow's 64 KiB message; "
        "at most 256, Open vSwitch's datapath hash (no upcall per connection, shares uneven "
        "by up to 1/256 per bucket; 127 spreads the 256 hash values most evenly), above "
        "256 its even default selection (an upcall per new connection) "
        "([controller.md](controller.md#data-plane-mode-short-flows-balanced-by-the-switch))"))
    transitions: str = setting("controller", type="choice", choices=("controller", "switch"),
                               help=(
        "data-plane mode: where a moving slot's connections are kept while its old owner "
        "still runs (`idle_timeout_s`). `controller`: every packet of the slot comes to the "
        "controller; `switch` (TCP; Open vSwitch's userspace datapath only, whose connection "
        "tracker keeps a connection it sees one way, and a grace period of at most "
        "25 s): its new connections are committed to the tracker and go to the new owner "
        "with no packet-in, the old owner's flows under way come to the controller. The "
        "experiments choose `switch` on a userspace testbed "
        "([controller.md](controller.md#data-plane-mode-short-flows-balanced-by-the-switch))"))
    connection_poll_s: float = setting(0.25, lo=0, hi=60, help=(
        "data-plane mode: how often the switches' counts of each short-flow instance's open "
        "TCP connections are read (counter rules beside the reverse NAT: its SYN-ACKs less "
        "its FINs and resets); `malb` sets the select group's shares from them at each "
        "count, fewer new connections to an instance with more open. 0: not counted "
        "([controller.md](controller.md#connection-aware-shares))"))
    tracked_max_s: float = setting(30.0, lo=1, hi=3600, help=(
        "tracker mode: a tracked connection whose end the controller has not seen by then "
        "(a half-open one of a SYN flood, a client gone without a reset) stops counting, "
        "for `max_active_flows`, the policy and the profiler ([controller.md](controller.md#"
        "tracker-mode-short-flows-translated-by-the-connection-tracker))"))


@dataclass(frozen=True, kw_only=True)
class Failover:
    """A standby controller's timing (its peer and preferred role are per process:
    `--malb-peer`, `--malb-role`; [controller.md](controller.md#a-standby-controller))."""
    peer_poll_s: float = setting(0.25, lo=0.05, hi=10, help=(
        "how often a controller with a peer asks it for its role (`GET /malb/role`)"))
    takeover_after_s: float = setting(1.0, lo=0.1, hi=60, help=(
        "a standby takes the master role when no master peer has answered for this long"))

    def validate(self, path: str) -> None:
        if self.takeover_after_s <= self.peer_poll_s:
            raise ConfigError(f"{path}.takeover_after_s: must be longer than peer_poll_s "
                              f"({self.peer_poll_s:g}), got {self.takeover_after_s:g}: one "
                              f"missed answer would hand the switches over")


@dataclass(frozen=True, kw_only=True)
class ControllerCfg:
    policy: str = setting("malb", type="choice", choices=POLICIES,
                          help="the balancing policy ([controller.md](controller.md#policies))")
    monitoring_period_s: float = setting(3.0, lo=0.1, hi=3600, help="statistics period")
    idle_timeout_s: int = setting(10, type="integer", lo=0, hi=65535,
                                  help="idle timeout of the NAT flow rules")
    hard_timeout_s: int = setting(0, type="integer", lo=0, hi=65535, help=(
        "hard timeout of the NAT flow rules (not both 0: flows must end)"))
    rest_host: str = setting("127.0.0.1", type="custom", parse=F.host_or_ipv6, schema=HOST,
                             what="host",
                             help="REST API of the controller: an IPv4 or IPv6 address or "
                                  "a host name")
    rest_port: int = setting(8080, **PORT, help="REST API port")
    ofp_port: int = setting(6653, **PORT, help="OpenFlow listening port")
    server_stale_after_s: float = setting(
        lo=0.1, default_from=lambda v, ctx: 3 * v["monitoring_period_s"],
        default_doc="3 x `monitoring_period_s`", help="a server's load older than this is stale")
    weights_stale_after_s: float = setting(
        lo=0.1, default_from=lambda v, ctx: 10 * v["monitoring_period_s"],
        default_doc="10 x `monitoring_period_s`",
        help="profiler weights older than this fall back to equal weights")
    pending_flow_cost: float = setting(5.0, lo=0, hi=100, help=(
        "load points a just-assigned flow adds until the profiler knows its microservice's "
        "per-flow use"))
    vip_mac: str = setting(mac_for(0, 0, 0x64), type="custom", parse=F.mac, what="MAC address",
                           schema={
        "type": "string", "pattern": f"^{F.MAC_PATTERN}$"},
        help="MAC the controller answers ARP for VIPs with")
    health: Health = setting(Health(), type="section", section=Health,
                             help="health probes of the instances")
    dataplane: Dataplane = setting(Dataplane(), type="section", section=Dataplane,
                                   help="who balances short flows")
    failover: Failover = setting(Failover(), type="section", section=Failover,
                                 help="a standby controller's timing")
    packet_in_limit_per_s: int = setting(2000, type="integer", lo=0, hi=1_000_000, help=(
        "per switch, an OpenFlow meter on the rules that send new flows to the VIPs and "
        "table misses to the controller (about 2 metered packets per new connection on the "
        "userspace datapath, so about 1,000 new flows/s); 0: no meter. Health-probe answers "
        "bypass it"))
    max_active_flows: int = setting(50000, type="integer", lo=1, hi=10_000_000, help=(
        "flow records the controller keeps; new per-flow flows beyond are dropped (counted "
        "as `flow_cap`) until some end"))
    probe_period_s: float = setting(0.25, lo=0.05, hi=60, help=(
        "how often the controller asks every agent's `GET /probes` (each instance's requests "
        "in flight and recent latency), only while the policy reads probes "
        "([controller.md](controller.md#probes-requests-in-flight-and-latency))"))

    def validate(self, path: str) -> None:
        if self.idle_timeout_s == 0 and self.hard_timeout_s == 0:
            raise ConfigError(f"{path}.idle_timeout_s: idle_timeout_s and hard_timeout_s are "
                              f"both 0, so NAT rules would never expire and no flow would "
                              f"ever end")
        dp = self.dataplane
        grace = self.idle_timeout_s or self.hard_timeout_s
        if dp.short_flows == "switch" and dp.transitions == "switch" and \
                grace > MAX_SWITCH_TRANSITION_S:
            raise ConfigError(f"{path}.dataplane.transitions: switch needs a grace period "
                              f"(idle_timeout_s, else hard_timeout_s) of at most "
                              f"{MAX_SWITCH_TRANSITION_S:g} s, got {grace}: Open vSwitch's "
                              f"tracker may forget a connection 30 s after its SYN; or set "
                              f"transitions: controller")
        if self.rest_port == self.ofp_port:
            raise ConfigError(f"{path}.rest_port: {self.rest_port} is also {path}.ofp_port "
                              f"(OpenFlow); the REST API needs a port of its own")


@dataclass(frozen=True, kw_only=True)
class ProfilerCfg:
    url: str = setting(type="custom", parse=F.url, what="http(s) URL", default_from=lambda v, ctx:
                       f"http://{v['listen_host']}:{v['listen_port']}",
                       default_doc="`http://<listen_host>:<listen_port>`",
                       schema={"type": "string", "pattern": "^https?://"},
                       help="where the controller finds the profiler")
    listen_host: str = setting("127.0.0.1", type="custom", parse=F.host, schema=HOST,
                               what="host",
                               help="an IPv4 address or a host name")
    listen_port: int = setting(9200, **PORT, help="the profiler's port")
    period_s: float = setting(3.0, lo=0.1, hi=3600, help="collection and prediction period")
    predictor: str = setting("rm", type="choice", choices=PREDICTORS,
                             help="`rm` (rolling mean) or `arma`")
    window: int = setting(10, type="integer", lo=1, hi=10000,
                          help="samples in the predictor window")
    arma_order: tuple[int, int] = setting((2, 1), type="custom", parse=_arma_order,
                                          what="[p, q], each 0 to 10", schema={
        "type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 10},
        "minItems": 2, "maxItems": 2}, help="ARMA (p, q)")
    arma_refit_every: int = setting(10, type="integer", lo=1, hi=100000,
                                    help="periods between ARMA refits")
    flow_threshold_s: float = setting(3.0, lo=0.0, help="flows longer than this are long")
    flow_classification: str = setting("threshold", type="choice",
                                       choices=("threshold", "auto"), help=(
        "`threshold`, or `auto` (from the observed durations)"))
    history_path: str = setting("results/profiler-history.sqlite", type="custom",
                                parse=_history_path, contextual=True, schema=HOST,
                                what="path", help=(
        "relative to the repository; experiments put each run's history in the run's "
        "directory"))
    retention_s: float = setting(7 * 24 * 3600.0, lo=1, help="history kept")
    agent_timeout_s: float = setting(1.0, lo=0.05, hi=60, help="HTTP timeout towards agents")
    graph_window_s: float = setting(30.0, lo=0.1, hi=86400, help=(
        "memory of the communication graph's EWMA ([placement.md](placement.md))"))
    agent_window_s: float = setting(lo=0, hi=600, default_from=lambda v, ctx: v["period_s"],
                                    default_doc="`period_s`", help=(
        "what each agent measures for a period: its last this many seconds, from the "
        "counters it keeps; 0: its latest sample alone (one `agents.period_s`, as `docker "
        "stats` shows it)"))

    def validate(self, path: str) -> None:
        need = max(sum(self.arma_order) + 2, 5)
        if self.predictor == "arma" and self.window < need:
            raise ConfigError(f"{path}.window: ARMA{self.arma_order} needs a window of at "
                              f"least {need} samples, got {self.window}")


@dataclass(frozen=True, kw_only=True)
class SloPredictiveCfg:
    """The predictive loop's model (slo/predictive.py; [slo.md](slo.md#the-predictive-loop))."""
    work_scv: float = setting(1.0, lo=0, hi=100, help=(
        "squared coefficient of variation of a request's CPU work (1: as varied as an "
        "exponential, 0: every request the same)"))
    offset_gain: float = setting(0.3, lo=0.01, hi=1, help=(
        "share of each windowed residual (SLI minus prediction) the offset takes"))
    max_down_steps: int = setting(2, type="integer", lo=1, hi=100,
                                  help="frequency steps down in one period at most")
    margin: float | None = setting(None, lo=0.01, hi=0.9, nullable=True, help=(
        "the band whose middle the rule aims at, a share of the target; null: the "
        "service's `slo.margin` (slo.md, \"The predictive loop\")"))


@dataclass(frozen=True, kw_only=True)
class SloLoopCfg:
    """The host agents' SLO frequency loop (slo/frequency_controller.py has the rule)."""
    policy: str = setting("slo", type="choice", choices=LOOP_POLICIES, help=(
        "the rule each loop starts with: `slo` (the windowed SLI), `predictive` (the queue "
        "and the work, corrected by the SLI), or a governor (`max`, `min`, `ondemand`, "
        "`schedutil`); `PUT /slo` changes it"))
    period_s: float = setting(1.0, lo=0.1, hi=600, help="how often the loop decides")
    window_s: float = setting(5.0, lo=0.5, hi=60,
                              help="the seconds of requests whose latency it reads")
    min_samples: int = setting(100, type="integer", lo=1, hi=1_000_000,
                               help="fewer requests in the window: hold")
    band_mode: str = setting("safe", type="choice", choices=("safe", "paper"),
                             help="`safe`, or `paper` (the paper's literal band, for "
                                  "comparison; [slo.md](slo.md))")
    actuator: str = setting("auto", type="choice", choices=("auto", "cpufreq", "emulated"),
                            help="`auto` (cpufreq, else emulated), `cpufreq` or `emulated`")
    emergency: float = setting(0.5, lo=0.05, hi=10,
                               help="above (1 + emergency) x the target: the maximum at once")
    cooldown_s: float = setting(10.0, lo=0, hi=3600,
                                help="after an emergency, no step down for this long")
    dwell_s: float = setting(3.0, lo=0, hi=3600,
                             help="no step down sooner than this after any change")
    guard: float = setting(0.4, lo=0, hi=0.99,
                           help="top share of the band that steps up early; 0: off")
    predictive: SloPredictiveCfg = setting(SloPredictiveCfg(), type="section",
                                           section=SloPredictiveCfg,
                                           help="the predictive loop's model (below)")


@dataclass(frozen=True, kw_only=True)
class AgentsCfg:
    listen_host: str = setting("127.0.0.1", type="custom", parse=F.host, schema=HOST,
                               what="host",
                               help="an IPv4 address or a host name")
    base_port: int = setting(9101, type="integer", lo=1, hi=65000,
                             help="agent k listens on base_port + k - 1")
    period_s: float = setting(1.0, lo=0.1, hi=3600, help="sampling period of `docker stats`")
    slo: SloLoopCfg = setting(SloLoopCfg(), type="section", section=SloLoopCfg,
                              help="the SLO loop ([slo.md](slo.md))")
    # the services' GET /latency takes windows of 0.1 to 60 s
    probe_window_s: float = setting(1.0, lo=0.1, hi=60, help=(
        "`GET /probes`: the seconds of recent requests whose latency it reports, unless the "
        "request says (`?window_s=`) ([profiler.md](profiler.md#get-probes-requests-in-"
        "flight-and-latency))"))
    probe_timeout_s: float = setting(0.25, lo=0.01, hi=10, help=(
        "`GET /probes`: how long one instance's reading may take before it is reported as "
        "failed (the answer waits no longer for it)"))


@dataclass(frozen=True, kw_only=True)
class SecurityCfg:
    """Never shown in a repr or an error."""
    token: str | None = setting(None, type="custom", parse=F.token, nullable=True, repr=False,
                                what="token",
                                schema={"type": ["string", "null"], "minLength": 16,
                                        "maxLength": 256, "pattern": r"^[\x21-\x7e]+$"},
                                help=(
        "a shared token, 16 to 256 visible ASCII characters; when set, every POST, PUT and "
        "DELETE to the controller's REST API, the profiler, the agents and the testbed's "
        "control API must carry it (Authorization: Bearer <token> or X-MALB-Token), and "
        "the project's own clients send it ([reliability.md](reliability.md#the-shared-"
        "token)); `MALB_TOKEN` overrides it"))


def _dpid(value: Any, where: str) -> int:
    """A datapath id as OpenFlow gives it: an integer, or hex digits (Ryu's and ovs-ofctl's
    `0000000000000001`)."""
    if isinstance(value, str) and re.fullmatch(r"(0x)?[0-9a-fA-F]{1,16}", value):
        return int(value, 16)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 64:
        return value
    raise ConfigError(f"{where}: expected a datapath id (an integer, or up to 16 hex digits "
                      f"as a string), got {value!r}")


@dataclass(frozen=True, kw_only=True)
class NetworkSwitch:
    """A switch of the user's own network."""
    name: str = setting(type="custom", parse=F.name, what="name", schema=NAME,
                        help="how the instances refer to it")
    dpid: int = setting(type="custom", parse=_dpid, what="datapath id",
                        schema={"type": ["integer", "string"]},
                        help="its OpenFlow datapath id: an integer, or hex digits as a string "
                             "(`\"0000000000000001\"`)")
    tracker_zone: int | None = setting(
        None, type="integer", lo=1, hi=TRACKER_ZONES, nullable=True,
        default_doc="`(dpid - 1) mod 65534 + 1`", help=(
            "its connection-tracker zone in tracker mode: by default from its datapath id "
            "alone, so it does not change when switches are added or removed; set it only "
            "where two datapath ids give the same zone"))


@dataclass(frozen=True, kw_only=True)
class DeclaredInstance:
    """An instance where the user's network has it: its address and MAC, and optionally its
    switch and port (else the controller finds them)."""
    microservice: str = setting(type="string", help="the microservice it serves")
    server: str = setting(type="string", help=(
        "the server it runs on (a name under `servers`): its load and its agent are that "
        "server's"))
    ip: str = setting(type="custom", parse=F.ipv4, what="IPv4 address",
                      schema={"type": "string"}, help="its own address")
    mac: str = setting(type="custom", parse=F.mac, what="MAC address",
                       schema={"type": "string", "pattern": "^" + F.MAC_PATTERN + "$"},
                       help="its MAC: the controller rewrites a flow's destination to it")
    name: str | None = setting(None, type="custom", parse=F.instance_name, nullable=True,
                               what="name", schema={"type": ["string", "null"]},
                               default_doc="`<server>-<abbrev>`",
                               help="how the controller, its REST API and the profiler name it")
    switch: str | None = setting(None, type="custom", parse=F.name, nullable=True,
                                 what="switch name", schema={"type": ["string", "null"]},
                                 help=("the switch it is attached to, one of "
                                       "`network.switches` (null: found by the controller)"))
    port: int | None = setting(None, type="integer", lo=1, hi=0xFFFFFF00, nullable=True,
                               help=("its OpenFlow port on that switch (null: the controller "
                                     "finds it from the instance's answers to its probes)"))

    def validate(self, path: str) -> None:
        if self.port is not None and self.switch is None:
            raise ConfigError(f"{path}.port: a port needs its switch ({path}.switch)")


@dataclass(frozen=True, kw_only=True)
class NetworkSection:
    """The file's `network:`: the user's own network instead of the testbed's. The
    controller balances the listed instances at their addresses; the testbed builder does
    not build such a network ([configuration.md](configuration.md#your-own-network))."""
    switches: tuple[NetworkSwitch, ...] = setting((), type="sections", section=NetworkSwitch,
                                                  help=("the OpenFlow switches the controller "
                                                        "serves (flows entering any other are "
                                                        "dropped)"))
    instances: tuple[DeclaredInstance, ...] = setting(
        (), type="sections", section=DeclaredInstance,
        help="every instance, at the address of your choosing (instead of the derived slots)")


# ---------------------------------------------------------------------------
# Derived data
# ---------------------------------------------------------------------------

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
    # where it is attached; None in the user's network (`network.instances`) where the
    # configuration does not say: the controller finds it (ryu_apps/locations.py)
    switch: str | None
    dpid: int | None
    switch_port: int | None   # OpenFlow port on its switch
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


def tracker_zone(dpid: int) -> int:
    """A switch's connection-tracker zone when the configuration names none: from its
    datapath id alone, so a switch keeps its zone whatever other switches are configured
    (connections tracked before a restart with a changed configuration stay known)."""
    return (dpid - 1) % TRACKER_ZONES + 1


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int
    tracker_zone: int = 0          # 0: tracker_zone(dpid)

    def __post_init__(self):
        if not self.tracker_zone:
            object.__setattr__(self, "tracker_zone", tracker_zone(self.dpid))


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
    # the user's own network (`network.instances`): the instances are the ones listed, at
    # their addresses; no testbed builds it
    declared_network: bool = False

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


# The file's top level: each key and the section it holds (servers: a list of Server, or
# the ServerCount shorthand; microservices: a list of Microservice).
FILE_SECTIONS = {"testbed": TestbedSection, "servers": Server, "microservices": Microservice,
                 "controller": ControllerCfg, "profiler": ProfilerCfg, "agents": AgentsCfg,
                 "security": SecurityCfg, "network": NetworkSection}
