"""What the fault suite looks at and touches on the running stack, each checked to be ours
before anything is signalled:

- FaultError: a fault could not be injected (its target not verified as ours);
- /proc and OVS parsing: unix_listener_inodes, docker_socket_path, parse_ovs_list,
  parse_ovs_value; project_dockerd (the dockerd proven to serve the agents' socket),
  verified_pid (a service the stack started); bridge_controllers, restore_controllers;
- the profiler's history: history_snapshot, wait_for_write, snapshot;
- DecisionRecorder (the controller's decisions, polled), Probe (is each part working?),
  await_checks (until every check passes).
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
import time

from common.httpjson import HttpError, get_json
from common.state import process_start_ticks, read_pid_file, same_process
from experiments.faults.analysis import (FLOW_TABLE, SAMPLE_TABLES, merge_decisions,
                                             recovery_seconds)

POLL_S = 0.5                     # how often recovery is checked
WORKLOAD_MICROSERVICES = ("ui", "backend", "video")
# one request per microservice checks that the VIPs serve (short, light requests)
PROBE_PATHS = {"ui": "/object?size=1000", "backend": "/job?seconds=0.1&cpu=0.05&mode=work",
               "video": "/stream?rate=100&seconds=0.3"}


class FaultError(RuntimeError):
    """A fault could not be injected (its target could not be verified as ours, say)."""


# ---------------------------------------------------------------- /proc and OVS parsing
def unix_listener_inodes(proc_net_unix: str, path: str, realpath=os.path.realpath) -> set[int]:
    """Inodes of the listening Unix sockets bound to `path` (compared after resolving
    symbolic links: /var/run is /run), from the text of /proc/net/unix."""
    want = realpath(path)
    out = set()
    for line in proc_net_unix.splitlines()[1:]:
        parts = line.split()
        # Num RefCount Protocol Flags Type St Inode Path
        if len(parts) < 8 or parts[7].startswith("@"):
            continue
        try:
            flags, inode = int(parts[3], 16), int(parts[6])
        except ValueError:
            continue
        if flags & 0x10000 and realpath(parts[7]) == want:     # __SO_ACCEPTCON: listening
            out.add(inode)
    return out


def docker_socket_path(environ=os.environ) -> str:
    """The Unix socket the Docker SDK (the agents' client) talks to: $DOCKER_HOST, else
    /var/run/docker.sock. FaultError for anything else: its daemon cannot be verified."""
    host = environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    for prefix in ("unix://", "http+unix://"):
        if host.startswith(prefix):
            return host[len(prefix):]
    raise FaultError(f"DOCKER_HOST={host}: not a Unix socket, so the daemon behind it cannot "
                     f"be verified as this machine's dockerd")


def parse_ovs_list(text: str) -> list[str]:
    """`ovs-vsctl get` output of a set column: "[a, b]", "[]" or a single value."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_ovs_value(text: str) -> str | None:
    """`ovs-vsctl get` output of a scalar or optional column: a quoted string, a number,
    or "[]" (unset: None)."""
    text = text.strip()
    if text in ("", "[]"):
        return None
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    return text


# ============================================================== the running stack
def short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:160]


def run_cmd(cmd: list[str], check: bool = True) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise FaultError(f"{' '.join(cmd)}: {res.stderr.strip()[:200] or res.returncode}")
    return res.stdout


def bridge_controllers(br: str) -> list[dict]:
    """The bridge's controller records (target, max_backoff, inactivity_probe)."""
    out = []
    for uuid in parse_ovs_list(run_cmd(["ovs-vsctl", "--timeout=5", "get", "bridge", br,
                                        "controller"])):
        rec = {}
        for col in ("target", "max_backoff", "inactivity_probe"):
            value = parse_ovs_value(run_cmd(["ovs-vsctl", "--timeout=5", "get",
                                             "controller", uuid, col]))
            if value is not None:
                rec[col] = value
        if rec.get("target"):
            out.append(rec)
    return out


def restore_controllers(br: str, saved: list[dict]) -> None:
    """The bridge's controller records as they were (Mininet makes them with
    max_backoff=1000: set-controller alone would leave OVS's 8 s backoff)."""
    cmd, ids = ["ovs-vsctl", "--timeout=10"], []
    for k, rec in enumerate(saved):
        cmd += ["--", f"--id=@c{k}", "create", "Controller", f'target="{rec["target"]}"']
        cmd += [f"{col}={rec[col]}" for col in ("max_backoff", "inactivity_probe")
                if col in rec]
        ids.append(f"@c{k}")
    cmd += ["--", "set", "bridge", br, f"controller=[{','.join(ids)}]"]
    run_cmd(cmd)


def verified_pid(svc) -> int:
    """The PID of a service the stack started, after checking that the PID file it
    recorded under /run/malb/pids names this very process (same PID, name and start time):
    only then may it be signalled."""
    if svc is None or not svc.running():
        raise FaultError(f"{getattr(svc, 'name', 'the service')} is not running")
    try:
        pid, name, start = read_pid_file(svc.pid_file)
    except (OSError, ValueError) as exc:
        raise FaultError(f"{svc.name}: no usable PID file ({short(exc)})") from None
    if pid != svc.proc.pid or name != svc.name or not same_process(pid, start):
        raise FaultError(f"{svc.name}: {svc.pid_file} (pid {pid}, {name}) is not the process "
                         f"the stack started (pid {svc.proc.pid}): not signalled")
    return pid


def project_dockerd() -> tuple[int, dict]:
    """The dockerd that serves the agents' Docker socket, proven: the one process named
    dockerd holding the socket that listens on that path (and the one in docker.pid, when
    that file exists). FaultError otherwise: nothing is signalled then."""
    path = docker_socket_path()
    with open("/proc/net/unix") as fh:
        inodes = unix_listener_inodes(fh.read(), path)
    if not inodes:
        raise FaultError(f"no process listens on {path} in this network namespace")
    holders = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as fh:
                if fh.read().strip() != "dockerd":
                    continue
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{entry}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                holders.append(int(entry))
                break
    if len(holders) != 1:
        raise FaultError(f"{len(holders)} dockerd processes hold the socket {path} (expected "
                         f"exactly one): not paused")
    pid = holders[0]
    evidence = {"pid": pid, "socket": path, "socket_inodes": sorted(inodes)}
    for pidfile in ("/var/run/docker.pid", "/run/docker.pid"):
        try:
            with open(pidfile) as fh:
                recorded = int(fh.read().strip() or 0)
        except (OSError, ValueError):
            continue
        if recorded != pid:
            raise FaultError(f"{pidfile} names pid {recorded}, but pid {pid} serves {path}: "
                             f"not paused")
        evidence["pidfile"] = pidfile
        break
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            evidence["cmdline"] = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        pass
    evidence["start_ticks"] = process_start_ticks(pid)
    if evidence["start_ticks"] is None:
        raise FaultError(f"dockerd pid {pid}: its start time cannot be read: not paused")
    return pid, evidence


def history_snapshot(path: str, until: float) -> dict:
    """What the history holds up to `until`: rows per sample table with t <= until, and the
    ids of the flows table. Read-only (WAL lets a reader in beside the profiler). Should a
    read-only connection fail to open the log a killed profiler left, an ordinary one
    reads it instead (it runs no statement that writes; closing it may checkpoint the log
    into the file, which keeps every committed row)."""
    def read(db) -> dict:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        counts = {t: db.execute(f"SELECT COUNT(*) FROM {t} WHERE t <= ?", (until,)).fetchone()[0]
                  for t in SAMPLE_TABLES if t in names}
        ids = {r[0] for r in db.execute(f"SELECT flow_id FROM {FLOW_TABLE}")} \
            if FLOW_TABLE in names else set()
        return {"counts": counts, "flow_ids": ids, "until": until}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            return read(db)
        finally:
            db.close()
    except sqlite3.Error:
        db = sqlite3.connect(path, timeout=10)
        try:
            return read(db)
        finally:
            db.close()


def wait_for_write(path: str, timeout_s: float) -> bool:
    """Until the file changes (size or modification time): the profiler is writing its
    history's log. False when it did not within the timeout."""
    def sig():
        try:
            st = os.stat(path)
            return st.st_size, st.st_mtime_ns
        except OSError:
            return None
    before = sig()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sig() != before:
            return True
        time.sleep(0.002)
    return False


class DecisionRecorder:
    """The controller keeps its recent decisions in memory only (and a restarted one has
    none): poll them every second and keep every one."""

    def __init__(self, st, interval_s: float = 1.0, limit: int = 200):
        self.st, self.interval_s, self.limit = st, interval_s, limit
        self.known: dict = {}
        self.polls = self.errors = self.gaps = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="decisions", daemon=True)

    def start(self) -> DecisionRecorder:
        self.poll()
        self._thread.start()
        return self

    def poll(self) -> bool:
        try:
            batch = self.st.controller_get(f"/malb/decisions?limit={self.limit}")["decisions"]
        except Exception:       # noqa: BLE001 -- down during a fault: try again
            self.errors += 1
            return False
        with self._lock:
            had = bool(self.known)
            _new, overlap = merge_decisions(self.known, batch)
            self.polls += 1
            if had and not overlap and len(batch) >= self.limit:
                self.gaps += 1        # more decisions in a second than one poll returns
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.poll()

    def decisions(self) -> list[dict]:
        with self._lock:
            return sorted(self.known.values(), key=lambda d: d.get("time") or 0)


class Probe:
    """The checks that tell whether the stack works. Each returns None when it does, else
    a short reason."""

    def __init__(self, st):
        self.st = st
        self.cfg = st.cfg
        self.cli = st.testbed.node(st.cfg.testbed.clients[0].name)
        self._docker = None

    def status(self) -> dict:
        return self.st.controller_get("/malb/status")

    def controller_up(self):
        self.status()

    def switches(self):
        have = set(self.status().get("switches") or [])
        missing = [sw.name for sw in self.cfg.testbed.switches if f"{sw.dpid:016x}" not in have]
        if missing:
            return f"not connected to the controller: {', '.join(missing)}"
        for sw in self.cfg.testbed.switches:     # and OVS says so too
            for uuid in parse_ovs_list(run_cmd(["ovs-vsctl", "--timeout=5", "get", "bridge",
                                             sw.name, "controller"])):
                target = parse_ovs_value(run_cmd(["ovs-vsctl", "--timeout=5", "get", "controller",
                                               uuid, "target"])) or ""
                if target.startswith(("tcp:", "ssl:")) and run_cmd(
                        ["ovs-vsctl", "--timeout=5", "get", "controller", uuid,
                         "is_connected"]).strip() != "true":
                    return f"{sw.name}: OVS is not connected to {target}"
        return None

    def master(self):
        role = self.st.controller_get("/malb/role")
        return None if role.get("role") == "master" else f"it is {role.get('role')}"

    def controller_profiler(self, since: float | None = None):
        p = self.status()["profiler"]
        if p.get("reachable") is not True:
            return f"profiler not reachable ({p.get('last_error')})"
        if since is not None and (p.get("last_ok") or 0) < since:
            return "no exchange with the profiler since the fault"
        return None

    def profiler_up(self):
        self.st.profiler_get("/health")

    def profiler_fresh(self, since: float | None = None):
        servers = self.st.profiler_get("/servers")["servers"]
        bad = [n for n, v in sorted(servers.items())
               if v.get("stale") or not v.get("complete") or
               (since is not None and (v.get("sample_time") or 0) < since)]
        return f"no fresh complete sample of {', '.join(bad)}" if bad else None

    def agents(self, names: list[str] | None = None):
        bad = []
        for srv in self.cfg.servers:
            if names is None or srv.name in names:
                try:
                    get_json(f"{srv.agent_url}/health", 2.0)
                except HttpError:
                    bad.append(srv.name)
        return f"agent of {', '.join(bad)} does not answer healthy" if bad else None

    def instance_down(self, inst):
        healthy = self.status()["servers"][inst.server]["instances"][inst.name]["healthy"]
        return None if healthy is False else f"{inst.name} still in its pool"

    def vips(self, microservices=WORKLOAD_MICROSERVICES):
        for name in microservices:
            ms = self.cfg.microservice(name)
            url = f"http://{ms.vip}:{ms.port}{PROBE_PATHS[name]}"
            out = self.cli.cmd(
                f"curl -s -o /dev/null -D - --max-time 5 -w 'STATUS:%{{http_code}}\\n' "
                f"'{url}' | tr -d '\\r' | grep -iE '^(x-served-by|STATUS)'")
            status = [x.split(":", 1)[1] for x in out.split() if x.startswith("STATUS:")]
            if status != ["200"] or "x-served-by" not in out.lower():
                return f"{name}: {'HTTP ' + status[0] if status else 'no answer'}"
        return None

    def docker(self):
        import docker      # deferred: the Docker SDK, for this fault only
        if self._docker is None:
            self._docker = docker.from_env(timeout=3)
        self._docker.ping()


def await_checks(checks: list[tuple[str, object]], since: float, timeout_s: float) -> dict:
    """Run the checks in order every POLL_S until all pass (or the timeout): when that
    happened, when each check first passed (seconds from `since`), the last failure."""
    observations, first_pass, reason = [], {}, None
    deadline = time.time() + timeout_s
    while True:
        reason = None
        for name, fn in checks:
            try:
                why = fn()
            except Exception as exc:     # noqa: BLE001 -- a component down is a failed check
                why = short(exc)
            if why:
                reason = f"{name}: {why}"
                break
            first_pass.setdefault(name, time.time())
        now = time.time()
        observations.append((now, reason is None))
        if reason is None or now >= deadline:
            break
        time.sleep(POLL_S)
    return {"recovered_at": next((t for t, ok in observations if ok), None),
            "recovery_s": recovery_seconds(observations, since),
            "milestones": {k: round(v - since, 2) for k, v in first_pass.items()},
            "last_failure": reason, "polls": len(observations)}


def snapshot(path: str, until: float, log) -> dict | None:
    try:
        return history_snapshot(path, until)
    except (sqlite3.Error, OSError) as exc:
        log(f"[faults] the history could not be read: {short(exc)}")
        return None


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def log_lines_since(path: str, offset: int, needle: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [line.strip()[-160:] for line in text.splitlines() if needle in line][:10]

