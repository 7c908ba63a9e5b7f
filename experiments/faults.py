"""Fault suite: the running stack under load, one fault after another.

    sudo .venv/bin/python -m experiments.faults                        # every fault, ~8 min
    sudo .venv/bin/python -m experiments.faults --faults agent,switch --seconds 30
    sudo .venv/bin/python -m experiments.faults --out results/faults-try --hold 3

The paper testbed comes up with the controller, the host agents and the profiler
(experiments/stack.py). For each fault in turn, the clients play a segment of open-loop load
through the VIPs (short ui objects and back-end jobs at a few requests per second, a few
long video streams), and a few seconds into it the fault is injected:

- agent:      the host agent of the first server killed with SIGKILL, restarted --hold s later;
- profiler:   the profiler killed with SIGKILL as soon as its history file is being written,
              restarted --hold s later on the same history;
- controller: ryu-manager stopped (SIGTERM), started again --hold s later; the switches
              reconnect on their own;
- container:  the ui instance of the second server killed (`docker kill`); it stays dead and
              the health probes must take it out of its pool;
- switch:     the switches' controller connection dropped and their flow tables wiped
              (`ovs-vsctl del-controller`, `ovs-ofctl del-flows`), the connection given back
              --hold s later (as tests/integration/test_controller.py does);
- docker:     the Docker engine unreachable for --docker-pause s: the dockerd serving the
              agents' socket is stopped with SIGSTOP and resumed with SIGCONT (containers run
              on under containerd; nothing is restarted).

Faults run in that order whatever order --faults gives (the killed instance stays dead, and
a controller started after it would begin with every instance in its pool). Only processes
the run started and recorded under /run/malb/pids are signalled, plus the dockerd proven to
serve the agents' Docker socket; only containers and bridges of the testbed are touched.

Measured per fault: requests that failed in the fault's window (from the load generators'
records, by intended start; the window runs from the injection to recovery), requests in
flight when it began that failed; new flows the controller sent to a dead instance more
than two health intervals after it died (its decisions against the kill time); history rows
committed before the fault and missing after it (the profiler's SQLite tables); seconds
from the end of the fault until the stack works again (the component answers, the profiler
has fresh samples of every server, requests through the VIPs succeed). Results: faults.md
(the table), faults.json, decisions.json and the raw run (run/) in --out.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import glob
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter

from common.cli import ArgumentParser, bounded, choice_list, fail, require_testbed
from common.config import POLICIES, ConfigError, check_deployable, config_path, \
    load_config_data, parse_config_file_data
from common.httpjson import HttpError, get_json
from common.markdown import number
from common.procs import ROOT, git_commit
from common.state import process_start_ticks, process_state, read_pid_file, same_process

FAULTS = ("agent", "profiler", "controller", "container", "switch", "docker")
RECOVERY_TARGET_PERIODS = 5      # the issue: recovery within a few monitoring periods
GRACE_HEALTH_INTERVALS = 2       # the issue: no new flow to a dead instance after two
POLL_S = 0.5                     # how often recovery is checked
VIDEO_SECONDS = 15               # a video stream of the workload lasts this long
REQUEST_TIMEOUT_S = 10           # a request fails after this long without data
LEAD_S = 10                      # load before the fault (at most a quarter of --seconds)
WORKLOAD_MICROSERVICES = ("ui", "backend", "video")
# one request per microservice checks that the VIPs serve (short, light requests)
PROBE_PATHS = {"ui": "/object?size=1000", "backend": "/job?seconds=0.1&cpu=0.05&mode=work",
               "video": "/stream?rate=100&seconds=0.3"}
SAMPLE_TABLES = ("container_samples", "server_samples", "microservice_samples",
                 "edge_samples")
FLOW_TABLE = "flows"             # one row per flow (upserted): compared by flow_id


class FaultError(RuntimeError):
    """A fault could not be injected (its target could not be verified as ours, say)."""


# ============================================================== metrics (plain functions)
def _float(value) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def error_kind(error: str) -> str:
    """A short name for a load generator's error ("timeout after 10 s without data",
    "ConnectionResetError: [Errno 104] ...", "HTTP 503") to count them by."""
    if error.startswith("timeout"):
        return "timeout"
    return error.split(":", 1)[0].strip()[:40]


def requests_in_window(rows: list[dict], t0: float, t1: float) -> dict:
    """The load generators' records (rows of their CSVs) against a window [t0, t1):
    requests whose intended start falls in it and how many of them failed (by class and
    kind of error), and requests intended before t0 still running at t0 that failed (a
    stream cut by the fault)."""
    sent = failed = in_flight_failed = 0
    by_class: Counter = Counter()
    kinds: Counter = Counter()
    for r in rows:
        intended = _float(r.get("intended"))
        if intended is None:
            continue
        error = r.get("error") or ""
        if t0 <= intended < t1:
            sent += 1
            if error:
                failed += 1
                by_class[r.get("class") or "?"] += 1
                kinds[error_kind(error)] += 1
        elif intended < t0 and error:
            ended = _float(r.get("ended"))
            if ended is not None and ended >= t0:
                in_flight_failed += 1
    return {"requests": sent, "failed": failed, "in_flight_failed": in_flight_failed,
            "failed_by_class": dict(sorted(by_class.items())),
            "errors": dict(kinds.most_common())}


def late_flows(decisions: list[dict], dead: dict[str, float], grace_s: float,
               since: float | None = None, until: float | None = None) -> list[dict]:
    """The controller's decisions (GET /malb/decisions items) that sent a new flow to an
    instance of ``dead`` ({instance: when it died}) more than grace_s after it died,
    optionally only those decided in [since, until)."""
    out = []
    for d in decisions:
        t = _float(d.get("time"))
        died = dead.get(d.get("instance"))
        if t is None or died is None or t <= died + grace_s:
            continue
        if (since is not None and t < since) or (until is not None and t >= until):
            continue
        out.append(d)
    return out


def rows_lost(before: dict, after: dict) -> dict:
    """History rows committed before a fault and missing after it.

    before/after: {"counts": {table: rows with t <= the same cut-off}, "flow_ids": set of
    the flows table's ids}. Sample tables only grow, so fewer rows up to the cut-off after
    than before is a loss; the flows table holds one row per flow whose t moves on when the
    flow is recorded again, so its rows are compared by id."""
    lost = {}
    for table, n in before.get("counts", {}).items():
        lost[table] = max(0, n - after.get("counts", {}).get(table, 0))
    if "flow_ids" in before:
        lost[FLOW_TABLE] = len(set(before["flow_ids"]) - set(after.get("flow_ids", ())))
    return {"tables": lost, "total": sum(lost.values())}


def recovery_seconds(observations: list[tuple[float, bool]], since: float) -> float | None:
    """Seconds from `since` to the first observation (time, everything works) at or after
    it that found everything working; None when none did."""
    for t, ok in sorted(observations):
        if ok and t >= since:
            return round(t - since, 3)
    return None


def decision_key(d: dict) -> tuple:
    return (d.get("time"), d.get("client"), d.get("switch"), d.get("instance"))


def merge_decisions(known: dict, batch: list[dict]) -> tuple[int, bool]:
    """Add a poll's decisions to `known` (by time, client, switch and instance); returns
    (how many were new, whether the batch overlapped what was known)."""
    new, overlap = 0, False
    for d in batch:
        key = decision_key(d)
        if key in known:
            overlap = True
        else:
            known[key] = d
            new += 1
    return new, overlap


def targets_met(result: dict, target_s: float) -> dict[str, bool]:
    """The issue's targets for one fault: no flow to a dead instance after the grace time,
    no committed history row lost, recovery within target_s."""
    rec = result.get("recovery_s")
    return {"late_flows": not result.get("late_flows"),
            "rows_lost": result.get("rows_lost_total") == 0,
            "recovery": rec is not None and rec <= target_s}


def analyse(records: list[dict], requests: list[dict], decisions: list[dict],
            grace_s: float, target_s: float) -> list[dict]:
    """One result per fault from what the run recorded.

    records: per fault, in order: fault, what, segment_start (its load began), start
    (injection), end (the fault was lifted: restart, SIGCONT; the kill for a container),
    recovered_at (None: not within the timeout), window_end (used when not recovered), dead
    ({instance: died} dead during its segment), rows_lost ({"tables", "total"} or None),
    error (None, or why the fault could not be injected); anything else is kept."""
    out = []
    for k, rec in enumerate(records):
        res = dict(rec)
        seg0 = rec["segment_start"]
        seg1 = records[k + 1]["segment_start"] if k + 1 < len(records) else None
        if rec.get("error") or rec.get("start") is None:
            res.update(requests={}, late_flows=None, recovery_s=None, outage_s=None,
                       window_s=None, rows_lost_total=None, failed_before_fault=None)
            res["targets"] = {"late_flows": False, "rows_lost": False, "recovery": False}
            res["met"] = False
            out.append(res)
            continue
        t0 = rec["start"]
        t1 = rec["recovered_at"] if rec.get("recovered_at") is not None else rec["window_end"]
        res["window_s"] = round(t1 - t0, 3)
        res["outage_s"] = round(rec["end"] - t0, 3)
        res["recovery_s"] = None if rec.get("recovered_at") is None else \
            round(rec["recovered_at"] - rec["end"], 3)
        res["requests"] = requests_in_window(requests, t0, t1)
        res["failed_before_fault"] = requests_in_window(requests, seg0, t0)["failed"]
        dead = rec.get("dead") or {}
        if dead:
            late = late_flows(decisions, dead, grace_s, seg0, seg1)
            res["late_flows"] = len(late)
            res["late_flow_examples"] = [
                {"time": d["time"], "instance": d["instance"], "client": d.get("client"),
                 "after_death_s": round(d["time"] - dead[d["instance"]], 3)}
                for d in late[:10]]
        else:
            res["late_flows"] = None          # no instance was dead: nothing to measure
        lost = rec.get("rows_lost")
        res["rows_lost_total"] = None if lost is None else lost["total"]
        res["targets"] = targets_met(res, target_s)
        res["met"] = all(res["targets"].values())
        out.append(res)
    return out


def markdown_table(results: list[dict]) -> str:
    lines = ["| fault | what was done | outage s | requests in window | failed | "
             "failed in flight | late flows to a dead instance | history rows lost | "
             "recovery s | targets |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if r.get("error"):
            lines.append(f"| {r['fault']} | NOT INJECTED: {r['error']} | – | – | – | – | "
                         f"– | – | – | missed |")
            continue
        q = r["requests"]
        missed = [k.replace("_", " ") for k, ok in r["targets"].items() if not ok]
        recovery = number(r["recovery_s"], 1) if r["recovery_s"] is not None else \
            "not recovered"
        lines.append(
            f"| {r['fault']} | {r['what']} | {number(r['outage_s'], 1)} | {q['requests']} | "
            f"{q['failed']} | {q['in_flight_failed']} | "
            f"{'–' if r['late_flows'] is None else r['late_flows']} | "
            f"{'–' if r['rows_lost_total'] is None else r['rows_lost_total']} | {recovery} | "
            f"{'met' if not missed else 'MISSED: ' + ', '.join(missed)} |")
    return "\n".join(lines) + "\n"


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
def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:160]


def _run(cmd: list[str], check: bool = True) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise FaultError(f"{' '.join(cmd)}: {res.stderr.strip()[:200] or res.returncode}")
    return res.stdout


def verified_pid(svc) -> int:
    """The PID of a service the stack started, after checking that the PID file it
    recorded under /run/malb/pids names this very process (same PID, name and start time):
    only then may it be signalled."""
    if svc is None or not svc.running():
        raise FaultError(f"{getattr(svc, 'name', 'the service')} is not running")
    try:
        pid, name, start = read_pid_file(svc.pid_file)
    except (OSError, ValueError) as exc:
        raise FaultError(f"{svc.name}: no usable PID file ({_short(exc)})") from None
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


# A detached guard that resumes dockerd if this process dies while it is stopped.
WATCHDOG = """
import os, signal, sys, time
pid, start, delay = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
time.sleep(delay)
try:
    stat = open(f"/proc/{pid}/stat", "rb").read()
    if stat[stat.rfind(b")") + 2:].split()[19].decode() == start:
        os.kill(pid, signal.SIGCONT)
except (OSError, IndexError):
    pass
"""


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

    def start(self) -> "DecisionRecorder":
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
            for uuid in parse_ovs_list(_run(["ovs-vsctl", "--timeout=5", "get", "bridge",
                                             sw.name, "controller"])):
                target = parse_ovs_value(_run(["ovs-vsctl", "--timeout=5", "get", "controller",
                                               uuid, "target"])) or ""
                if target.startswith(("tcp:", "ssl:")) and _run(
                        ["ovs-vsctl", "--timeout=5", "get", "controller", uuid,
                         "is_connected"]).strip() != "true":
                    return f"{sw.name}: OVS is not connected to {target}"
        return None

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
                why = _short(exc)
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


class Suite:
    """The faults, run one after another on a running stack."""

    def __init__(self, st, opts, log):
        self.st, self.opts, self.log = st, opts, log
        self.cfg = st.cfg
        self.probe = Probe(st)
        self.recorder = DecisionRecorder(st)
        self.dead: dict[str, float] = {}
        self.period = max(self.cfg.controller.monitoring_period_s, self.cfg.profiler.period_s)
        self.agent_server = self.cfg.servers[0].name
        # the ui instance of the second server (of the first when it is alone)
        ui = self.cfg.instances_of("ui")
        self.container = next((i for i in ui if i.server != self.agent_server), ui[0])

    def what(self, fault: str) -> str:
        o = self.opts
        return {
            "agent": f"agent of {self.agent_server} SIGKILLed, restarted after {o.hold:g} s",
            "profiler": f"profiler SIGKILLed while writing its history, restarted after "
                        f"{o.hold:g} s",
            "controller": f"controller stopped, started again after {o.hold:g} s",
            "container": f"container of {self.container.name} killed (stays dead)",
            "switch": f"switches' controller connection dropped and flows wiped for "
                      f"{o.hold:g} s",
            "docker": f"dockerd stopped (SIGSTOP) for {o.docker_pause:g} s",
        }[fault]

    # ------------------------------------------------------------ the steady state
    def steady_checks(self) -> list:
        p = self.probe
        return [("controller answers", p.controller_up), ("switches connected", p.switches),
                ("controller reaches the profiler", p.controller_profiler),
                ("profiler fresh", p.profiler_fresh), ("agents answer", p.agents)]

    # ------------------------------------------------------------ faults
    def _restart(self, what: str, start) -> str | None:
        """Bring a component back; the reason when it does not come (the fault stays
        injected and its checks find it not recovered)."""
        try:
            start()
            return None
        except Exception as exc:     # noqa: BLE001 -- recorded, the checks will say the rest
            self.log(f"[faults] {what} did not come back: {_short(exc)}")
            return _short(exc)

    def fault_agent(self) -> dict:
        server, p = self.agent_server, self.probe
        svc = self.st.agents[server]
        pid = verified_pid(svc)
        start = time.time()
        svc.kill(signal.SIGKILL)
        self.log(f"[faults] agent: agent-{server} (pid {pid}) killed; restart in "
                 f"{self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart(f"agent-{server}", lambda: self.st.start_agent(server))
        return {"start": start, "end": end,
                "details": {"pid": pid, "server": server, "restart_error": failed},
                "checks": [("agent answers", lambda: p.agents([server])),
                           ("profiler fresh", lambda: p.profiler_fresh(since=end))]}

    def fault_profiler(self) -> dict:
        p, svc = self.probe, self.st.profiler
        pid = verified_pid(svc)
        wal = self.st.history_path + "-wal"
        writing = wait_for_write(wal, 2 * self.cfg.profiler.period_s + 1)
        start = time.time()
        svc.kill(signal.SIGKILL)
        committed = _snapshot(self.st.history_path, start, self.log)
        self.log(f"[faults] profiler: pid {pid} killed "
                 f"{'while writing its history' if writing else '(no write seen in time)'}; "
                 f"restart in {self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart("the profiler", self.st.start_profiler)
        return {"start": start, "end": end, "history_before": committed,
                "details": {"pid": pid, "killed_while_writing": writing,
                            "restart_error": failed},
                "checks": [("profiler answers", p.profiler_up),
                           ("profiler fresh", p.profiler_fresh),
                           ("controller reaches the profiler",
                            lambda: p.controller_profiler(since=end))]}

    def fault_controller(self) -> dict:
        p, svc = self.probe, self.st.controller
        pid = verified_pid(svc)
        self.recorder.poll()      # the decisions it is about to forget
        start = time.time()
        svc.stop()
        self.log(f"[faults] controller: pid {pid} stopped; start again in {self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart("the controller", self.st.start_controller)
        return {"start": start, "end": end, "details": {"pid": pid, "restart_error": failed},
                "checks": [("controller answers", p.controller_up),
                           ("switches connected", p.switches),
                           ("controller reaches the profiler",
                            lambda: p.controller_profiler(since=end)),
                           ("requests through the VIPs", p.vips)]}

    def fault_container(self) -> dict:
        # deferred: the Docker SDK (topologies.dockerhost's too); only this fault needs it
        import docker
        from topologies.dockerhost import leftover_is_ours
        p, inst = self.probe, self.container
        client = docker.from_env(timeout=30)
        c = client.containers.get(inst.container)
        env = (c.attrs.get("Config") or {}).get("Env") or []
        if not leftover_is_ours(c) or f"MALB_INSTANCE={inst.name}" not in env:
            raise FaultError(f"container {inst.container} is not the testbed's {inst.name}: "
                             f"not killed")
        if c.status != "running":
            raise FaultError(f"container {inst.container} is {c.status}, not running")
        start = time.time()       # it counts as dead from here (the strict reading)
        c.kill()
        end = time.time()
        self.dead[inst.name] = start
        self.log(f"[faults] container: {inst.container} killed; it stays dead")
        return {"start": start, "end": end,
                "details": {"container": inst.container, "id": c.id[:12],
                            "instance": inst.name},
                "checks": [("controller takes it out of its pool", lambda: p.instance_down(inst)),
                           ("requests through the VIP", lambda: p.vips([inst.microservice])),
                           ("profiler fresh", lambda: p.profiler_fresh(since=end))]}

    def _bridge_controllers(self, br: str) -> list[dict]:
        out = []
        for uuid in parse_ovs_list(_run(["ovs-vsctl", "--timeout=5", "get", "bridge", br,
                                         "controller"])):
            rec = {}
            for col in ("target", "max_backoff", "inactivity_probe"):
                value = parse_ovs_value(_run(["ovs-vsctl", "--timeout=5", "get", "controller",
                                              uuid, col]))
                if value is not None:
                    rec[col] = value
            if rec.get("target"):
                out.append(rec)
        return out

    @staticmethod
    def _restore_controllers(br: str, saved: list[dict]) -> None:
        """The bridge's controller records as they were (Mininet makes them with
        max_backoff=1000: set-controller alone would leave OVS's 8 s backoff)."""
        cmd, ids = ["ovs-vsctl", "--timeout=10"], []
        for k, rec in enumerate(saved):
            cmd += ["--", f"--id=@c{k}", "create", "Controller", f'target="{rec["target"]}"']
            cmd += [f"{col}={rec[col]}" for col in ("max_backoff", "inactivity_probe")
                    if col in rec]
            ids.append(f"@c{k}")
        cmd += ["--", "set", "bridge", br, f"controller=[{','.join(ids)}]"]
        _run(cmd)

    def fault_switch(self) -> dict:
        p = self.probe
        bridges = [sw.name for sw in self.cfg.testbed.switches]
        saved = {}
        for br in bridges:
            if _run(["ovs-vsctl", "--timeout=5", "br-get-external-id", br, "malb"],
                    check=False).strip() != "1":
                raise FaultError(f"bridge {br} is not tagged external-ids:malb=1 (not the "
                                 f"testbed's): not touched")
            saved[br] = self._bridge_controllers(br)
            if not saved[br]:
                raise FaultError(f"bridge {br} has no controller to reconnect to")
        rules = {br: max(0, len(_run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", br],
                                     check=False).strip().splitlines()) - 1)
                 for br in bridges}
        log_offset = _file_size(self.st.controller.log_path)
        start = time.time()
        try:
            for br in bridges:
                _run(["ovs-vsctl", "--timeout=5", "del-controller", br])
                _run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", br])
            self.log(f"[faults] switch: {', '.join(bridges)} disconnected, {sum(rules.values())} "
                     f"rules wiped; reconnect in {self.opts.hold:g} s")
            time.sleep(self.opts.hold)
        finally:
            end = time.time()
            for br in bridges:
                self._restore_controllers(br, saved[br])
        return {"start": start, "end": end,
                "details": {"bridges": bridges, "rules_wiped": rules, "controllers": saved,
                            "controller_log_offset": log_offset},
                "checks": [("switches reconnected", p.switches),
                           ("requests through the VIPs", p.vips)]}

    def fault_docker(self) -> dict:
        p = self.probe
        pid, evidence = project_dockerd()
        ticks = evidence["start_ticks"]
        self.probe.docker()         # it answers now, through the agents' socket
        guard = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(pid), str(ticks),
                                  str(self.opts.docker_pause + 30)], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        start = end = None
        try:
            if not same_process(pid, ticks):
                raise FaultError(f"dockerd pid {pid} changed before it could be paused")
            start = time.time()
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.2)
            evidence["state_when_paused"] = process_state(pid)
            self.log(f"[faults] docker: dockerd pid {pid} (serving {evidence['socket']}) "
                     f"stopped for {self.opts.docker_pause:g} s")
            time.sleep(max(0.0, self.opts.docker_pause - 0.2))
        finally:
            if start is not None and same_process(pid, ticks):
                os.kill(pid, signal.SIGCONT)
            end = time.time()
            guard.kill()
            guard.wait(timeout=5)
        evidence["state_after"] = process_state(pid)
        return {"start": start, "end": end, "details": {"dockerd": evidence},
                "checks": [("docker answers", p.docker),
                           ("agents answer", p.agents),
                           ("profiler fresh", lambda: p.profiler_fresh(since=end))]}

    # ------------------------------------------------------------ one fault under load
    def run_fault(self, k: int, fault: str) -> dict:
        o, st = self.opts, self.st
        rec = {"fault": fault, "what": self.what(fault), "tag": f"{k + 1}-{fault}",
               "error": None, "start": None, "end": None, "recovered_at": None}
        spec_path = os.path.join(st.run_dir, f"spec-{rec['tag']}.json")
        with open(spec_path, "w") as fh:
            json.dump(workload_spec(self.cfg, o, o.seed + k, fault), fh, indent=1)
        lead = min(LEAD_S, o.seconds / 4)
        seg0 = time.time() + 2
        rec["segment_start"] = seg0
        st.start_loadgen(spec_path, seg0, tag=rec["tag"], timeout_s=REQUEST_TIMEOUT_S)
        time.sleep(max(0.0, seg0 + lead - time.time()))
        before = _snapshot(st.history_path, time.time(), self.log)
        injected = None
        try:
            injected = getattr(self, f"fault_{fault}")()
        except Exception as exc:        # noqa: BLE001 -- recorded; the next fault still runs
            rec["error"] = _short(exc)
            self.log(f"[faults] {fault}: NOT INJECTED: {rec['error']}")
        if injected is not None:
            rec.update(start=injected["start"], end=injected["end"],
                       details=injected.get("details", {}))
            rec["start_offset_s"] = round(injected["start"] - seg0, 2)
            got = await_checks(injected["checks"], injected["end"], o.recovery_timeout)
            rec.update(recovered_at=got["recovered_at"], milestones=got["milestones"],
                       last_failure=got["last_failure"],
                       window_end=injected["end"] + o.recovery_timeout)
            base = injected.get("history_before") or before
            after = None if base is None else _snapshot(st.history_path, base["until"],
                                                        self.log)
            if base is not None and after is not None:
                # the same cut-off: rows with t up to it, before and after the fault
                rec["rows_lost"] = rows_lost(base, after)
                rec["history_rows_checked"] = sum(base["counts"].values()) + \
                    len(base["flow_ids"])
            else:
                rec["rows_lost"] = None
            if fault == "switch":
                rec["details"]["nat_restored"] = _log_lines_since(
                    st.controller.log_path, rec["details"].pop("controller_log_offset"),
                    "NAT flows restored")
            lost = rec["rows_lost"]["total"] if rec["rows_lost"] else "not measured"
            if got["recovered_at"] is None:
                self.log(f"[faults] {fault}: NOT recovered within {o.recovery_timeout:g} s "
                         f"({got['last_failure']})")
            else:
                steps = ", ".join(f"{n} {s:g} s" for n, s in got["milestones"].items())
                self.log(f"[faults] {fault}: recovered {got['recovery_s']:.1f} s after the "
                         f"fault ended ({steps}); history rows lost: {lost}")
        rec["dead"] = dict(self.dead)
        # the rest of the segment's load, then every request of it finished
        clients = len(self.cfg.testbed.clients)
        st.wait_for(lambda: len(st.loadgen_summaries(rec["tag"])) == clients,
                    max(0.0, seg0 + o.seconds - time.time()) + VIDEO_SECONDS +
                    REQUEST_TIMEOUT_S + 60, f"load of {fault}", interval_s=1.0)
        summaries = st.loadgen_summaries(rec["tag"])
        rec["planned"] = sum(s["planned"] for s in summaries)
        rec["failed_in_segment"] = sum(s["failed"] for s in summaries)
        self.log(f"[faults] {fault}: load done, {rec['planned']} requests, "
                 f"{rec['failed_in_segment']} failed")
        return rec

    def run(self, faults: list[str]) -> list[dict]:
        records = []
        self.recorder.start()
        try:
            for k, fault in enumerate(faults):
                steady = await_checks(self.steady_checks(), time.time(), self.opts.recovery_timeout)
                if steady["recovered_at"] is None:
                    why = f"the stack was not working before it ({steady['last_failure']})"
                    self.log(f"[faults] {fault}: skipped: {why}; the remaining faults too")
                    for rest in faults[k:]:
                        records.append({"fault": rest, "what": self.what(rest),
                                        "segment_start": time.time(), "error": why,
                                        "start": None})
                    break
                self.log(f"[faults] {k + 1}/{len(faults)} {fault}: {self.what(fault)}")
                records.append(self.run_fault(k, fault))
        finally:
            self.recorder.stop()
        return records


def _snapshot(path: str, until: float, log) -> dict | None:
    try:
        return history_snapshot(path, until)
    except (sqlite3.Error, OSError) as exc:
        log(f"[faults] the history could not be read: {_short(exc)}")
        return None


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _log_lines_since(path: str, offset: int, needle: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [line.strip()[-160:] for line in text.splitlines() if needle in line][:10]


# ============================================================== workload, run, report
def workload_spec(cfg, opts, seed: int, phase: str) -> dict:
    """One segment of open-loop load: short ui objects and back-end jobs, a few long video
    streams, opts.rate requests per second in all, opts.seconds long."""
    paths = {"ui": ("ui-object", 0.47, "/object?size=100000"),
             "backend": ("backend-job", 0.47, "/job?seconds=1&cpu=0.1&mode=work"),
             "video": ("video-stream", 0.06, f"/stream?rate=200&seconds={VIDEO_SECONDS}")}
    classes = []
    for ms_name, (name, weight, path) in paths.items():
        ms = cfg.microservice(ms_name)
        classes.append({"name": name, "host": ms.vip, "port": ms.port, "weight": weight,
                        "path": path})
    return {"seed": seed, "arrivals": "poisson", "classes": classes,
            "phases": [{"name": phase, "seconds": opts.seconds, "from": opts.rate,
                        "to": opts.rate}]}


def config_data(opts) -> dict:
    data = load_config_data(opts.config)
    data.setdefault("testbed", {})["clients"] = 2
    data.setdefault("controller", {})["monitoring_period_s"] = opts.period
    data.setdefault("profiler", {})["period_s"] = opts.period
    return data


def read_requests(run_dir: str) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(os.path.join(run_dir, "requests-*.csv"))):
        with open(path, newline="") as fh:
            rows += list(csv.DictReader(fh))
    return rows


def run(opts, data: dict, out_dir: str, log=print) -> dict:
    from experiments.stack import Stack   # deferred: Mininet, for the runs only
    run_dir = os.path.join(out_dir, "run")
    with Stack(data, run_dir, policy=opts.policy) as st:
        log(f"[faults] stack up ({st.testbed.backend}, {st.testbed.datapath} datapath); "
            f"waiting for monitoring")
        st.wait_monitoring(60)
        st.wait_for(lambda: st.controller_get("/malb/status")["profiler"]["reachable"], 30,
                    "the controller reaches the profiler")
        suite = Suite(st, opts, log)
        records = suite.run(opts.faults)
        decisions = suite.recorder.decisions()
        h = st.cfg.controller.health
        info = {"testbed": {"backend": st.testbed.backend, "datapath": st.testbed.datapath},
                "health": {"method": h.method, "interval_s": h.interval_s,
                           "timeout_s": h.timeout_s, "unhealthy_after": h.unhealthy_after},
                "period_s": suite.period,
                "decisions": {"recorded": len(decisions), "polls": suite.recorder.polls,
                              "failed_polls": suite.recorder.errors,
                              "possible_gaps": suite.recorder.gaps}}
    grace = GRACE_HEALTH_INTERVALS * info["health"]["interval_s"]
    target = RECOVERY_TARGET_PERIODS * info["period_s"]
    requests = read_requests(run_dir)
    results = analyse(records, requests, decisions, grace, target)
    with open(os.path.join(out_dir, "decisions.json"), "w") as fh:
        json.dump(decisions, fh)
    planned = sum(r.get("planned", 0) for r in records)
    return {**info, "grace_s": grace, "recovery_target_s": target, "faults": results,
            "requests": {"planned": planned, "recorded": len(requests),
                         "failed": sum(1 for r in requests if r.get("error"))}}


def summary_markdown(doc: dict) -> str:
    h = doc["health"]
    lines = [
        "# Fault suite", "",
        f"Command: `{doc['command']}`  ", f"Commit: {doc['commit']}; {doc['when']}  ",
        f"Testbed: {doc['testbed']['backend']}, {doc['testbed']['datapath']} datapath; "
        f"policy {doc['options']['policy']}; monitoring and profiler period "
        f"{doc['period_s']:g} s; health probes ({h['method']}) every {h['interval_s']:g} s, "
        f"down after {h['unhealthy_after']} failed; load {doc['options']['rate']:g} "
        f"requests/s for {doc['options']['seconds']:g} s around each fault.", "",
        markdown_table(doc["faults"]),
        f"Targets: no new flow to a dead instance later than "
        f"{GRACE_HEALTH_INTERVALS} health intervals ({doc['grace_s']:g} s) after it died; no "
        f"history row committed before a fault lost; recovery within "
        f"{RECOVERY_TARGET_PERIODS} monitoring periods ({doc['recovery_target_s']:g} s) of the "
        f"fault's end.", "",
        "Columns: *outage*: from the injection until the fault was lifted (restart, "
        "reconnection, SIGCONT; 0 for the container, which stays dead); *requests in window*, "
        "*failed*: requests whose intended start falls between the injection and recovery, "
        "and those of them that failed; *failed in flight*: requests started before the "
        "injection that failed after it; *late flows*: new flows the controller sent to a "
        "killed instance more than the grace time after its kill, during the fault's segment "
        "of load (– when no instance was dead); *history rows lost*: rows committed before "
        "the fault (before the kill, for the profiler) missing after recovery; *recovery*: "
        "from the fault's end until every check passed.", "",
        f"Requests: {doc['requests']['planned']} planned, {doc['requests']['recorded']} "
        f"recorded, {doc['requests']['failed']} failed in all. Decisions recorded: "
        f"{doc['decisions']['recorded']} ({doc['decisions']['possible_gaps']} possible gaps).",
        "", "## Per fault", ""]
    for r in doc["faults"]:
        lines.append(f"- **{r['fault']}**: {r['what']}.")
        if r.get("error"):
            lines.append(f"  Not injected: {r['error']}.")
            continue
        steps = ", ".join(f"{n} at {s:g} s" for n, s in (r.get("milestones") or {}).items())
        lines.append(f"  Checks passed (seconds after the fault's end): {steps or 'none'}"
                     + (f"; last failure: {r['last_failure']}" if r.get("last_failure") else "")
                     + ".")
        q = r["requests"]
        if q.get("errors"):
            lines.append(f"  Errors in the window: "
                         f"{', '.join(f'{k} {v}' for k, v in q['errors'].items())}; by class: "
                         f"{', '.join(f'{k} {v}' for k, v in q['failed_by_class'].items())}.")
        for ex in r.get("late_flow_examples") or []:
            lines.append(f"  Late flow: {ex['client']} -> {ex['instance']}, "
                         f"{ex['after_death_s']:g} s after the kill.")
        d = r.get("details") or {}
        if r["fault"] == "profiler":
            lines.append(f"  Killed while writing the history: "
                         f"{d.get('killed_while_writing')}; rows checked: "
                         f"{r.get('history_rows_checked')}.")
        if r["fault"] == "docker" and d.get("dockerd"):
            dd = d["dockerd"]
            lines.append(f"  dockerd pid {dd['pid']} ({dd.get('cmdline', '?')}), proven to "
                         f"serve {dd['socket']}"
                         f"{' and named in ' + dd['pidfile'] if dd.get('pidfile') else ''}; "
                         f"state while paused: {dd.get('state_when_paused')}.")
        if r["fault"] == "switch" and d.get("nat_restored"):
            lines.append(f"  Controller: {d['nat_restored'][-1]}")
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m experiments.faults", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", type=choice_list(FAULTS), default=list(FAULTS),
                   help=f"which faults (default all: {','.join(FAULTS)}); they run in that "
                        f"order")
    p.add_argument("--seconds", type=bounded(float, 20, 3600), default=45.0,
                   help="seconds of load around each fault (default 45)")
    p.add_argument("--rate", type=bounded(float, 0.1, 100), default=4.0,
                   help="requests per second through the VIPs, all clients (default 4)")
    p.add_argument("--hold", type=bounded(float, 0, 60), default=5.0,
                   help="seconds an agent, the profiler, the controller or the switches stay "
                        "down (default 5)")
    p.add_argument("--docker-pause", type=bounded(float, 1, 30), default=10.0,
                   help="seconds the Docker engine stays stopped (default 10)")
    p.add_argument("--recovery-timeout", type=bounded(float, 10, 600), default=60.0,
                   help="seconds to wait for recovery after each fault (default 60)")
    p.add_argument("--period", type=bounded(float, 0.5, 60), default=3.0,
                   help="monitoring and profiler period in seconds (default 3, the paper's)")
    p.add_argument("--policy", choices=POLICIES, default="malb",
                   help="controller policy (default malb)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", help="base configuration (default configs/paper.yaml)")
    p.add_argument("--out", help="results directory (default results/faults-<time>)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    args.faults = [f for f in FAULTS if f in args.faults]        # the fixed order
    if args.seconds < min(LEAD_S, args.seconds / 4) + max(args.hold, args.docker_pause) + 5:
        parser().error("--seconds: too short for the fault's hold and pause")
    try:
        cfg = parse_config_file_data(config_data(args), config_path(args.config))
        check_deployable(cfg)
        for name in WORKLOAD_MICROSERVICES:
            cfg.microservice(name)
        if "container" in args.faults and not cfg.instances_of("ui"):
            raise ConfigError("microservices: no ui instance to kill")
    except KeyError as exc:
        fail(f"configuration: the workload needs the microservice {exc} (video, ui, "
             f"backend as in configs/paper.yaml)", code=2)
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
    require_testbed("the fault suite")
    out_dir = args.out or os.path.join(
        ROOT, "results", datetime.datetime.now().strftime("faults-%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    command = f"sudo {os.path.relpath(sys.executable, ROOT)} -m experiments.faults " + \
        " ".join(argv if argv is not None else sys.argv[1:])
    # SIGTERM ends the run through its cleanup (the stack torn down, dockerd resumed)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    per_fault = 2 + args.seconds + VIDEO_SECONDS + 5
    print(f"[faults] {len(args.faults)} faults ({', '.join(args.faults)}), about "
          f"{(60 + len(args.faults) * per_fault) / 60:.0f} min; results in {out_dir}",
          flush=True)
    measured = run(args, config_data(args), out_dir, log=lambda m: print(m, flush=True))
    doc = {**measured, "command": command.strip(), "commit": git_commit(),
           "when": datetime.datetime.now().isoformat(timespec="seconds"),
           "config": os.path.relpath(config_path(args.config), ROOT), "options": vars(args)}
    with open(os.path.join(out_dir, "faults.json"), "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
    text = summary_markdown(doc)
    with open(os.path.join(out_dir, "faults.md"), "w") as fh:
        fh.write(text)
    print("\n" + text)
    print(f"[faults] results in {out_dir}")
    return 0 if all(r["met"] for r in doc["faults"]) else 1


if __name__ == "__main__":
    sys.exit(main())
