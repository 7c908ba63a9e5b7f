"""The controller's new-flow path as plain Python (no Ryu import, no clock read, no send): a
packet-in to a VIP, an instance's answer that no rule rewrites, or a FIN watch's copy goes
in with the time; the OpenFlow messages per switch, the packet-in kinds, the decision and
any warning come out, in the CoreResult the controller core (ryu_apps/core.py) returns
(docs/controller.md: "How a decision is made", "Connections that outlive their rules").

- FlowPath: vip_packet (repeat, transition, resume, reset, decision, caps), orphan (resumed
  by the instance's side), fin (a watched flow's end), tracked_miss (a tracked segment
  ahead of its rule); the rules and packets they send are ryu_apps/flow_messages.py's
  (tracker mode's through ryu_apps/tracker.py);
- next_hops: output ports over the configured trunks and the links found; new_record: a
  new flow's record from its first packet;
- RULES_RESEND_AFTER_S, ...: when rules are sent again, warnings logged (the rules'
  priorities and timeouts: ryu_apps/flow_messages.py).
"""
from __future__ import annotations

from collections.abc import Callable

from ryu_apps import ofwire
from ryu_apps.flow_messages import FlowMessages
from ryu_apps.locations import InstanceLocations
from ryu_apps.managers.switch_rules import orphan_rules
from ryu_apps.flows import FlowRecord, FlowTable
from ryu_apps.policies import Backend, NoBackend
from ryu_apps.policy_core import PolicyCore
from ryu_apps.core_result import CoreResult
from ryu_apps.tracker import Tracker, towards_actions

RULES_RESEND_AFTER_S = 1.0   # an instance's answers still reach the controller after this
FLOW_CAP_LOG_EVERY_S = 10
NO_PATH_LOG_EVERY_S = 10      # a flow's packets dropped for want of a path: logged this often


def next_hops(cfg, links=()) -> dict[tuple[int, int], int]:
    """(from dpid, to dpid) -> output port, over the configured trunks and the links found
    between switches (ryu_apps/links.py: (dpid a, port a, dpid b, port b)); a tree."""
    dpid = {s.name: s.dpid for s in cfg.testbed.switches}
    edges = [(dpid[t.a], t.a_port, dpid[t.b], t.b_port) for t in cfg.testbed.trunks]
    adj: dict[int, list[tuple[int, int]]] = {}
    for a, a_port, b, b_port in (*edges, *links):
        adj.setdefault(a, []).append((b, a_port))
        adj.setdefault(b, []).append((a, b_port))
    hops = {}
    for src in set(dpid.values()) | set(adj):
        # breadth-first from src, remembering the first port taken
        frontier = [(n, port) for n, port in adj.get(src, [])]
        seen = {src}
        while frontier:
            nxt = []
            for node, first_port in frontier:
                if node in seen:
                    continue
                seen.add(node)
                hops[(src, node)] = first_port
                nxt += [(n, first_port) for n, _ in adj.get(node, []) if n not in seen]
            frontier = nxt
    return hops


def new_record(flow_id: int, dpid: int, in_port: int, f: ofwire.Frame, proto: str, ms,
               backend: Backend, now: float, fin_watch: bool, tracked: bool) -> FlowRecord:
    """The record of a new flow, from its first packet (a tracked connection's FIN and
    reset come by the tracker's static watch: watched)."""
    return FlowRecord(flow_id=flow_id, dpid=dpid, protocol=proto, client_ip=f.ip_src,
                      client_port=f.src_port, client_in_port=in_port, vip=f.ip_dst,
                      vport=f.dst_port, microservice=ms.name, instance=backend.name,
                      server=backend.server, created=now, last_active=now,
                      backend_ip=backend.ip, backend_port=backend.port,
                      fin_watch=fin_watch or tracked, tracked=tracked)


class FlowPath:
    """The state the new-flow path needs, and the path itself."""

    def __init__(self, cfg, policy_core: PolicyCore, flows: FlowTable, backends: dict[str, Backend],
                 xid: Callable[[int], int], timer: Callable[[], float] | None = None,
                 locations: InstanceLocations | None = None):
        self.cfg = cfg
        self.policy_core = policy_core
        self.flows = flows
        self.backends = backends
        self.xid = xid                     # the next transaction id for a switch
        self.timer = timer                 # times choose() when given (a monotonic clock)
        self.instances = {i.name: i for i in cfg.slots}
        self.instance_macs = {i.mac: i for i in cfg.slots}
        self.service_at = {(m.vip, m.protocol, m.port): m for m in cfg.microservices}
        self.switch_dpids = {s.dpid for s in cfg.testbed.switches}
        self.next_hop = next_hops(cfg)
        self.locations = locations or InstanceLocations(cfg.slots)
        self.mac_to_port: dict[int, dict[str, int]] = {}   # learned by the shell's L2 path
        # the user's network: per switch, the (client address, microservice) whose flows
        # entered there, given orphan rules (the testbed has them for its client block)
        self.client_orphans: dict[int, set[tuple[str, str]]] = {}
        self.foreign_switches: set[int] = set()             # warned about once each
        self._flow_cap_logged = float("-inf")
        self._no_path_logged = float("-inf")
        # tracker mode: short-flow TCP connections NATed by the switch's connection tracker
        self.tracker = Tracker.of(cfg) \
            if cfg.controller.dataplane.short_flows == "tracker" else None
        # the messages of a flow on a switch (ryu_apps/flow_messages.py), called on the path
        # by the managers as well
        m = self.messages = FlowMessages(cfg, backends, xid, self.instances, self.locations,
                                         self.next_hop, self.mac_to_port, self.tracker)
        self.nat_rules, self.tracker_rules, self.first_packet = \
            m.nat_rules, m.tracker_rules, m.first_packet
        self.tcp_reset, self.port_towards = m.tcp_reset, m.port_towards

    # ------------------------------------------------------------------ packet-ins
    def vip_packet(self, dpid: int, in_port: int, data: bytes, f: ofwire.Frame,
                   now: float) -> CoreResult:
        """A TCP segment or UDP datagram to a VIP (not a health-probe answer): of a flow
        whose rules are there (it met the switch's stale path), the same instance and no
        new rules (`repeat`); from a select-group slot in transition (its destination MAC
        the old owner's), a flow under way stays with the old owner on its own rule pair;
        any other segment of a flow that ended recently, resumed; a TCP segment that is
        not a SYN and that no flow owns, a reset from the VIP; a SYN (or a first datagram),
        a decision, the NAT rule pair (reverse first), a barrier and the packet, in one
        write; beyond max_active_flows, or with no healthy instance, dropped and counted.
        Tracker mode: a repeat is committed once more (the client's SYN, sent again while
        the first waited), then goes on a rule pair (the tracker refuses it); a resumed
        flow goes on a rule pair."""
        out = CoreResult()
        proto = "tcp" if f.ip_proto == ofwire.IPPROTO_TCP else "udp"
        ms = self.service_at.get((f.ip_dst, proto, f.dst_port))
        if ms is None:
            return out   # nothing listens on this VIP port
        if dpid not in self.switch_dpids:
            # A switch outside the configured topology: no path from it to any instance is
            # known, so no flow may be recorded or counted for it.
            out.kinds.append("foreign_switch")
            if dpid not in self.foreign_switches:
                self.foreign_switches.add(dpid)
                out.warnings.append(f"switch {dpid:016x} is not in the configuration: new "
                                    f"flows from it to the VIPs are dropped")
            return out
        key = (dpid, proto, f.ip_src, f.src_port, f.ip_dst, f.dst_port)
        rec = self.flows.lookup(key)
        if rec is not None:
            # The rules are there, but this packet met the switch's cached "to controller"
            # path before it was revalidated: same instance, no new decision, no new rules.
            out.kinds.append("repeat")
            if not self._path_to(out, dpid, rec, f, now):
                return out
            rules = b""
            if rec.tracked and rec.recommits:
                # the tracker does not hold it after a second commit (it refuses it, or lost
                # it): the same instance on a rule pair, not a loop of commits
                self._off_tracker(rec)
                rules = self.nat_rules(dpid, rec, now)
            elif rec.tracked:
                rec.recommits += 1    # the client's SYN again, sent while the first waited
            elif not rec.rules_sent:
                # no rules of this process on the switch (it reconnected while no path led
                # to the instance; or the flow was adopted): not a packet ahead of its rules
                # but a flow without them. Not on a timer: a switch slow to take flow-mods
                # would get them twice
                rules = self.nat_rules(dpid, rec, now)
            out.sends.append((dpid, rules + self.first_packet(dpid, in_port, data, rec)))
            return out
        # from a select-group slot in transition (data-plane mode), marked with its old owner
        owner = self.instance_macs.get(f.eth_dst)
        if owner is not None and owner.microservice != ms.name:
            owner = None
        if owner is not None:
            out.kinds.append("dp_transition")
        if proto == "udp" or not f.tcp_flags & ofwire.TCP_SYN:
            # not the start of a connection: one that went quiet past the idle timeout
            rec = self.flows.resumable(key=key)
            if rec is not None:
                if not self._path_to(out, dpid, rec, f, now):
                    return out
                self.flows.resume(key=key)
                out.kinds.append("resumed")
                if rec.tracked:
                    self._off_tracker(rec)     # what brought it back missed the tracker
                out.sends.append((dpid, self.nat_rules(dpid, rec, now) +
                                  self.first_packet(dpid, in_port, data, rec)))
                return out
            if owner is not None and self.policy_core.healthy.get(owner.name, True):
                # a flow under way in a moving slot stays with its old owner, on a NAT rule
                # pair of its own; a new one (a SYN) gets a decision below
                try:
                    self._start_flow(out, dpid, in_port, data, f, proto, ms,
                                     self.backends[owner.name], now)
                except LookupError as exc:      # no path left to the old owner
                    self._no_path(out, dpid, f, exc, now)
                return out
            if proto == "tcp":
                # Only a SYN opens a connection: a segment of a connection nobody knows any
                # more would be refused by any instance, and counting it as a new flow
                # would add zero-length flows to the profiler's statistics. The client gets
                # a reset at once, as from a host that lost the connection, instead of
                # retransmitting into silence.
                out.kinds.append("tcp_not_syn")
                if f.tcp_flags & ofwire.TCP_ACK and not f.tcp_flags & ofwire.TCP_RST:
                    out.sends.append((dpid, self.tcp_reset(dpid, in_port, f)))
                return out
        elif f.tcp_flags & ofwire.TCP_ACK:
            out.kinds.append("tcp_not_syn")   # a SYN-ACK towards a VIP: nothing to open
            return out
        if self.flows.active_count() >= self.cfg.controller.max_active_flows:
            # a flood of new flows must not grow the records without bound
            out.kinds.append("flow_cap")
            if now - self._flow_cap_logged > FLOW_CAP_LOG_EVERY_S:
                self._flow_cap_logged = now
                out.warnings.append(f"{self.flows.active_count()} active flows "
                                    f"(controller.max_active_flows): new flows are dropped "
                                    f"until some end")
            return out
        out.kinds.append("new_flow")
        try:
            # the 5-tuple without the switch: a flow hashes alike wherever it enters (maglev)
            t0 = self.timer() if self.timer else 0.0
            # a long TCP flow's end is watched (its FIN comes here too): the policy core
            # counts it as running until then, not by how long such flows lasted (and
            # under malb a short one's: PolicyCore.watches)
            watched = key if proto == "tcp" and self.policy_core.watches(ms.name) else None
            d = self.policy_core.choose(ms.name, now, flow_key=key[1:], watched=watched,
                                        caller=f.ip_src)
            if self.timer:
                out.choose_s = self.timer() - t0
        except NoBackend as exc:
            out.no_backend = ms.name
            out.warnings.append(f"{exc}: flow from {f.ip_src}:{f.src_port} dropped")
            return out
        out.decision = d
        try:
            self._start_flow(out, dpid, in_port, data, f, proto, ms, self.backends[d.instance],
                             now, fin_watch=watched is not None,
                             tracked=self.tracker is not None and proto == "tcp" and
                             self.policy_core.profiles.flow_class(ms.name)[0] == "short")
        except LookupError as exc:
            # the user's network: no link from this switch towards the instance found yet
            if watched is not None:
                self.policy_core.flow_ended(watched, now)
            out.decision = None
            out.kinds.append("no_path")
            out.warnings.append(f"switch {dpid:016x}: {exc}: flow from {f.ip_src}:"
                                f"{f.src_port} dropped")
        return out

    def _path_to(self, out: CoreResult, dpid: int, rec: FlowRecord, f: ofwire.Frame,
                 now: float) -> bool:
        """Whether a path leads from the switch to the flow's instance; if none, the packet
        is dropped (_no_path). Checked before a flow under way is changed: one changed and
        then left without its rules would stay so."""
        try:
            self.port_towards(dpid, self.instances[rec.instance])
        except LookupError as exc:
            self._no_path(out, dpid, f, exc, now)
            return False
        return True

    def _no_path(self, out: CoreResult, dpid: int, f: ofwire.Frame, exc: LookupError,
                 now: float) -> None:
        """A packet of a flow under way whose instance no path leads to from this switch
        (the user's network: links not found again yet, or the instance looked for again):
        dropped, the flow left as it is; the sender's next packet tries again. Logged once
        per NO_PATH_LOG_EVERY_S: retransmissions would repeat it."""
        out.kinds.append("no_path")
        if now - self._no_path_logged >= NO_PATH_LOG_EVERY_S:
            self._no_path_logged = now
            out.warnings.append(f"switch {dpid:016x}: {exc}: a packet from {f.ip_src}:"
                                f"{f.src_port} dropped (and any others for "
                                f"{NO_PATH_LOG_EVERY_S:g} s, counted as no_path)")

    def fin(self, dpid: int, f: ofwire.Frame, now: float) -> CoreResult:
        """An instance's FIN or reset, copied by a flow's FIN watch after the reverse
        rewrite, or in tracker mode a client's reset copied after the forward one (the
        switch has sent either on): the flow ends for the policy core."""
        out = CoreResult(kinds=["fin"])
        if (f.ip_src, "tcp", f.src_port) in self.service_at:     # from a VIP: an answer's
            key = (dpid, "tcp", f.ip_dst, f.dst_port, f.ip_src, f.src_port)
        else:                                  # the client's reset, on its way to the instance
            towards = self.flows.lookup_reverse(("tcp", f.ip_dst, f.dst_port, f.ip_src,
                                                 f.src_port))
            if towards is None or towards.dpid != dpid:
                return out                     # of a flow that ended already
            key = towards.key
        self.policy_core.flow_ended(key, now)
        self.flows.fin(key, now)
        return out

    def tracked_miss(self, dpid: int, in_port: int, data: bytes, f: ofwire.Frame,
                     now: float) -> CoreResult:
        """A TCP segment from the tracker's catch-all, already translated: of a tracked
        connection whose rule the switch had just been sent, but which met the datapath's
        cached "to controller" path before it was revalidated. Sent on as the rule would
        (an end it carries ends the flow, as its watch would have); not handled otherwise
        (an untranslated segment: to a VIP, or an answer the tracker does not hold)."""
        out = CoreResult()
        towards = self.flows.lookup_reverse(("tcp", f.ip_dst, f.dst_port, f.ip_src, f.src_port))
        if towards is not None and towards.tracked and towards.dpid == dpid:
            inst = self.instances[towards.instance]
            try:
                actions = towards_actions(inst.mac, self.port_towards(dpid, inst))
            except LookupError:       # moved away meanwhile: the client's retransmission
                out.handled = False
                return out
            end = f.tcp_flags & ofwire.TCP_RST
        else:
            back = self.flows.lookup((dpid, "tcp", f.ip_dst, f.dst_port, f.ip_src, f.src_port))
            if back is None or not back.tracked:
                out.handled = False
                return out
            assert self.tracker is not None     # a tracked flow: tracker mode
            actions = self.tracker.back_actions(back.client_in_port)
            end = f.tcp_flags & (ofwire.TCP_FIN | ofwire.TCP_RST)
        out.kinds.append("repeat")
        out.sends.append((dpid, ofwire.packet_out(self.xid(dpid), in_port, actions, data)))
        if end:
            out.kinds += self.fin(dpid, f, now).kinds
        return out

    def orphan(self, dpid: int, data: bytes, f: ofwire.Frame, now: float,
               connected: Callable[[int], bool]) -> CoreResult:
        """An instance answers on a connection whose rules expired: resume the flow (rules on
        the client's edge switch again) and deliver the packet rewritten to the VIP. Not
        handled when no NATed flow owns the packet (traffic sent to the instance's own
        address), which then goes on as plain L2."""
        out = CoreResult()
        proto = "tcp" if f.ip_proto == ofwire.IPPROTO_TCP else "udp"
        reverse_key = (proto, f.ip_src, f.src_port, f.ip_dst, f.dst_port)
        rec = self.flows.lookup_reverse(reverse_key)
        if rec is not None and dpid != rec.dpid:
            out.handled = False     # on its way to the flow's edge switch: plain L2 takes it
            return out
        flow = rec or self.flows.resumable(reverse_key=reverse_key)
        if flow is None:
            out.handled = False
            return out
        if connected(flow.dpid) and not self._path_to(out, flow.dpid, flow, f, now):
            return out   # (a switch away: its reconnection restores the rules, or marks it)
        if rec is not None:
            # The flow was just resumed and this packet, sent right behind the one that
            # resumed it, met the switch before the new rules: deliver it the same way
            # (plain L2 would carry the instance's address and the client would reset).
            out.kinds.append("repeat")
            # rules sent a while ago and still answers come here: a rule is missing (an
            # adopted flow had only one, a switch lost one); send the pair again
            resend = now - rec.rules_sent > RULES_RESEND_AFTER_S
        else:
            rec = self.flows.resume(reverse_key=reverse_key)
            assert rec is not None              # resumable, as `flow` above
            out.kinds.append("resumed")
            resend = True
        if rec.tracked:
            # the switch's tracker does not hold it (the switch restarted): rules from now on
            self._off_tracker(rec)
            resend = True
        if f.tcp_flags & ofwire.TCP_FIN and rec.fin_watch:
            self.policy_core.flow_ended(rec.key, now)     # its rules had gone: no watch saw it
            self.flows.fin(rec.key, now)
        if not connected(rec.dpid):
            return out   # the edge switch is away; its reconnection restores the rules
        c = self.cfg.controller
        actions = ofwire.reverse_actions(proto, c.vip_mac, rec.vip, rec.vport, rec.backend_port,
                                         rec.client_in_port)
        rules = self.nat_rules(rec.dpid, rec, now) if resend else b""
        out.sends.append((rec.dpid, rules + ofwire.packet_out(
            self.xid(rec.dpid), ofwire.OFPP_CONTROLLER, actions, data)))
        return out

    # ------------------------------------------------------------------ messages
    def _start_flow(self, out: CoreResult, dpid: int, in_port: int, data: bytes, f, proto: str,
                    ms, backend: Backend, now: float, fin_watch: bool = False,
                    tracked: bool = False) -> None:
        rec = new_record(self.flows.new_flow_id(ms.index, backend.order), dpid, in_port, f,
                         proto, ms, backend, now, fin_watch, tracked)
        # built before the record is kept: nothing is recorded for a flow whose rules could
        # not be made
        messages = self.messages.for_new_flow(dpid, in_port, data, rec, now)
        if self.cfg.declared_network and (f.ip_src, ms.name) not in \
                self.client_orphans.get(dpid, ()):
            # first flow of this client here: its answers outliving their rules come back
            # to the controller from now on (before the rules: they are already in order)
            self.client_orphans.setdefault(dpid, set()).add((f.ip_src, ms.name))
            messages = orphan_rules(self.cfg, self.xid, dpid, self.cfg.instances_of(ms.name),
                                    (f.ip_src, "255.255.255.255"), self.tracker) + messages
        self.flows.add(rec)
        out.sends.append((dpid, messages))

    def _off_tracker(self, rec: FlowRecord) -> None:
        """A tracked flow goes on a rule pair: its FIN watched only if the policy watches
        its microservice (tracked, every end was copied; unwatched, an idled-out rule pair
        is its end, not a dormant flow)."""
        self.flows.untrack(rec)
        rec.fin_watch = self.policy_core.watches(rec.microservice)
