"""NetworkPlan: what the configuration says about the network, looked up by the controller
core and its managers: every instance slot (by name, by index, by address, by switch
port, where it is: `locations`), the microservices by index, the VIPs, the clients, every
known host's switch and port, and the address blocks of the hosts on each switch."""
from __future__ import annotations

from ryu_apps.locations import InstanceLocations


class NetworkPlan:
    def __init__(self, cfg):
        # Every slot (a microservice on a server) is known: an instance can join a pool at
        # run time (a placement's move, REST).
        self.instances = {i.name: i for i in cfg.slots}
        self.vips = {m.vip for m in cfg.microservices}
        self.ms_by_index = {m.index: m for m in cfg.microservices}
        self.instance_by_index = {i.slot: i for i in cfg.slots}
        self.instance_ips = {i.ip: i for i in cfg.slots}
        # where each instance is: configured, or (the user's network) found at run time
        self.locations = InstanceLocations(cfg.slots)
        self.client_names = {cl.ip: cl.name for cl in cfg.testbed.clients}
        self.client_ports = {(cl.dpid, cl.ip): cl.switch_port for cl in cfg.testbed.clients}
        # every host the configuration knows: MAC -> (its switch, its port there). The
        # outside balancer's proxy is one, but its block is no local block below: HAProxy
        # talks to the instances' own addresses, so their answers to it go by plain L2.
        proxy = (cfg.testbed.proxy,) if cfg.testbed.proxy else ()
        self.host_at = {h.mac: (h.dpid, h.switch_port)
                        for h in (*cfg.slots, *cfg.testbed.clients, *proxy)
                        if h.dpid is not None and h.switch_port is not None}
        # per switch, the address blocks of the hosts on it: 10.0.<server>.0/24 for its
        # servers' instances, 10.0.200.0/24 where the clients are
        self.local_blocks: dict[int, list[str]] = {}
        for srv in () if cfg.declared_network else cfg.servers:
            dpid = next(s.dpid for s in cfg.testbed.switches if s.name == srv.switch)
            self.local_blocks.setdefault(dpid, []).append(f"10.0.{srv.index}.0")
        for dpid in {cl.dpid for cl in cfg.testbed.clients}:
            self.local_blocks.setdefault(dpid, []).append("10.0.200.0")

    def instances_on(self, dpid: int) -> set[str]:
        return self.locations.on_switch(dpid)

    def port_owner(self, dpid: int, port: int):
        """The instance at this switch port, or None."""
        name = self.locations.owner(dpid, port)
        return None if name is None else self.instances[name]
