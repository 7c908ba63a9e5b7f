"""SwitchRules: the rules every switch gets when it (re)connects (table miss, the VIPs to
the controller, a rule towards every known host, instances' orphaned answers to the
controller) and its packet-in meters once it says it has them; which switches are up."""
from __future__ import annotations

from ryu_apps import ofwire, tracker
from ryu_apps.managers.base import TO_CONTROLLER, Manager
from ryu_apps.managers.health_checks import PROBE_MASK, PROBE_PORTS
from ryu_apps.core_result import CoreResult

PRIO_L2, PRIO_HOSTS, PRIO_VIP, PRIO_ORPHAN = 10, 20, 100, 150    # PRIO_NAT: flowpath.py
PRIO_PROBE = PRIO_VIP + 1
HOST_TABLE = 1             # where reverse-NATed answers find their host (data-plane mode)
PACKET_IN_METER = 1               # the meter of new-flow packet-ins to the VIPs
MISS_METER = 2                    # and of table misses (unknown hosts, broadcasts)


def orphan_rules(cfg, xid, dpid: int, instances, dst: tuple[str, str],
                 conntrack: tracker.Tracker | None) -> bytes:
    """Instances' answers to `dst` (an address and mask) that no NAT rule rewrites go to the
    controller (flowpath.orphan resumes their flow), not out by plain L2 with the instance's
    own address; in tracker mode (`conntrack`), TCP answers through the tracker first."""
    buf = b""
    for inst in instances:
        ms = cfg.microservice(inst.microservice)
        buf += ofwire.flow_mod(xid(dpid), 0, PRIO_ORPHAN, {
            "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO[ms.protocol],
            "ipv4_src": inst.ip, f"{ms.protocol}_src": ms.port, "ipv4_dst": dst},
            TO_CONTROLLER)
        if conntrack is not None and ms.protocol == "tcp":
            buf += tracker.answer_rules(xid, dpid, conntrack.zone(dpid), inst.ip, ms.port, dst)
    return buf


class SwitchRules(Manager):
    def __init__(self, cfg, plan, xid, next_hop: dict, mac_to_port: dict, dp_mode: bool,
                 client_orphans: dict | None = None,
                 conntrack: tracker.Tracker | None = None):
        self.cfg, self.plan, self.xid = cfg, plan, xid
        self.next_hop, self.mac_to_port, self.dp_mode = next_hop, mac_to_port, dp_mode
        self.client_orphans = {} if client_orphans is None else client_orphans
        self.conntrack = conntrack      # tracker mode
        self.switches: set[int] = set()       # connected (features reply seen, not gone)
        self.metered: set[int] = set()        # switches with the packet-in meter

    def switch_up(self, dpid: int, now: float) -> list[bytes]:
        self.switches.add(dpid)
        self.mac_to_port.setdefault(dpid, {})
        x = self.xid
        buf = [self.table_miss(dpid, meter=None), self.vip_rules(dpid, meter=None)]
        if self.conntrack is not None:
            self.conntrack.forget(dpid)
        self.metered.discard(dpid)
        if self.cfg.controller.packet_in_limit_per_s:
            # metered once the switch says it has meters (meter_features)
            buf.append(ofwire.multipart_request(x(dpid), ofwire.OFPMP_METER_FEATURES))
        # Every host the configuration knows gets a rule towards it on every switch (its own
        # port, or the trunk towards its switch): traffic crossing switches, such as an
        # instance's answers to a caller on another switch, never waits for the controller.
        # In data-plane mode the host table behind the reverse NAT gets the same rules.
        for mac, (host_dpid, port) in self.plan.host_at.items():
            to = port if host_dpid == dpid else self.next_hop.get((dpid, host_dpid))
            if to is None:
                continue
            for table in (0, HOST_TABLE) if self.dp_mode else (0,):
                buf.append(ofwire.flow_mod(x(dpid), 0, PRIO_HOSTS, {"eth_dst": mac},
                                           ofwire.action_output(to), table=table))
        # Answers of instances that no NAT rule rewrites (the connection outlived its rules'
        # idle timeout) come to the controller, not out through L2 with the instance's address.
        # Only for callers on this switch, where the flow's NAT happens: answers passing
        # through towards another switch go on by the host rules above.
        for block in self.plan.local_blocks.get(dpid, ()):
            buf.append(orphan_rules(self.cfg, x, dpid, self.cfg.slots, (block, "255.255.255.0"),
                                    self.conntrack))
        # the user's network: clients found where their flows entered (flowpath.py)
        for client_ip, ms_name in sorted(self.client_orphans.get(dpid, ())):
            buf.append(orphan_rules(self.cfg, x, dpid, self.cfg.instances_of(ms_name),
                                    (client_ip, "255.255.255.255"), self.conntrack))
        return buf

    def switch_down(self, dpid: int, now: float) -> None:
        self.switches.discard(dpid)
        self.metered.discard(dpid)

    def table_miss(self, dpid: int, meter: int | None) -> bytes:
        return b"".join(ofwire.flow_mod(self.xid(dpid), 0, 0, {}, TO_CONTROLLER, table=table,
                                        meter=meter)
                        for table in ((0, HOST_TABLE) if self.dp_mode else (0,)))

    def vip_rules(self, dpid: int, meter: int | None) -> bytes:
        """ARP for the VIPs and IPv4 to them go to the controller, through the packet-in
        meter when there is one (re-adding a rule replaces its instructions); health-probe
        answers go around it, so a flood of new flows cannot take instances down."""
        x, buf = self.xid, b""
        for vip in sorted(self.plan.vips):
            buf += ofwire.flow_mod(x(dpid), 0, PRIO_VIP, {"eth_type": ofwire.ETH_TYPE_ARP,
                                                          "arp_tpa": vip}, TO_CONTROLLER,
                                   meter=meter)
            buf += ofwire.flow_mod(x(dpid), 0, PRIO_VIP, {"eth_type": ofwire.ETH_TYPE_IP,
                                                          "ipv4_dst": vip}, TO_CONTROLLER,
                                   meter=meter)
            buf += ofwire.flow_mod(x(dpid), 0, PRIO_PROBE, {
                "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP, "ipv4_dst": vip,
                "tcp_dst": (PROBE_PORTS[0], PROBE_MASK)}, TO_CONTROLLER)
        if self.conntrack is not None:
            buf += tracker.table_rules(x, dpid, self.conntrack.zone(dpid), sorted(
                (m.vip, m.port) for m in self.cfg.microservices if m.protocol == "tcp"), meter)
        return buf

    def meter_features(self, dpid: int, max_meter: int, band_types: int, capabilities: int,
                       now: float) -> CoreResult:
        out = CoreResult()
        limit = self.cfg.controller.packet_in_limit_per_s
        if not (max_meter >= MISS_METER and band_types & (1 << ofwire.OFPMBT_DROP)
                and capabilities & ofwire.OFPMF_PKTPS):
            out.warnings.append(f"switch {dpid:016x} has no packet-rate meters: packet-ins to "
                                f"the controller are not limited there")
            return out
        flags = ofwire.OFPMF_PKTPS | ofwire.OFPMF_BURST
        buf = b""
        # ADD, then MODIFY: a meter a previous controller left takes this limit
        for meter in (PACKET_IN_METER, MISS_METER):
            for command in (ofwire.OFPMC_ADD, ofwire.OFPMC_MODIFY):
                buf += ofwire.meter_mod(self.xid(dpid), command, flags, meter, limit, limit)
        buf += self.vip_rules(dpid, meter=PACKET_IN_METER)
        buf += self.table_miss(dpid, meter=MISS_METER)
        out.sends.append((dpid, buf))
        self.metered.add(dpid)
        out.infos.append(f"switch {dpid:016x}: packet-ins to the VIPs limited to {limit}/s")
        return out

    def meter_status(self) -> dict:
        return {f"{d:016x}": self.cfg.controller.packet_in_limit_per_s
                if d in self.metered else None for d in sorted(self.switches)}
