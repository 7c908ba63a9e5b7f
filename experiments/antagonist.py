"""CPU antagonists of the comparison's antagonist scenario (experiments/scenarios.py): a busy
thread that starts on a server part-way through the load and stops later.

- where "container": exec'd in one of the server's instance containers; the host agent's
  docker stats count its CPU as that microservice's;
- where "beside": a host process put into a cgroup of its own under the server's cgroup
  (common/cgroups.py), in no container; it takes from the server's CPU quota, no agent
  sees it, the containers just get less CPU.

Holds BUSY (the busy thread's program), due (pure: which antagonists to start or stop at
an elapsed time), the /proc readers that identify a process (its command line, cgroup and
CPU time), Antagonist (one process: start, verified start, verified stop), a server's CPU
cgroup directories (server_groups; rel_of: the path /proc shows for one) and Schedule (the
workload spec's antagonists against the clock, a context manager that stops whatever still
runs on the way out, interrupts included).

Every process is identified by a random token in its command line, its start time and its
cgroup before it is signalled; each is also recorded under /run/malb/pids (so `make
clean-testbed` stops one a crash left behind), dies with the comparison (the one beside the
containers: PR_SET_PDEATHSIG) and ends by itself shortly after its window.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid

from common.cgroups import CGROUP_ROOT, detect_layout, group_dirs
from common.state import PID_DIR, process_cpu_seconds, process_start_ticks, same_process, \
    write_pid_file

# The busy thread: argv = token, cores, until (epoch s), parent pid (0: none), then the
# cgroup.procs files to join before any work. Standard library only (it runs in the
# containers' Python too).
BUSY = r"""
import os, sys, time
token, cores, until, parent = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
for path in sys.argv[5:]:
    with open(path, "w") as fh:
        fh.write(str(os.getpid()))
if parent:
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, 9)         # PR_SET_PDEATHSIG, SIGKILL: die with the parent
    except (OSError, AttributeError, ImportError):
        pass
    if os.getppid() != parent:
        sys.exit(0)
slice_s = 0.05
while time.time() < until:
    t = time.monotonic()
    while time.monotonic() - t < slice_s * cores:
        pass
    rest = t + slice_s - time.monotonic()
    if rest > 0:
        time.sleep(rest)
"""
GRACE_S = 30.0          # a lost antagonist ends by itself this long after its window
START_TIMEOUT_S = 15.0  # how long a new process may take to show up in its cgroup
CONTROLLER_DIRS = {"cpu", "cpuacct", "cpu,cpuacct", "memory", "cpuset", "pids", "blkio"}
GROUP = "malb-antagonist"


def due(entries: list[dict], state: dict[str, str], elapsed: float) -> list[tuple[str, str]]:
    """(action, name) to take at `elapsed` seconds from the load's start: 'start' for an
    antagonist not started whose window has begun (and not ended), 'stop' for a running one
    whose window has ended. state: name -> 'waiting' | 'running' | 'stopped'."""
    out = []
    for a in entries:
        s = state.get(a["name"], "waiting")
        if s == "waiting" and a["start_s"] <= elapsed < a["stop_s"]:
            out.append(("start", a["name"]))
        elif s == "running" and elapsed >= a["stop_s"]:
            out.append(("stop", a["name"]))
    return out


# ---------------------------------------------------------------- /proc readers
def cmdline(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [x.decode(errors="replace") for x in fh.read().split(b"\0") if x]
    except OSError:
        return None


def cgroups_of(pid: int) -> list[str] | None:
    """The process's cgroup paths, one per hierarchy (/proc/<pid>/cgroup)."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            return [line.rstrip("\n").split(":", 2)[2] for line in fh if line.count(":") >= 2]
    except OSError:
        return None


def pids_with_token(token: str) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and token in (cmdline(int(p)) or ())]


# ---------------------------------------------------------------- one antagonist
class Antagonist:
    """One busy thread as the workload spec describes it (see loadgen.validate_spec)."""

    def __init__(self, entry: dict, t0: float, run_dir: str, server_group: dict | None):
        self.entry, self.t0, self.run_dir = entry, t0, run_dir
        self.server_group = server_group     # "beside": controller -> the server's cgroup dir
        self.token = f"malb-antagonist-{uuid.uuid4().hex[:12]}"
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.ticks: int | None = None
        self.where: str = ""                 # the cgroup the process was verified in
        self.record: dict = {k: entry[k] for k in ("name", "server", "where")}
        self.record.update(planned_start_s=entry["start_s"], planned_stop_s=entry["stop_s"],
                           cores=entry["cores"])

    @property
    def name(self) -> str:
        return self.entry["name"]

    def _groups(self) -> dict[str, str]:
        return {c: os.path.join(d, GROUP) for c, d in self.server_group.items()}

    def start(self) -> None:
        until = f"{self.t0 + self.entry['stop_s'] + GRACE_S:.3f}"
        args = [self.token, f"{self.entry['cores']:g}", until]
        log = open(os.path.join(self.run_dir, f"antagonist-{self.name}.log"), "ab")
        try:
            if self.entry["where"] == "beside":
                procs = []
                for d in self._groups().values():
                    os.makedirs(d, exist_ok=True)
                    procs.append(os.path.join(d, "cgroup.procs"))
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", BUSY, *args, str(os.getpid()), *procs],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                want = [rel_of(d) for d in self._groups().values()]
            else:
                cid = subprocess.run(["docker", "inspect", "--format", "{{.Id}}",
                                      self.entry["container"]], capture_output=True,
                                     text=True, timeout=30)
                if cid.returncode != 0 or not cid.stdout.strip():
                    raise RuntimeError(f"antagonist {self.name}: no container "
                                       f"{self.entry['container']} ({cid.stderr.strip()})")
                self.proc = subprocess.Popen(
                    ["docker", "exec", self.entry["container"], "python3", "-c", BUSY,
                     *args, "0"], stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
                want = [cid.stdout.strip()]
        finally:
            log.close()
        self._verify_started(want)

    def _verify_started(self, want: list[str]) -> None:
        """Wait until the token's process runs in the cgroup it was meant for (the
        container's, or the group beside them); otherwise stop what was started."""
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            for pid in pids_with_token(self.token):
                groups = cgroups_of(pid) or []
                if all(any(w in g for g in groups) for w in want):
                    ticks = process_start_ticks(pid)
                    if ticks is not None:
                        self.pid, self.ticks = pid, ticks
                        self.where = next(g for g in groups if want[0] in g)
                        write_pid_file(self._pid_name(), pid)
                        now = time.time()
                        self.record.update(started_at=round(now, 3),
                                           started_s=round(now - self.t0, 3), pid=pid,
                                           cgroup=self.where)
                        return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self._end_client(wait_s=0)
        raise RuntimeError(f"antagonist {self.name}: its process did not appear in "
                           f"{', '.join(want)}; see {self.run_dir}/antagonist-{self.name}.log")

    def _pid_name(self) -> str:
        return f"antagonist-{self.name}"

    def verified(self) -> bool:
        """Is the recorded PID still our busy thread, where it was started?"""
        return (self.pid is not None and same_process(self.pid, self.ticks)
                and self.token in (cmdline(self.pid) or ())
                and self.where in (cgroups_of(self.pid) or ()))

    def stop(self) -> None:
        """Stop the busy thread (only once it is verified to be ours) and record when, and
        the CPU it had; remove its cgroup. Idempotent."""
        if self.pid is None or "stopped_at" in self.record:
            self._end_client()
            return
        used = process_cpu_seconds(self.pid) if self.verified() else None
        if used is not None:
            with contextlib.suppress(ProcessLookupError):    # it ended meanwhile
                os.kill(self.pid, signal.SIGKILL)
            deadline = time.time() + 10
            while process_start_ticks(self.pid) == self.ticks and time.time() < deadline:
                time.sleep(0.05)
            gone = process_start_ticks(self.pid) != self.ticks
        else:
            gone = True        # it had already ended (its deadline) or is someone else's
        now = time.time()
        self.record.update(stopped_at=round(now, 3), stopped_s=round(now - self.t0, 3),
                           cpu_s=None if used is None else round(used, 3),
                           gone=gone, ended_before_stop=used is None)
        self._end_client()
        try:
            os.unlink(os.path.join(PID_DIR, f"{self._pid_name()}.pid"))
        except OSError:
            pass
        if self.entry["where"] == "beside":
            for d in self._groups().values():
                try:
                    os.rmdir(d)     # the kernel refuses while a process is still in it
                except OSError:
                    pass

    def _end_client(self, wait_s: float = 5.0) -> None:
        """The process we launched (the busy thread itself, or the docker exec client that
        waits for it; our child either way): reaped, killed first if it outlives wait_s."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def rel_of(group_dir: str) -> str:
    """/sys/fs/cgroup/cpu/malb/srv3/malb-antagonist -> /malb/srv3/malb-antagonist (v1; v2:
    /sys/fs/cgroup/malb/... likewise): the path /proc/<pid>/cgroup shows."""
    parts = os.path.relpath(group_dir, CGROUP_ROOT).split(os.sep)
    # v1 has a controller directory under the root; v2's groups start right there
    if parts[0] in CONTROLLER_DIRS:
        parts = parts[1:]
    return "/" + "/".join(parts)


# ---------------------------------------------------------------- the schedule
def server_groups(server: str) -> dict[str, str]:
    """The server's cgroup directories for CPU (and its accounting), as common/cgroups.py
    lays them out (its layout, read here; nothing there changes)."""
    from topologies.dockerhost import docker_client   # deferred: the Docker SDK, Mininet
    dirs = group_dirs(detect_layout(docker_client().info()), server)
    return {c: d for c, d in dirs.items() if c in ("cpu", "cpuacct", "unified")}


class Schedule:
    """The workload spec's antagonists against the clock from t0, started and stopped by
    tick() (called about every second), every one stopped on the way out."""

    def __init__(self, entries: list[dict], t0: float, run_dir: str, backend: str,
                 log=print):
        if any(e["where"] == "beside" for e in entries) and backend != "mininet":
            # Containernet's Docker node splits each server's share between its containers:
            # there is no server cgroup to put a process beside them in
            raise RuntimeError("an antagonist beside a server's containers needs the "
                               "server cgroups of the Mininet backend with the project's "
                               f"Docker node; this testbed runs {backend}")
        self.entries, self.t0, self.log = entries, t0, log
        self.by_name = {e["name"]: Antagonist(e, t0, run_dir, server_groups(e["server"])
                                              if e["where"] == "beside" else None)
                        for e in entries}
        self.state = {e["name"]: "waiting" for e in entries}

    def tick(self, now: float | None = None) -> None:
        elapsed = (time.time() if now is None else now) - self.t0
        for action, name in due(self.entries, self.state, elapsed):
            a = self.by_name[name]
            if action == "start":
                a.start()
                self.state[name] = "running"
                self.log(f"[antagonist] {name} started at {a.record['started_s']:.1f} s "
                         f"(pid {a.pid}, {a.where})")
            else:
                self.stop_one(name)

    def stop_one(self, name: str) -> None:
        a = self.by_name[name]
        a.stop()
        self.state[name] = "stopped"
        if "stopped_s" in a.record:
            self.log(f"[antagonist] {name} stopped at {a.record['stopped_s']:.1f} s "
                     f"({a.record['cpu_s']} CPU-s)")

    def stop_all(self) -> None:
        for name, s in self.state.items():
            if s == "running":
                self.stop_one(name)

    def records(self) -> list[dict]:
        return [a.record for a in self.by_name.values()]

    def __enter__(self) -> Schedule:
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()
