"""Build the project's testbeds from the shared configuration.

One builder covers both topologies of the project:
- ``testbed.switches: 1``: the MALB paper testbed (one switch, N servers, M clients);
- ``testbed.switches: 2..4``: a chain of switches joined by bandwidth-limited trunks, the
  servers spread over them, used for placement experiments.

Naming and addressing are derived in common/config.py and documented in docs/testbed.md.
The same code runs on real Containernet and on Debian's Mininet with DockerHost.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from common import openapi
from common.config import Config, Instance, check_testbed_builds
from common.httpjson import BadRequest, field_name, quote
from common.state import STATE_DIR, TESTBED_STATE_FILE
from common import testbed_lock
from topologies import backend as backends
from topologies.params import disable_tx_offload, docker_params, link_shaping, \
    server_docker_params, service_command


@dataclass
class TestbedOptions:
    __test__ = False  # not a pytest test class
    backend: str = "auto"            # auto | containernet | mininet
    datapath: str | None = None      # None: the configuration's testbed.datapath
    controller: str | None = "config"  # "config", "none" or "host:port"
    start_services: bool = True
    wait_controller_s: float = 0.0   # >0: wait until every switch is connected


_up: Testbed | None = None       # the testbed this process has up (one per machine)


@dataclass
class Testbed:
    """A running testbed. Use as a context manager, or call start() and stop()."""
    __test__ = False
    cfg: Config
    options: TestbedOptions = field(default_factory=TestbedOptions)
    net: object = None
    backend: str = ""
    datapath: str = ""
    deployed: set = field(default_factory=set)     # instances running (names)
    _server_params: dict | None = None

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> Testbed:
        # mininet.node before mininet.link: Containernet's two modules import each other,
        # and only this order resolves
        from mininet.node import OVSSwitch  # deferred: Mininet or
        from mininet.link import TCLink    # deferred: Containernet, whichever the backend is
        from topologies.topo import TestbedTopo    # deferred: it imports Mininet

        check_testbed_builds(self.cfg)     # before anything is made (TestbedTopo checks too)
        controller = self._controller_address()
        global _up
        if _up is not None:
            raise testbed_lock.TestbedBusy("this process has a testbed up already: stop it "
                                           "first (one testbed per machine)")
        testbed_lock.acquire()             # TestbedBusy while another process has one up
        _up = self
        self._write_state(status="building")
        try:
            # the servers' cgroups are made here: inside the try, so a failure cleans up
            topo = TestbedTopo(self.cfg, backend=self.options.backend,
                               datapath=self.options.datapath, controller=controller is not None)
            self.backend, self.datapath = topo.backend, topo.datapath
            # every entry point builds its network here: which emulator ran, said at start
            print(f"[testbed] {self.backend}, {self.datapath} datapath", file=sys.stderr,
                  flush=True)
            self._server_params = topo.server_params
            net_cls = backends.network_class(self.backend)
            self.net = net_cls(topo=topo, controller=None, switch=OVSSwitch, link=TCLink,
                               build=False, autoSetMacs=False, autoStaticArp=False)
            if controller:
                self.net.addController("c0", controller=backends.remote_controller_class(),
                                       ip=controller[0], port=controller[1])
            self.net.build()
            self.deployed.update(i.name for i in self.cfg.instances)
            self.net.start()
            self._after_start()
        except BaseException:
            self.stop()
            raise
        self._write_state(status="running")
        return self

    def stop(self) -> None:
        failure = None
        if self.net is not None:
            try:
                self.net.stop()
            except Exception as exc:     # noqa: BLE001 -- raised after the clean-up below
                # e.g. a host whose shell a SIGTERM or ^C caught mid-command: Mininet
                # refuses to run the next command there, so the rest is never taken down
                failure = exc
            finally:
                # Mininet stops a RemoteController by doing nothing and never ends its shell:
                # one bash per testbed would outlive it in this process
                for controller in self.net.controllers:
                    controller.terminate()
                self.net = None
        global _up
        if _up is self:              # else never started, or refused: what runs is another's
            from topologies.clean import clean_testbed   # deferred: Mininet, the Docker SDK
            try:
                clean_testbed(quiet=True)  # whatever a failed build or a crash left behind
            finally:
                _up = None
                testbed_lock.release()
        if failure is not None:
            raise failure

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- build
    def _controller_address(self) -> tuple[str, int] | None:
        choice = self.options.controller
        address = self.cfg.testbed.controller if choice == "config" else choice
        if address in (None, "none"):
            return None
        host, port = address.rsplit(":", 1)
        return host, int(port)

    def _docker_params(self, inst: Instance) -> dict:
        if self._server_params is None:
            self._server_params = server_docker_params(self.cfg, self.backend)
        return docker_params(self.cfg, inst, backends.docker_node_class(self.backend),
                             self._server_params)

    def _after_start(self) -> None:
        for sw in self.cfg.testbed.switches:
            subprocess.run(["ovs-vsctl", "set", "bridge", sw.name, "external-ids:malb=1"],
                           check=True, capture_output=True)
        if self.datapath == "user":
            # The userspace datapath does not complete checksums left to the NIC: with TX
            # offload on, TCP through veth pairs stalls (docs/testbed.md).
            for host in self.net.hosts:
                for intf in host.intfNames():
                    if intf != "lo":
                        disable_tx_offload(host.pid, intf)
        if self.options.start_services:
            for inst in self.running_instances():
                self.start_service(inst)
        if self.options.wait_controller_s > 0 and self.cfg.testbed.controller:
            self.wait_connected(self.options.wait_controller_s)

    # ---------------------------------------------------------------- helpers
    def describe(self) -> dict[str, str]:
        """Which emulator and datapath this testbed runs on: every result records it."""
        return {"backend": self.backend, "datapath": self.datapath}

    def node(self, name: str):
        return self.net[name]

    @property
    def clients(self) -> list:
        return [self.net[c.name] for c in self.cfg.testbed.clients]

    def start_service(self, inst: Instance) -> None:
        self.net[inst.name].cmd(service_command(self.cfg, inst))

    # ---------------------------------------------------------------- run-time changes
    def add_instance(self, inst: Instance, start_service: bool = True) -> None:
        """Start an instance in a slot of the running testbed (a placement's move): its
        container with its server's limits, its link on the slot's switch port, its
        service. The controller is told separately (REST)."""
        if inst.name in self.deployed:
            raise ValueError(f"{inst.name} is running already")
        node = self.net.addDocker(inst.name, **self._docker_params(inst))
        try:
            switch = self.net[inst.switch]
            link = self.net.addLink(node, switch, port2=inst.switch_port,
                                    **link_shaping(self.cfg.server(inst.server).link_mbit))
            port = link.intf2.name
            # The slot's port number is fixed, so OVS must not number the port.
            # Containernet's addLink attaches the port itself (numbered by OVS); Mininet's
            # does not: --may-exist covers both, and a changed ofport_request makes OVS
            # renumber the port.
            subprocess.run(["ovs-vsctl", "--may-exist", "add-port", switch.name, port, "--",
                            "set", "Interface", port, f"ofport_request={inst.switch_port}"],
                           check=True, capture_output=True, text=True)
            subprocess.run(["ip", "link", "set", port, "up"], check=True, capture_output=True)
            node.configDefault()
            if self.datapath == "user":
                for intf in node.intfNames():
                    if intf != "lo":
                        disable_tx_offload(node.pid, intf)
            self.deployed.add(inst.name)
            if start_service:
                self.start_service(inst)
            self._write_state(status="running")
        except BaseException as exc:
            # all or nothing: a slot half built would hold its switch port and name
            try:
                self._discard(inst, node)
            except Exception as cleanup:   # noqa: BLE001 -- the first failure is the news
                exc.add_note(f"and removing what was built of {inst.name} failed: {cleanup}")
            raise

    def remove_instance(self, name: str) -> None:
        """Stop an instance and remove its container and link."""
        if name not in self.deployed:
            raise ValueError(f"{name} is not running")
        self._discard(next(i for i in self.cfg.slots if i.name == name), self.net[name])
        self._write_state(status="running")

    def _discard(self, inst: Instance, node) -> None:
        """Remove an instance's link, switch port and container, whatever of them exists."""
        switch = self.net[inst.switch]
        for link in self.net.linksBetween(node, switch):
            peer = link.intf2 if link.intf2.node is switch else link.intf1
            subprocess.run(["ovs-vsctl", "--if-exists", "del-port", switch.name, peer.name],
                           capture_output=True)
            self.net.delLink(link)
        self.net.delHost(node)
        self.deployed.discard(inst.name)

    def control_routes(self) -> dict:
        """The control API of a running testbed (`topologies up` serves it on
        testbed.control_port): start and stop instances in their slots (a placement's
        moves, placement/apply.py). One change at a time."""
        lock = threading.Lock()
        slots = {i.name: i for i in self.cfg.slots}

        def listing(_q, _b):
            return 200, {"running": sorted(self.deployed), "slots": sorted(slots)}

        def start(_q, body):
            name = body.get("instance") if isinstance(body, dict) else None
            if isinstance(body, dict) and set(body) - {"instance"}:
                raise BadRequest(f"{field_name(min(set(body) - {'instance'}))}: unknown field "
                                 f"(known: instance)")
            if not isinstance(name, str) or name not in slots:   # a list is not hashable
                raise BadRequest(f"instance: no slot {quote(name)} in the configuration")
            with lock:
                if name in self.deployed:
                    return 409, {"error": f"{name} is running already"}
                self.add_instance(slots[name])
                if self.wait_services(20.0, [slots[name]]):
                    return 504, {"error": f"{name}: its service is not listening after 20 s"}
            return 201, {"instance": name, "running": True}

        def stop(query, _b):
            name = (query.get("instance") or [None])[0]
            if name not in slots:
                raise BadRequest(f"instance: no slot {quote(name)} in the configuration")
            with lock:
                if name not in self.deployed:
                    return 404, {"error": f"{name} is not running"}
                self.remove_instance(name)
            return 200, {"instance": name, "running": False}
        def named_slots(spec: dict) -> None:
            """The description made this testbed's: the slots a change may name."""
            openapi.body_schema(spec, "/instances", "post")["properties"]["instance"][
                "enum"] = sorted(slots)
            spec["paths"]["/instances"]["delete"]["parameters"][0]["schema"]["enum"] = \
                sorted(slots)
        routes = {("GET", "/instances"): listing, ("POST", "/instances"): start,
                  ("DELETE", "/instances"): stop}
        routes[("GET", "/openapi.json")] = openapi.served("testbed", routes, named_slots)
        return routes

    def running_instances(self) -> list[Instance]:
        return [i for i in self.cfg.slots if i.name in self.deployed]

    def wait_services(self, timeout_s: float = 20.0,
                      instances: list[Instance] | None = None) -> list[str]:
        """Wait until every instance (default: those running) listens on its port; returns
        those that do not."""
        deadline = time.time() + timeout_s
        pending = list(instances if instances is not None else self.running_instances())
        while pending and time.time() < deadline:
            still = []
            for inst in pending:
                port = self.cfg.microservice(inst.microservice).port
                out = self.net[inst.name].cmd(f"ss -Hltn 'sport = :{port}' | wc -l")
                if out.strip() in ("", "0"):
                    still.append(inst)
            pending = still
            if pending:
                time.sleep(0.3)
        return [i.name for i in pending]

    def wait_connected(self, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        for sw in self.cfg.testbed.switches:
            while True:
                out = subprocess.run(["ovs-vsctl", "get", "controller", sw.name, "is_connected"],
                                     capture_output=True, text=True).stdout
                if out.strip() == "true":
                    break
                if time.time() > deadline:
                    raise TimeoutError(f"switch {sw.name} did not connect to the controller at "
                                       f"{self.cfg.testbed.controller} within {timeout_s:.0f} s")
                time.sleep(0.2)

    def _write_state(self, status: str) -> None:
        os.makedirs(STATE_DIR, exist_ok=True)
        state = {
            "status": status, "pid": os.getpid(), "config": self.cfg.source,
            "backend": self.backend, "datapath": self.datapath,
            "switches": [s.name for s in self.cfg.testbed.switches],
            # every slot: cleanup must find an instance a placement started anywhere
            "nodes": ([i.name for i in self.cfg.slots] +
                      [c.name for c in self.cfg.testbed.clients] +
                      ([self.cfg.testbed.proxy.name] if self.cfg.testbed.proxy else []) +
                      [s.name for s in self.cfg.testbed.switches]),
            "servers": [s.name for s in self.cfg.servers],
        }
        tmp = TESTBED_STATE_FILE + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(state, fh, indent=2)
        os.replace(tmp, TESTBED_STATE_FILE)
