"""The controller core as plain Python (issue 13, item 1), in the style of faucet's valve:
events in, OpenFlow messages and state changes out. No Ryu import, no clock read, no send,
no socket: ryu_apps/malb.py decodes each Ryu event into plain arguments, passes the time in,
calls one method here and sends the (dpid, bytes) the returned Result holds, counts its
metric updates and logs its lines. tests/unit/test_core.py runs it against a fake flow
table that applies the messages and answers where a packet goes.

Events: a switch connected (its features reply) or gone, its meter and group features, a
packet-in, a flow removed, flow and port statistics, a port status, the profiler's answers
(or its failure), a probe's result, an echo reply, an agent's GET /probes answer (or its
failure: probe_answer, probe_failed; `probing` says whether the policy wants them), and the
timer loops' steps (poll_stats, probe_health, health_marker, sync_dataplane); instances
added, drained or removed and the policy changed over REST. The new-flow path itself is
ryu_apps/flowpath.py; decisions are ryu_apps/policy.py, flow bookkeeping ryu_apps/flows.py,
health ryu_apps/health.py, select groups ryu_apps/dataplane.py.
"""
from __future__ import annotations

import math
import random
from collections import deque
from typing import Callable, Iterator, NamedTuple

from common.config import active_flow_refresh_s
from common.netuse import network_percent
from ryu_apps import dataplane, maglev, ofwire
from ryu_apps.flowpath import FlowPath, Result
from ryu_apps.flows import DIR_FORWARD, FIN_TAG, FlowRecord, FlowTable, fin_cookie, \
    flow_id_of, parse_cookie
from ryu_apps.health import HealthTracker
from ryu_apps.policy import backends_of, core_from_config
from ryu_apps.profiles import apply_profiles

PRIO_L2, PRIO_HOSTS, PRIO_VIP, PRIO_ORPHAN = 10, 20, 100, 150    # PRIO_NAT: flowpath.py
# data-plane mode (ryu_apps/dataplane.py): VIP:port to the select group above the VIP's
# to-controller rule; the stateless reverse NAT above the orphan rules it replaces, below
# the per-flow NAT pairs (flows that did go through the controller keep theirs)
PRIO_DP_GROUP, PRIO_DP_REVERSE = 120, 170
HOST_TABLE = 1             # where reverse-NATed answers find their host (data-plane mode)
DP_COOKIE = 0x4D44 << 48   # "MD": data-plane rules, never polled with the NAT rules
DP_VIP, DP_REVERSE = 1, 2  # cookie kinds (bits 32-39), microservice index in the low bits
DP_GROUP_BASE = 0x4D000    # select group id = base + microservice index
# outside Linux's default ephemeral range (32768-60999): never a client; one masked match
# (tcp_dst 0xF000/0xFC00) sends their answers to the controller past the packet-in meter
PROBE_PORTS = (0xF000, 0xF3FF)
PROBE_MASK = 0xFC00
PRIO_PROBE = PRIO_VIP + 1
PACKET_IN_METER = 1               # the meter of new-flow packet-ins to the VIPs
MISS_METER = 2                    # and of table misses (unknown hosts, broadcasts)
COOKIE_BASE = 0x4D4C << 48
COOKIE_MASK = 0xFFFF << 48
# Flow statistics are polled in slices (by the low bits of the flow's sequence number) spread
# over the period: Ryu parses a whole reply at once on the event loop, at about 0.13 ms per
# rule, so one reply for hundreds of NAT rules would hold up packet-ins for tens of
# milliseconds. Slices hold about RULES_PER_SLICE rules each (docs/controller.md).
RULES_PER_SLICE = 32
MAX_SLICES = 1024
# At most this many rules' statistics are parsed per second (about 0.2 of a core): with
# more NAT rules than a period can cover, the polling cycle stretches beyond the period
# instead of taking the controller over (docs/controller.md).
STATS_RULES_PER_S = 1500
REPORT_CHUNK = 200    # flow records per POST: bounded JSON work between event-loop yields
# The profiler's answer is ready this long after its step's time: the next exchange with it
# is due then, so the controller acts on every period within a fraction of a second of the
# samples (not up to a period later, as a loop of its own phase would)
PROFILER_READY_S = 0.3
L2_IDLE_TIMEOUT = 300
# an agent whose GET /probes fails, or answers in part, fails at every poll (4 a second):
# its warnings are logged once per this many seconds, with how many were left out
PROBE_LOG_EVERY_S = 60.0
TO_CONTROLLER = ofwire.action_output(ofwire.OFPP_CONTROLLER, ofwire.OFPCML_NO_BUFFER)
REMOVED_REASONS = {ofwire.OFPRR_IDLE_TIMEOUT: "idle_timeout",
                   ofwire.OFPRR_HARD_TIMEOUT: "hard_timeout", ofwire.OFPRR_DELETE: "deleted"}


class FlowStat(NamedTuple):
    """One entry of a flow-statistics reply, decoded by the shell."""
    cookie: int
    age: float                 # duration_sec + duration_nsec / 1e9
    byte_count: int
    packet_count: int
    match: dict
    out_ports: tuple = ()      # the output actions' ports, in order


class PortStat(NamedTuple):
    port_no: int
    rx_bytes: int
    tx_bytes: int


def dp_cookie(kind: int, ms_index: int) -> int:
    return DP_COOKIE | kind << 32 | ms_index


def slices_for(rules: int) -> int:
    slices = 1
    while slices < MAX_SLICES and rules / slices > RULES_PER_SLICE:
        slices *= 2
    return slices


class ControllerCore:
    """Every piece of the controller's state, and one method per event."""

    def __init__(self, cfg, policy: str, xid: Callable[[int], int], started: float,
                 timer: Callable[[], float] | None = None, rng: random.Random | None = None,
                 clock: Callable[[], float] | None = None):
        self.cfg = cfg
        c = cfg.controller
        self.xid = xid                        # the next transaction id for a switch
        self.rng = rng or random.Random()     # TCP probes' sequence numbers
        # Every slot (a microservice on a server) is known: an instance can join a pool at
        # run time (a placement's move, REST).
        self.instances = {i.name: i for i in cfg.slots}
        self.backends = backends_of(cfg)
        self.core = core_from_config(cfg, policy, self.backends,
                                     **({} if clock is None else {"clock": clock}))
        self.flows = FlowTable(idle_timeout=c.idle_timeout_s,
                               threshold_s=cfg.profiler.flow_threshold_s,
                               refresh_s=active_flow_refresh_s(cfg))
        self.health = HealthTracker([i.name for i in cfg.instances],
                                    c.health.unhealthy_after, c.health.healthy_after,
                                    c.health.timeout_s)
        # data-plane mode: one Maglev slot table per microservice, shared by every switch;
        # per switch, whether it has select groups and the table each group renders now
        self.dp_mode = c.dataplane.short_flows == "switch"
        self.slot_tables = {m.name: dataplane.SlotTable(c.dataplane.table_size)
                            for m in cfg.microservices}
        self.group_capable: dict[int, bool] = {}
        self.dp_installed: dict[int, dict[str, tuple]] = {}   # dpid -> ms -> view
        self.dp_last_change: dict[str, dict] = {}

        # ---- lookups derived from the configuration
        self.vips = {m.vip for m in cfg.microservices}
        self.ms_by_index = {m.index: m for m in cfg.microservices}
        self.instance_by_index = {i.slot: i for i in cfg.slots}
        self.instance_ips = {i.ip: i for i in cfg.slots}
        self.port_owner = {(i.dpid, i.switch_port): i for i in cfg.slots}
        self.client_names = {cl.ip: cl.name for cl in cfg.testbed.clients}
        self.client_ports = {(cl.dpid, cl.ip): cl.switch_port for cl in cfg.testbed.clients}
        # every host the configuration knows: MAC -> (its switch, its port there). The
        # outside balancer's proxy is one, but its block is no local block below: HAProxy
        # talks to the instances' own addresses, so their answers to it go by plain L2.
        proxy = (cfg.testbed.proxy,) if cfg.testbed.proxy else ()
        self.host_at = {h.mac: (h.dpid, h.switch_port)
                        for h in (*cfg.slots, *cfg.testbed.clients, *proxy)}
        # per switch, the address blocks of the hosts on it: 10.0.<server>.0/24 for its
        # servers' instances, 10.0.200.0/24 where the clients are
        self.local_blocks: dict[int, list[str]] = {}
        for srv in cfg.servers:
            dpid = next(s.dpid for s in cfg.testbed.switches if s.name == srv.switch)
            self.local_blocks.setdefault(dpid, []).append(f"10.0.{srv.index}.0")
        for dpid in {cl.dpid for cl in cfg.testbed.clients}:
            self.local_blocks.setdefault(dpid, []).append("10.0.200.0")

        # ---- switch state
        self.switches: set[int] = set()       # connected (features reply seen, not gone)
        self.metered: set[int] = set()        # switches with the packet-in meter
        # health: the echo requests out (dpid, xid) -> when sent; per switch, the last
        # echo's round trip (how far the switch's messages queue behind ours)
        self.health_markers: dict[tuple[int, int], float] = {}
        self.channel_lag: dict[int, float] = {}
        self.path = FlowPath(cfg, self.core, self.flows, self.backends, xid=xid, timer=timer)
        self.next_hop = self.path.next_hop
        self.mac_to_port = self.path.mac_to_port
        self.port_prev: dict[tuple[int, int], tuple[int, int, float]] = {}
        self.port_rates: dict[tuple[int, int], dict] = {}
        self.decisions: deque = deque(maxlen=2000)
        # statistics slices (poll_stats)
        self.slices, self.flow_slice = 1, 0
        self.cycle = float(c.monitoring_period_s)
        # profiler exchange
        self._pairs_since = started      # the traffic in take_pairs() counts from here
        self._report: tuple[list, tuple[dict, dict]] = ([], ({}, {}))
        self.profiler_state = {"url": cfg.profiler.url, "reachable": None, "last_ok": None,
                               "last_error": None}
        self.next_probe_port = PROBE_PORTS[0]
        # the agents' GET /probes, per server: last answer, last error, log rate limit
        self.probe_agents = {s.name: {"url": f"{s.agent_url}/probes", "last_ok": None,
                                      "last_error": None, "logged": None, "unlogged": 0}
                             for s in cfg.servers}

    # ================================================================ switches
    def switch_connected(self, dpid: int, now: float) -> Result:
        """Base rules on every (re)connection, then the NAT rules of flows still active.
        Existing rules are never wiped: after a controller restart, connections keep
        working on the rules they have."""
        out = Result()
        self.switches.add(dpid)
        self.mac_to_port.setdefault(dpid, {})
        x = self.xid
        # parts joined once: a reconnection may restore thousands of NAT rules
        buf = [self._table_miss(dpid, meter=None), self._vip_rules(dpid, meter=None)]
        self.metered.discard(dpid)
        if self.cfg.controller.packet_in_limit_per_s:
            # metered once the switch says it has meters (meter_features)
            buf.append(ofwire.multipart_request(x(dpid), ofwire.OFPMP_METER_FEATURES))
        # Every host the configuration knows gets a rule towards it on every switch (its own
        # port, or the trunk towards its switch): traffic crossing switches, such as an
        # instance's answers to a caller on another switch, never waits for the controller.
        # In data-plane mode the host table behind the reverse NAT gets the same rules.
        for mac, (host_dpid, port) in self.host_at.items():
            to = port if host_dpid == dpid else self.next_hop.get((dpid, host_dpid))
            for table in ((0, HOST_TABLE) if self.dp_mode else (0,)) if to is not None else ():
                buf.append(ofwire.flow_mod(x(dpid), 0, PRIO_HOSTS, {"eth_dst": mac},
                                           ofwire.action_output(to), table=table))
        # Answers of instances that no NAT rule rewrites (the connection outlived its rules'
        # idle timeout) come to the controller, not out through L2 with the instance's address.
        # Only for callers on this switch, where the flow's NAT happens: answers passing
        # through towards another switch go on by the host rules above.
        for block in self.local_blocks.get(dpid, ()):
            for inst in self.cfg.slots:
                ms = self.cfg.microservice(inst.microservice)
                buf.append(ofwire.flow_mod(x(dpid), 0, PRIO_ORPHAN, {
                    "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO[ms.protocol],
                    "ipv4_src": inst.ip, f"{ms.protocol}_src": ms.port,
                    "ipv4_dst": (block, "255.255.255.0")}, TO_CONTROLLER))
        if self.dp_mode:
            # whether the switch has select groups decides per-flow or data-plane mode
            self.dp_installed[dpid] = {}
            self.group_capable.pop(dpid, None)
            buf.append(ofwire.multipart_request(x(dpid), ofwire.OFPMP_GROUP_FEATURES))
        restored = 0
        for rec in self.flows.active(dpid):
            buf.append(self.path.nat_rules(dpid, rec, now))
            restored += 1
        # learn what rules a previous controller left (restart)
        buf.append(self._stats_requests(dpid))
        out.sends.append((dpid, b"".join(buf)))
        out.infos.append(f"switch {dpid:016x} connected: base rules installed, {restored} "
                         f"NAT flows restored")
        return out

    def switch_gone(self, dpid: int, now: float) -> Result:
        """Its flows keep their records: a reconnection restores their rules."""
        out = Result()
        self.switches.discard(dpid)
        self.metered.discard(dpid)
        self.channel_lag.pop(dpid, None)
        self.health_markers = {k: v for k, v in self.health_markers.items() if k[0] != dpid}
        self.health.forget(self._instances_on(dpid))
        out.warnings.append(f"switch {dpid:016x} disconnected")
        return out

    def _table_miss(self, dpid: int, meter: int | None) -> bytes:
        return b"".join(ofwire.flow_mod(self.xid(dpid), 0, 0, {}, TO_CONTROLLER, table=table,
                                        meter=meter)
                        for table in ((0, HOST_TABLE) if self.dp_mode else (0,)))

    def _vip_rules(self, dpid: int, meter: int | None) -> bytes:
        """ARP for the VIPs and IPv4 to them go to the controller, through the packet-in
        meter when there is one (re-adding a rule replaces its instructions); health-probe
        answers go around it, so a flood of new flows cannot take instances down."""
        x, buf = self.xid, b""
        for vip in sorted(self.vips):
            buf += ofwire.flow_mod(x(dpid), 0, PRIO_VIP, {"eth_type": ofwire.ETH_TYPE_ARP,
                                                          "arp_tpa": vip}, TO_CONTROLLER,
                                   meter=meter)
            buf += ofwire.flow_mod(x(dpid), 0, PRIO_VIP, {"eth_type": ofwire.ETH_TYPE_IP,
                                                          "ipv4_dst": vip}, TO_CONTROLLER,
                                   meter=meter)
            buf += ofwire.flow_mod(x(dpid), 0, PRIO_PROBE, {
                "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP, "ipv4_dst": vip,
                "tcp_dst": (PROBE_PORTS[0], PROBE_MASK)}, TO_CONTROLLER)
        return buf

    def meter_features(self, dpid: int, max_meter: int, band_types: int, capabilities: int,
                       now: float) -> Result:
        out = Result()
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
        buf += self._vip_rules(dpid, meter=PACKET_IN_METER)
        buf += self._table_miss(dpid, meter=MISS_METER)
        out.sends.append((dpid, buf))
        self.metered.add(dpid)
        out.infos.append(f"switch {dpid:016x}: packet-ins to the VIPs limited to {limit}/s")
        return out

    # ================================================================ data-plane mode
    def group_features(self, dpid: int, types: int, max_select_groups: int,
                       now: float) -> Result:
        select = bool(types & (1 << ofwire.OFPGT_SELECT)) and max_select_groups > 0
        self.group_capable[dpid] = select
        out = Result()
        if not select:
            out.warnings.append(f"switch {dpid:016x} has no select groups: short flows stay "
                                f"under per-flow control there")
        return self.sync_dataplane(now, out)

    def _dataplane_services(self) -> dict[str, dict[str, float] | None]:
        """Per microservice, the instance shares its select group should render, or None
        when its flows stay under per-flow control."""
        out = {}
        for m in self.cfg.microservices:
            # the baselines (srr, ln) keep a controller decision per flow, as the paper
            # defines them; a policy says whether the switch may balance its short flows
            on = (self.core.strategy.dataplane
                  and self.core.flow_class(m.name)[0] == "short")
            out[m.name] = self.core.short_flow_shares(m.name) if on else None
        return out

    def sync_dataplane(self, now: float, out: Result | None = None) -> Result:
        """Bring every switch's select groups and data-plane rules to what the pools,
        health, policy and flow classes say now, and end transitions whose grace period is
        over; only what changed is sent."""
        out = out or Result()
        if not self.dp_mode:
            return out
        c = self.cfg.controller
        # connections to these may go on: their moved slots pass through the controller
        alive = {n for n in self.instances if self.core.healthy.get(n, True)}
        for name, shares in self._dataplane_services().items():
            table = self.slot_tables[name]
            before = table.table
            table.expire(now)
            moved = table.update(shares or {}, now, alive, c.idle_timeout_s or c.hard_timeout_s)
            if moved and before is not None and table.table is not None:
                out.metrics.append(("inc", "malb_dataplane_slots_moved_total", (name,),
                                    len(moved)))
            if before != table.table:
                counts = maglev.slot_counts(table.table or ())
                for inst in {*maglev.slot_counts(before or ()), *counts}:
                    out.metrics.append(("set", "malb_dataplane_slots", (name, inst),
                                        counts.get(inst, 0)))
                self.dp_last_change[name] = {
                    "time": now, "slots_moved": len(moved),
                    "slots_in_transition": len(table.transitions),
                    "share_moved": round(len(moved) / table.size, 4), "slots": counts}
                out.infos.append("data-plane table of %s: %d of %d slots moved (%s)" % (
                    name, len(moved), table.size,
                    ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                    or "no instance: per-flow control"))
        for dpid in sorted(self.switches):
            if not self.group_capable.get(dpid):
                continue
            installed = self.dp_installed.setdefault(dpid, {})
            for m in self.cfg.microservices:
                want = self.slot_tables[m.name].view()
                have = installed.get(m.name)
                if want == have:
                    continue
                try:
                    if want is None:
                        out.sends.append((dpid, self._dp_remove(dpid, m)))
                        del installed[m.name]
                    else:
                        out.sends.append((dpid, self._dp_install(dpid, m, want,
                                                                 first=have is None)))
                        installed[m.name] = want
                except LookupError as exc:     # no path from this switch to an instance
                    out.warnings.append(f"switch {dpid:016x}: {m.name}: {exc}")
        return out

    def _dp_install(self, dpid: int, m, view: tuple, first: bool) -> bytes:
        """The group (new, or its buckets replaced), and on first install the VIP rule and
        the reverse NAT rules. Buckets keep their positions, so only moved slots change."""

        def target_of(name: str) -> dataplane.Target:
            b, inst = self.backends[name], self.instances[name]
            return dataplane.Target(name, b.mac, b.ip, b.port, self.path.port_towards(dpid, inst),
                                    inst.switch_port if inst.dpid == dpid else None)

        packed: dict[object, bytes] = {}
        parts = []
        for bk in dataplane.buckets(view, m.protocol, m.port, target_of,
                                    ofwire.OFPP_CONTROLLER):
            one = packed.get(bk)
            if one is None:
                one = packed[bk] = ofwire.bucket(
                    b"".join(ofwire.action_set_field(k, v) for k, v in bk.set_fields) +
                    ofwire.action_output(bk.out_port, ofwire.OFPCML_NO_BUFFER),
                    watch_port=ofwire.OFPP_ANY if bk.watch_port is None else bk.watch_port)
            parts.append(one)
        buckets = b"".join(parts)
        gid = DP_GROUP_BASE + m.index
        commands = (ofwire.OFPGC_ADD, ofwire.OFPGC_MODIFY) if first else (ofwire.OFPGC_MODIFY,)
        # ADD then MODIFY: a group a previous controller left is replaced (ADD fails on it)
        buf = b"".join(ofwire.group_mod(self.xid(dpid), command, ofwire.OFPGT_SELECT, gid,
                                        buckets) for command in commands)
        if not first:
            return buf
        c = self.cfg.controller
        for inst in self.cfg.slots:
            if inst.microservice != m.name:
                continue
            for block in self.local_blocks.get(dpid, ()):
                match, fields = dataplane.reverse_rule(m.protocol, inst.ip, m.port, block,
                                                       c.vip_mac, m.vip, m.port)
                buf += ofwire.flow_mod(
                    self.xid(dpid), dp_cookie(DP_REVERSE, m.index), PRIO_DP_REVERSE, match,
                    b"".join(ofwire.action_set_field(k, v) for k, v in fields), goto=HOST_TABLE)
        buf += ofwire.flow_mod(self.xid(dpid), dp_cookie(DP_VIP, m.index), PRIO_DP_GROUP,
                               dataplane.vip_match(m.protocol, m.vip, m.port),
                               ofwire.action_group(gid))
        return buf

    def _dp_remove(self, dpid: int, m) -> bytes:
        """Back to per-flow control: the VIP rule first (new flows reach the controller),
        then the reverse rules and the group."""
        buf = b"".join(ofwire.flow_delete(self.xid(dpid), dp_cookie(kind, m.index),
                                          0xFFFFFFFFFFFFFFFF) for kind in (DP_VIP, DP_REVERSE))
        return buf + ofwire.group_mod(self.xid(dpid), ofwire.OFPGC_DELETE, ofwire.OFPGT_SELECT,
                                      DP_GROUP_BASE + m.index)

    # ================================================================ packet-in
    def packet_in(self, dpid: int, in_port: int, data: bytes, now: float,
                  cookie: int = 0) -> Result:
        """`cookie`: the rule's that sent the packet here (a flow's FIN watch, or 0)."""
        f = ofwire.parse_frame(data)
        if f is None or f.eth_type == ofwire.ETH_TYPE_LLDP:
            return Result()
        if cookie >> 48 == FIN_TAG and f.eth_type == ofwire.ETH_TYPE_IP:
            return self.path.fin(dpid, f, now)     # already sent on by the switch
        if f.eth_src != self.cfg.controller.vip_mac:
            self.mac_to_port.setdefault(dpid, {})[f.eth_src] = in_port
        if f.eth_type == ofwire.ETH_TYPE_ARP and f.arp_tpa in self.vips:
            out = Result()
            if f.arp_op == ofwire.ARP_REQUEST:
                out.kinds.append("arp_vip")
                vip_mac = self.cfg.controller.vip_mac
                out.sends.append((dpid, self._packet_out(dpid, ofwire.arp_frame(
                    ofwire.ARP_REPLY, vip_mac, f.arp_tpa, f.arp_sha, f.arp_spa,
                    eth_dst=f.eth_src), in_port)))
            elif f.arp_op == ofwire.ARP_REPLY and f.arp_spa in self.instance_ips:
                out.kinds.append("health")
                self._health_answer(out, ("arp", f.arp_spa), True, "ARP reply", now)
            return out
        if f.ip_dst in self.vips and f.ip_proto in (ofwire.IPPROTO_TCP, ofwire.IPPROTO_UDP):
            if (f.ip_proto == ofwire.IPPROTO_TCP and f.ip_src in self.instance_ips
                    and PROBE_PORTS[0] <= f.dst_port <= PROBE_PORTS[1]):
                out = Result(kinds=["health"])
                self._tcp_probe_answer(out, dpid, in_port, f, now)
                return out
            out = self.path.vip_packet(dpid, in_port, data, f, now)
            out.latency = True
            d = out.decision
            if d is not None:
                self.decisions.append({
                    "time": d.time, "microservice": d.microservice,
                    "client": f"{f.ip_src}:{f.src_port}", "switch": dpid,
                    "instance": d.instance, "server": d.server, "policy": d.policy,
                    "algorithm": d.algorithm, "reason": d.reason, "scores": d.scores,
                    "weights": list(d.weights) if d.weights else None})
            return out
        if f.ip_dst in self.vips:
            return Result()  # other IP protocols to a VIP: nothing serves them
        if f.ip_src in self.instance_ips and f.ip_proto in (ofwire.IPPROTO_TCP,
                                                             ofwire.IPPROTO_UDP):
            out = self.path.orphan(dpid, data, f, now, self.switches.__contains__)
            if out.handled:
                return out
        # broadcasts (ARP, neighbour discovery) always come here; unicast only for hosts the
        # configuration does not know
        out = Result(kinds=["l2_broadcast" if int(f.eth_dst[:2], 16) & 1 else "l2"])
        self._l2_forward(out, dpid, in_port, data, f)
        return out

    def _packet_out(self, dpid: int, frame: bytes, out_port: int) -> bytes:
        """A frame the controller made, out of one port of the switch."""
        return ofwire.packet_out(self.xid(dpid), ofwire.OFPP_CONTROLLER,
                                 ofwire.action_output(out_port), frame)

    def _l2_forward(self, out: Result, dpid: int, in_port: int, data: bytes, f) -> None:
        out_port = self.mac_to_port.get(dpid, {}).get(f.eth_dst)
        buf = b""
        if out_port is not None and out_port != in_port:
            buf = ofwire.flow_mod(self.xid(dpid), 0, PRIO_L2, {"eth_dst": f.eth_dst},
                                  ofwire.action_output(out_port), idle_timeout=L2_IDLE_TIMEOUT)
        elif out_port == in_port:
            return
        buf += ofwire.packet_out(self.xid(dpid), in_port, ofwire.action_output(
            out_port if out_port is not None else ofwire.OFPP_FLOOD), data)
        out.sends.append((dpid, buf))

    # ================================================================ NAT flows
    def flow_removed(self, dpid: int, cookie: int, duration_s: float, byte_count: int,
                     packet_count: int, reason: int, now: float) -> Result:
        out = Result()
        rec = self.flows.on_removed(cookie, duration_s, byte_count, packet_count,
                                    REMOVED_REASONS.get(reason, "other"), now)
        if rec is not None and rec.fin_watch and rec.ended == now and len(rec.removed) == 1 \
                and not self.core.flow_idle(rec.key, now) and rec.end_reason == "idle_timeout":
            # the pair's first rule gone, and not a short flow that lost its FIN (a SYN
            # flood's, which ends here): a long one computing in silence goes on until its
            # FIN, for the profiler too
            self.flows.go_dormant(rec)
        if rec is not None and rec.fin_watch and rec.ended == now and \
                rec.dpid in self.switches:
            # the pair is going: its FIN watch too (a resume installs all three again)
            out.sends.append((rec.dpid, ofwire.flow_delete(
                self.xid(rec.dpid), fin_cookie(rec.flow_id), 0xFFFFFFFFFFFFFFFF)))
        return out

    def _stats_requests(self, dpid: int, flow_slice: int = 0, slices: int = 1) -> bytes:
        """Port statistics (with slice 0) and one slice of the NAT flow statistics."""
        buf = ofwire.flow_stats_request(self.xid(dpid), COOKIE_BASE | flow_slice,
                                        COOKIE_MASK | (slices - 1))
        if flow_slice == 0:
            buf += ofwire.port_stats_request(self.xid(dpid))
        return buf

    def poll_stats(self, now: float) -> Result:
        """One step of the statistics loop: one slice to every switch; out.next_in_s says
        when the next step is due. A cycle covers every rule once, in one period, or longer
        when the rules exceed the statistics budget. The number of slices follows the number
        of rules at every step: it grows at once (a burst of new flows must not make one
        huge reply) and shrinks only at a cycle's end."""
        out = Result()
        period = self.cfg.controller.monitoring_period_s
        rules = 2 * self.flows.active_count()
        need = slices_for(rules)
        if need > self.slices or (need < self.slices and self.flow_slice == 0):
            self.slices, self.flow_slice = need, 0
        if self.flow_slice == 0:
            self.cycle = max(period, rules / STATS_RULES_PER_S)
            out.metrics.append(("set", "malb_flow_stats_cycle_seconds", (), self.cycle))
        for dpid in sorted(self.switches):
            out.sends.append((dpid, self._stats_requests(dpid, self.flow_slice, self.slices)))
        self.flow_slice = (self.flow_slice + 1) % self.slices
        out.next_in_s = self.cycle / self.slices
        return out

    def flow_stats(self, dpid: int, entries: list[FlowStat], now: float) -> Result:
        out = Result()
        for st in entries:
            if self.flows.on_stats(st.cookie, st.age, st.byte_count, st.packet_count,
                                   now) is None:
                self._adopt_rule(out, dpid, st, now)
        out.metrics.append(("set", "malb_active_flows", (), self.flows.active_count()))
        return out

    def _adopt_rule(self, out: Result, dpid: int, st: FlowStat, now: float) -> None:
        """A NAT rule this process did not install (a previous controller did): rebuild its
        flow record from the cookie and the match, so it is counted and reported."""
        parsed = parse_cookie(st.cookie)
        if parsed is None:
            return
        direction, ms_idx, inst_idx, _seq = parsed
        ms, inst = self.ms_by_index.get(ms_idx), self.instance_by_index.get(inst_idx)
        if ms is None or inst is None:
            return
        m = st.match
        l4 = ms.protocol
        if direction == DIR_FORWARD:
            # the forward rule does not say where the client hangs; the configuration does
            client_ip, client_port = m.get("ipv4_src"), m.get(f"{l4}_src")
            in_port = self.client_ports.get((dpid, client_ip), 0)
        else:
            client_ip, client_port = m.get("ipv4_dst"), m.get(f"{l4}_dst")
            in_port = st.out_ports[-1] if st.out_ports else 0
        fid = flow_id_of(st.cookie)
        rec = self.flows.flows.get(fid)
        if rec is None:
            rec = FlowRecord(flow_id=fid, dpid=dpid, protocol=l4, client_ip=client_ip,
                             client_port=client_port, client_in_port=in_port, vip=ms.vip,
                             vport=ms.port, microservice=ms.name, instance=inst.name,
                             server=inst.server, created=now - st.age, last_active=now,
                             backend_ip=inst.ip, backend_port=ms.port)
            self.flows.add(rec, new=False)
            out.infos.append(f"adopted NAT flow {client_ip}:{client_port} -> {inst.name} left "
                             f"by a previous controller")
        elif direction != DIR_FORWARD and not rec.client_in_port:
            rec.client_in_port = in_port
        self.flows.on_stats(st.cookie, st.age, st.byte_count, st.packet_count, now)

    # ================================================================ ports
    def port_status(self, dpid: int, port_no: int, reason: int, state: int,
                    now: float) -> Result:
        """An instance's port deleted or its link down (the container died): out of its pool
        at once, not two or three probe intervals later; the probes bring it back."""
        out = Result()
        gone = reason == ofwire.OFPPR_DELETE or bool(state & ofwire.OFPPS_LINK_DOWN)
        owner = self.port_owner.get((dpid, port_no))
        if not gone or owner is None or owner.name not in self.health.state:
            return out
        detail = "switch port deleted" if reason == ofwire.OFPPR_DELETE else "switch link down"
        change = self.health.link_down(owner.name, now, detail)
        if change:
            self._apply_health(out, *change, now)
        return out

    def port_stats(self, dpid: int, entries: list[PortStat], now: float) -> Result:
        """Rates per port since the last reply; the instances' ports give each server's
        network utilisation to the policy core."""
        per_server: dict[str, list[float]] = {}
        for st in entries:
            key = (dpid, st.port_no)
            prev = self.port_prev.get(key)
            self.port_prev[key] = (st.rx_bytes, st.tx_bytes, now)
            if prev is None or now - prev[2] <= 0:
                continue
            dt = now - prev[2]
            rx = max(0, st.rx_bytes - prev[0]) / dt
            tx = max(0, st.tx_bytes - prev[1]) / dt
            owner = self.port_owner.get(key)
            self.port_rates[key] = {"dpid": dpid, "port": st.port_no, "time": now,
                                    "rx_bytes_per_s": round(rx, 1), "tx_bytes_per_s": round(tx, 1),
                                    "instance": owner.name if owner else None,
                                    "server": owner.server if owner else None}
            if owner is not None:
                both = per_server.setdefault(owner.server, [0.0, 0.0])
                both[0] += rx
                both[1] += tx
        for server, (rx, tx) in per_server.items():
            capacity = self.cfg.server(server).network_mbit * 1e6 / 8
            self.core.update_network(server, network_percent(rx, tx, capacity), now)
        return Result()

    # ================================================================ profiler
    def profiler_report(self, now: float) -> Iterator[dict]:
        """The bodies to POST to the profiler's /flows, in order (flow records in chunks;
        ports and pairs with the first), each built when the shell asks for it, so the JSON
        work stays bounded between its posts (which yield to the event loop). Then
        profiler_pairs_sent() once the first is accepted, and profiler_answer() or
        profiler_failed()."""
        report = self.flows.take_report(now)
        pairs = self.flows.take_pairs()
        self._report = (report, pairs)
        idle = self.cfg.controller.idle_timeout_s

        def bodies() -> Iterator[dict]:
            for start in range(0, max(1, len(report)), REPORT_CHUNK):
                body = {"source": "malb-controller", "time": now,
                        "flows": [r.as_record(idle, self.flows.epoch, now)
                                  for r in report[start:start + REPORT_CHUNK]]}
                if start == 0:   # ports and pairs once per period, with the first chunk
                    body["ports"] = list(self.port_rates.values())
                    body["pairs"] = self._pairs_report(pairs, now)
                yield body
        return bodies()

    def profiler_pairs_sent(self, now: float) -> None:
        """The first chunk arrived: its pairs count as reported, new ones from now on."""
        self._report = (self._report[0], ({}, {}))
        self._pairs_since = now

    def _pairs_report(self, pairs: tuple[dict, dict], now: float) -> dict:
        """Who sent how much to which instance since the last report: the edges of the
        microservice communication graph. A sender is an instance (a microservice calling
        another through its VIP) or a client host."""
        sent, started = pairs
        rows = []
        for (client_ip, instance) in sorted(set(sent) | set(started)):
            caller = self.instance_ips.get(client_ip)
            rows.append({"src": caller.name if caller else
                         self.client_names.get(client_ip, client_ip),
                         "dst": instance, "bytes": sent.get((client_ip, instance), 0),
                         "flows": started.get((client_ip, instance), 0)})
        return {"interval_s": round(now - self._pairs_since, 3), "edges": rows}

    def profiler_failed(self, error: str, now: float) -> Result:
        """The exchange failed: the records and pairs go out again next period; the last
        weights stay (equal weights once they are stale)."""
        out = Result()
        report, pairs = self._report
        self._report = ([], ({}, {}))
        self.flows.report_failed(report)
        self.flows.restore_pairs(pairs)
        if self.profiler_state["reachable"] is not False:
            out.warnings.append(f"profiler unreachable ({error}): keeping the last weights; "
                                f"equal weights after "
                                f"{self.cfg.controller.weights_stale_after_s:.0f} s")
        self.profiler_state.update(reachable=False, last_error=error)
        return out

    def profiler_answer(self, profiles, servers, now: float) -> Result:
        """The profiler's /profiles and /servers. An answer that is not two JSON objects
        counts as a failed exchange; one with weights the policy core would refuse is
        rejected whole (nothing changes) with a warning."""
        if not isinstance(profiles, dict) or not isinstance(servers, dict):
            return self.profiler_failed("profiler answered something other than JSON objects",
                                        now)
        out = Result()
        self._report = ([], ({}, {}))
        if self.profiler_state["reachable"] is False:
            out.infos.append("profiler reachable again")
        self.profiler_state.update(reachable=True, last_ok=now, last_error=None)
        self._apply_profiles(out, profiles, servers, now)
        out.next_in_s = next_exchange_in(servers.get("time"), now,
                                         self.cfg.controller.monitoring_period_s)
        return out

    def _apply_profiles(self, out: Result, profiles: dict, servers: dict, now: float) -> None:
        out.warnings.extend(apply_profiles(self.core, profiles, servers, now))

    # ================================================================ probes (GET /probes)
    def probing(self) -> bool:
        """Whether the agents' /probes should be polled: the current policy reads them
        (the shell asks every round, so a policy set over REST starts or stops it)."""
        return bool(self.core.strategy.uses_probes)

    def probe_answer(self, server: str, body, now: float) -> Result:
        """An agent's GET /probes answer, received at `now`: each instance's reading goes
        to the policy core at now - its age_s (the agent's clock need not agree with ours).
        Instances the agent could not read, or that are in no pool, keep their last probe;
        malformed parts are warnings (at most one line a minute per agent), the rest is
        applied."""
        out = Result()
        agent = self.probe_agents.get(server)
        if agent is None:
            out.warnings.append(f"/probes answer from an unknown server {server!r:.40}")
            return out
        instances = body.get("instances") if isinstance(body, dict) else None
        if not isinstance(instances, dict):
            return self.probe_failed(server, "its /probes answer has no 'instances' object",
                                     now, kind="malformed")
        if agent["last_error"] is not None:
            out.infos.append(f"agent {server}: /probes answers again")
        agent.update(last_ok=now, last_error=None)
        out.metrics.append(("inc", "malb_probe_answers_total", (server,), 1))
        applied, failed, bad = 0, [], []
        for name, entry in instances.items():
            where = f"instances.{name!s:.40}"
            inst = self.instances.get(name)
            if inst is None or inst.server != server:
                bad.append(f"{where}: not an instance of {server}")
                continue
            if not isinstance(entry, dict):
                bad.append(f"{where}: expected an object")
                continue
            if entry.get("error") is not None:      # the agent could not read it
                failed.append(f"{name}: {str(entry['error'])[:120]}")
                continue
            if name not in self.core.healthy:       # in no pool (yet): nothing reads it
                continue
            values = {}
            for key, optional in (("in_flight", False), ("p50_ms", True), ("p99_ms", True),
                                  ("age_s", False)):
                v = entry.get(key)
                if not (v is None and optional) and not _finite_at_least_0(v):
                    bad.append(f"{where}.{key}: expected a finite number >= 0"
                               f"{' or null' if optional else ''}, got {v!r:.40}")
                    break
                values[key] = v
            else:
                try:
                    self.core.update_probe(
                        name, values["in_flight"],
                        None if values["p50_ms"] is None else values["p50_ms"] / 1000.0,
                        None if values["p99_ms"] is None else values["p99_ms"] / 1000.0,
                        now - values["age_s"])
                except (KeyError, ValueError) as exc:
                    bad.append(f"{where}: {exc}")
                    continue
                applied += 1
        if applied:
            out.metrics.append(("inc", "malb_probe_readings_total", (server,), applied))
        if failed:
            out.metrics.append(("inc", "malb_probe_failures_total", (server, "instance"),
                                len(failed)))
            self._probe_log(out, server, f"agent {server}: could not read "
                                         f"{'; '.join(failed)}", now)
        if bad:
            out.metrics.append(("inc", "malb_probe_failures_total", (server, "malformed"),
                                len(bad)))
            more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
            self._probe_log(out, server, f"agent {server}: /probes answer: "
                                         f"{'; '.join(bad[:3])}{more}; the rest applied", now)
        return out

    def probe_failed(self, server: str, error: str, now: float, kind: str = "poll") -> Result:
        """An agent's GET /probes failed (kind poll) or answered no instances object
        (malformed): its instances keep their last probes, which age."""
        out = Result()
        agent = self.probe_agents.get(server)
        if agent is None:
            return out
        agent["last_error"] = error
        out.metrics.append(("inc", "malb_probe_failures_total", (server, kind), 1))
        self._probe_log(out, server, f"agent {server}: /probes failed: {error}", now)
        return out

    def _probe_log(self, out: Result, server: str, text: str, now: float) -> None:
        """A warning about an agent's probes, at most one per PROBE_LOG_EVERY_S per agent
        (they come at every poll while the trouble lasts)."""
        agent = self.probe_agents[server]
        if agent["logged"] is not None and now - agent["logged"] < PROBE_LOG_EVERY_S:
            agent["unlogged"] += 1
            return
        if agent["unlogged"]:
            text += (f" ({agent['unlogged']} more such problems with its probes in the last "
                     f"{now - agent['logged']:.0f} s were not logged)")
        out.warnings.append(text)
        agent.update(logged=now, unlogged=0)

    def probe_status(self, now: float) -> dict:
        return {"polling": self.probing(),
                "period_s": self.cfg.controller.probe_period_s,
                "agents": {name: {"url": a["url"],
                                  "last_answer_age_s": None if a["last_ok"] is None else
                                  round(now - a["last_ok"], 3),
                                  "last_error": a["last_error"]}
                           for name, a in self.probe_agents.items()}}

    # ================================================================ health
    def probe_health(self, now: float) -> Result:
        """One round of probes (the health loop's first step): a TCP SYN from the VIP to
        every pooled instance of a TCP service, else an ARP request. An instance whose last
        probe is still out gets none: that one waits for health_marker's verdict."""
        out = Result()
        h = self.cfg.controller.health
        vip_mac = self.cfg.controller.vip_mac
        for inst in [self.instances[b.name] for pool in self.core.pools.values()
                     for b in pool]:
            if inst.dpid not in self.switches or self.health.outstanding_for(inst.name):
                continue
            ms = self.cfg.microservice(inst.microservice)
            if h.method == "tcp" and ms.protocol == "tcp":
                port = self.next_probe_port
                token = ("tcp", inst.ip, port)
                frame = ofwire.tcp_frame(inst.mac, vip_mac, ms.vip, inst.ip, port, ms.port,
                                         self.rng.getrandbits(32), flags=ofwire.TCP_SYN,
                                         window=1024)
                self.next_probe_port = PROBE_PORTS[0] + (port + 1 - PROBE_PORTS[0]) % \
                    (PROBE_PORTS[1] - PROBE_PORTS[0] + 1)
            else:
                token = ("arp", inst.ip)
                frame = ofwire.arp_frame(ofwire.ARP_REQUEST, vip_mac, ms.vip,
                                         "00:00:00:00:00:00", inst.ip,
                                         eth_dst="ff:ff:ff:ff:ff:ff")
            out.sends.append((inst.dpid, self._packet_out(inst.dpid, frame, inst.switch_port)))
            change = self.health.sent(token, inst.name, now)
            if change:
                self._apply_health(out, *change, now)
        return out

    def health_marker(self, now: float) -> Result:
        """The health loop's second step: an echo request to every switch. Probes are judged
        when its reply comes back (echo_reply), not by the controller's clock alone: the
        reply queues behind every packet-in the switch sent before it, probe answers among
        them, so a controller that falls behind a flood of packet-ins does not count the
        answers still waiting in its queue as missing. A switch whose last marker is still
        out gets none (at most one per switch is kept)."""
        out = Result()
        waiting = {dpid for dpid, _ in self.health_markers}
        for dpid in sorted(self.switches - waiting):
            xid = self.xid(dpid)
            self.health_markers[(dpid, xid)] = now
            out.sends.append((dpid, ofwire.echo_request(xid, b"malb-health")))
        return out

    def echo_reply(self, dpid: int, xid: int, now: float) -> Result:
        """A health marker came back: the probes on this switch that were out longer than
        the timeout when it was sent, and are still unanswered, are failures."""
        out = Result()
        sent = self.health_markers.pop((dpid, xid), None)
        if sent is None:          # not ours (Ryu's keep-alive) or its switch went away
            return out
        self.channel_lag[dpid] = now - sent
        out.metrics.append(("set", "malb_switch_channel_lag_seconds", (f"{dpid:016x}",),
                            now - sent))
        for change in self.health.expire(sent, self._instances_on(dpid)):
            self._apply_health(out, *change, now)
        return out

    def _instances_on(self, dpid: int) -> set[str]:
        return {name for name, inst in self.instances.items() if inst.dpid == dpid}

    def health_result(self, instance: str, ok: bool, detail: str, now: float) -> Result:
        """A probe's result known by other means than a probe answer."""
        out = Result()
        change = self.health.record(instance, ok, now, detail)
        if change:
            self._apply_health(out, *change, now)
        return out

    def _tcp_probe_answer(self, out: Result, dpid: int, in_port: int, f, now: float) -> None:
        ok = bool(f.tcp_flags & ofwire.TCP_SYN) and bool(f.tcp_flags & ofwire.TCP_ACK)
        refused = bool(f.tcp_flags & ofwire.TCP_RST)
        if ok:   # close the half-open connection
            out.sends.append((dpid, self.path.tcp_reset(dpid, in_port, f)))
        if ok or refused:
            self._health_answer(out, ("tcp", f.ip_src, f.dst_port), ok,
                                "TCP SYN-ACK" if ok else "TCP reset (port closed)", now)

    def _health_answer(self, out: Result, token, ok: bool, detail: str, now: float) -> None:
        change = self.health.answered(token, ok, now, detail)
        if change:
            self._apply_health(out, *change, now)

    def _apply_health(self, out: Result, instance: str, healthy: bool, now: float) -> None:
        self.core.set_health(instance, healthy)
        out.metrics.append(("set", "malb_instance_healthy", (instance,), 1 if healthy else 0))
        text = "instance %s is %s (%s)" % (instance,
                                           "healthy again" if healthy else "DOWN: no new flows",
                                           self.health.state[instance].last_result)
        (out.infos if healthy else out.warnings).append(text)
        self.sync_dataplane(now, out)

    # ================================================================ pools at run time
    def add_instance(self, name: str, now: float) -> Result:
        """A slot's instance joins its pool: unhealthy until its probe answers."""
        if name not in self.instances:
            raise KeyError(name)
        out = Result()
        self.core.add_backend(self.backends[name])
        self.health.add(name)
        out.metrics.append(("set", "malb_instance_healthy", (name,), 0))
        out.infos.append(f"instance {name} added to the pool of "
                         f"{self.instances[name].microservice} (healthy once it answers)")
        return self.sync_dataplane(now, out)

    def set_draining(self, name: str, draining: bool, now: float) -> Result:
        self.core.set_draining(name, draining)
        out = Result(infos=[f"instance {name} " + ("draining: no new flows" if draining
                                                   else "takes new flows again")])
        return self.sync_dataplane(now, out)

    def remove_instance(self, name: str, now: float) -> Result:
        self.core.remove_backend(name)
        self.health.remove(name)
        out = Result(infos=[f"instance {name} removed from the pool of "
                            f"{self.instances[name].microservice}"])
        return self.sync_dataplane(now, out)

    def set_policy(self, policy: str, now: float) -> Result:
        self.core.set_policy(policy)
        return self.sync_dataplane(now)

    # ================================================================ views
    def active_flows_of(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rec in self.flows.flows.values():
            if rec.ended is None:
                counts[rec.instance] = counts.get(rec.instance, 0) + 1
        return counts

    def instances_view(self) -> dict:
        counts = self.active_flows_of()
        out = {}
        for pool in self.core.pools.values():
            for b in pool:
                out[b.name] = {"microservice": b.microservice, "server": b.server,
                               "healthy": self.core.healthy[b.name],
                               "draining": b.name in self.core.draining,
                               "active_flows": counts.get(b.name, 0),
                               "health": self.health.state[b.name].last_result
                               if b.name in self.health.state else None}
        # instances out of every pool that still carry flows (removed while draining)
        for name, n in counts.items():
            out.setdefault(name, {"microservice": self.instances[name].microservice,
                                  "server": self.instances[name].server, "healthy": None,
                                  "draining": None, "active_flows": n, "health": None,
                                  "in_pool": False})
        return out

    def dataplane_status(self) -> dict:
        c = self.cfg.controller.dataplane
        out = {"short_flows": c.short_flows, "table_size": c.table_size, "microservices": {}}
        if not self.dp_mode:
            return out
        for name, table in self.slot_tables.items():
            out["microservices"][name] = {
                "slots": maglev.slot_counts(table.table or ()),
                "slots_in_transition": len(table.transitions),
                "switches": sorted(f"{d:016x}" for d, inst in self.dp_installed.items()
                                   if name in inst),
                "last_change": self.dp_last_change.get(name)}
        out["switches_without_select_groups"] = sorted(
            f"{d:016x}" for d, ok in self.group_capable.items() if not ok)
        return out

    def status(self) -> dict:
        st = self.core.status()
        health = self.health.status()
        for s in st["servers"].values():
            for name, inst in s["instances"].items():
                inst["health"] = health[name]["last_result"]
        st["profiler"] = dict(self.profiler_state)
        st["probes"] = self.probe_status(self.core.clock())
        st["switches"] = sorted(f"{d:016x}" for d in self.switches)
        st["active_flows"] = self.flows.active_count()
        st["monitoring_period_s"] = self.cfg.controller.monitoring_period_s
        st["dataplane"] = self.dataplane_status()
        st["channel_lag_s"] = {f"{d:016x}": round(lag, 4)
                               for d, lag in sorted(self.channel_lag.items())}
        st["packet_in_limit_per_s"] = {f"{d:016x}": self.cfg.controller.packet_in_limit_per_s
                                       if d in self.metered else None
                                       for d in sorted(self.switches)}
        return st


def _finite_at_least_0(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf


def next_exchange_in(step_time, now: float, period: float) -> float | None:
    """Seconds until the next exchange with the profiler: PROFILER_READY_S after one of
    its steps (every `period` from `step_time`, the time its answer carries), and at least
    a quarter of a period from now. None when the answer carries no usable time (the loop
    then waits a period)."""
    if isinstance(step_time, bool) or not isinstance(step_time, (int, float)) or \
            not math.isfinite(step_time):
        return None
    delay = (step_time + PROFILER_READY_S - now) % period
    return delay + period if delay < period / 4 else delay
