"""Command-line helpers shared by every entry point: the same flags mean the same thing
everywhere, bad values end with one clear line and a non-zero exit code, not a traceback."""
from __future__ import annotations

import argparse
import os
import sys

from common.config import CONFIG_ENV_VAR, ConfigError, load_config


def fail(message: str, code: int = 1) -> "NoReturn":  # noqa: F821
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        fail(f"{what} needs root (Open vSwitch, Docker and network namespaces); "
             f"run it with sudo", code=1)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def port_number(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is at most 65535, got {value}")
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"one of {', '.join(LOG_LEVELS)}, got {text!r}")
    return text.upper()


def add_config_args(p: argparse.ArgumentParser) -> None:
    """--config plus the testbed flags that override it."""
    g = p.add_argument_group("configuration")
    g.add_argument("--config", metavar="FILE",
                   help=f"YAML configuration (default: ${CONFIG_ENV_VAR} or configs/paper.yaml)")
    g.add_argument("--servers", type=positive_int, metavar="N", help="number of servers")
    g.add_argument("--server-cpu", type=positive_float, metavar="CORES",
                   help="CPU share of every server, in cores")
    g.add_argument("--server-memory", metavar="SIZE", help="memory of every server, e.g. 256m")
    g.add_argument("--clients", type=positive_int, metavar="M", help="number of client hosts")
    g.add_argument("--switches", type=positive_int, metavar="K",
                   help="1 = paper testbed; 2..4 = chain of switches")
    g.add_argument("--trunk-bw", type=positive_float, metavar="MBIT",
                   help="bandwidth of inter-switch links")
    g.add_argument("--datapath", choices=("auto", "user", "kernel"),
                   help="OVS datapath (default: kernel when it works, else user)")
    g.add_argument("--controller", metavar="HOST:PORT|none",
                   help="remote OpenFlow controller, or none for standalone L2 switches")


def overrides_from_args(args: argparse.Namespace, base) -> dict:
    testbed, servers = {}, None
    if getattr(args, "clients", None):
        testbed["clients"] = args.clients
    if getattr(args, "switches", None):
        testbed["switches"] = args.switches
    if getattr(args, "trunk_bw", None):
        testbed["trunk_bw_mbit"] = args.trunk_bw
    if getattr(args, "datapath", None):
        testbed["datapath"] = args.datapath
    if getattr(args, "controller", None):
        testbed["controller"] = args.controller
    if any(getattr(args, k, None) for k in ("servers", "server_cpu", "server_memory")):
        servers = _server_overrides(args, base, switches_changed="switches" in testbed)
    out = {}
    if testbed:
        out["testbed"] = testbed
    if servers:
        out["servers"] = servers
    return out


def _server_overrides(args: argparse.Namespace, base, switches_changed: bool):
    """--servers/--server-cpu/--server-memory on top of the configuration's servers. Servers
    that differ from each other (names, sizes, switches) keep what the flags do not set."""
    first = base.servers[0]
    n_switches = len(base.testbed.switches)
    # the shorthand form can say it only when every server has what the shorthand derives
    uniform = all(
        s.name == f"srv{s.index}" and s.switch == f"s{(s.index - 1) % n_switches + 1}"
        and s.agent_url == f"http://{base.agents.listen_host}:{base.agents.base_port + s.index - 1}"
        and (s.cpu, s.memory_mb, s.network_mbit) == (first.cpu, first.memory_mb, first.network_mbit)
        for s in base.servers)
    cpu, memory = args.server_cpu, args.server_memory
    if uniform:
        return {"count": args.servers or len(base.servers), "cpu": cpu or first.cpu,
                "memory": memory or f"{first.memory_mb}m", "network_mbit": first.network_mbit}
    if args.servers and args.servers != len(base.servers):
        raise ConfigError(f"--servers {args.servers}: the configuration lists "
                          f"{len(base.servers)} servers one by one (names or sizes differ); "
                          f"change that list instead")
    return [{"name": s.name, "cpu": cpu or s.cpu, "memory": memory or f"{s.memory_mb}m",
             "network_mbit": s.network_mbit, "agent_url": s.agent_url,
             **({} if switches_changed else {"switch": s.switch})} for s in base.servers]


def config_from_args(args: argparse.Namespace, extra: dict | None = None):
    """Load the configuration with the command-line overrides; exit 2 naming a bad value."""
    try:
        base = load_config(getattr(args, "config", None))
        overrides = overrides_from_args(args, base)
        for section, values in (extra or {}).items():
            overrides.setdefault(section, {}).update(values)
        return load_config(getattr(args, "config", None), overrides) if overrides else base
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
