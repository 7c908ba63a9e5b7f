"""Remove what a testbed left behind, and only what the project made: containers, bridges,
node shells and what runs in their namespaces, veth interfaces, server cgroups, recorded
background processes (docs/testbed.md, "Cleanup"). Debian's ``mn -c`` also removes every
OVS bridge on the machine, so it runs only with ``--mininet``.

- clean_testbed, leftovers: remove it all; what of ours is still there;
- our_containers, our_bridges, node_shells, node_interfaces: what counts as ours;
- remove_containers, remove_bridges, stop_recorded_processes: removing it;
- CleanupError: what is left cannot be told (the Docker engine does not answer).

While another process holds the testbed lock (common/testbed_lock.py), its testbed is not
left behind but running: clean_testbed refuses (TestbedBusy) and touches nothing.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

from common.state import PID_DIR, TESTBED_STATE_FILE, process_start_ticks, read_pid_file, \
    same_process
from common.cgroups import remove_groups
from topologies.dockerhost import leftover_is_ours
from common.testbed_lock import TestbedBusy, holder
# Node names the configuration can produce: srv1-vid, cli2, prx1, s3 (common/config.py).
NODE_NAME_RE = r"(?:[a-z][a-z0-9]*-[a-z][a-z0-9]*|cli\d+|prx\d+|s\d+)"
# Without a state file, switch names (s1, ...) count as ours only when their bridge carries
# our tag: a user's own Mininet on the same machine uses the same names.
FALLBACK_NAME_RE = re.compile(r"[a-z][a-z0-9]*-[a-z][a-z0-9]*|cli\d+|prx\d+")


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


class CleanupError(RuntimeError):
    """What is left on the machine cannot be told (the Docker engine does not answer)."""


def _state() -> dict:
    try:
        with open(TESTBED_STATE_FILE) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        print(f"clean-testbed: ignoring an unreadable {TESTBED_STATE_FILE} ({exc}); "
              f"looking for our nodes by their names")
        return {}


def our_containers(timeout: int = 60) -> list:
    """Containers of ours: labelled malb, or made by Containernet (which drops our labels)
    with our MALB_INSTANCE in their environment. CleanupError when Docker cannot say:
    stopped containers of ours may still exist, and an unanswered question is not "none"."""
    try:
        import docker   # deferred: the Docker SDK, only when there is cleaning to do
        client = docker.from_env(timeout=timeout)
        mine = {c.id: c for c in client.containers.list(all=True, filters={"label": "malb"})}
        for c in client.containers.list(all=True, filters={"label": "com.containernet"}):
            if c.id not in mine:
                c.reload()     # the list omits the environment
                if leftover_is_ours(c):
                    mine[c.id] = c
        return list(mine.values())
    except Exception as exc:  # noqa: BLE001 -- the SDK, requests or the socket
        raise CleanupError(f"cannot list containers: the Docker engine does not answer "
                           f"({type(exc).__name__}: {exc})") from None


def remove_containers(errors: list[str]) -> list[str]:
    try:
        containers = our_containers()
    except CleanupError as exc:
        errors.append(str(exc))
        return []
    removed = []
    for c in containers:
        try:
            c.remove(force=True)
            removed.append(c.name)
        except Exception as exc:  # noqa: BLE001 -- named in the errors
            errors.append(f"container {c.name}: not removed ({type(exc).__name__}: {exc})")
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


def _terminate(pid: int, start: int) -> str:
    """SIGTERM, then SIGKILL after 3 s, to a verified process (its whole group when it leads
    one: the services run in sessions of their own, with workers under them)."""
    try:
        group = os.getpgid(pid) == pid
    except ProcessLookupError:
        return "already gone"

    def send(sig) -> None:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)

    for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
        try:
            send(sig)
        except ProcessLookupError:
            return "stopped"
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not same_process(pid, start):
                return "stopped" if sig == signal.SIGTERM else "killed (did not stop on SIGTERM)"
            time.sleep(0.05)
    return "STILL RUNNING after SIGKILL"


def stop_recorded_processes(pid_dir: str = PID_DIR) -> dict[str, str]:
    """Stop the background services (controller, agents, profiler) that recorded their PID,
    each only while it is verifiably the recorded process. {pid file: what happened}."""
    outcome: dict[str, str] = {}
    if not os.path.isdir(pid_dir):
        return outcome
    for name in sorted(os.listdir(pid_dir)):
        path = os.path.join(pid_dir, name)
        keep = False
        try:
            pid, label, start = read_pid_file(path)
        except (OSError, ValueError) as exc:
            outcome[name] = f"unreadable ({exc}): nothing signalled"
        else:
            if process_start_ticks(pid) is None:
                outcome[name] = f"{label} (pid {pid}): already gone"
            elif start is None:
                outcome[name] = (f"{label} (pid {pid}): the file records no start time, so "
                                 f"the process cannot be told ours: not signalled")
            elif not same_process(pid, start):
                outcome[name] = (f"{label}: pid {pid} now belongs to another process: "
                                 f"not signalled")
            else:
                result = _terminate(pid, start)
                keep = result.startswith("STILL")
                outcome[name] = f"{label} (pid {pid}): {result}"
        if not keep:
            try:
                os.unlink(path)
            except OSError as exc:
                outcome[name] += f"; {path} not removed ({exc.strerror})"
    return outcome


def clean_testbed(quiet: bool = False, mininet: bool = False) -> dict:
    running = holder()
    if running is not None:
        raise TestbedBusy(f"a testbed is running on this machine ({running}); not cleaning "
                          f"what it uses: wait for it to end, or stop it")
    state = _state()
    bridges = our_bridges(state.get("switches", []))
    names, fallback = set(state.get("nodes", [])) | set(bridges), not state
    errors: list[str] = []
    report = {
        "processes": stop_recorded_processes(),
        "containers": remove_containers(errors),
        "shells": _kill(node_shells(names, fallback)),
        "bridges": remove_bridges(bridges),
        "interfaces": [i for i in node_interfaces(names, fallback)
                       if _run(["ip", "link", "del", i]).returncode == 0],
    }
    report["cgroups"] = remove_groups()
    if mininet:
        report["mn -c"] = _run(["mn", "-c"]).returncode == 0
    try:
        os.unlink(TESTBED_STATE_FILE)
    except FileNotFoundError:
        pass
    except OSError as exc:
        errors.append(f"{TESTBED_STATE_FILE}: not removed ({exc.strerror})")
    errors += [f"process {w}" for w in report["processes"].values() if "STILL RUNNING" in w]
    report["errors"] = errors
    if not quiet:
        for what, items in report.items():
            if what in ("processes", "errors"):
                continue
            count = len(items) if isinstance(items, list) else items
            print(f"clean-testbed: {what}: {count}")
        for _name, what in report["processes"].items():
            print(f"clean-testbed: process {what}")
        for err in errors:
            print(f"clean-testbed: ERROR: {err}")
    return report


def leftovers() -> dict:
    """What of ours is still on the machine (used by tests and `make clean-testbed`).
    CleanupError when the Docker engine cannot be asked."""
    state = _state()
    bridges = our_bridges(state.get("switches", []))
    names, fallback = set(state.get("nodes", [])) | set(bridges), not state
    containers = [c.name for c in our_containers()]
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
    try:
        raise SystemExit(1 if clean_testbed(mininet=args.mininet)["errors"] else 0)
    except TestbedBusy as exc:
        raise SystemExit(f"clean-testbed: {exc}") from None
