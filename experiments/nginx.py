"""nginx as a second outside balancer, beside HAProxy (experiments/haproxy.py): the other
proxy practitioners put in front of a service. Its ``stream`` module (TCP, Debian's
libnginx-mod-stream) on the proxy host (node prx1), ``least_conn`` over the same instance
containers, with the same capacity weights, timeouts and connection limit as HAProxy.

The module holds:

- ``render_config(cfg, pid_path)``: nginx.conf from the configuration (pure): one
  ``upstream`` per microservice with every instance the configuration places, one
  ``server`` listening on the proxy's address and the microservice's port.
- ``listening(text)``, ``connections_to(text, targets)``: listening sockets and
  established connections per target address from /proc/<pid>/net/tcp text (pure).
- ``NginxBalancer(stack)``: nginx for one run (a context manager), with the interface of
  ``haproxy.OutsideBalancer``: started in prx1's namespace (master and workers, its PID
  recorded under /run/malb/pids so ``make clean-testbed`` stops a leftover one while it is
  verifiably ours), the CPU of master and workers measured, ``address``, ``retarget``,
  ``servers()`` (each instance's open connections, read from the proxy's sockets: open
  source nginx has no statistics of its upstreams), ``cpu_report()``.

Choices (docs/haproxy.md, "nginx"):

- ``worker_processes auto`` (one per core, what the package ships) and
  ``worker_connections`` 2 x MAXCONN (a proxied connection holds two); each upstream in a
  shared memory ``zone``, so the workers count one set of connections (without it each
  worker balances on its own counts: least_conn per worker);
- health: open-source nginx checks passively only, so a server that fails
  ``unhealthy_after`` connection attempts in a row is left out for ``unhealthy_after``
  health intervals (``max_fails``, ``fail_timeout``); nothing when the controller's health
  method is ``none``. HAProxy's active checks and agent weights have no open-source nginx
  counterpart.
- ``proxy_timeout`` 10 min of silence and ``proxy_connect_timeout`` 5 s, as HAProxy's.
- the error log on stderr at ``warn`` (the run directory's nginx.log); no access log: a
  line per connection would be CPU the OpenFlow path does not spend.
"""
from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import time

from common.cli import ArgumentParser
from common.config import Config, ConfigError, load_config
from common.procs import Service, ServiceError
from common.state import process_start_ticks, same_process
from experiments.haproxy import MAXCONN, TIMEOUT_CONNECT_S, TIMEOUT_IDLE_S, CpuMeter, \
    _recorded, capacity_weights, meter_report, retarget

MODES = ("leastconn",)
NGINX = "nginx"
STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"
NGINX_PID_NAME = "nginx"        # /run/malb/pids/nginx.pid
TCP_LISTEN, TCP_ESTABLISHED = "0A", "01"


# ---------------------------------------------------------------------------- pure parts
def render_config(cfg: Config, pid_path: str, maxconn: int = MAXCONN,
                  stream_module: str = STREAM_MODULE) -> str:
    """nginx.conf for the configuration's testbed (it must have the proxy host), least_conn.
    ValueError naming the field for what nginx's stream module cannot balance."""
    proxy = cfg.testbed.proxy
    if proxy is None:
        raise ValueError("testbed.proxy: the outside balancer needs the proxy host "
                         "(set testbed.proxy: true)")
    for m in cfg.microservices:
        if m.protocol != "tcp":
            raise ValueError(f"microservices[{m.index - 1}].protocol: the nginx balancer "
                             f"proxies TCP only, {m.name} is {m.protocol}")
    h = cfg.controller.health
    passive = "" if h.method == "none" else \
        f" max_fails={h.unhealthy_after} fail_timeout={h.interval_s * h.unhealthy_after:g}s"
    weights = capacity_weights(cfg)
    lines = [
        "# MALB's outside balancer: nginx, least_conn (experiments/nginx.py)",
        f"load_module {stream_module};",
        "worker_processes auto;",
        "daemon off;",
        f"pid {pid_path};",
        "error_log stderr warn;",
        "",
        f"events {{ worker_connections {2 * maxconn}; }}",
        "",
        "stream {",
        f"    proxy_connect_timeout {TIMEOUT_CONNECT_S}s;",
        f"    proxy_timeout {TIMEOUT_IDLE_S}s;",
    ]
    for m in cfg.microservices:
        lines += ["", f"    upstream {m.name} {{", f"        zone {m.name} 64k;",
                  "        least_conn;"]
        for inst in cfg.instances_of(m.name):
            lines.append(f"        server {inst.ip}:{m.port} weight={weights[inst.server]}"
                         f"{passive};   # {inst.name}")
        lines += ["    }", f"    server {{ listen {proxy.ip}:{m.port}; proxy_pass {m.name}; }}"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _address(hex_addr: str) -> tuple[str, int]:
    """An IPv4 address:port as /proc/net/tcp writes it (little-endian hex)."""
    ip, port = hex_addr.split(":")
    return str(ipaddress.IPv4Address(socket.ntohl(int(ip, 16)))), int(port, 16)


def _sockets(text: str):
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 4:
            yield _address(parts[1]), _address(parts[2]), parts[3]


def listening(text: str) -> set[tuple[str, int]]:
    """The (address, port) pairs listening in /proc/<pid>/net/tcp text."""
    return {local for local, _, state in _sockets(text) if state == TCP_LISTEN}


def connections_to(text: str, targets: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Established connections to each target (address, port) in /proc/<pid>/net/tcp text."""
    out = dict.fromkeys(targets, 0)
    for _, remote, state in _sockets(text):
        if state == TCP_ESTABLISHED and remote in out:
            out[remote] += 1
    return out


# ---------------------------------------------------------------------------- the balancer
class NginxBalancer:
    """nginx for one run of a Stack whose testbed has the proxy host, as
    haproxy.OutsideBalancer (the same interface; lb_comparison picks either by name)."""

    name = "nginx"

    def __init__(self, stack, mode: str = "leastconn", run_dir: str | None = None):
        if mode not in MODES:
            raise ValueError(f"mode: one of {', '.join(MODES)}, got {mode!r}")
        self.stack, self.mode = stack, mode
        self.cfg: Config = stack.cfg
        self.run_dir = os.path.abspath(run_dir or stack.run_dir)
        self.config_path = os.path.join(self.run_dir, "nginx.conf")
        self.log_path = os.path.join(self.run_dir, "nginx.log")
        self.pid_path = os.path.join(self.run_dir, "nginx.pid")
        self.service: Service | None = None
        self.meter: CpuMeter | None = None

    def start(self, timeout_s: float = 15.0) -> NginxBalancer:
        try:
            text = render_config(self.cfg, self.pid_path)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        proxy = self.stack.testbed.node(self.cfg.testbed.proxy.name)
        os.makedirs(self.run_dir, exist_ok=True)
        with open(self.config_path, "w") as fh:
            fh.write(text)
        if same_process(*_recorded(NGINX_PID_NAME)):
            raise ServiceError(f"another nginx balancer runs already (pid "
                               f"{_recorded(NGINX_PID_NAME)[0]}); stop it first")
        if shutil.which(NGINX) is None:
            raise ServiceError(f"{NGINX} not found: `make setup` installs it")
        # -t checks the file, that the stream module loads and that every port binds (in
        # prx1's namespace, where the proxy's address is); -e: its own log on stderr from
        # the first line, not the package's /var/log/nginx
        inside = ["nsenter", f"--net=/proc/{proxy.pid}/ns/net", NGINX, "-e", "stderr", "-c",
                  self.config_path]
        checked = subprocess.run([*inside, "-t", "-q"], capture_output=True, text=True)
        if checked.returncode != 0:
            raise ServiceError(f"nginx refused {self.config_path}: "
                               f"{(checked.stderr or checked.stdout).strip()[-500:]}")
        try:
            # daemon off: the master stays in the foreground, the PID recorded is its own;
            # nsenter execs it in prx1's network namespace, its workers are forked there
            self.service = Service(NGINX_PID_NAME, inside, None, self.log_path).start()
            self._wait_ready(timeout_s)
            pid = self.service.proc.pid
            self.meter = CpuMeter(pid, process_start_ticks(pid), tree=True).start()
        except BaseException:
            self.stop()
            raise
        return self

    def _proc_tcp(self) -> str:
        with open(f"/proc/{self.service.proc.pid}/net/tcp") as fh:
            return fh.read()

    def _wait_ready(self, timeout_s: float) -> None:
        """Until every microservice's port listens on the proxy's address."""
        want = {(self.cfg.testbed.proxy.ip, m.port) for m in self.cfg.microservices}
        deadline = time.time() + timeout_s
        missing: object = want
        while time.time() < deadline:
            if not self.service.running():
                raise ServiceError(f"nginx exited with {self.service.proc.returncode} at "
                                   f"start; last lines of {self.log_path}:\n"
                                   f"{self.service.tail()}")
            try:
                missing = want - listening(self._proc_tcp())
                if not missing:
                    return
            except OSError as exc:
                missing = exc
            time.sleep(0.1)
        raise ServiceError(f"nginx: not listening within {timeout_s:.0f} s (missing: "
                           f"{missing!r}); log {self.log_path}")

    def stop(self) -> None:
        if self.meter is not None:
            self.meter.stop()          # the last reading before nginx ends
        if self.service is not None:
            self.service.stop()        # SIGTERM to the group (master and workers)

    def __enter__(self) -> NginxBalancer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def address(self, microservice: str) -> tuple[str, int]:
        return self.cfg.testbed.proxy.ip, self.cfg.microservice(microservice).port

    def retarget(self, spec: dict) -> dict:
        return retarget(spec, self.cfg)

    def servers(self) -> list[dict]:
        """Per instance: its upstream (the microservice), name, weight and the proxy's open
        connections to it now (from the sockets in prx1's namespace)."""
        weights = capacity_weights(self.cfg)
        targets = {(inst.ip, m.port): (m.name, inst) for m in self.cfg.microservices
                   for inst in self.cfg.instances_of(m.name)}
        current = connections_to(self._proc_tcp(), set(targets)) if \
            self.service is not None and self.service.running() else {}
        return [{"backend": ms, "server": inst.name, "weight": weights[inst.server],
                 "current": current.get(addr)} for addr, (ms, inst) in targets.items()]

    def cpu_report(self, at: list[float] | None = None, period_s: float | None = None) -> dict:
        """nginx's own CPU (master and workers), as haproxy.OutsideBalancer.cpu_report."""
        return {"mode": self.mode, "pid": self.service.proc.pid if self.service else None,
                **meter_report(self.meter, period_s or self.cfg.profiler.period_s, at)}


# ---------------------------------------------------------------------------- command
def main(argv=None) -> int:
    p = ArgumentParser(
        prog="python -m experiments.nginx",
        description="Print the nginx.conf the nginx balancer runs for a configuration (its "
                    "testbed needs testbed.proxy: true, or --proxy).")
    p.add_argument("command", choices=("render",))
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--proxy", action="store_true", help="as if testbed.proxy were true")
    p.add_argument("--pid-file", default="/run/malb/nginx.pid")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config, {"testbed": {"proxy": True}} if args.proxy else None)
        sys.stdout.write(render_config(cfg, args.pid_file))
    except (ConfigError, ValueError) as exc:
        print(f"error: configuration: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
