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
import time
from dataclasses import dataclass, field

from common.config import Config, Instance, check_deployable
from common.state import STATE_DIR, TESTBED_STATE_FILE
from topologies import backend as backends
from topologies.cgroups import apply_server_limits, detect_layout, CFS_PERIOD_US

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

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> "Testbed":
        # mininet.node before mininet.link: Containernet's two modules import each other,
        # and only this order resolves
        from mininet.node import OVSSwitch, RemoteController
        from mininet.link import TCLink

        check_deployable(self.cfg)
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
        from topologies.clean import clean_testbed
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
            from topologies.dockerhost import docker_client
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
        # TBF rather than Mininet's default HTB: HTB at tens of Mbit/s logs a quantum
        # warning per link (as an error) and shapes no better
        host_link = {"bw": tb.host_bw_mbit, "use_tbf": True} if tb.host_bw_mbit else {}
        server_params = self._server_docker_params()
        node_cls = backends.docker_node_class(self.backend)
        for inst in self.cfg.instances:
            ms = self.cfg.microservice(inst.microservice)
            node = net.addDocker(
                inst.name, cls=node_cls, dimage=ms.image, ip=f"{inst.ip}/{tb.prefix_len}", mac=inst.mac,
                environment={"MALB_INSTANCE": inst.name, "MALB_SERVER": inst.server,
                             "MALB_MICROSERVICE": ms.name},
                labels={"malb.server": inst.server, "malb.microservice": ms.name,
                        "malb.instance": inst.name},
                **server_params[inst.server])
            net.addLink(node, net[inst.switch], port2=inst.switch_port, **host_link)
        for cli in tb.clients:
            host = net.addHost(cli.name, ip=f"{cli.ip}/{tb.prefix_len}", mac=cli.mac)
            net.addLink(host, net[cli.switch], port2=cli.switch_port, **host_link)
        for trunk in tb.trunks:
            extra = {"bw": trunk.bw_mbit, "use_tbf": True} if trunk.bw_mbit else {}
            net.addLink(net[trunk.a], net[trunk.b], port1=trunk.a_port, port2=trunk.b_port,
                        **extra)

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
            for inst in self.cfg.instances:
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

    def wait_services(self, timeout_s: float = 20.0) -> list[str]:
        """Wait until every instance listens on its port; returns those that do not."""
        deadline = time.time() + timeout_s
        pending = list(self.cfg.instances)
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
            "nodes": ([i.name for i in self.cfg.instances] +
                      [c.name for c in self.cfg.testbed.clients] +
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
