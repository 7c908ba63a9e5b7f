"""MALB: microservice-aware load balancing, as a Ryu application (OpenFlow 1.3).

    ryu-manager ryu_apps/malb.py                       # configs/paper.yaml or $MALB_CONFIG
    MALB_POLICY=srr ryu-manager ryu_apps/malb.py
    ryu-manager --user-flags ryu_apps/flags.py ryu_apps/malb.py --malb-config my.yaml

What it does (docs/controller.md):
- answers ARP for the virtual IPs of the microservices;
- on the first packet of a new TCP/UDP flow to a VIP:port, asks the policy core
  (ryu_apps/policy.py) for an instance, installs a NAT rule pair on the client's edge switch
  (client->VIP rewritten to the instance, instance->client rewritten back to the VIP), then
  sends that first packet on, rewritten: no packet is lost, and later packets of the flow
  match the rules;
- forwards everything else as a learning L2 switch, over one or several switches;
- every monitoring period polls flow and port statistics, pushes flow records and port
  utilization to the profiler and pulls weights, flow classes and server loads from it;
- probes instances through the data plane (TCP SYN or ARP from the VIP) and takes unhealthy
  ones out of the pool;
- serves REST and Prometheus metrics (ryu_apps/rest.py).

This module is the thin shell: decisions, flow bookkeeping and health state live in plain
Python modules beside it.
"""
from __future__ import annotations

import gc
import os
import random
import sys
import time
from collections import deque
from typing import NoReturn

from ryu import cfg
from oslo_config.cfg import NoSuchOptError
from ryu.app.wsgi import WSGIApplication
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, \
    set_ev_cls
from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3

from common.config import DATAPLANE_POLICIES, POLICIES, ConfigError, active_flow_refresh_s, \
    check_deployable, load_config
from common.httpjson import HttpError, get_json, post_json
from common.metrics import Registry
from common.netuse import network_percent
from ryu_apps.flowpath import FlowPath, Result
from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FlowRecord, FlowTable, parse_cookie, \
    flow_id_of
from ryu_apps import dataplane, listeners, maglev, ofwire
from ryu_apps.health import HealthTracker
from ryu_apps.policy import backends_of, core_from_config
from ryu_apps.profiles import apply_profiles

CONF = cfg.CONF
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
L2_IDLE_TIMEOUT = 300
CHOOSE_BUCKETS = (0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005)
LATENCY_BUCKETS = (0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                   0.1, 0.5)


def _conf(name: str):
    try:
        return getattr(CONF, name)
    except NoSuchOptError:  # ryu_apps/flags.py not loaded
        return None


def _exit(message: str) -> NoReturn:
    """One clear line on stderr and exit code 2 (a bad configuration, as every other entry
    point does), not a traceback from inside ryu-manager."""
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)


class MalbController(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        try:
            self.cfg = load_config(_conf("malb_config") or None)
            check_deployable(self.cfg)
        except ConfigError as exc:
            _exit(f"malb: bad configuration: {exc}")
        c = self.cfg.controller
        # the shared token (security.token or $MALB_TOKEN): REST writes need it, and the
        # flow reports to the profiler carry it
        self.token = self.cfg.security.token
        policy = _conf("malb_policy") or os.environ.get("MALB_POLICY") or c.policy
        if policy not in POLICIES:
            _exit(f"malb: policy {policy!r} (from --malb-policy, MALB_POLICY or "
                  f"controller.policy) is not one of {', '.join(POLICIES)}")
        self._listen_defaults()
        # both listening sockets now, without SO_REUSEPORT: a second controller on the same
        # ports stops here instead of sharing them (ryu_apps/listeners.py)
        ports = {"REST API (controller.rest_host:rest_port)": (CONF.wsapi_host,
                                                               CONF.wsapi_port)}
        if not (_conf("ctl_privkey") and _conf("ctl_cert")):    # Ryu's TLS listens elsewhere
            ports["OpenFlow (controller.ofp_port)"] = (_conf("ofp_listen_host") or "0.0.0.0",
                                                       CONF.ofp_tcp_listen_port)
        try:
            listeners.reserve(ports)
        except listeners.PortInUse as exc:
            _exit(f"malb: cannot listen: {exc}")

        # ---- plain-Python cores. Every slot (a microservice on a server) is known: an
        # instance can join a pool at run time (a placement's move, REST).
        self.instances = {i.name: i for i in self.cfg.slots}
        self.backends = backends_of(self.cfg)
        self.core = core_from_config(self.cfg, policy, self.backends)
        self.flows = FlowTable(idle_timeout=c.idle_timeout_s,
                               threshold_s=self.cfg.profiler.flow_threshold_s,
                               refresh_s=active_flow_refresh_s(self.cfg))
        self.health = HealthTracker([i.name for i in self.cfg.instances],
                                    c.health.unhealthy_after, c.health.healthy_after,
                                    c.health.timeout_s)
        # data-plane mode: one Maglev slot table per microservice, shared by every switch;
        # per switch, whether it has select groups and the table each group renders now
        self.dp_mode = c.dataplane.short_flows == "switch"
        self.slot_tables = {m.name: dataplane.SlotTable(c.dataplane.table_size)
                            for m in self.cfg.microservices}
        self.group_capable: dict[int, bool] = {}
        self.dp_installed: dict[int, dict[str, tuple]] = {}   # dpid -> ms -> view
        self.dp_last_change: dict[str, dict] = {}

        # ---- lookups derived from the configuration
        self.vips = {m.vip for m in self.cfg.microservices}
        self.ms_index = {m.name: m.index for m in self.cfg.microservices}
        self.ms_by_index = {m.index: m for m in self.cfg.microservices}
        self.instance_by_index = {i.slot: i for i in self.cfg.slots}
        self.instance_ips = {i.ip: i for i in self.cfg.slots}
        self.port_owner = {(i.dpid, i.switch_port): i for i in self.cfg.slots}
        self.client_names = {c.ip: c.name for c in self.cfg.testbed.clients}
        self.client_dpids = {c.dpid for c in self.cfg.testbed.clients}
        self.metered: set[int] = set()            # switches with the packet-in meter
        self.client_ports = {(c.dpid, c.ip): c.switch_port for c in self.cfg.testbed.clients}
        # every host the configuration knows: MAC -> (its switch, its port there)
        self.host_at = {h.mac: (h.dpid, h.switch_port)
                        for h in (*self.cfg.slots, *self.cfg.testbed.clients)}
        # per switch, the address blocks of the hosts on it: 10.0.<server>.0/24 for its
        # servers' instances, 10.0.200.0/24 where the clients are
        self.local_blocks: dict[int, list[str]] = {}
        for srv in self.cfg.servers:
            dpid = next(s.dpid for s in self.cfg.testbed.switches if s.name == srv.switch)
            self.local_blocks.setdefault(dpid, []).append(f"10.0.{srv.index}.0")
        for dpid in self.client_dpids:
            self.local_blocks.setdefault(dpid, []).append("10.0.200.0")

        # ---- switch state
        self.datapaths = {}
        # the new-flow path: plain Python, messages out (ryu_apps/flowpath.py)
        self.path = FlowPath(self.cfg, self.core, self.flows, self.backends, xid=self._xid,
                             timer=time.perf_counter)
        self.next_hop = self.path.next_hop
        self.mac_to_port = self.path.mac_to_port
        self.port_prev: dict[tuple[int, int], tuple[int, int, float]] = {}
        self.port_rates: dict[tuple[int, int], dict] = {}
        self.decisions = deque(maxlen=2000)
        self._pairs_since = time.time()     # the traffic in take_pairs() counts from here
        self.profiler_state = {"url": self.cfg.profiler.url, "reachable": None,
                               "last_ok": None, "last_error": None}

        # ---- metrics
        self.metrics = Registry()
        self.m_decisions = self.metrics.counter(
            "malb_decisions_total", "Load-balancing decisions.",
            ("microservice", "server", "policy", "algorithm"))
        self.m_packet_in = self.metrics.counter("malb_packet_in_total", "Packet-in messages.",
                                                ("kind",))
        self.m_latency = self.metrics.histogram(
            "malb_decision_latency_seconds",
            "From packet-in to the flow rules and packet-out being sent.", (), LATENCY_BUCKETS)
        self.m_choose = self.metrics.histogram(
            "malb_choose_seconds", "The policy core's decision alone (choose()).",
            ("algorithm",), CHOOSE_BUCKETS)
        self.m_no_backend = self.metrics.counter(
            "malb_no_backend_total", "New flows dropped: no healthy instance.", ("microservice",))
        self.m_profiler = self.metrics.counter(
            "malb_profiler_requests_total", "Calls to the profiler.", ("call", "result"))
        self.m_health = self.metrics.gauge("malb_instance_healthy",
                                           "1 when the instance passes its health probe.",
                                           ("instance",))
        self.m_flows = self.metrics.gauge("malb_active_flows",
                                          "NAT flows with rules on a switch.", ())
        self.m_stats_cycle = self.metrics.gauge(
            "malb_flow_stats_cycle_seconds",
            "Time to poll every NAT rule once (the period, or longer above the budget).", ())
        self.m_dp_slots = self.metrics.gauge(
            "malb_dataplane_slots", "Maglev slots of an instance in its select group.",
            ("microservice", "instance"))
        self.m_dp_moved = self.metrics.counter(
            "malb_dataplane_slots_moved_total", "Select-group slots given to another instance.",
            ("microservice",))

        from ryu_apps.rest import register_rest
        register_rest(kwargs["wsgi"], self)
        self.logger.info("MALB: %d microservices, %d instances on %d servers, policy %s, "
                         "config %s", len(self.core.pools), len(self.instances), len(self.cfg.servers),
                         policy, self.cfg.source)
        self.threads = [hub.spawn(self._monitor_loop), hub.spawn(self._profiler_loop)]
        # Ryu and this app allocate a few hundred thousand long-lived objects at start-up;
        # frozen, they stay out of every later full collection (a 70 ms pause otherwise).
        gc.freeze()
        if c.health.method != "none":
            self.threads.append(hub.spawn(self._health_loop))

    def _listen_defaults(self) -> None:
        """REST on the configured address (loopback by default) unless --wsapi-host/-port
        say otherwise; OpenFlow on the configured port unless --ofp-tcp-listen-port does."""
        c = self.cfg.controller
        given = " ".join(sys.argv)
        if "--wsapi-host" not in given:
            CONF.set_override("wsapi_host", c.rest_host)
        if "--wsapi-port" not in given:
            CONF.set_override("wsapi_port", c.rest_port)
        if "--ofp-tcp-listen-port" not in given:
            CONF.set_override("ofp_tcp_listen_port", c.ofp_port)

    # ================================================================ switches
    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        dp = ev.datapath
        if ev.state == MAIN_DISPATCHER:
            self.datapaths[dp.id] = dp
        elif ev.state == DEAD_DISPATCHER and self.datapaths.get(dp.id) is dp:
            del self.datapaths[dp.id]
            self.logger.warning("switch %016x disconnected", dp.id)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev):
        """Base rules on every (re)connection, then the NAT rules of flows still active.
        Existing rules are never wiped: after a controller restart, connections keep
        working on the rules they have."""
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        # known from now on, not only from MAIN_DISPATCHER: the NAT rules restored below take
        # their transaction ids through self.datapaths (FlowPath's xid)
        self.datapaths[dp.id] = dp
        self.mac_to_port.setdefault(dp.id, {})
        to_controller = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        self._table_miss(dp, meter=None)
        self._vip_rules(dp, meter=None)
        self.metered.discard(dp.id)
        if self.cfg.controller.packet_in_limit_per_s:
            # metered once the switch says it has meters (_meter_features)
            dp.send_msg(parser.OFPMeterFeaturesStatsRequest(dp, 0))
        # Every host the configuration knows gets a rule towards it on every switch (its own
        # port, or the trunk towards its switch): traffic crossing switches, such as an
        # instance's answers to a caller on another switch, never waits for the controller.
        # In data-plane mode the host table behind the reverse NAT gets the same rules.
        for mac, (dpid, port) in self.host_at.items():
            out = port if dpid == dp.id else self.next_hop.get((dp.id, dpid))
            for table in ((0, HOST_TABLE) if self.dp_mode else (0,)) if out is not None else ():
                self._add_flow(dp, PRIO_HOSTS, parser.OFPMatch(eth_dst=mac),
                               [parser.OFPActionOutput(out)], table=table)
        # Answers of instances that no NAT rule rewrites (the connection outlived its rules'
        # idle timeout) come to the controller, not out through L2 with the instance's address.
        # Only for callers on this switch, where the flow's NAT happens: answers passing
        # through towards another switch go on by the host rules above.
        for block in self.local_blocks.get(dp.id, ()):
            for inst in self.cfg.slots:
                ms = self.cfg.microservice(inst.microservice)
                self._add_flow(dp, PRIO_ORPHAN, parser.OFPMatch(**{
                    "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO[ms.protocol],
                    "ipv4_src": inst.ip, f"{ms.protocol}_src": ms.port,
                    "ipv4_dst": (block, "255.255.255.0")}), to_controller)
        if self.dp_mode:
            # whether the switch has select groups decides per-flow or data-plane mode
            self.dp_installed[dp.id] = {}
            self.group_capable.pop(dp.id, None)
            dp.send_msg(parser.OFPGroupFeaturesStatsRequest(dp, 0))
        restored = 0
        for rec in self.flows.active(dp.id):
            dp.send(self.path.nat_rules(dp.id, rec, time.time()))
            restored += 1
        self.logger.info("switch %016x connected: base rules installed, %d NAT flows restored",
                         dp.id, restored)
        # learn what rules a previous controller left (restart)
        self._request_stats(dp)

    def _table_miss(self, dp, meter: int | None) -> None:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_controller = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        for table in (0, HOST_TABLE) if self.dp_mode else (0,):
            self._add_flow(dp, 0, parser.OFPMatch(), to_controller, table=table, meter=meter)

    def _vip_rules(self, dp, meter: int | None) -> None:
        """ARP for the VIPs and IPv4 to them go to the controller, through the packet-in
        meter when there is one (re-adding a rule replaces its instructions); health-probe
        answers go around it, so a flood of new flows cannot take instances down."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_controller = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        for vip in sorted(self.vips):
            self._add_flow(dp, PRIO_VIP, parser.OFPMatch(eth_type=ofwire.ETH_TYPE_ARP,
                                                         arp_tpa=vip), to_controller, meter=meter)
            self._add_flow(dp, PRIO_VIP, parser.OFPMatch(eth_type=ofwire.ETH_TYPE_IP,
                                                         ipv4_dst=vip), to_controller, meter=meter)
            self._add_flow(dp, PRIO_PROBE, parser.OFPMatch(
                eth_type=ofwire.ETH_TYPE_IP, ip_proto=ofwire.IPPROTO_TCP, ipv4_dst=vip,
                tcp_dst=(PROBE_PORTS[0], PROBE_MASK)), to_controller)

    @set_ev_cls(ofp_event.EventOFPMeterFeaturesStatsReply, MAIN_DISPATCHER)
    def _meter_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        feats = ev.msg.body[0] if isinstance(ev.msg.body, list) else ev.msg.body
        limit = self.cfg.controller.packet_in_limit_per_s
        if not (feats.max_meter >= MISS_METER and feats.band_types & (1 << ofp.OFPMBT_DROP)
                and feats.capabilities & ofp.OFPMF_PKTPS):
            self.logger.warning("switch %016x has no packet-rate meters: packet-ins to the "
                                "controller are not limited there", dp.id)
            return
        band = parser.OFPMeterBandDrop(rate=limit, burst_size=limit)
        flags = ofp.OFPMF_PKTPS | ofp.OFPMF_BURST
        # ADD, then MODIFY: a meter a previous controller left takes this limit
        for meter in (PACKET_IN_METER, MISS_METER):
            for command in (ofp.OFPMC_ADD, ofp.OFPMC_MODIFY):
                dp.send_msg(parser.OFPMeterMod(dp, command, flags, meter, [band]))
        self._vip_rules(dp, meter=PACKET_IN_METER)
        self._table_miss(dp, meter=MISS_METER)
        self.metered.add(dp.id)
        self.logger.info("switch %016x: packet-ins to the VIPs limited to %d/s", dp.id, limit)

    def _add_flow(self, dp, priority, match, actions, idle=0, hard=0, cookie=0, flags=0,
                  table=0, goto=None, meter=None):
        parser = dp.ofproto_parser
        inst = [parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]
        if meter is not None:
            inst.insert(0, parser.OFPInstructionMeter(meter))
        if goto is not None:
            inst.append(parser.OFPInstructionGotoTable(goto))
        dp.send_msg(parser.OFPFlowMod(datapath=dp, table_id=table, priority=priority,
                                      match=match, instructions=inst, idle_timeout=idle,
                                      hard_timeout=hard, cookie=cookie, flags=flags))

    # ================================================================ data-plane mode
    @set_ev_cls(ofp_event.EventOFPGroupFeaturesStatsReply, MAIN_DISPATCHER)
    def _group_features(self, ev):
        dp = ev.msg.datapath
        ofp = dp.ofproto
        body = ev.msg.body
        select = bool(body.types & (1 << ofp.OFPGT_SELECT)) and \
            body.max_groups[ofp.OFPGT_SELECT] > 0
        self.group_capable[dp.id] = select
        if not select:
            self.logger.warning("switch %016x has no select groups: short flows stay under "
                                "per-flow control there", dp.id)
        self.sync_dataplane()

    def _dataplane_services(self) -> dict[str, dict[str, float] | None]:
        """Per microservice, the instance shares its select group should render, or None
        when its flows stay under per-flow control."""
        out = {}
        for m in self.cfg.microservices:
            on = (self.core.policy in DATAPLANE_POLICIES
                  and self.core.flow_class(m.name)[0] == "short")
            out[m.name] = self.core.short_flow_shares(m.name) if on else None
        return out

    def sync_dataplane(self) -> None:
        """Bring every switch's select groups and data-plane rules to what the pools,
        health, policy and flow classes say now, and end transitions whose grace period is
        over; only what changed is sent."""
        if not self.dp_mode:
            return
        now = time.time()
        c = self.cfg.controller
        # connections to these may go on: their moved slots pass through the controller
        alive = {n for n in self.instances if self.core.healthy.get(n, True)}
        for name, shares in self._dataplane_services().items():
            table = self.slot_tables[name]
            before = table.table
            table.expire(now)
            moved = table.update(shares or {}, now, alive, c.idle_timeout_s or c.hard_timeout_s)
            if moved and before is not None and table.table is not None:
                self.m_dp_moved.inc(name, amount=len(moved))
            if before != table.table:
                counts = maglev.slot_counts(table.table or ())
                for inst in {*maglev.slot_counts(before or ()), *counts}:
                    self.m_dp_slots.set(name, inst, value=counts.get(inst, 0))
                self.dp_last_change[name] = {
                    "time": now, "slots_moved": len(moved),
                    "slots_in_transition": len(table.transitions),
                    "share_moved": round(len(moved) / table.size, 4), "slots": counts}
                self.logger.info("data-plane table of %s: %d of %d slots moved (%s)", name,
                                 len(moved), table.size,
                                 ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                                 or "no instance: per-flow control")
        for dpid, dp in list(self.datapaths.items()):
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
                        self._dp_remove(dp, m)
                        del installed[m.name]
                    else:
                        self._dp_install(dp, m, want, first=have is None)
                        installed[m.name] = want
                except LookupError as exc:     # no path from this switch to an instance
                    self.logger.warning("switch %016x: %s: %s", dpid, m.name, exc)

    def _dp_install(self, dp, m, view: tuple, first: bool) -> None:
        """The group (new, or its buckets replaced), and on first install the VIP rule and
        the reverse NAT rules. Buckets keep their positions, so only moved slots change."""
        ofp, parser = dp.ofproto, dp.ofproto_parser

        def target_of(name: str) -> dataplane.Target:
            b, inst = self.backends[name], self.instances[name]
            return dataplane.Target(name, b.mac, b.ip, b.port, self.path.port_towards(dp.id, inst),
                                    inst.switch_port if inst.dpid == dp.id else None)

        buckets = [parser.OFPBucket(
            weight=1, watch_port=ofp.OFPP_ANY if bk.watch_port is None else bk.watch_port,
            watch_group=ofp.OFPG_ANY,
            actions=[*(parser.OFPActionSetField(**{k: v}) for k, v in bk.set_fields),
                     parser.OFPActionOutput(bk.out_port, ofp.OFPCML_NO_BUFFER)])
            for bk in dataplane.buckets(view, m.protocol, m.port, target_of,
                                        ofp.OFPP_CONTROLLER)]
        gid = DP_GROUP_BASE + m.index
        commands = (ofp.OFPGC_ADD, ofp.OFPGC_MODIFY) if first else (ofp.OFPGC_MODIFY,)
        # ADD then MODIFY: a group a previous controller left is replaced (ADD fails on it)
        for command in commands:
            dp.send_msg(parser.OFPGroupMod(dp, command, ofp.OFPGT_SELECT, gid, buckets))
        if not first:
            return
        c = self.cfg.controller
        for inst in self.cfg.slots:
            if inst.microservice != m.name:
                continue
            for block in self.local_blocks.get(dp.id, ()):
                match, fields = dataplane.reverse_rule(m.protocol, inst.ip, m.port, block,
                                                       c.vip_mac, m.vip, m.port)
                self._add_flow(dp, PRIO_DP_REVERSE, parser.OFPMatch(**match),
                               [parser.OFPActionSetField(**{k: v}) for k, v in fields],
                               cookie=_dp_cookie(DP_REVERSE, m.index), goto=HOST_TABLE)
        self._add_flow(dp, PRIO_DP_GROUP,
                       parser.OFPMatch(**dataplane.vip_match(m.protocol, m.vip, m.port)),
                       [parser.OFPActionGroup(gid)], cookie=_dp_cookie(DP_VIP, m.index))

    def _dp_remove(self, dp, m) -> None:
        """Back to per-flow control: the VIP rule first (new flows reach the controller),
        then the reverse rules and the group."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        for kind in (DP_VIP, DP_REVERSE):
            dp.send_msg(parser.OFPFlowMod(
                datapath=dp, table_id=0, command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                out_group=ofp.OFPG_ANY, cookie=_dp_cookie(kind, m.index),
                cookie_mask=0xFFFFFFFFFFFFFFFF, match=parser.OFPMatch()))
        dp.send_msg(parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, ofp.OFPGT_SELECT,
                                       DP_GROUP_BASE + m.index, []))

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

    def set_policy(self, policy: str) -> None:
        self.core.set_policy(policy)
        self.sync_dataplane()

    # ================================================================ packet-in
    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        started = time.perf_counter()
        msg = ev.msg
        dp = msg.datapath
        in_port = msg.match["in_port"]
        f = ofwire.parse_frame(msg.data)
        if f is None or f.eth_type == ofwire.ETH_TYPE_LLDP:
            return
        if f.eth_src != self.cfg.controller.vip_mac:
            self.mac_to_port.setdefault(dp.id, {})[f.eth_src] = in_port
        if f.eth_type == ofwire.ETH_TYPE_ARP and f.arp_tpa in self.vips:
            if f.arp_op == ofwire.ARP_REQUEST:
                self.m_packet_in.inc("arp_vip")
                return self._answer_arp(dp, in_port, f)
            if f.arp_op == ofwire.ARP_REPLY and f.arp_spa in self.instance_ips:
                self.m_packet_in.inc("health")
                return self._health_answer(("arp", f.arp_spa), True, "ARP reply")
            return
        if f.ip_dst in self.vips and f.ip_proto in (ofwire.IPPROTO_TCP,
                                                     ofwire.IPPROTO_UDP):
            if (f.ip_proto == ofwire.IPPROTO_TCP and f.ip_src in self.instance_ips
                    and PROBE_PORTS[0] <= f.dst_port <= PROBE_PORTS[1]):
                self.m_packet_in.inc("health")
                return self._tcp_probe_answer(dp, in_port, f)
            self._apply(dp, f, self.path.vip_packet(dp.id, in_port, msg.data, f, time.time()))
            self.m_latency.observe(time.perf_counter() - started)
            return
        if f.ip_dst in self.vips:
            return  # other IP protocols to a VIP: nothing serves them
        if f.ip_src in self.instance_ips and f.ip_proto in (ofwire.IPPROTO_TCP,
                                                             ofwire.IPPROTO_UDP):
            result = self.path.orphan(dp.id, msg.data, f, time.time(),
                                      lambda dpid: dpid in self.datapaths)
            if result.handled:
                return self._apply(dp, f, result)
        # broadcasts (ARP, neighbour discovery) always come here; unicast only for hosts the
        # configuration does not know
        self.m_packet_in.inc("l2_broadcast" if int(f.eth_dst[:2], 16) & 1 else "l2")
        self._l2_forward(dp, in_port, msg, f)

    def _apply(self, dp, f, result: Result) -> None:
        """Send and count what the new-flow path decided."""
        for kind in result.kinds:
            self.m_packet_in.inc(kind)
        for dpid, messages in result.sends:
            target = self.datapaths.get(dpid)
            if target is not None:
                target.send(messages)
        for text in result.warnings:
            self.logger.warning("%s", text)
        if result.no_backend:
            self.m_no_backend.inc(result.no_backend)
        d = result.decision
        if d is None:
            return
        if result.choose_s is not None:
            self.m_choose.observe(result.choose_s, d.algorithm)
        self.m_decisions.inc(d.microservice, d.server, d.policy, d.algorithm)
        self.decisions.append({
            "time": d.time, "microservice": d.microservice,
            "client": f"{f.ip_src}:{f.src_port}", "switch": dp.id, "instance": d.instance,
            "server": d.server, "policy": d.policy, "algorithm": d.algorithm,
            "reason": d.reason, "scores": d.scores,
            "weights": list(d.weights) if d.weights else None})

    def _xid(self, dpid: int) -> int:
        return _next_xid(self.datapaths[dpid])

    def _answer_arp(self, dp, in_port, f):
        vip_mac = self.cfg.controller.vip_mac
        self._packet_out(dp, ofwire.arp_frame(ofwire.ARP_REPLY, vip_mac, f.arp_tpa, f.arp_sha,
                                              f.arp_spa, eth_dst=f.eth_src), in_port)

    def _packet_out(self, dp, frame: bytes, out_port: int) -> None:
        """Send a frame the controller made out of one port of the switch."""
        dp.send(ofwire.packet_out(_next_xid(dp), dp.ofproto.OFPP_CONTROLLER,
                                  ofwire.action_output(out_port), frame))

    def _l2_forward(self, dp, in_port, msg, f):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        out_port = self.mac_to_port.get(dp.id, {}).get(f.eth_dst)
        if out_port is not None and out_port != in_port:
            self._add_flow(dp, PRIO_L2, parser.OFPMatch(eth_dst=f.eth_dst),
                           [parser.OFPActionOutput(out_port)], idle=L2_IDLE_TIMEOUT)
        elif out_port == in_port:
            return
        actions = [parser.OFPActionOutput(out_port if out_port is not None else ofp.OFPP_FLOOD)]
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=in_port, actions=actions, data=msg.data))

    # ================================================================ NAT flows
    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    def _flow_removed(self, ev):
        msg = ev.msg
        ofp = msg.datapath.ofproto
        reason = {ofp.OFPRR_IDLE_TIMEOUT: "idle_timeout", ofp.OFPRR_HARD_TIMEOUT: "hard_timeout",
                  ofp.OFPRR_DELETE: "deleted"}.get(msg.reason, "other")
        self.flows.on_removed(msg.cookie, msg.duration_sec + msg.duration_nsec / 1e9,
                              msg.byte_count, msg.packet_count, reason, time.time())

    # ================================================================ monitoring
    def _request_stats(self, dp, flow_slice: int = 0, slices: int = 1) -> None:
        """Port statistics (with slice 0) and one slice of the NAT flow statistics."""
        ofp, parser = dp.ofproto, dp.ofproto_parser
        cookie, mask = COOKIE_BASE | flow_slice, COOKIE_MASK | (slices - 1)
        dp.send_msg(parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                               cookie, mask, parser.OFPMatch()))
        if flow_slice == 0:
            dp.send_msg(parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY))

    def _monitor_loop(self):
        """Poll one slice per step, so that a cycle covers every rule once: in one period,
        or longer when the rules exceed the statistics budget. The number of slices follows
        the number of rules at every step: it grows at once (a burst of new flows must not
        make one huge reply) and shrinks only at a cycle's end."""
        period = self.cfg.controller.monitoring_period_s
        slices, flow_slice, cycle = 1, 0, period
        while True:
            hub.sleep(cycle / slices)
            rules = 2 * self.flows.active_count()                # after the sleep: rules grow
            need = _slices_for(rules)
            if need > slices or (need < slices and flow_slice == 0):
                slices, flow_slice = need, 0
            if flow_slice == 0:
                cycle = max(period, rules / STATS_RULES_PER_S)
                self.m_stats_cycle.set(value=cycle)
            for dp in list(self.datapaths.values()):
                self._request_stats(dp, flow_slice, slices)
            flow_slice = (flow_slice + 1) % slices

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev):
        now = time.time()
        dp = ev.msg.datapath
        for st in ev.msg.body:
            age = st.duration_sec + st.duration_nsec / 1e9
            if self.flows.on_stats(st.cookie, age, st.byte_count, st.packet_count, now) is None:
                self._adopt_rule(dp, st, age, now)
        self.m_flows.set(value=self.flows.active_count())

    def _adopt_rule(self, dp, st, age, now) -> None:
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
            in_port = self.client_ports.get((dp.id, client_ip), 0)
        else:
            client_ip, client_port = m.get("ipv4_dst"), m.get(f"{l4}_dst")
            outs = [a.port for i in st.instructions for a in getattr(i, "actions", [])
                    if hasattr(a, "port")]
            in_port = outs[-1] if outs else 0
        fid = flow_id_of(st.cookie)
        rec = self.flows.flows.get(fid)
        if rec is None:
            rec = FlowRecord(flow_id=fid, dpid=dp.id, protocol=l4, client_ip=client_ip,
                             client_port=client_port, client_in_port=in_port, vip=ms.vip,
                             vport=ms.port, microservice=ms.name, instance=inst.name,
                             server=inst.server, created=now - age, last_active=now,
                             backend_ip=inst.ip, backend_port=ms.port)
            self.flows.add(rec, new=False)
            self.logger.info("adopted NAT flow %s:%s -> %s left by a previous controller",
                             client_ip, client_port, inst.name)
        elif direction == DIR_REVERSE and not rec.client_in_port:
            rec.client_in_port = in_port
        self.flows.on_stats(st.cookie, age, st.byte_count, st.packet_count, now)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        """An instance's port deleted or its link down (the container died): out of its pool
        at once, not two or three probe intervals later; the probes bring it back."""
        msg = ev.msg
        ofp = msg.datapath.ofproto
        gone = msg.reason == ofp.OFPPR_DELETE or bool(msg.desc.state & ofp.OFPPS_LINK_DOWN)
        owner = self.port_owner.get((msg.datapath.id, msg.desc.port_no))
        if not gone or owner is None or owner.name not in self.health.state:
            return
        reason = "switch port deleted" if msg.reason == ofp.OFPPR_DELETE else "switch link down"
        change = self.health.link_down(owner.name, time.time(), reason)
        if change:
            self._apply_health(*change)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev):
        now = time.time()
        dpid = ev.msg.datapath.id
        per_server: dict[str, list[float]] = {}
        for st in ev.msg.body:
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

    # ================================================================ profiler
    def _profiler_loop(self):
        period = self.cfg.controller.monitoring_period_s
        while True:
            hub.sleep(period)
            try:
                self._profiler_exchange(time.time(), timeout=min(2.0, period / 2))
            except Exception:   # noqa: BLE001 -- the loop must outlive any one bad answer
                self.logger.exception("profiler exchange failed; trying again next period")
            # flow classes or weights may have changed, transitions may be over
            self.sync_dataplane()

    def _profiler_exchange(self, now: float, timeout: float) -> None:
        """Report flows and ports to the profiler; take its weights, classes and loads."""
        base = self.cfg.profiler.url
        report = self.flows.take_report(now)
        pairs = self.flows.take_pairs()
        idle = self.cfg.controller.idle_timeout_s
        try:
            for start in range(0, max(1, len(report)), REPORT_CHUNK):
                body = {"source": "malb-controller", "time": now,
                        "flows": [r.as_record(idle, self.flows.epoch)
                                  for r in report[start:start + REPORT_CHUNK]]}
                if start == 0:   # ports and pairs once per period, with the first chunk
                    body["ports"] = list(self.port_rates.values())
                    body["pairs"] = self._pairs_report(pairs, now)
                post_json(f"{base}/flows", body, timeout, token=self.token)
                if start == 0:      # the pairs arrived: they count from now on
                    pairs, self._pairs_since = ({}, {}), now
            self.m_profiler.inc("flows", "ok")
            profiles = get_json(f"{base}/profiles", timeout)
            self.m_profiler.inc("profiles", "ok")
            servers = get_json(f"{base}/servers", timeout)
            self.m_profiler.inc("servers", "ok")
            if not isinstance(profiles, dict) or not isinstance(servers, dict):
                raise HttpError("profiler answered something other than JSON objects")
        except HttpError as exc:
            self.flows.report_failed(report)
            self.flows.restore_pairs(pairs)
            self.m_profiler.inc("any", "error")
            if self.profiler_state["reachable"] is not False:
                self.logger.warning("profiler unreachable (%s): keeping the last weights; "
                                    "equal weights after %.0f s", exc,
                                    self.cfg.controller.weights_stale_after_s)
            self.profiler_state.update(reachable=False, last_error=str(exc))
            return
        if self.profiler_state["reachable"] is False:
            self.logger.info("profiler reachable again")
        self.profiler_state.update(reachable=True, last_ok=now, last_error=None)
        self._apply_profiles(profiles, servers, now)

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

    def _apply_profiles(self, profiles: dict, servers: dict, now: float) -> None:
        for warning in apply_profiles(self.core, profiles, servers, now):
            self.logger.warning("%s", warning)

    # ================================================================ health
    def _health_loop(self):
        h = self.cfg.controller.health
        next_port = PROBE_PORTS[0]
        while True:
            now = time.time()
            for inst in [self.instances[b.name] for pool in self.core.pools.values()
                         for b in pool]:
                dp = self.datapaths.get(inst.dpid)
                if dp is None:
                    continue
                ms = self.cfg.microservice(inst.microservice)
                if h.method == "tcp" and ms.protocol == "tcp":
                    token = ("tcp", inst.ip, next_port)
                    self._send_tcp_probe(dp, inst, ms, next_port)
                    next_port = PROBE_PORTS[0] + (next_port + 1 - PROBE_PORTS[0]) % \
                        (PROBE_PORTS[1] - PROBE_PORTS[0] + 1)
                else:
                    token = ("arp", inst.ip)
                    self._send_arp_probe(dp, inst, ms)
                change = self.health.sent(token, inst.name, now)
                if change:
                    self._apply_health(*change)
            hub.sleep(h.interval_s)
            for change in self.health.expire(time.time()):
                self._apply_health(*change)

    def _send_tcp_probe(self, dp, inst, ms, sport: int) -> None:
        self._packet_out(dp, ofwire.tcp_frame(
            inst.mac, self.cfg.controller.vip_mac, ms.vip, inst.ip, sport, ms.port,
            random.getrandbits(32), flags=ofwire.TCP_SYN, window=1024), inst.switch_port)

    def _send_arp_probe(self, dp, inst, ms) -> None:
        self._packet_out(dp, ofwire.arp_frame(
            ofwire.ARP_REQUEST, self.cfg.controller.vip_mac, ms.vip, "00:00:00:00:00:00",
            inst.ip, eth_dst="ff:ff:ff:ff:ff:ff"), inst.switch_port)

    def _tcp_probe_answer(self, dp, in_port, f) -> None:
        ok = bool(f.tcp_flags & ofwire.TCP_SYN) and bool(f.tcp_flags & ofwire.TCP_ACK)
        refused = bool(f.tcp_flags & ofwire.TCP_RST)
        if ok:
            dp.send(self.path.tcp_reset(dp.id, in_port, f))   # close the half-open connection
        if ok or refused:
            self._health_answer(("tcp", f.ip_src, f.dst_port), ok,
                                "TCP SYN-ACK" if ok else "TCP reset (port closed)")

    def _health_answer(self, token, ok: bool, detail: str) -> None:
        change = self.health.answered(token, ok, time.time(), detail)
        if change:
            self._apply_health(*change)

    def _apply_health(self, instance: str, healthy: bool) -> None:
        self.core.set_health(instance, healthy)
        self.m_health.set(instance, value=1 if healthy else 0)
        log = self.logger.info if healthy else self.logger.warning
        log("instance %s is %s (%s)", instance,
            "healthy again" if healthy else "DOWN: no new flows",
            self.health.state[instance].last_result)
        self.sync_dataplane()

    # ================================================================ pools at run time
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

    def add_instance(self, name: str) -> None:
        """A slot's instance joins its pool: unhealthy until its probe answers."""
        if name not in self.instances:
            raise KeyError(name)
        self.core.add_backend(self.backends[name])
        self.health.add(name)
        self.m_health.set(name, value=0)
        self.logger.info("instance %s added to the pool of %s (healthy once it answers)",
                         name, self.instances[name].microservice)
        self.sync_dataplane()

    def set_draining(self, name: str, draining: bool) -> None:
        self.core.set_draining(name, draining)
        self.logger.info("instance %s %s", name,
                         "draining: no new flows" if draining else "takes new flows again")
        self.sync_dataplane()

    def remove_instance(self, name: str) -> None:
        self.core.remove_backend(name)
        self.health.remove(name)
        self.logger.info("instance %s removed from the pool of %s", name,
                         self.instances[name].microservice)
        self.sync_dataplane()

    # ================================================================ status
    def status(self) -> dict:
        st = self.core.status()
        health = self.health.status()
        for s in st["servers"].values():
            for name, inst in s["instances"].items():
                inst["health"] = health[name]["last_result"]
        st["profiler"] = dict(self.profiler_state)
        st["switches"] = sorted(f"{d:016x}" for d in self.datapaths)
        st["active_flows"] = self.flows.active_count()
        st["monitoring_period_s"] = self.cfg.controller.monitoring_period_s
        st["dataplane"] = self.dataplane_status()
        st["packet_in_limit_per_s"] = {f"{d:016x}": self.cfg.controller.packet_in_limit_per_s
                                       if d in self.metered else None
                                       for d in sorted(self.datapaths)}
        return st


def _dp_cookie(kind: int, ms_index: int) -> int:
    return DP_COOKIE | kind << 32 | ms_index


def _next_xid(dp) -> int:
    """Transaction ids from the datapath's own counter, as send_msg() would assign them."""
    dp.xid = (dp.xid + 1) & dp.ofproto.MAX_XID
    return dp.xid


def _slices_for(rules: int) -> int:
    slices = 1
    while slices < MAX_SLICES and rules / slices > RULES_PER_SLICE:
        slices *= 2
    return slices
