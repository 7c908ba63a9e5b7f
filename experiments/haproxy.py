"""HAProxy as an outside balancer in the testbed, to compare the controller's policies with
what practitioners run: a TCP proxy on its own host (``testbed.proxy: true``: node prx1,
10.0.201.1 on s1) in front of the same instance containers.

The module holds:

- ``render_config(cfg, mode, ...)``: haproxy.cfg from the configuration (pure). One
  ``mode tcp`` frontend per microservice on the proxy's address and the microservice's
  port, one backend with every instance the configuration places (``ip:port``). Modes:
  ``roundrobin``, ``leastconn``, and ``agent`` (leastconn whose weights follow each
  server's CPU through HAProxy's agent-check).
- ``agent_weight(cpu_percent)``: the agent-check rule (pure): a server's weight is its
  idle CPU share, ``max(1, 100 - cpu%)`` percent of the configured weight;
  ``host_cpu_percent(totals)``: the cpu% it is fed, the whole server's (the containers'
  and what runs beside them), as a practitioner's agent reports a host.
- ``cores_over(readings, t0, t1)``: CPU cores a process used over an interval, from
  cumulative readings (pure).
- ``listen_in_namespace(pid, host, port)``: a listening TCP socket inside another
  process's network namespace (setns(2) through ctypes, in a short-lived thread).
- ``AgentResponder``: answers HAProxy's agent checks with the rule above, from the host
  agents' ``GET /stats`` (served on the root namespace's loopback, which HAProxy inside
  prx1 cannot reach): its socket lives in prx1's namespace, its threads in this process.
- ``OutsideBalancer(stack, mode)``: HAProxy for one run (a context manager): started in
  prx1's namespace, its PID recorded under /run/malb/pids (``make clean-testbed`` stops a
  leftover one, only while verifiably ours), its CPU measured; ``address(microservice)``
  for the workload, ``retarget(spec)``, ``weights()``, ``servers()``, ``cpu_report()``.

Choices (docs/haproxy.md says why at more length):

- timeouts: ``client``/``server`` 10 min of silence: a back-end job answers only when it
  is done (30-60 s, longer when a work-mode job is starved of CPU), a stream may pause;
  the load generator gives up first (max(longest request + 60 s, twice it)), as it does on the
  OpenFlow path, where nothing in between cuts a connection. ``connect`` 5 s.
- maxconn 4096 (global and per frontend): the open-loop workload keeps at most a few
  hundred connections open (1.5 requests/s, jobs of 10-30 s, streams of 20 s); HAProxy
  needs two file descriptors per connection, and 4096 fits the 20,000-descriptor limit of
  the CI machines (its own default would be derived from whatever limit a machine has).
- health checks: a TCP connect per server at the controller's own health interval and
  counts (``controller.health``: 2 s, down after 2, up after 1), the practitioner's plain
  ``check``; none when the controller's method is ``none``. Agent checks every agent
  period (1 s) in ``agent`` mode only.
- logging: warnings and server state changes only (``option dontlog-normal``): a line per
  connection would be CPU the OpenFlow path does not spend.
"""
from __future__ import annotations

import ctypes
import math
import os
import socket
import subprocess
import sys
import threading
import time

from common.cli import ArgumentParser
from common.config import Config, ConfigError, load_config
from common.httpjson import get_json
from common.numbers import finite_non_negative
from common.procs import Service, ServiceError
from common.state import PID_DIR, STATE_DIR, process_cpu_seconds, process_start_ticks, \
    process_tree_cpu_seconds, read_pid_file, same_process

MODES = ("roundrobin", "leastconn", "agent")
HAPROXY = "haproxy"
MAXCONN = 4096
TIMEOUT_CONNECT_S = 5
TIMEOUT_IDLE_S = 600         # client and server: longer than any client waits for data
WEIGHT = 100                 # every server's configured weight; agent answers are % of it
AGENT_HOST, AGENT_PORT = "127.0.0.1", 9777    # in prx1's namespace (the responder's socket)
STATS_SOCKET = os.path.join(STATE_DIR, "haproxy.sock")
HAPROXY_PID_NAME = "haproxy"    # /run/malb/pids/haproxy.pid
CPU_READ_S = 0.5             # how often HAProxy's CPU counters are read
CLONE_NEWNET = 0x40000000


# ---------------------------------------------------------------------------- pure parts
def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def render_config(cfg: Config, mode: str, stats_socket: str = STATS_SOCKET,
                  agent_port: int = AGENT_PORT, maxconn: int = MAXCONN) -> str:
    """haproxy.cfg for the configuration's testbed (it must have the proxy host) in one of
    MODES. ValueError naming the field for what HAProxy cannot balance."""
    if mode not in MODES:
        raise ValueError(f"mode: one of {', '.join(MODES)}, got {mode!r}")
    proxy = cfg.testbed.proxy
    if proxy is None:
        raise ValueError("testbed.proxy: the outside balancer needs the proxy host "
                         "(set testbed.proxy: true)")
    for m in cfg.microservices:
        if m.protocol != "tcp":
            raise ValueError(f"microservices[{m.index - 1}].protocol: HAProxy balances TCP "
                             f"only, {m.name} is {m.protocol}")
    h = cfg.controller.health
    check = "" if h.method == "none" else \
        f" check inter {_ms(h.interval_s)} fall {h.unhealthy_after} rise {h.healthy_after}"
    lines = [
        f"# MALB's outside balancer, mode {mode} (experiments/haproxy.py)",
        "global",
        f"    maxconn {maxconn}",
        f"    stats socket {stats_socket} mode 600 level admin",
        "    log stdout format raw local0 info",
        "",
        "defaults",
        "    mode tcp",
        "    log global",
        "    option dontlog-normal",
        f"    maxconn {maxconn}",
        f"    timeout connect {TIMEOUT_CONNECT_S}s",
        f"    timeout client {TIMEOUT_IDLE_S}s",
        f"    timeout server {TIMEOUT_IDLE_S}s",
    ]
    if check:
        lines.append(f"    timeout check {_ms(h.timeout_s)}")
    lines.append(f"    default-server weight {WEIGHT}{check}")
    balance = "roundrobin" if mode == "roundrobin" else "leastconn"
    weights = capacity_weights(cfg)
    agent_inter = _ms(cfg.agents.period_s)
    for m in cfg.microservices:
        lines += ["", f"frontend {m.name}", f"    bind {proxy.ip}:{m.port}",
                  f"    default_backend {m.name}",
                  "", f"backend {m.name}", f"    balance {balance}"]
        for inst in cfg.instances_of(m.name):
            line = f"    server {inst.name} {inst.ip}:{m.port}"
            if weights[inst.server] != WEIGHT:
                line += f" weight {weights[inst.server]}"
            if mode == "agent":
                line += (f" agent-check agent-addr {AGENT_HOST} agent-port {agent_port}"
                         f" agent-send \"{inst.server}\\n\" agent-inter {agent_inter}")
            lines.append(line)
    return "\n".join(lines) + "\n"


def capacity_weights(cfg: Config) -> dict[str, int]:
    """Each server's weight as a practitioner sets it: WEIGHT for the largest CPU share, the
    others in proportion (at least 1); all WEIGHT on equal servers. Agent answers are a
    percentage of it, so they scale with the server's size too."""
    top = max(s.cpu for s in cfg.servers)
    return {s.name: max(1, round(WEIGHT * s.cpu / top)) for s in cfg.servers}


def agent_weight(cpu_percent: float | None) -> int | None:
    """The weight an agent check reports for a server, in percent of its configured weight:
    its idle CPU share, max(1, 100 - cpu %) (1, not 0: 0 % would drain the server), from
    its CPU use relative to its own capacity (host_cpu_percent of the host agent's). None
    when the use is unknown: nothing is reported, and HAProxy keeps the weight it has."""
    if cpu_percent is None or not math.isfinite(cpu_percent):
        return None
    return int(max(1, min(100, round(100.0 - cpu_percent))))


def host_cpu_percent(totals: dict) -> float | None:
    """What a practitioner's agent reports of a server: its whole CPU use relative to its
    capacity, the containers' (totals.cpu_percent) and what runs beside them
    (totals.outside_cpu_percent, the figure `malb` adds as outside use; 0 when the host
    agent cannot read the whole server). None when the containers' use is unknown or
    either figure is not a number >= 0 (nothing unknown is read as idle)."""
    cpu, outside = totals.get("cpu_percent"), totals.get("outside_cpu_percent")
    if not finite_non_negative(cpu) or not (outside is None or finite_non_negative(outside)):
        return None
    return cpu + (outside or 0.0)


def agent_answer(weight: int | None) -> bytes:
    """What the responder sends: "<weight>%\\n"; nothing for an unknown weight (HAProxy
    then shows the agent's answer as invalid and changes nothing)."""
    return b"" if weight is None else f"{weight}%\n".encode()


def cores_over(readings: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """CPU cores used on average over [t0, t1] from cumulative readings (time, CPU
    seconds), sorted by time, interpolated linearly between readings. None when the
    readings do not cover the interval (nothing unmeasured is read as zero)."""
    if t1 <= t0 or not readings or t0 < readings[0][0] - 1e-9 or t1 > readings[-1][0] + 1e-9:
        return None

    def at(t: float) -> float:
        for (ta, ca), (tb, cb) in zip(readings, readings[1:]):
            if ta <= t <= tb:
                return ca if tb == ta else ca + (cb - ca) * (t - ta) / (tb - ta)
        return readings[-1][1] if t >= readings[-1][0] else readings[0][1]
    return (at(t1) - at(t0)) / (t1 - t0)


def parse_stat_csv(text: str) -> list[dict]:
    """The rows of the stats socket's `show stat` (CSV whose first line is "# field,...")."""
    lines = [x for x in text.splitlines() if x.strip()]
    if not lines or not lines[0].startswith("# "):
        raise ValueError(f"not HAProxy's show stat output: {text[:80]!r}")
    fields = lines[0][2:].split(",")
    return [dict(zip(fields, row.split(","))) for row in lines[1:]]


def retarget(spec: dict, cfg: Config) -> dict:
    """A load generator's spec (experiments/loadgen.py) with every class that goes to a
    microservice's VIP and port sent to the proxy's address for it instead."""
    proxy = cfg.testbed.proxy
    if proxy is None:
        raise ValueError("testbed.proxy: the outside balancer needs the proxy host")
    by_vip = {(m.vip, m.port): m for m in cfg.microservices}
    classes = []
    for c in spec["classes"]:
        m = by_vip.get((c["host"], int(c["port"])))
        if m is None:
            raise ValueError(f"classes: {c.get('name')!r} goes to {c['host']}:{c['port']}, "
                             f"no microservice's VIP and port")
        classes.append({**c, "host": proxy.ip, "port": m.port})
    return {**spec, "classes": classes}


# ---------------------------------------------------------------------------- namespaces
_libc = ctypes.CDLL(None, use_errno=True)


def listen_in_namespace(pid: int, host: str, port: int, backlog: int = 64) -> socket.socket:
    """A TCP socket listening on host:port inside the network namespace of process `pid`.

    A socket belongs to the namespace it was made in, whatever thread later uses it: a
    short-lived thread enters that namespace (setns(2) changes only the calling thread;
    Python 3.11 has no os.setns), makes and binds the socket and ends; the caller accepts
    on it from the root namespace, where the host agents answer."""
    made: dict = {}

    def inside() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into the network namespace of pid {pid}: "
                                       f"{os.strerror(err)}")
            finally:
                os.close(fd)
            made["sock"] = socket.create_server((host, port), backlog=backlog)
        except BaseException as exc:     # noqa: BLE001 -- re-raised in the caller's thread
            made["error"] = exc
    t = threading.Thread(target=inside, name=f"netns-{pid}")
    t.start()
    t.join()
    if "error" in made:
        raise made["error"]
    return made["sock"]


# ---------------------------------------------------------------------------- responder
class AgentResponder:
    """HAProxy's agent checks, answered from the host agents.

    A poller thread reads every server's ``GET /stats`` (its latest sample) once per agent
    period and keeps each server's weight (agent_weight of host_cpu_percent; unknown when
    the agent does not answer, its sample is older than three periods, or its totals are
    partial). The listener thread answers each check at once from those weights: HAProxy
    sends the server's name (agent-send "srv1\\n"), gets "<weight>%\\n"."""

    def __init__(self, cfg: Config, sock: socket.socket):
        self.cfg, self.sock = cfg, sock
        self.period_s = cfg.agents.period_s
        self.weights: dict[str, int | None] = {s.name: None for s in cfg.servers}
        self.cpu: dict[str, float | None] = {s.name: None for s in cfg.servers}
        self.checks = {"answered": 0, "unknown": 0, "bad_request": 0}
        self.errors: dict[str, str] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def poll_once(self) -> None:
        for srv in self.cfg.servers:
            cpu, error = None, None
            try:
                s = get_json(f"{srv.agent_url}/stats", timeout=min(1.0, self.period_s))
                if s.get("age_s") is not None and s["age_s"] > 3 * self.period_s:
                    error = f"sample {s['age_s']:.1f} s old"
                else:
                    cpu = host_cpu_percent(s.get("totals") or {})
                    error = None if cpu is not None else "partial totals"
            except (OSError, ValueError, RuntimeError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            self.cpu[srv.name], self.weights[srv.name] = cpu, agent_weight(cpu)
            if error:
                self.errors[srv.name] = error
            else:
                self.errors.pop(srv.name, None)

    def _poll(self) -> None:
        while not self._stop.wait(self.period_s):
            self.poll_once()

    def _serve(self) -> None:
        self.sock.settimeout(0.5)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return                  # closed by stop()
            with conn:
                try:
                    conn.settimeout(0.5)
                    name = conn.recv(64).split(b"\n", 1)[0].strip().decode("ascii")
                    if name not in self.weights:
                        self.checks["bad_request"] += 1
                        continue
                    answer = agent_answer(self.weights[name])
                    self.checks["answered" if answer else "unknown"] += 1
                    if answer:
                        conn.sendall(answer)
                except (OSError, UnicodeDecodeError):
                    self.checks["bad_request"] += 1

    def start(self) -> AgentResponder:
        self.poll_once()              # the first checks find weights already
        for target, name in ((self._poll, "agent-poll"), (self._serve, "agent-serve")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self.sock.close()

    def report(self) -> dict:
        return {"checks": dict(self.checks), "weights": dict(self.weights),
                "cpu_percent": dict(self.cpu), "errors": dict(self.errors)}


def _recorded(name: str) -> tuple[int, int | None]:
    """(pid, start ticks) a PID file of ours records, or (0, None)."""
    try:
        pid, _, start = read_pid_file(os.path.join(PID_DIR, f"{name}.pid"))
        return pid, start
    except (OSError, ValueError):
        return 0, None


class CpuMeter:
    """Cumulative CPU readings of one verified process, every CPU_READ_S; with tree, of the
    process and its children (a master process and its workers)."""

    def __init__(self, pid: int, start_ticks: int | None, every_s: float = CPU_READ_S,
                 tree: bool = False):
        self.pid, self.start_ticks, self.every_s = pid, start_ticks, every_s
        self.cpu_seconds = process_tree_cpu_seconds if tree else process_cpu_seconds
        self.readings: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> None:
        with self._lock:               # readings stay in time order, whoever reads
            if not same_process(self.pid, self.start_ticks):
                return
            now, cpu = time.time(), self.cpu_seconds(self.pid)
            if cpu is not None:
                self.readings.append((now, cpu))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.read()

    def start(self) -> CpuMeter:
        self.read()
        self._thread = threading.Thread(target=self._run, name="haproxy-cpu", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.read()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def snapshot(self) -> list[tuple[float, float]]:
        with self._lock:
            return list(self.readings)


def meter_report(meter: CpuMeter | None, period: float, at: list[float] | None) -> dict:
    """A metered process's CPU over its readings so far (read up to now first; nothing more
    once it has ended): CPU seconds, wall seconds, mean cores, and one sample per period
    keyed by its end: at the given times, else at every period from the first reading. A
    period the readings do not cover is None."""
    if meter is not None:
        meter.read()
    readings = meter.snapshot() if meter else []
    out: dict = {"period_s": period, "cpu_seconds": None, "wall_s": None, "mean_cores": None,
                 "samples": []}
    if len(readings) >= 2:
        (t0, c0), (t1, c1) = readings[0], readings[-1]
        out.update(cpu_seconds=round(c1 - c0, 3), wall_s=round(t1 - t0, 3),
                   mean_cores=round((c1 - c0) / (t1 - t0), 4) if t1 > t0 else None)
        ends = at if at is not None else [t0 + period * k for k in
                                          range(1, int((t1 - t0) / period + 1e-9) + 1)]
        out["samples"] = [{"time": t, "cores": None if (c := cores_over(
            readings, t - period, t)) is None else round(c, 4)} for t in ends]
    return out


# ---------------------------------------------------------------------------- the balancer
class OutsideBalancer:
    """HAProxy for one run of a Stack whose testbed has the proxy host.

        with Stack(data, run_dir, policy="srr") as st, OutsideBalancer(st, "agent") as lb:
            host, port = lb.address("ui")          # or: spec = lb.retarget(spec)
            ...                                    # the clients' workload
            report = lb.cpu_report(at=sorted(server_sample_times))

    The controller keeps running under any policy: it installs the host rules HAProxy's
    traffic to the instances' own addresses goes by (no VIP, no NAT). HAProxy balances
    the instances placed at the start; a placement's moves are not followed."""

    name = "haproxy"

    def __init__(self, stack, mode: str, run_dir: str | None = None,
                 stats_socket: str = STATS_SOCKET):
        if mode not in MODES:
            raise ValueError(f"mode: one of {', '.join(MODES)}, got {mode!r}")
        self.stack, self.mode = stack, mode
        self.cfg: Config = stack.cfg
        self.run_dir = os.path.abspath(run_dir or stack.run_dir)
        self.stats_socket = stats_socket
        self.config_path = os.path.join(self.run_dir, f"haproxy-{mode}.cfg")
        self.log_path = os.path.join(self.run_dir, f"haproxy-{mode}.log")
        self.service: Service | None = None
        self.responder: AgentResponder | None = None
        self.meter: CpuMeter | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 15.0) -> OutsideBalancer:
        try:
            text = render_config(self.cfg, self.mode, self.stats_socket)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        proxy = self.stack.testbed.node(self.cfg.testbed.proxy.name)
        os.makedirs(self.run_dir, exist_ok=True)
        os.makedirs(os.path.dirname(self.stats_socket), exist_ok=True)
        with open(self.config_path, "w") as fh:
            fh.write(text)
        if same_process(*_recorded(HAPROXY_PID_NAME)):
            raise ServiceError(f"another outside balancer runs already (pid "
                               f"{_recorded(HAPROXY_PID_NAME)[0]}); stop it first")
        try:
            checked = subprocess.run([HAPROXY, "-c", "-q", "-f", self.config_path],
                                     capture_output=True, text=True)
        except FileNotFoundError:
            raise ServiceError(f"{HAPROXY} not found: `make setup` installs it") from None
        if checked.returncode != 0:
            raise ServiceError(f"haproxy refused {self.config_path}: "
                               f"{(checked.stderr or checked.stdout).strip()[-500:]}")
        try:
            if self.mode == "agent":
                sock = listen_in_namespace(proxy.pid, AGENT_HOST, AGENT_PORT)
                self.responder = AgentResponder(self.cfg, sock).start()
            # -db: in the foreground, one process (its threads): the PID recorded is
            # HAProxy's own; nsenter execs it in prx1's network namespace
            self.service = Service(
                HAPROXY_PID_NAME, ["nsenter", f"--net=/proc/{proxy.pid}/ns/net", HAPROXY, "-db",
                            "-f", self.config_path], None, self.log_path).start()
            self._wait_ready(timeout_s)
            self.meter = CpuMeter(self.service.proc.pid,
                                  process_start_ticks(self.service.proc.pid)).start()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        """Until every frontend is open (bound on the proxy's address)."""
        deadline = time.time() + timeout_s
        last: object = None
        while time.time() < deadline:
            if not self.service.running():
                raise ServiceError(f"haproxy exited with {self.service.proc.returncode} at "
                                   f"start; last lines of {self.log_path}:\n"
                                   f"{self.service.tail()}")
            try:
                rows = [r for r in self.stats() if r["svname"] == "FRONTEND"]
                if len(rows) == len(self.cfg.microservices) and \
                        all(r["status"] == "OPEN" for r in rows):
                    return
                last = rows
            except (OSError, ValueError) as exc:
                last = exc
            time.sleep(0.1)
        raise ServiceError(f"haproxy: frontends not open within {timeout_s:.0f} s (last: "
                           f"{last!r}); log {self.log_path}")

    def stop(self) -> None:
        if self.meter is not None:
            self.meter.stop()          # the last reading before HAProxy ends
        if self.service is not None:
            self.service.stop()        # SIGTERM to our own child's group, then SIGKILL
        if self.responder is not None:
            self.responder.stop()
            self.responder = None
        try:
            os.unlink(self.stats_socket)
        except OSError:
            pass

    def __enter__(self) -> OutsideBalancer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------ for the workload
    def address(self, microservice: str) -> tuple[str, int]:
        """Where clients reach a microservice through HAProxy: (proxy address, its port)."""
        return self.cfg.testbed.proxy.ip, self.cfg.microservice(microservice).port

    def retarget(self, spec: dict) -> dict:
        return retarget(spec, self.cfg)

    # ------------------------------------------------------------ HAProxy's own view
    def command(self, line: str, timeout_s: float = 5.0) -> str:
        """One command on HAProxy's stats socket (e.g. "show servers state")."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(self.stats_socket)
            s.sendall(line.encode() + b"\n")
            chunks = []
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def stats(self) -> list[dict]:
        return parse_stat_csv(self.command("show stat"))

    def servers(self) -> list[dict]:
        """Per server: backend, name, status, weight, current and total sessions, check
        and agent status."""
        return [{"backend": r["pxname"], "server": r["svname"], "status": r["status"],
                 "weight": int(r["weight"]) if r["weight"].isdigit() else None,
                 "current": int(r["scur"] or 0), "total": int(r["stot"] or 0),
                 "check": r.get("check_status", ""), "agent": r.get("agent_status", "")}
                for r in self.stats() if r["svname"] not in ("FRONTEND", "BACKEND")]

    def weights(self) -> dict[str, dict[str, int | None]]:
        out: dict[str, dict] = {}
        for s in self.servers():
            out.setdefault(s["backend"], {})[s["server"]] = s["weight"]
        return out

    # ------------------------------------------------------------ its own CPU
    def cpu_report(self, at: list[float] | None = None, period_s: float | None = None) -> dict:
        """HAProxy's own CPU (utime + stime of its process, all threads) over the run so
        far: CPU seconds, mean cores, and one sample per period (the profiler's period by
        default) keyed by its end: at the given times (e.g. the profiler's server-sample
        times, each covering the period before it), else at every period from the start.
        A period the readings do not cover is None."""
        out = {"mode": self.mode, "pid": self.service.proc.pid if self.service else None,
               **meter_report(self.meter, period_s or self.cfg.profiler.period_s, at)}
        if self.responder is not None:
            out["agent"] = self.responder.report()
        return out


# ---------------------------------------------------------------------------- command
def main(argv=None) -> int:
    p = ArgumentParser(
        prog="python -m experiments.haproxy",
        description="Print the haproxy.cfg the outside balancer runs for a configuration "
                    "(its testbed needs testbed.proxy: true, or --proxy).")
    p.add_argument("command", choices=("render",))
    p.add_argument("--mode", choices=MODES, default="leastconn")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--proxy", action="store_true", help="as if testbed.proxy were true")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config, {"testbed": {"proxy": True}} if args.proxy else None)
        sys.stdout.write(render_config(cfg, args.mode))
    except (ConfigError, ValueError) as exc:
        print(f"error: configuration: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
