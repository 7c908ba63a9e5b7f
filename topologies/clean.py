"""Remove what a testbed left behind, and only what the project made.

- containers labelled ``malb``;
- Open vSwitch bridges tagged ``external-ids:malb=1`` (and those named in the state file);
- Mininet node shells of our nodes (which hold their network namespaces);
- veth interfaces of our nodes left in the root namespace;
- the per-server cgroups;
- processes the project started in the background and recorded under /run/malb/pids.

Debian's ``mn -c`` also removes every OVS bridge on the machine, including a user's own;
it runs only with ``--mininet``.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

from topologies.cgroups import remove_groups

STATE_DIR = "/run/malb"
STATE_FILE = os.path.join(STATE_DIR, "testbed.json")
PID_DIR = os.path.join(STATE_DIR, "pids")
# Node names the configuration can produce: srv1-vid, cli2, s3 (see common/config.py).
NODE_NAME_RE = r"(?:[a-z][a-z0-9]*-[a-z][a-z0-9]*|cli\d+|s\d+)"
# Without a state file, switch names (s1, ...) count as ours only when their bridge carries
# our tag: a user's own Mininet on the same machine uses the same names.
FALLBACK_NAME_RE = re.compile(r"[a-z][a-z0-9]*-[a-z][a-z0-9]*|cli\d+")


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def _state() -> dict:
    try:
        with open(STATE_FILE) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def remove_containers() -> list[str]:
    try:
        import docker
        client = docker.from_env(timeout=60)
        containers = client.containers.list(all=True, filters={"label": "malb"})
    except Exception:  # no daemon: nothing of ours can be running either
        return []
    removed = []
    for c in containers:
        try:
            c.remove(force=True)
            removed.append(c.name)
        except Exception:
            pass
    return removed


def our_bridges(state_names: list[str]) -> list[str]:
    out = _run(["ovs-vsctl", "--timeout=5", "list-br"])
    if out.returncode != 0:
        return []
    return [br for br in out.stdout.split()
            if br in state_names or _run(["ovs-vsctl", "--timeout=5", "br-get-external-id", br,
                                          "malb"]).stdout.strip() == "1"]


def remove_bridges(bridges: list[str]) -> list[str]:
    return [br for br in bridges
            if _run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", br]).returncode == 0]


def _is_ours(name: str, names: set[str], fallback: bool) -> bool:
    return name in names or (fallback and FALLBACK_NAME_RE.fullmatch(name) is not None)


def node_shells(names: set[str], fallback: bool) -> list[int]:
    """Processes that keep our nodes alive: Mininet shells (`bash ... -is mininet:<name>`,
    docker exec for containers) and anything else running in a network namespace that holds
    one of our nodes' interfaces (a client program started in the background, say)."""
    shell_re = re.compile(r"mininet:(%s)$" % NODE_NAME_RE)
    intf_re = re.compile(r"^\s*((%s)-eth\d+):" % NODE_NAME_RE, re.M)
    root_ns = os.readlink("/proc/self/ns/net")  # the clean-up runs in the root namespace
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            netns = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        last = next((a.decode(errors="replace") for a in reversed(argv) if a), "")
        m = shell_re.search(last)
        ours = bool(m and _is_ours(m.group(1), names, fallback))
        if not ours and netns != root_ns:
            try:
                with open(f"/proc/{pid}/net/dev") as fh:
                    dev = fh.read()
            except OSError:
                continue
            ours = any(_is_ours(n.group(2), names, fallback) for n in intf_re.finditer(dev))
        if ours and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def node_interfaces(names: set[str], fallback: bool) -> list[str]:
    pattern = re.compile(r"^\d+:\s+((%s)-eth\d+)[@:]" % NODE_NAME_RE)
    found = []
    for line in _run(["ip", "-o", "link", "show"]).stdout.splitlines():
        m = pattern.match(line)
        if m and _is_ours(m.group(2), names, fallback):
            found.append(m.group(1))
    return found


def _kill(pids: list[int]) -> list[int]:
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def stop_recorded_processes() -> list[str]:
    """Background services (controller, agents, profiler) record their PID here."""
    stopped = []
    if not os.path.isdir(PID_DIR):
        return stopped
    for name in os.listdir(PID_DIR):
        path = os.path.join(PID_DIR, name)
        try:
            pid = int(open(path).read().split()[0])
            os.kill(pid, signal.SIGTERM)
            for _ in range(30):
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
        stopped.append(name)
        try:
            os.unlink(path)
        except OSError:
            pass
    return stopped


def clean_testbed(quiet: bool = False, mininet: bool = False) -> dict:
    state = _state()
    bridges = our_bridges(state.get("switches", []))
    names, fallback = set(state.get("nodes", [])) | set(bridges), not state
    report = {
        "processes": stop_recorded_processes(),
        "containers": remove_containers(),
        "shells": _kill(node_shells(names, fallback)),
        "bridges": remove_bridges(bridges),
        "interfaces": [i for i in node_interfaces(names, fallback)
                       if _run(["ip", "link", "del", i]).returncode == 0],
    }
    report["cgroups"] = remove_groups()
    if mininet:
        report["mn -c"] = _run(["mn", "-c"]).returncode == 0
    try:
        os.unlink(STATE_FILE)
    except OSError:
        pass
    if not quiet:
        for what, items in report.items():
            count = len(items) if isinstance(items, list) else items
            print(f"clean-testbed: {what}: {count}")
    return report


def leftovers() -> dict:
    """What of ours is still on the machine (used by tests and `make clean-testbed`)."""
    state = _state()
    bridges = our_bridges(state.get("switches", []))
    names, fallback = set(state.get("nodes", [])) | set(bridges), not state
    try:
        import docker
        containers = [c.name for c in docker.from_env().containers.list(
            all=True, filters={"label": "malb"})]
    except Exception:
        containers = []
    return {"containers": containers, "bridges": bridges,
            "interfaces": node_interfaces(names, fallback),
            "namespaces": node_shells(names, fallback)}


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(description="Remove testbed leftovers (containers labelled "
                                            "malb, our OVS bridges, node shells, interfaces).")
    p.add_argument("--mininet", action="store_true",
                   help="also run Debian's `mn -c` (removes EVERY OVS bridge on the machine)")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("clean-testbed: needs root (try: sudo make clean-testbed)")
    clean_testbed(mininet=args.mininet)
