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
import threading
import time
from dataclasses import dataclass, field

from common.config import Config, Instance, callgraph_spec, check_testbed_builds
from common.httpjson import BadRequest, quote
from common.state import STATE_DIR, TESTBED_STATE_FILE
from topologies import backend as backends
from common.cgroups import apply_server_limits, detect_layout, CFS_PERIOD_US

SERVICE_DIR = "/opt/malb"


@dataclass
class TestbedOptions:
    __test__ = False  # not a pytest test class
    backend: str = "auto"            # auto | containernet | mininet
    datapath: str | None = None      # None: the configuration's testbed.datapath
    controller: str | None = "config"  # "config", "none" or "host:port"
    start_services: bool = True
    wait_controller_s: float = 0.0   # >0: wait until every switch is connected


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
    def start(self) -> "Testbed":
        # mininet.node before mininet.link: Containernet's two modules import each other,
        # and only this order resolves
        from mininet.node import OVSSwitch, RemoteController  # deferred: Mininet or
        from mininet.link import TCLink    # deferred: Containernet, whichever the backend is

        check_testbed_builds(self.cfg)
        self.backend = backends.resolve_backend(self.options.backend)
        self.datapath = backends.resolve_datapath(self.options.datapath or
                                                  self.cfg.testbed.datapath)
        controller = self._controller_address()
        net_cls = backends.network_class(self.backend)
        self.net = net_cls(controller=None, switch=OVSSwitch, link=TCLink, build=False,
                           autoSetMacs=False, autoStaticArp=False)
        self._write_state(status="building")
        try:
            self._build(controller, RemoteController, TCLink)
            self.net.build()
            self.net.start()
            self._after_start()
        except BaseException:
            self.stop()
            raise
        self._write_state(status="running")
        return self

    def stop(self) -> None:
        if self.net is not None:
            try:
                self.net.stop()
            finally:
                self.net = None
        from topologies.clean import clean_testbed   # deferred: Mininet, the Docker SDK
        clean_testbed(quiet=True)  # whatever a failed build or a crash left behind

    def __enter__(self) -> "Testbed":
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

    def _server_docker_params(self) -> dict[str, dict]:
        """Per server: how its containers share the server's CPU share and memory."""
        params = {}
        if self.backend == "mininet":
            from topologies.dockerhost import docker_client   # deferred: Mininet's node
            layout = detect_layout(docker_client().info())
            for srv in self.cfg.servers:
                parent = apply_server_limits(layout, srv.name, srv.cpu, srv.memory_mb)
                params[srv.name] = {"cgroup_parent": parent}
        else:
            # Containernet's Docker node has no cgroup_parent: split the server's share
            # evenly between its containers (documented in docs/testbed.md).
            for srv in self.cfg.servers:
                n = max(1, len(self.cfg.instances_on(srv.name)))
                params[srv.name] = {"cpu_period": CFS_PERIOD_US,
                                    "cpu_quota": max(1000, int(srv.cpu * CFS_PERIOD_US / n)),
                                    "mem_limit": f"{max(6, srv.memory_mb // n)}m"}
        return params

    @staticmethod
    def _shaped(bw: float | None) -> dict:
        # TBF rather than Mininet's default HTB: HTB at tens of Mbit/s logs a quantum
        # warning per link (as an error) and shapes no better
        return {"bw": bw, "use_tbf": True} if bw else {}

    def _host_link(self, server: str | None = None) -> dict:
        """An instance's link (shaped at its server's link_mbit) or a client's."""
        if server is None:
            return self._shaped(self.cfg.testbed.client_bw_mbit)
        return self._shaped(self.cfg.server(server).link_mbit)

    def _docker_params(self, inst: Instance) -> dict:
        """How the container of an instance is made: its image, address, environment
        (call-graph services find their spec in MALB_SPEC) and its server's limits."""
        if self._server_params is None:
            self._server_params = self._server_docker_params()
        ms = self.cfg.microservice(inst.microservice)
        env = {"MALB_INSTANCE": inst.name, "MALB_SERVER": inst.server,
               "MALB_MICROSERVICE": ms.name}
        if ms.kind == "callgraph":
            env["MALB_SPEC"] = json.dumps(callgraph_spec(self.cfg, ms))
        cores = self.cfg.server(inst.server).cores
        pinned = {"cpuset_cpus": ",".join(map(str, cores))} if cores else {}
        return dict(**pinned,cls=backends.docker_node_class(self.backend), dimage=ms.image,
                    ip=f"{inst.ip}/{self.cfg.testbed.prefix_len}", mac=inst.mac,
                    environment=env,
                    labels={"malb.server": inst.server, "malb.microservice": ms.name,
                            "malb.instance": inst.name},
                    **self._server_params[inst.server])

    def _build(self, controller, RemoteController, TCLink) -> None:
        tb = self.cfg.testbed
        net = self.net
        if controller:
            net.addController("c0", controller=RemoteController, ip=controller[0],
                              port=controller[1])
        for sw in tb.switches:
            net.addSwitch(sw.name, dpid="%016x" % sw.dpid, protocols="OpenFlow13",
                          datapath=self.datapath,
                          failMode="secure" if controller else "standalone")
        for inst in self.cfg.instances:
            node = net.addDocker(inst.name, **self._docker_params(inst))
            net.addLink(node, net[inst.switch], port2=inst.switch_port,
                        **self._host_link(inst.server))
            self.deployed.add(inst.name)
        for cli in tb.clients:
            host = net.addHost(cli.name, ip=f"{cli.ip}/{tb.prefix_len}", mac=cli.mac)
            net.addLink(host, net[cli.switch], port2=cli.switch_port, **self._host_link())
        for trunk in tb.trunks:
            extra = {"bw": trunk.bw_mbit, "use_tbf": True} if trunk.bw_mbit else {}
            net.addLink(net[trunk.a], net[trunk.b], port1=trunk.a_port, port2=trunk.b_port,
                        **extra)
        if tb.proxy:
            # the outside balancer's host (experiments/haproxy.py): a plain host with the
            # clients' shaping, so what reaches the instances through it meets the same link
            p = tb.proxy
            host = net.addHost(p.name, ip=f"{p.ip}/{tb.prefix_len}", mac=p.mac)
            net.addLink(host, net[p.switch], port2=p.switch_port, **self._host_link())

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
    def node(self, name: str):
        return self.net[name]

    @property
    def clients(self) -> list:
        return [self.net[c.name] for c in self.cfg.testbed.clients]

    def start_service(self, inst: Instance) -> None:
        ms = self.cfg.microservice(inst.microservice)
        cmd = ms.command.format(port=ms.port, name=ms.name, instance=inst.name)
        self.net[inst.name].cmd(f"cd {SERVICE_DIR} 2>/dev/null; nohup {cmd} "
                                f"> /tmp/{ms.name}.log 2>&1 &")

    # ---------------------------------------------------------------- run-time changes
    def add_instance(self, inst: Instance, start_service: bool = True) -> None:
        """Start an instance in a slot of the running testbed (a placement's move): its
        container with its server's limits, its link on the slot's switch port, its
        service. The controller is told separately (REST)."""
        if inst.name in self.deployed:
            raise ValueError(f"{inst.name} is running already")
        node = self.net.addDocker(inst.name, **self._docker_params(inst))
        switch = self.net[inst.switch]
        link = self.net.addLink(node, switch, port2=inst.switch_port,
                                **self._host_link(inst.server))
        port = link.intf2.name
        # The slot's port number is fixed, so OVS must not number the port. Containernet's
        # addLink attaches the port itself (numbered by OVS); Mininet's does not: --may-exist
        # covers both, and a changed ofport_request makes OVS renumber the port.
        subprocess.run(["ovs-vsctl", "--may-exist", "add-port", switch.name, port, "--", "set",
                        "Interface", port, f"ofport_request={inst.switch_port}"], check=True,
                       capture_output=True, text=True)
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

    def remove_instance(self, name: str) -> None:
        """Stop an instance and remove its container and link."""
        if name not in self.deployed:
            raise ValueError(f"{name} is not running")
        node = self.net[name]
        inst = next(i for i in self.cfg.slots if i.name == name)
        switch = self.net[inst.switch]
        for link in self.net.linksBetween(node, switch):
            peer = link.intf2 if link.intf2.node is switch else link.intf1
            subprocess.run(["ovs-vsctl", "--if-exists", "del-port", switch.name, peer.name],
                           capture_output=True)
            self.net.delLink(link)
        self.net.delHost(node)
        self.deployed.discard(name)
        self._write_state(status="running")

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
        return {("GET", "/instances"): listing, ("POST", "/instances"): start,
                ("DELETE", "/instances"): stop}

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


def disable_tx_offload(pid: int, intf: str) -> None:
    """`ethtool -K <intf> tx off` inside a namespace, run from outside (no ethtool needed in
    the container image)."""
    res = subprocess.run(["nsenter", "-t", str(pid), "-n", "ethtool", "-K", intf, "tx", "off"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"could not switch TX offload off on {intf} (pid {pid}): "
                           f"{res.stderr.strip()}")
