"""Command-line helpers shared by every entry point: the same flags mean the same thing
everywhere, bad values end with one clear line and a non-zero exit code, not a traceback."""
from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
from typing import NoReturn

from common.config import CONFIG_ENV_VAR, ConfigError, load_config
from common.config.model import DATAPLANE_MODES


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line: what is wrong, and where the usage is;
    exit code 2. Subcommands inherit it. Run as a console script (malb-agent, ...), a
    `python -m <module>` program is named as that script."""

    def __init__(self, *args, **kwargs):
        kwargs["prog"] = as_invoked(kwargs.get("prog"))
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def as_invoked(prog: str | None, argv0: str | None = None) -> str | None:
    """`python -m agents ...` as the user typed it: `malb-agent ...` when that console
    script is what runs (pyproject.toml's [project.scripts])."""
    script = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    if prog and script.startswith("malb-") and prog.startswith("python -m "):
        return " ".join([script, *prog.split()[3:]])
    return prog


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        fail(f"{what} needs root (Open vSwitch, Docker and network namespaces); "
             f"run it with sudo", code=1)


def _answers(command: list[str]) -> bool:
    """Whether the command exists here and succeeds within 20 s."""
    if shutil.which(command[0]) is None:
        return False
    try:
        return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_testbed(what: str, hold: bool = True) -> None:
    """Root, no other testbed running, and the daemons a testbed needs running: Open
    vSwitch and Docker (without them Mininet fails deep inside with its own message; after
    a reboot the daemons are down until `make setup` starts them again). With hold, this
    process takes the testbed lock (common/testbed_lock.py) and keeps it to its end, across
    every testbed it brings up; without, it only checks (a command whose children take
    it)."""
    require_root(what)
    missing = [name for name, command in (
        ("Open vSwitch", ["ovs-vsctl", "--timeout=5", "show"]),
        ("Docker", ["docker", "info", "--format", "{{.ID}}"])) if not _answers(command)]
    if missing:
        fail(f"{what} needs {' and '.join(missing)} running, and "
             f"{'it is' if len(missing) == 1 else 'they are'} not: run `make setup` "
             f"(it installs and starts what is missing)", code=1)
    from common import testbed_lock     # deferred: only the testbed's commands
    try:                                # last: a refusal above leaves the lock alone
        if hold:
            testbed_lock.acquire()
        elif testbed_lock.holder() is not None:
            raise testbed_lock.TestbedBusy(f"a testbed is running on this machine "
                                           f"({testbed_lock.holder()})")
    except testbed_lock.TestbedBusy as exc:
        fail(f"{what} brings a testbed up, and {str(exc)[0].lower()}{str(exc)[1:]}", code=1)


def _number(text: str, kind):
    try:
        value = kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text[:40]!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text[:40]!r}")
    return value


def bounded(kind=float, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False):
    """An argparse type: a number of `kind` (int or float, finite) within [lo, hi]
    ((lo, hi] with lo_open)."""
    def parse(text: str):
        value = _number(text, kind)
        if lo is not None and (value <= lo if lo_open else value < lo):
            raise argparse.ArgumentTypeError(
                "must be positive" if (lo_open and lo == 0) else
                f"must be {'above' if lo_open else 'at least'} {lo:g}, got {value:g}")
        if hi is not None and value > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi:g}, got {value:g}")
        return value
    return parse


positive_int = bounded(int, 1)
positive_float = bounded(float, 0, lo_open=True)
non_negative_float = bounded(float, 0)


def port_number(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is at most 65535, got {value}")
    return value


def number_list(kind=float, lo: float | None = None, hi: float | None = None,
                lo_open: bool = False, length: int | None = None):
    """An argparse type: comma-separated numbers, each as `bounded` checks it; at least one
    (exactly `length` when given)."""
    one = bounded(kind, lo, hi, lo_open)

    def parse(text: str) -> list:
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items or (length is not None and len(items) != length):
            n = f"{length} numbers" if length else "numbers"
            raise argparse.ArgumentTypeError(f"expected {n} separated by commas, "
                                             f"got {text[:40]!r}")
        out = []
        for item in items:
            try:
                out.append(one(item))
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"{item[:40]!r}: {exc}") from None
        return out
    return parse


def choice_list(choices):
    """An argparse type: comma-separated names, each one of `choices`, at least one."""
    def parse(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in choices]
        if not items or bad:
            raise argparse.ArgumentTypeError(
                f"choose from {', '.join(choices)}, got {(bad[0] if bad else text)[:40]!r}")
        return items
    return parse


def add_short_flows(parser: argparse.ArgumentParser, what: str = "the connections") -> None:
    """--short-flows: how the switches carry the short flows of an experiment's stack
    (controller.dataplane.short_flows), the same flag in every experiment; not given
    (None): as the configuration says."""
    parser.add_argument("--short-flows", choices=DATAPLANE_MODES, help=(
        f"how the switches carry {what} (controller.dataplane.short_flows): controller (a "
        "rule pair per connection from the controller), tracker (the controller decides, "
        "the switch's connection tracker translates) or switch (data-plane mode: no packet "
        "to the controller); default: the configuration's (controller unless it says)"))


def with_short_flows(data: dict, mode: str | None) -> dict:
    """A configuration's data with controller.dataplane.short_flows set to `mode` (None:
    the data as it is). The rest kept; the data given is not changed."""
    if mode is None:
        return data
    controller = data.get("controller") or {}
    return {**data, "controller": {**controller, "dataplane": {
        **(controller.get("dataplane") or {}), "short_flows": mode}}}


def regex(text: str):
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression ({exc}): "
                                         f"{text[:40]!r}") from None


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"one of {', '.join(LOG_LEVELS)}, got {text!r}")
    return text.upper()


def flag_config_error(exc: Exception, flag_of_field: dict[str, str]) -> str:
    """A configuration error caused by command-line flags, with the flag named: the first
    flag whose field (a substring of the field path) the message starts with."""
    message = str(exc)
    field = message.split(": ")[-2] if message.count(": ") >= 1 else ""
    for part, flag in flag_of_field.items():
        if part in field:
            return f"{flag}: {field}: {message.split(': ')[-1]}"
    return f"configuration: {message}"


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
    g.add_argument("--proxy", action="store_true",
                   help="add the outside balancer's host prx1 (testbed.proxy: true)")


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
    if getattr(args, "proxy", False):
        testbed["proxy"] = True
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
