"""FlowStatistics: the NAT rules' side of the flow records (ryu_apps/flows.py). Rules
removed by the switch end or idle their flow; on a (re)connection the rules of flows still
active are installed again (a tracked flow's tracker rules), and those that no path lets it
install end if the switch's full statistics, requested then, list none of their rules
(rules_lost); the rules' statistics are polled in slices spread over the monitoring period,
and a rule this process did not install (a previous controller's) is adopted as a flow
record. Tracked flows whose end was not seen are aged out as the polling goes; the
tracker's counting rules are read once a cycle, for the communication graph's bytes."""
from __future__ import annotations

from typing import NamedTuple

from ryu_apps import ofwire, tracker
from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FlowRecord, fin_cookie, flow_id_of, \
    parse_cookie
from ryu_apps.managers.base import Manager
from ryu_apps.core_result import CoreResult

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


def slices_for(rules: int) -> int:
    slices = 1
    while slices < MAX_SLICES and rules / slices > RULES_PER_SLICE:
        slices *= 2
    return slices


class FlowStatistics(Manager):
    def __init__(self, cfg, plan, xid, policy_core, flows, path, switches: set[int]):
        self.cfg, self.plan, self.xid = cfg, plan, xid
        self.policy_core, self.flows, self.path, self.switches = policy_core, flows, path, switches
        self.slices, self.flow_slice = 1, 0
        self.cycle = float(cfg.controller.monitoring_period_s)
        self.restored = 0          # NAT flows restored at the last (re)connection
        self.unrestored: dict[str, int] = {}     # and those not, per instance with no path
        # flows not restored (rule pairs), by flow id: their switch, until its statistics
        # requested with the reconnection (by their xid, per switch) have been answered
        self.unseen: dict[int, int] = {}
        self.full_request: dict[int, int] = {}

    def switch_up(self, dpid: int, now: float) -> list[bytes]:
        """The NAT rules of flows still active, then the statistics that show what rules a
        previous controller left (a restart), and which of the flows not restored the
        switch still holds."""
        # (a tracked connection has no rules of its own: the switch's tracker may still hold
        # it, so the tracker's rules it needs, if the switch lost them but not its tracker)
        buf, self.restored, self.unrestored = [], 0, {}
        self._forget_unseen(dpid)
        for rec in self.flows.active(dpid):
            try:
                buf.append(self.path.tracker_rules(dpid, rec) if rec.tracked else
                           self.path.nat_rules(dpid, rec, now))
            except LookupError:
                # no path from this switch to the instance yet (the user's network: links
                # not found again since the switch came back, or the instance looked for
                # again). The switch may still hold the flow's rules (a control channel
                # that dropped); if not, its next packet comes to the controller as a
                # repeat, which sends the rules once a path is known (rules_sent 0), and
                # the statistics below do not list them (unseen). A tracked one ages out
                rec.rules_sent = 0.0
                self.unrestored[rec.instance] = self.unrestored.get(rec.instance, 0) + 1
                if not rec.tracked:
                    self.unseen[rec.flow_id] = dpid
                continue
            self.restored += not rec.tracked
        xid = self.xid(dpid)
        if any(d == dpid for d in self.unseen.values()):
            self.full_request[dpid] = xid
        return [*buf, self.stats_requests(dpid, xid=xid)]

    def switch_down(self, dpid: int, now: float) -> None:
        self._forget_unseen(dpid)       # its reconnection looks again

    def _forget_unseen(self, dpid: int) -> None:
        self.full_request.pop(dpid, None)
        if self.unseen:
            self.unseen = {fid: d for fid, d in self.unseen.items() if d != dpid}

    def flow_removed(self, dpid: int, cookie: int, duration_s: float, byte_count: int,
                     packet_count: int, reason: int, now: float) -> CoreResult:
        out = CoreResult()
        rec = self.flows.on_removed(cookie, duration_s, byte_count, packet_count,
                                    REMOVED_REASONS.get(reason, "other"), now)
        # an idled-out rule's flow went quiet the idle timeout before its removal
        idle = rec is not None and rec.end_reason == "idle_timeout"
        if rec is not None and rec.fin_watch and rec.ended == now and len(rec.removed) == 1 \
                and not self.policy_core.flow_idle(
                    rec.key, now, now - self.flows.idle_timeout if idle else None) and idle:
            # the pair's first rule gone, and not a short flow that lost its FIN (a SYN
            # flood's, which ends here): a long one computing in silence goes on until its
            # FIN, for the profiler too
            self.flows.go_dormant(rec)
        if rec is not None and rec.fin_watch and rec.ended == now and \
                len(rec.removed) == 1 and rec.dpid in self.switches:
            # the pair is going: its FIN watch too, once, with the pair's first rule (a
            # resume installs all three again)
            out.sends.append((rec.dpid, ofwire.flow_delete(
                self.xid(rec.dpid), fin_cookie(rec.flow_id), 0xFFFFFFFFFFFFFFFF)))
        return out

    def stats_requests(self, dpid: int, flow_slice: int = 0, slices: int = 1,
                       xid: int | None = None) -> bytes:
        """Port statistics and the tracker's counting rules (with slice 0), and one slice of
        the NAT flow statistics (under `xid`, when given)."""
        buf = ofwire.flow_stats_request(self.xid(dpid) if xid is None else xid,
                                        COOKIE_BASE | flow_slice, COOKIE_MASK | (slices - 1))
        if flow_slice == 0:
            buf += ofwire.port_stats_request(self.xid(dpid))
            if self.path.tracker is not None:
                buf += self.path.tracker.pair_stats_request(self.xid(dpid), dpid)
        return buf

    def poll_stats(self, now: float) -> CoreResult:
        """One step of the statistics loop: one slice to every switch; out.next_in_s says
        when the next step is due. A cycle covers every rule once, in one period, or longer
        when the rules exceed the statistics budget. The number of slices follows the number
        of rules at every step: it grows at once (a burst of new flows must not make one
        huge reply) and shrinks only at a cycle's end."""
        out = CoreResult()
        for rec in self.flows.age_out_tracked(now):
            self.policy_core.flow_ended(rec.key, now, quiet_since=rec.last_active)
        period = self.cfg.controller.monitoring_period_s
        rules = 2 * (self.flows.active_count() - self.flows.tracked_count())
        need = slices_for(rules)
        if need > self.slices or (need < self.slices and self.flow_slice == 0):
            self.slices, self.flow_slice = need, 0
        if self.flow_slice == 0:
            self.cycle = max(period, rules / STATS_RULES_PER_S)
            out.metrics.append(("set", "malb_flow_stats_cycle_seconds", (), self.cycle))
        for dpid in sorted(self.switches):
            out.sends.append((dpid, self.stats_requests(dpid, self.flow_slice, self.slices)))
        self.flow_slice = (self.flow_slice + 1) % self.slices
        out.next_in_s = self.cycle / self.slices
        return out

    def flow_stats(self, dpid: int, entries: list[FlowStat], now: float, xid: int = 0,
                   more: bool = False) -> CoreResult:
        """One reply (or one part of one, `more` to come) to the flow statistics request
        `xid`."""
        out = CoreResult()
        unseen = self.unseen
        for st in entries:
            if st.cookie & COOKIE_MASK == tracker.PAIR_COOKIE:
                self._pair_counted(dpid, st)
                continue
            rec = self.flows.on_stats(st.cookie, st.age, st.byte_count, st.packet_count, now)
            if rec is None:
                self._adopt_rule(out, dpid, st, now)
            elif unseen:
                unseen.pop(rec.flow_id, None)     # its rules are there
        if not more and xid and self.full_request.get(dpid) == xid:
            del self.full_request[dpid]
            self._rules_lost(out, dpid, now)
        out.metrics.append(("set", "malb_active_flows", (), self.flows.active_count()))
        return out

    def _pair_counted(self, dpid: int, st: FlowStat) -> None:
        """A tracker counting rule's entry: what its pair exchanged since the last one
        goes to the communication graph's edges."""
        grown = None if self.path.tracker is None else \
            self.path.tracker.pair_bytes(dpid, st.cookie, st.byte_count)
        if grown is not None and grown[2] > 0:
            self.flows.add_pair_bytes(grown[0], grown[1], grown[2])

    def _rules_lost(self, out: CoreResult, dpid: int, now: float) -> None:
        """The statistics requested with the switch's reconnection are all in: the flows it
        could not restore that they do not list, and that no packet of theirs has got their
        rules since, lost them with the switch. Each ends as if its rules had been removed,
        a long watched one dormant until its FIN, as when its rules idle out; its next
        packet resumes it."""
        ended = 0
        for fid in [fid for fid, d in self.unseen.items() if d == dpid]:
            del self.unseen[fid]
            rec = self.flows.flows.get(fid)
            if rec is None or rec.ended is not None or rec.rules_sent:
                continue         # ended meanwhile, or given its rules by a packet
            self.flows.lost(rec, now)
            if rec.fin_watch:
                if not self.policy_core.flow_idle(rec.key, now, rec.last_active):
                    self.flows.go_dormant(rec)
                out.sends.append((dpid, ofwire.flow_delete(
                    self.xid(dpid), fin_cookie(rec.flow_id), 0xFFFFFFFFFFFFFFFF)))
            ended += 1
        if ended:
            out.warnings.append(f"switch {dpid:016x}: {ended} flows not restored at its "
                                f"reconnection ended: its statistics list none of their "
                                f"rules, and no packet of theirs got them again (rules_lost)")

    def _adopt_rule(self, out: CoreResult, dpid: int, st: FlowStat, now: float) -> None:
        """A NAT rule this process did not install (a previous controller did): rebuild its
        flow record from the cookie and the match, so it is counted and reported."""
        parsed = parse_cookie(st.cookie)
        if parsed is None or parsed[0] not in (DIR_FORWARD, DIR_REVERSE):
            return
        direction, ms_idx, inst_idx, _seq = parsed
        ms, inst = self.plan.ms_by_index.get(ms_idx), self.plan.instance_by_index.get(inst_idx)
        if ms is None or inst is None:
            return
        m = st.match
        l4 = ms.protocol
        if direction == DIR_FORWARD:
            # the forward rule does not say where the client hangs; the configuration does
            client_ip, client_port = m.get("ipv4_src"), m.get(f"{l4}_src")
            in_port = self.plan.client_ports.get((dpid, client_ip), 0)
        else:
            client_ip, client_port = m.get("ipv4_dst"), m.get(f"{l4}_dst")
            in_port = st.out_ports[-1] if st.out_ports else 0
        fid = flow_id_of(st.cookie)
        rec = self.flows.flows.get(fid)
        if rec is None:
            if client_ip is None or client_port is None:
                return          # not the match our NAT rules have: nothing to adopt
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
