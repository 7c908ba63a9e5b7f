"""The project's testbeds as Mininet `Topo` classes, so `sudo mn --custom`, a user's own
`sudo python` script and the project's Testbed (topologies/testbed.py) build the same
network from the same configuration.

- TestbedTopo: switches, instance containers, clients, trunks and the proxy host of a
  configuration (docs/testbed.md: names, addresses, ports), each node with its class and
  parameters; `self_start` makes the nodes finish their own set-up (below);
- the nodes' and links' parameters come from topologies/params.py (no Mininet there);
- node classes that finish their own set-up once Mininet has configured them (after their
  links exist): TX offload off on their links (the userspace datapath needs it) and the
  instance's service started. `mn` has no step after its network starts, and a user's
  script need not know ours: SelfStartingHost (clients), self_starting_docker(backend).

The `mn` entry point is topologies/mn_topos.py; examples/ shows a script.
"""
from __future__ import annotations

# mininet.node before mininet.link: Containernet's two modules import each other, and only
# this order resolves
from mininet.node import Host, OVSSwitch
from mininet.link import TCLink
from mininet.topo import Topo

from common.config import Config, check_testbed_builds
from topologies import backend as backends
from topologies.params import (disable_tx_offload, docker_params, link_shaping,
                               server_docker_params, service_command)

def shaped(bw: float | None) -> dict:
    """A shaped link's parameters, with its class (`mn` defaults to an unshaped one)."""
    return {"cls": TCLink, **link_shaping(bw)} if bw else {}


class SelfStarting:
    """A node that finishes its own set-up when Mininet configures it (configHosts, after
    its links exist): TX offload off on its links when `malb_tx_off` (the userspace
    datapath does not complete checksums left to the NIC), and `malb_service`, a shell
    line, run."""

    def config(self, malb_tx_off: bool = False, malb_service: str | None = None, **params):
        result = super().config(**params)
        if malb_tx_off:
            for intf in self.intfNames():
                if intf != "lo":
                    disable_tx_offload(self.pid, intf)
        if malb_service:
            self.cmd(malb_service)
        return result


class SelfStartingHost(SelfStarting, Host):
    """A plain Mininet host (the clients, the proxy) that finishes its own set-up."""


def self_starting_docker(backend: str):
    """The backend's container node that finishes its own set-up (a class per backend)."""
    base = backends.docker_node_class(backend)
    return type(f"SelfStarting{base.__name__}", (SelfStarting, base), {
        "__doc__": f"{base.__name__} that finishes its own set-up (SelfStarting)."})


class TestbedTopo(Topo):
    """A configuration's testbed as a Mininet Topo (docs/testbed.md): one switch (the MALB
    paper's testbed) or a chain of them joined by shaped trunks; a container per running
    instance on its slot's port; the clients; the proxy host when the configuration has
    one.

    cfg: a Config; backend: auto | mininet | containernet; datapath: auto | user | kernel
    (None: the configuration's); controller: whether a remote controller runs the switches
    (else standalone L2 switches); self_start: the nodes switch TX offload off and start
    their services themselves (for `mn` and scripts; the Testbed does both after start)."""
    __test__ = False

    def build(self, cfg: Config, backend: str = "auto", datapath: str | None = None,
              controller: bool = True, self_start: bool = False):
        check_testbed_builds(cfg)
        tb = cfg.testbed
        self.cfg = cfg
        self.backend = backends.resolve_backend(backend)
        self.datapath = backends.resolve_datapath(datapath or tb.datapath)
        tx_off = self_start and self.datapath == "user"
        docker_cls = (self_starting_docker(self.backend) if self_start
                      else backends.docker_node_class(self.backend))
        host_cls = SelfStartingHost if self_start else Host
        for sw in tb.switches:
            self.addSwitch(sw.name, cls=OVSSwitch, dpid="%016x" % sw.dpid,
                           protocols="OpenFlow13", datapath=self.datapath,
                           failMode="secure" if controller else "standalone")
        self.server_params = server_params = server_docker_params(cfg, self.backend)
        for inst in cfg.instances:
            extra = {"malb_tx_off": tx_off,
                     "malb_service": service_command(cfg, inst)} if self_start else {}
            self.addHost(inst.name, **docker_params(cfg, inst, docker_cls, server_params),
                         **extra)
            self.addLink(inst.name, inst.switch, port2=inst.switch_port,
                         **backends.container_link_options(self.backend),
                         **shaped(cfg.server(inst.server).link_mbit))
        hosts = [*tb.clients, *((tb.proxy,) if tb.proxy else ())]
        for h in hosts:
            # the proxy: an outside balancer's host (experiments/haproxy.py), a plain host
            # with the clients' shaping, so what reaches the instances through it meets
            # the same link
            self.addHost(h.name, cls=host_cls, ip=f"{h.ip}/{tb.prefix_len}", mac=h.mac,
                         **({"malb_tx_off": tx_off} if self_start else {}))
            self.addLink(h.name, h.switch, port2=h.switch_port, **shaped(tb.client_bw_mbit))
        for trunk in tb.trunks:
            self.addLink(trunk.a, trunk.b, port1=trunk.a_port, port2=trunk.b_port,
                         **shaped(trunk.bw_mbit))
