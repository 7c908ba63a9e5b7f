"""The whole platform on this machine: testbed, controller, host agents and profiler,
started in order from one configuration file and stopped in reverse order.

    with Stack(config_data, run_dir, policy="malb") as stack:
        stack.testbed.node("cli1").cmd(...)
        stack.controller_get("/malb/status")

Every component reads the same file (written to ``run_dir/config.yaml``), so they agree
on names, addresses and ports. Logs go to ``run_dir``.
"""
from __future__ import annotations

import copy
import json
import os
import signal
import sys
import time
import urllib.request

import yaml

from common import lab, testbed_lock
from common.config import load_config
from common.httpjson import auth_headers
from common.procs import Service, controller_service, python_service
from experiments.controller_pair import ControllerPair
from common.state import process_start_ticks, same_process
from topologies.backend import resolve_datapath
from topologies.testbed import Testbed, TestbedOptions

LOADGEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loadgen.py")


def transitions_for(datapath: str) -> str:
    """controller.dataplane.transitions on a testbed of this datapath: in the switch on Open
    vSwitch's userspace datapath, whose connection tracker keeps a connection it sees one
    way only; the kernel's marks its handshake's ACK invalid (docs/controller.md)."""
    return "switch" if datapath == "user" else "controller"


class Stack:
    def __init__(self, config_data: dict, run_dir: str, policy: str | None = None,
                 controller: bool = True, agents: bool = True, profiler: bool = True,
                 start_services: bool = True, history_path: str | None = None,
                 standby: bool = False):
        self.data = copy.deepcopy(config_data)
        self.run_dir = os.path.abspath(run_dir)
        self.history_path = os.path.abspath(
            history_path or os.path.join(self.run_dir, "history.sqlite"))
        self.policy = policy
        self.want = {"controller": controller, "agents": agents, "profiler": profiler}
        self.start_services = start_services
        self.config_path = os.path.join(self.run_dir, "config.yaml")
        self.cfg = None
        self.testbed: Testbed | None = None
        self.controller: Service | None = None
        # a standby pair (experiments/controller_pair.py): `controller` is the master the
        # stack asks, `standby` the other; they swap when the standby takes over
        self.want_standby = standby and controller
        self.pair: ControllerPair | None = None
        self.standby: Service | None = None
        self.agents: dict[str, Service] = {}
        self.profiler: Service | None = None
        self.loadgens: dict[str, tuple[int, int | None]] = {}   # name -> (pid, start ticks)
        self._locked = False
        self._sigterm = None          # SIGTERM's handling before start(), given back by stop()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> Stack:
        # before any service: a controller started beside another's testbed would take its
        # ports and PID file (TestbedBusy here; nested within an experiment's own hold)
        testbed_lock.acquire()
        self._locked = True
        try:
            self._sigterm = lab.terminate_unwinds()     # a SIGTERM brings the stack down too
            os.makedirs(self.run_dir, exist_ok=True)
            if not self.want["controller"]:
                self.data.setdefault("testbed", {})["controller"] = "none"
            # Each run keeps its own history beside its other results, whatever the base
            # configuration names (paper.yaml points at a shared file for interactive use).
            self.data.setdefault("profiler", {})["history_path"] = self.history_path
            dp = (self.data.get("controller") or {}).get("dataplane") or {}
            if dp.get("short_flows") == "switch" and "transitions" not in dp:
                dp["transitions"] = transitions_for(resolve_datapath(
                    (self.data.get("testbed") or {}).get("datapath") or "auto"))
            with open(self.config_path, "w") as fh:
                yaml.safe_dump(self.data, fh, sort_keys=False)
            self.cfg = load_config(self.config_path)
            if self.want_standby:
                self.pair = ControllerPair(self.cfg, self.config_path, self.policy, self.run_dir)
            if self.want["controller"]:
                self.start_controller()
            if self.want_standby:
                self.start_standby()
            self.testbed = Testbed(self.cfg, TestbedOptions(
                start_services=self.start_services)).start()
            # beside the run's configuration and logs, whichever entry point made it
            lab.write_results(self.run_dir, "testbed", self.testbed.describe(), echo=False)
            if self.pair is not None:
                self.pair.connect_both()
            if self.start_services:
                missing = self.testbed.wait_services()
                if missing:
                    raise RuntimeError(f"services not listening: {', '.join(missing)}")
            if self.want["agents"]:
                for srv in self.cfg.servers:
                    self.agents[srv.name] = self._agent_service(srv.name).launch()
            if self.want["profiler"]:
                self.profiler = self._profiler_service().launch()
            # launched together, then waited for: their starts (a second or so of imports
            # each) overlap
            for service in [*self.agents.values(), self.profiler]:
                if service is not None:
                    service.ready()
            if self.controller is not None:
                self.wait_switches(30)
                if self.start_services:
                    self.wait_pools(30)
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)    # what failed stays raised
            raise
        return self

    def start_controller(self) -> Service:
        self.controller = self._controller_service().start()
        return self.controller

    def start_standby(self) -> Service:
        assert self.pair is not None, "a standby pair only (Stack(standby=True))"
        self.standby = self.pair.service("standby").start()
        return self.standby

    def promote_standby(self) -> None:
        """The standby took over: the stack asks it from now on; the old master's slot is
        the standby's, to be started again by start_standby."""
        assert self.pair is not None, "a standby pair only (Stack(standby=True))"
        self.pair.promote()
        self.controller, self.standby = self.standby, self.controller

    def start_agent(self, server: str) -> Service:
        self.agents[server] = self._agent_service(server).start()
        return self.agents[server]

    def start_profiler(self) -> Service:
        self.profiler = self._profiler_service().start()
        return self.profiler

    def _controller_service(self) -> Service:
        if self.pair is not None:
            return self.pair.service("master")
        return controller_service(self.config_path, self.policy,
                                  os.path.join(self.run_dir, "controller.log"),
                                  self.cfg.controller.rest_port)

    def _agent_service(self, server: str) -> Service:
        return python_service(
            f"agent-{server}", ["agents", "--server", server, "--config", self.config_path],
            f"{self.cfg.server(server).agent_url}/health",
            os.path.join(self.run_dir, f"agent-{server}.log"))

    def _profiler_service(self) -> Service:
        return python_service(
            "profiler", ["profiler", "--config", self.config_path],
            f"{self.cfg.profiler.url}/health", os.path.join(self.run_dir, "profiler.log"))

    def wait_switches(self, timeout_s: float) -> None:
        """Until the controller has every configured switch (its base rules sent): asked of
        the controller, which knows at once; Open vSwitch's own is_connected column is
        refreshed only every 5 s."""
        want = {f"{sw.dpid:016x}" for sw in self.cfg.testbed.switches}
        self.wait_for(lambda: want <= set(self.controller_get("/malb/status")["switches"]),
                      timeout_s, "every switch connected to the controller", interval_s=0.1)

    def stop(self) -> None:
        # a second SIGTERM while it comes down ends the process as usual
        lab.restore_terminate(self._sigterm)
        self._sigterm = None
        # every part is stopped even when one fails (Mininet refuses to take down a host
        # whose shell a SIGTERM or ^C caught mid-command); the first failure is raised after
        failures = []
        testbed, self.testbed = self.testbed, None
        parts = [self.profiler, *self.agents.values(), testbed, self.controller, self.standby]
        try:
            self.stop_loadgens()
            for service in [self.profiler, *self.agents.values()]:
                if service is not None:
                    service.terminate()
            for stop in [part.stop for part in parts if part is not None]:
                try:
                    stop()
                except Exception as exc:     # noqa: BLE001 -- raised below, after the rest
                    failures.append(exc)
        finally:
            if self._locked:
                self._locked = False
                testbed_lock.release()
        if failures:
            raise failures[0]

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.stop()
        except Exception as failure:     # raised below, or said beside what ended the block
            if exc_type is None:
                raise
            # what ended the block is what the caller is to see; this, said beside it
            print(f"[stack] while coming down: {failure!r}", file=sys.stderr)

    # ---------------------------------------------------------------- workload
    def start_loadgen(self, spec_path: str, t0: float, tag: str = "",
                      timeout_s: float | None = None) -> None:
        """Start experiments/loadgen.py in the background on every client host, each on its
        share of the spec, all at t0. Client k writes <run_dir>/requests-[<tag>-]<k>.csv,
        its summary line to loadgen-[<tag>-]<k>.json and its log to loadgen-[<tag>-]<k>.log."""
        clients = [self.testbed.node(c.name) for c in self.cfg.testbed.clients]
        for k, cli in enumerate(clients):
            name = self._loadgen_name(tag, k)
            out = cli.cmd(f"{sys.executable} {LOADGEN} --spec {spec_path} --client {k} "
                          f"--clients {len(clients)} --out {self.run_dir}/requests-{name}.csv "
                          f"--start-at {t0} --progress 0"
                          + (f" --timeout {timeout_s:g}" if timeout_s else "") +
                          f" > {self.run_dir}/loadgen-{name}.json"
                          f" 2> {self.run_dir}/loadgen-{name}.log & echo $!")
            pid = int(out.strip().split()[-1])
            self.loadgens[name] = (pid, process_start_ticks(pid))

    def stop_loadgens(self) -> None:
        """End the load generators still running (a block left mid-load): each one only
        while its PID is still the process this stack started."""
        for name, (pid, start) in self.loadgens.items():
            if same_process(pid, start):
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError as exc:          # gone meanwhile, or not ours to signal
                    print(f"[stack] load generator {name} (PID {pid}): {exc}",
                          file=sys.stderr)
        self.loadgens.clear()

    def loadgen_summaries(self, tag: str = "") -> list[dict]:
        """The summaries of the clients whose load generator has finished. RuntimeError
        when one ended without a summary (it crashed): waiting on would only reach the
        deadline."""
        out = []
        for k in range(len(self.cfg.testbed.clients)):
            name = self._loadgen_name(tag, k)
            summary = self._loadgen_summary(name)
            if summary is not None:
                out.append(summary)
                continue
            pid, start = self.loadgens.get(name, (None, None))
            if pid is not None and not same_process(pid, start):
                summary = self._loadgen_summary(name)   # it may have just finished
                if summary is None:
                    with open(f"{self.run_dir}/loadgen-{name}.log", errors="replace") as fh:
                        tail = "".join(fh.readlines()[-5:]).strip()
                    raise RuntimeError(f"the load generator of client {k} ({name}) ended "
                                       f"without a summary; its log ends: {tail or '(empty)'}")
                out.append(summary)
        return out

    def _loadgen_summary(self, name: str) -> dict | None:
        try:
            with open(f"{self.run_dir}/loadgen-{name}.json") as fh:
                lines = fh.read().strip().splitlines()
        except FileNotFoundError:
            return None
        try:
            return json.loads(lines[-1]) if lines else None
        except ValueError:
            return None      # being written

    @staticmethod
    def _loadgen_name(tag: str, k: int) -> str:
        return f"{tag}-{k}" if tag else str(k)

    # ---------------------------------------------------------------- helpers
    def controller_url(self, path: str) -> str:
        """On the master's REST port (the standby's, once it has taken over)."""
        port = self.pair.master_ports[1] if self.pair else self.cfg.controller.rest_port
        return f"http://127.0.0.1:{port}{path}"

    def controller_get(self, path: str):
        with urllib.request.urlopen(self.controller_url(path), timeout=5) as r:
            return json.load(r)

    def controller_put(self, path: str, body) -> tuple[int, dict]:
        req = urllib.request.Request(self.controller_url(path), method="PUT",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **auth_headers(self.cfg.security.token)})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def profiler_get(self, path: str):
        with urllib.request.urlopen(f"{self.cfg.profiler.url}{path}", timeout=5) as r:
            return json.load(r)

    def wait_pools(self, timeout_s: float) -> None:
        """Until the controller has every instance the testbed runs healthy in its pool
        (its switch port seen, its health checks passed): flows sent sooner would all go to
        the few instances found first."""
        missing: list[str] = []

        def all_healthy():
            nonlocal missing
            healthy = {i for ms in self.controller_get("/malb/status")["microservices"]
                       .values() for i in ms["healthy_instances"]}
            missing = sorted(set(self.testbed.deployed) - healthy)
            return not missing
        try:
            self.wait_for(all_healthy, timeout_s, "every instance healthy", interval_s=0.2)
        except TimeoutError:
            raise RuntimeError(f"the controller has not found these instances healthy within "
                               f"{timeout_s:.0f} s: {', '.join(missing)} (its log: "
                               f"{self.run_dir}/controller.log)") from None

    def wait_monitoring(self, timeout_s: float = 30.0) -> None:
        """Until the profiler has a complete, fresh sample of every server, and sees every
        instance the testbed runs. RuntimeError naming what it lacks, and why (an agent that
        sees no container of its server would otherwise make an experiment of zeros)."""
        last: dict = {}
        unseen: set = set()

        def all_seen():
            nonlocal last, unseen
            last = self.profiler_get("/servers")["servers"]
            vertices = self.profiler_get("/graph")["vertices"]
            seen = {i for v in vertices.values() for i in v["instances"]}
            unseen = set(self.testbed.deployed) - seen
            return not unseen and all(not v["stale"] and v["complete"]
                                      for v in last.values())
        try:
            self.wait_for(all_seen, timeout_s, "monitoring of every server")
        except TimeoutError:
            bad = [f"{name}: {v.get('error') or 'no complete sample'}"
                   for name, v in sorted(last.items()) if v["stale"] or not v["complete"]]
            if unseen:
                bad.append(f"no reading of the instance(s) {', '.join(sorted(unseen))}")
            raise RuntimeError(f"monitoring is incomplete after {timeout_s:.0f} s: "
                               f"{'; '.join(bad)} (agents' logs: {self.run_dir}/agent-*.log)"
                               ) from None

    def wait_for(self, predicate, timeout_s: float, what: str, interval_s: float = 0.5):
        deadline = time.time() + timeout_s
        last = None
        while time.time() < deadline:
            try:
                last = predicate()
                if last:
                    return last
            except OSError as exc:
                last = exc
            time.sleep(interval_s)
        raise TimeoutError(f"{what}: not reached within {timeout_s:.0f} s (last: {last!r})")
