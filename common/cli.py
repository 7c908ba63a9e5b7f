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
        servers = {"count": args.servers or len(base.servers),
                   "cpu": args.server_cpu or base.servers[0].cpu,
                   "memory": args.server_memory or f"{base.servers[0].memory_mb}m",
                   "network_mbit": base.servers[0].network_mbit}
    out = {}
    if testbed:
        out["testbed"] = testbed
    if servers:
        out["servers"] = servers
    return out


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
