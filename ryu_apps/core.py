"""The controller core as plain Python, in the style of faucet's valve: events in,
OpenFlow messages and state changes out. No Ryu import, no clock read, no send, no socket:
ryu_apps/malb.py decodes each Ryu event into plain arguments, passes the time in, calls
one method here and sends the (dpid, bytes) the returned CoreResult holds, counts its metric
updates and logs its lines. tests/unit/ryu_apps/test_core.py runs it against a fake flow table.

ControllerCore holds the managers (ryu_apps/managers/, one concern each) and passes each
event to them: a switch up or gone to all in turn, any other event to the one it concerns;
it handles packet-ins itself (ARP for the VIPs, probe answers, the new-flow path of
ryu_apps/flowpath.py, plain L2) and the pools changed over REST; the views of its state
are ryu_apps/views.py's. In the user's own network (`network:`) its link_discovery manager
finds the links between switches (ryu_apps/links.py), and probe answers where instances
are (ryu_apps/locations.py).
"""
from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Iterator

from common.config import active_flow_refresh_s
from ryu_apps import ofwire, views
from ryu_apps.flowpath import FlowPath
from ryu_apps.flows import FIN_TAG, FlowTable
from ryu_apps.tracker import MISS_COOKIE
from ryu_apps.health import InstanceHealth
from ryu_apps.managers.agent_probes import AgentProbes, PollPlan
from ryu_apps.managers.base import controller_packet_out
from ryu_apps.managers.dataplane_groups import DataplaneGroups
from ryu_apps.managers.flow_statistics import FlowStat, FlowStatistics
from ryu_apps.managers.health_checks import HealthChecks
from ryu_apps.managers.link_discovery import LinkDiscovery
from ryu_apps.managers.port_rates import PortRates, PortStat
from ryu_apps.managers.profiler_exchange import ProfilerExchange
from ryu_apps.managers.switch_rules import PRIO_L2, SwitchRules
from ryu_apps.network_plan import NetworkPlan
from ryu_apps.microservice_profiles import normalise_weights
from ryu_apps.policy_core import backends_of, core_from_config
from ryu_apps.core_result import CoreResult

__all__ = ["ControllerCore", "FlowStat", "PortStat"]

L2_IDLE_TIMEOUT = 300


class ControllerCore:
    """The controller's state, as its managers hold it, and one method per event."""

    def __init__(self, cfg, policy: str, xid: Callable[[int], int], started: float,
                 timer: Callable[[], float] | None = None, rng: random.Random | None = None,
                 clock: Callable[[], float] | None = None):
        self.cfg = cfg
        c = cfg.controller
        self.xid = xid                        # the next transaction id for a switch
        self.plan = NetworkPlan(cfg)
        self.backends = backends_of(cfg)
        self.policy_core = core_from_config(cfg, policy, self.backends,
                                            clock=time.time if clock is None else clock)
        self.flows = FlowTable(idle_timeout=c.idle_timeout_s,
                               threshold_s=cfg.profiler.flow_threshold_s,
                               refresh_s=active_flow_refresh_s(cfg),
                               tracked_max_s=c.dataplane.tracked_max_s)
        self.health = InstanceHealth([i.name for i in cfg.instances],
                                    c.health.unhealthy_after, c.health.healthy_after,
                                    c.health.timeout_s, c.health.service_readmit_s)
        self.path = FlowPath(cfg, self.policy_core, self.flows, self.backends, xid=xid, timer=timer,
                             locations=self.plan.locations)
        # the user's network: links between switches found by LLDP, not configured
        self.discovering = cfg.declared_network
        self.discovery = LinkDiscovery(cfg, self.discovering, xid, self.path.next_hop, set(),
                                       self._pools_changed)
        self.links = self.discovery.links
        for name in self.plan.locations.unlocated():
            # probed out of every edge port until an answer says where it is
            self.health.add(name)
            self.health.state[name].last_result = "not located yet"
            self.policy_core.set_health(name, False)
        self.decisions: deque = deque(maxlen=2000)
        dp_mode = c.dataplane.short_flows == "switch"
        self.switch_rules = SwitchRules(cfg, self.plan, xid, self.path.next_hop,
                                        self.path.mac_to_port, dp_mode,
                                        self.path.client_orphans, self.path.tracker)
        switches = self.switch_rules.switches
        self.dataplane = DataplaneGroups(cfg, self.plan, xid, self.policy_core, self.backends,
                                         self.path, switches)
        self.statistics = FlowStatistics(cfg, self.plan, xid, self.policy_core, self.flows,
                                         self.path, switches)
        self.ports = PortRates(cfg, self.plan, self.policy_core)
        self.health_checks = HealthChecks(cfg, self.plan, xid, self.policy_core, self.health,
                                          self.path, switches, rng or random.Random(),
                                          self._pools_changed, self.links.edge_ports)
        self.probes = AgentProbes(cfg, self.plan, self.policy_core,
                                  self.health_checks.service_reading)
        self.profiler = ProfilerExchange(cfg, self.plan, self.policy_core, self.flows,
                                         self.ports.rates, started)
        self.discovery.switches = switches
        # in the order a (re)connected switch gets their messages
        self.managers = (self.switch_rules, self.dataplane, self.statistics, self.ports,
                         self.health_checks, self.probes, self.profiler, self.discovery)
        self.switches = switches

    def _pools_changed(self, now: float, out: CoreResult) -> CoreResult:
        for m in self.managers:
            m.pools_changed(now, out)
        return out

    # ---------------------------------------------------------------- switches
    def switch_connected(self, dpid: int, now: float) -> CoreResult:
        """Base rules on every (re)connection, then the NAT rules of flows still active.
        Existing rules are never wiped: after a controller restart, connections keep
        working on the rules they have."""
        # parts joined once: a reconnection may restore thousands of NAT rules
        buf = [part for m in self.managers for part in m.switch_up(dpid, now)]
        lost = self.statistics.unrestored
        return CoreResult(sends=[(dpid, b"".join(buf))],
                      infos=[f"switch {dpid:016x} connected: base rules installed, "
                             f"{self.statistics.restored} NAT flows restored"],
                      warnings=[f"switch {dpid:016x}: {sum(lost.values())} flows not "
                                f"restored, no path to their instances yet (" + ", ".join(
                                    f"{name} {n}" for name, n in sorted(lost.items())) +
                                "): rules sent when their packets come and a path is "
                                "known; those whose rules the switch no longer lists end "
                                "(rules_lost)"] if lost else [])

    def switch_gone(self, dpid: int, now: float) -> CoreResult:
        """Its flows keep their records, and its links theirs until they expire
        (discover_links): a reconnection restores their rules."""
        for m in self.managers:
            m.switch_down(dpid, now)
        return CoreResult(warnings=[f"switch {dpid:016x} disconnected"])

    def meter_features(self, dpid: int, max_meter: int, band_types: int, capabilities: int,
                       now: float) -> CoreResult:
        return self.switch_rules.meter_features(dpid, max_meter, band_types, capabilities, now)

    def group_features(self, dpid: int, types: int, max_select_groups: int,
                       now: float) -> CoreResult:
        return self.dataplane.group_features(dpid, types, max_select_groups, now)

    def sync_dataplane(self, now: float, out: CoreResult | None = None) -> CoreResult:
        """The data-plane loop's step: groups in step with what the policy says now."""
        return self.dataplane.sync(now, out)

    # ---------------------------------------------------------------- packet-in
    def packet_in(self, dpid: int, in_port: int, data: bytes, now: float,
                  cookie: int = 0) -> CoreResult:
        """`cookie`: the rule's that sent the packet here (a flow's FIN watch, or 0)."""
        f = ofwire.parse_frame(data)
        if f is None:
            return CoreResult()
        if f.eth_type == ofwire.ETH_TYPE_LLDP:
            return self.discovery.heard(dpid, in_port, data, now)
        if cookie >> 48 == FIN_TAG and f.eth_type == ofwire.ETH_TYPE_IP:
            return self.path.fin(dpid, f, now)     # already sent on by the switch
        if cookie == MISS_COOKIE and f.ip_proto == ofwire.IPPROTO_TCP:
            out = self.path.tracked_miss(dpid, in_port, data, f, now)
            if out.handled:
                return out
        if f.eth_src != self.cfg.controller.vip_mac:
            self.path.mac_to_port.setdefault(dpid, {})[f.eth_src] = in_port
        plan = self.plan
        if f.eth_type == ofwire.ETH_TYPE_ARP and f.arp_tpa in plan.vips:
            out = CoreResult()
            if f.arp_op == ofwire.ARP_REQUEST:
                out.kinds.append("arp_vip")
                vip_mac = self.cfg.controller.vip_mac
                out.sends.append((dpid, controller_packet_out(self.xid(dpid), ofwire.arp_frame(
                    ofwire.ARP_REPLY, vip_mac, f.arp_tpa, f.arp_sha, f.arp_spa,
                    eth_dst=f.eth_src), in_port)))
            elif f.arp_op == ofwire.ARP_REPLY and f.arp_spa in plan.instance_ips:
                out.kinds.append("health")
                self._locate(out, plan.instance_ips[f.arp_spa].name, dpid, in_port, f.eth_src)
                self.health_checks.answered(out, ("arp", f.arp_spa), True, "ARP reply", now)
            return out
        if f.ip_dst in plan.vips and f.ip_proto in (ofwire.IPPROTO_TCP, ofwire.IPPROTO_UDP):
            if self.health_checks.is_probe_answer(f, plan.instance_ips):
                out = CoreResult(kinds=["health"])
                self._locate(out, plan.instance_ips[f.ip_src].name, dpid, in_port, f.eth_src)
                self.health_checks.tcp_probe_answer(out, dpid, in_port, f, now)
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
        if f.ip_dst in plan.vips:
            return CoreResult()  # other IP protocols to a VIP: nothing serves them
        if f.ip_src in plan.instance_ips and f.ip_proto in (ofwire.IPPROTO_TCP,
                                                            ofwire.IPPROTO_UDP):
            out = self.path.orphan(dpid, data, f, now, self.switches.__contains__)
            if out.handled:
                return out
        # broadcasts (ARP, neighbour discovery) always come here; unicast only for hosts the
        # configuration does not know
        out = CoreResult(kinds=["l2_broadcast" if int(f.eth_dst[:2], 16) & 1 else "l2"])
        self._l2_forward(out, dpid, in_port, data, f)
        return out

    def _locate(self, out: CoreResult, name: str, dpid: int, in_port: int, mac: str) -> None:
        """A probe answer enters the controller from the instance's own switch (the probe
        rules are on every switch, so the first one it meets sends it here)."""
        said = self.plan.locations.learn(name, dpid, in_port, mac)
        if said is not None:
            line, warning = said
            (out.warnings if warning else out.infos).append(line)

    def discover_links(self, now: float) -> CoreResult:
        """The user's network: discovery frames out, links not heard forgotten."""
        return self.discovery.discover(now)

    def _l2_forward(self, out: CoreResult, dpid: int, in_port: int, data: bytes, f) -> None:
        out_port = self.path.mac_to_port.get(dpid, {}).get(f.eth_dst)
        buf = b""
        if out_port is not None and out_port != in_port:
            buf = ofwire.flow_mod(self.xid(dpid), 0, PRIO_L2, {"eth_dst": f.eth_dst},
                                  ofwire.action_output(out_port), idle_timeout=L2_IDLE_TIMEOUT)
        elif out_port == in_port:
            return
        buf += ofwire.packet_out(self.xid(dpid), in_port, ofwire.action_output(
            out_port if out_port is not None else ofwire.OFPP_FLOOD), data)
        out.sends.append((dpid, buf))

    # ---------------------------------------------------------------- NAT rules, ports
    def flow_removed(self, dpid: int, cookie: int, duration_s: float, byte_count: int,
                     packet_count: int, reason: int, now: float) -> CoreResult:
        return self.statistics.flow_removed(dpid, cookie, duration_s, byte_count,
                                            packet_count, reason, now)

    def poll_stats(self, now: float) -> CoreResult:
        return self.statistics.poll_stats(now)

    def flow_stats(self, dpid: int, entries: list[FlowStat], now: float, xid: int = 0,
                   more: bool = False) -> CoreResult:
        if self.dataplane.answers_poll(xid):
            return self.dataplane.counter_stats(dpid, entries, now, xid, more)
        return self.statistics.flow_stats(dpid, entries, now, xid, more)

    def poll_connections(self, now: float) -> CoreResult:
        """Data-plane mode: the switches' connection counters asked for."""
        return self.dataplane.poll_connections(now)

    def port_stats(self, dpid: int, entries: list[PortStat], now: float) -> CoreResult:
        self.discovery.ports_seen(dpid, [e.port_no for e in entries])
        return self.ports.port_stats(dpid, entries, now)

    def port_status(self, dpid: int, port_no: int, reason: int, state: int,
                    now: float) -> CoreResult:
        return self.health_checks.port_status(dpid, port_no, reason, state, now)

    # ---------------------------------------------------------------- health
    def probe_health(self, now: float) -> CoreResult:
        return self.health_checks.probe_health(now)

    def health_marker(self, now: float) -> CoreResult:
        return self.health_checks.health_marker(now)

    def echo_reply(self, dpid: int, xid: int, now: float) -> CoreResult:
        return self.health_checks.echo_reply(dpid, xid, now)

    def health_result(self, instance: str, ok: bool, detail: str, now: float) -> CoreResult:
        return self.health_checks.health_result(instance, ok, detail, now)

    # ---------------------------------------------------------------- profiler, probes
    def profiler_report(self, now: float) -> Iterator[dict | None]:
        return self.profiler.report(now)

    def profiler_pairs_sent(self, now: float) -> None:
        self.profiler.pairs_sent(now)

    def profiler_failed(self, error: str, now: float) -> CoreResult:
        return self.profiler.failed(error, now)

    def profiler_answer(self, profiles, servers, now: float) -> CoreResult:
        return self.profiler.answer(profiles, servers, now)

    def probing(self) -> bool:
        return self.probes.probing()

    def probe_poll_plan(self) -> PollPlan | None:
        return self.probes.poll_plan()

    def probe_answer(self, server: str, body, now: float) -> CoreResult:
        return self.probes.probe_answer(server, body, now)

    def probe_failed(self, server: str, error: str, now: float, kind: str = "poll") -> CoreResult:
        return self.probes.probe_failed(server, error, now, kind)

    # ---------------------------------------------------------------- pools at run time
    def add_instance(self, name: str, now: float) -> CoreResult:
        """A slot's instance joins its pool: unhealthy until its probe answers."""
        if name not in self.plan.instances:
            raise KeyError(name)
        out = CoreResult()
        self.policy_core.add_backend(self.backends[name])
        self.health.add(name)
        out.metrics.append(("set", "malb_instance_healthy", (name,), 0))
        out.infos.append(f"instance {name} added to the pool of "
                         f"{self.plan.instances[name].microservice} (healthy once it answers)")
        return self._pools_changed(now, out)

    def set_draining(self, name: str, draining: bool, now: float) -> CoreResult:
        self.policy_core.set_draining(name, draining)
        out = CoreResult(infos=[f"instance {name} " + ("draining: no new flows" if draining
                                                   else "takes new flows again")])
        return self._pools_changed(now, out)

    def remove_instance(self, name: str, now: float) -> CoreResult:
        self.policy_core.remove_backend(name)
        self.health.remove(name)
        out = CoreResult(infos=[f"instance {name} removed from the pool of "
                            f"{self.plan.instances[name].microservice}"])
        return self._pools_changed(now, out)

    def set_policy(self, policy: str, now: float) -> CoreResult:
        self.policy_core.set_policy(policy)
        return self._pools_changed(now, CoreResult())

    def set_weights(self, weights: dict[str, tuple[float, float, float] | None],
                    now: float) -> CoreResult:
        """Manual weights per microservice (None: the profiler's again), all or none: an
        unknown microservice or weights the policy core refuses change nothing. The
        data-plane groups follow at once (their shares may weigh capacity by them)."""
        for ms, w in weights.items():
            if ms not in self.policy_core.pools:
                raise KeyError(f"unknown microservice {ms!r}")
            if w is not None:
                normalise_weights(w, ms)
        for ms, w in weights.items():
            self.policy_core.profiles.set_manual_weights(ms, w)
        return self._pools_changed(now, CoreResult())

    # ---------------------------------------------------------------- views (ryu_apps/views.py)
    def active_flows_of(self) -> dict[str, int]:
        return self.flows.active_per_instance()

    def instances_view(self) -> dict:
        return views.instances_view(self)

    def status(self) -> dict:
        return views.status(self)
