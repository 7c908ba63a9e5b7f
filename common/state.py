"""Where the platform keeps its run-time state on this machine, and the records in it.

    /run/malb/testbed.json       the running testbed (topologies/testbed.py writes it,
                                 topologies/clean.py reads it)
    /run/malb/testbed.lock       held by the process whose testbed runs
                                 (common/testbed_lock.py)
    /run/malb/pids/<name>.pid    background services the project started (common/procs.py)

A PID file holds ``<pid> <name> <start>``, where start is the process's start time in clock
ticks since boot (/proc/<pid>/stat, field 22). A PID alone may name some other process once
ours has ended and the number was reused; cleanup signals a recorded process only while its
start time still matches. Also here: the processes' CPU and start times, and Open vSwitch's
own daemon (ovs_vswitchd_pid, from its PID file).
"""
from __future__ import annotations

import os

STATE_DIR = "/run/malb"
TESTBED_STATE_FILE = os.path.join(STATE_DIR, "testbed.json")
TESTBED_LOCK_FILE = os.path.join(STATE_DIR, "testbed.lock")
PID_DIR = os.path.join(STATE_DIR, "pids")
OVS_PID_FILE = "/var/run/openvswitch/ovs-vswitchd.pid"     # Open vSwitch's own


CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 on), or None when
    there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces and parentheses
    return stat[stat.rfind(b")") + 2:].split()


def process_state(pid: int) -> str | None:
    """The process's state letter (R, S, T for stopped, Z, ...), or None."""
    fields = _stat_fields(pid)
    return fields[0].decode() if fields else None


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads) so far, in seconds; None when it is
    gone."""
    fields = _stat_fields(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / CLK_TCK     # fields 14 and 15
    except (TypeError, IndexError, ValueError):
        return None


def process_tree_cpu_seconds(pid: int) -> float | None:
    """CPU seconds a process and its children used so far: its own utime + stime, what its
    ended (reaped) children used (cutime + cstime), and, the same way, each child still
    running (nginx's workers under its master). None when the process is gone."""
    fields = _stat_fields(pid)
    try:
        total = sum(int(fields[k]) for k in (11, 12, 13, 14)) / CLK_TCK   # fields 14-17
    except (TypeError, IndexError, ValueError):
        return None
    for child in process_children(pid):
        total += process_tree_cpu_seconds(child) or 0.0    # one that just ended: reaped soon
    return total


def process_children(pid: int) -> list[int]:
    """The process's children (every thread's), [] when it has none or is gone."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            pass
    return out


def process_start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot), or None when there is none or it
    has ended (a zombie waiting for its parent)."""
    fields = _stat_fields(pid)
    if not fields or fields[0] == b"Z":
        return None
    try:
        return int(fields[19])      # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def write_pid_file(name: str, pid: int, pid_dir: str = PID_DIR) -> str:
    os.makedirs(pid_dir, exist_ok=True)
    path = os.path.join(pid_dir, f"{name}.pid")
    with open(path, "w") as fh:
        fh.write(f"{pid} {name} {process_start_ticks(pid)}\n")
    return path


def read_pid_file(path: str) -> tuple[int, str, int | None]:
    """(pid, name, start ticks or None when the file does not say). ValueError when the
    file is not a PID file."""
    with open(path) as fh:
        parts = fh.read().split()
    if not parts or not parts[0].isdigit():
        raise ValueError(f"{path}: not a PID file")
    start = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
    return int(parts[0]), parts[1] if len(parts) > 1 else "?", start


def same_process(pid: int, start: int | None) -> bool:
    """Is the process with this PID still the one that was recorded?"""
    return start is not None and process_start_ticks(pid) == start


def ovs_vswitchd_pid() -> int | None:
    """Open vSwitch's datapath process (the userspace datapath forwards every packet in it),
    from its PID file, if that names a running ovs-vswitchd."""
    try:
        with open(OVS_PID_FILE) as fh:
            pid = int(fh.read().strip())
        with open(f"/proc/{pid}/comm") as fh:
            return pid if fh.read().strip() == "ovs-vswitchd" else None
    except (OSError, ValueError):
        return None
