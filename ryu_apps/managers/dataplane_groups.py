"""DataplaneGroups: data-plane mode (controller.dataplane.short_flows: switch). Per
microservice whose short flows the switch may balance, one Maglev slot table shared by
every switch, rendered as an OpenFlow select group with the VIP rule and the stateless
reverse NAT in front of it, and (controller.dataplane.transitions: switch) the rules that
keep a moving slot's connections in the switch; kept in step with the pools, health, policy
and flow classes, only what changed sent. With controller.dataplane.connection_poll_s, the
rules beside the reverse NAT that count each instance's open TCP connections, and their
statistics polled that often (estimators/switch_connections.py), the shares set again from
each complete count. The slot tables, buckets and rules themselves: ryu_apps/dataplane.py."""
from __future__ import annotations

from ryu_apps import dataplane, maglev, ofwire
from ryu_apps.managers.flow_statistics import FlowStat
from ryu_apps.managers.base import TO_CONTROLLER, Manager
from ryu_apps.managers.switch_rules import HOST_TABLE
from ryu_apps.core_result import CoreResult

# VIP:port to the select group above the VIP's to-controller rule; the stateless reverse NAT
# above the orphan rules it replaces, below the per-flow NAT pairs (flows that did go
# through the controller keep theirs)
PRIO_DP_GROUP, PRIO_DP_REVERSE = 120, 170
# an instance calling its own microservice's VIP: to the controller, which never gives it
# itself (the group might: the switch cannot send it back out of its own port)
PRIO_DP_SELF_CALL = PRIO_DP_GROUP + 1
DP_COOKIE = 0x4D44 << 48   # "MD": data-plane rules, never polled with the NAT rules
# cookie kinds (bits 32-39), microservice index in the low bits, a counter rule's instance
# index in bits 16-31
DP_VIP, DP_REVERSE, DP_TRANSITION, DP_TRANSITION_MISS = 1, 2, 3, 4
DP_OPENED, DP_CLOSED = 8, 9             # the connection counters: one poll asks for both
COUNTERS = DP_COOKIE | DP_OPENED << 32
COUNTERS_MASK = 0xFFFFFFFE << 32        # kinds 8 and 9, any instance and microservice
COUNTER_KIND = {dataplane.OPENED: DP_OPENED, dataplane.CLOSED: DP_CLOSED}
PRIO_DP_COUNT = PRIO_DP_REVERSE + 1     # above the reverse NAT, below the NAT pairs
DP_GROUP_BASE = 0x4D000    # select group id = base + microservice index
# a count older than this many poll periods is not used (a switch that stopped answering)
COUNT_FRESH_POLLS = 4


def dp_cookie(kind: int, ms_index: int, inst_index: int = 0) -> int:
    return DP_COOKIE | kind << 32 | inst_index << 16 | ms_index


def packed_buckets(view: tuple, m, target_of) -> bytes:
    """The select group's buckets for a slot view, packed in slot order (equal buckets
    packed once): to the owner's target, or through the connection tracker's transition
    table for a slot in transition."""
    packed: dict[object, bytes] = {}
    parts = []
    for bk in dataplane.buckets(view, m.protocol, m.port, target_of, ofwire.OFPP_CONTROLLER):
        one = packed.get(bk)
        if one is None:
            if bk.track:
                then = ofwire.action_ct(dataplane.TRANSITION_ZONE, dataplane.TRANSITION_TABLE)
            else:
                assert bk.out_port is not None      # an untracked bucket outputs
                then = ofwire.action_output(bk.out_port, ofwire.OFPCML_NO_BUFFER)
            one = packed[bk] = ofwire.bucket(
                b"".join(ofwire.action_set_field(k, v) for k, v in bk.set_fields) + then,
                watch_port=ofwire.OFPP_ANY if bk.watch_port is None else bk.watch_port)
        parts.append(one)
    return b"".join(parts)


class DataplaneGroups(Manager):
    def __init__(self, cfg, plan, xid, policy_core, backends: dict, path, switches: set[int]):
        self.cfg, self.plan, self.xid = cfg, plan, xid
        self.policy_core, self.backends = policy_core, backends
        self.path, self.switches = path, switches
        c = cfg.controller
        self.on = c.dataplane.short_flows == "switch"
        # the connection tracker keeps TCP only: a UDP flow has no start to tell it by
        self.slot_tables = {m.name: dataplane.SlotTable(
            c.dataplane.table_size,
            in_switch=c.dataplane.transitions == "switch" and m.protocol == "tcp")
            for m in cfg.microservices}
        self.group_capable: dict[int, bool] = {}
        # dpid -> ms -> (view, the targets it was rendered with): a port towards an instance
        # that changes (links found or lost, an instance found elsewhere) renders it again
        self.installed: dict[int, dict[str, tuple]] = {}
        # dpid -> instance -> the target its TRANSITION_TABLE rules were sent for
        self.transition_rules: dict[int, dict[str, dataplane.Target]] = {}
        self.last_change: dict[str, dict] = {}
        self.poll_s = c.dataplane.connection_poll_s if self.on else 0.0
        self.counting = self.poll_s > 0
        if self.counting:
            policy_core.switch_connections.max_age_s = COUNT_FRESH_POLLS * self.poll_s
        # dpid -> ms -> the instances whose counters the switch has
        self.counted: dict[int, dict[str, set[str]]] = {}
        # a poll's xid -> (its switch, the counter rules' entries of its reply so far)
        self.polls: dict[int, tuple[int, list[FlowStat]]] = {}

    def switch_up(self, dpid: int, now: float) -> list[bytes]:
        if not self.on:
            return []
        # whether the switch has select groups decides per-flow or data-plane mode
        self.installed[dpid] = {}
        self.counted.pop(dpid, None)
        self.transition_rules.pop(dpid, None)
        self.group_capable.pop(dpid, None)
        return [ofwire.multipart_request(self.xid(dpid), ofwire.OFPMP_GROUP_FEATURES)]

    def switch_down(self, dpid: int, now: float) -> None:
        self.policy_core.switch_connections.forget(dpid)
        self.polls = {x: p for x, p in self.polls.items() if p[0] != dpid}

    def pools_changed(self, now: float, out: CoreResult) -> None:
        self.sync(now, out)

    # ------------------------------------------------------------ connection counts
    def poll_connections(self, now: float) -> CoreResult:
        """The counter rules' statistics, asked of every switch that has groups (a reply
        still out is superseded: its switch is asked again)."""
        out = CoreResult()
        if not self.counting:
            return out
        for dpid in sorted(self.switches):
            if not self.installed.get(dpid):
                continue
            self.polls = {x: p for x, p in self.polls.items() if p[0] != dpid}
            xid = self.xid(dpid)
            self.polls[xid] = (dpid, [])
            out.sends.append((dpid, ofwire.flow_stats_request(xid, COUNTERS, COUNTERS_MASK)))
        return out

    def answers_poll(self, xid: int) -> bool:
        return xid in self.polls

    def counter_stats(self, dpid: int, entries: list[FlowStat], now: float, xid: int,
                      more: bool = False) -> CoreResult:
        """One reply (or part of one) to a poll; complete, the switch's counts replace its
        last ones and the groups follow what the policy makes of them."""
        poll = self.polls.get(xid)
        if poll is None or poll[0] != dpid:
            return CoreResult()
        poll[1].extend(entries)
        if more:
            return CoreResult()
        del self.polls[xid]
        counts: dict[str, list[int]] = {}
        for st in poll[1]:
            kind = st.cookie >> 32 & 0xFF
            inst = self.plan.instance_by_index.get(st.cookie >> 16 & 0xFFFF)
            if inst is None or kind not in (DP_OPENED, DP_CLOSED):
                continue
            counts.setdefault(inst.name, [0, 0])[kind == DP_CLOSED] += st.packet_count
        known = self.policy_core.switch_connections
        known.update(dpid, {n: (c[0], c[1]) for n, c in counts.items()}, now)
        if any(d in self.switches for d, _ in self.polls.values()):
            return CoreResult()             # the round's other replies still to come
        # the round is in: the groups follow the counts once
        out = CoreResult()
        for name, n in known.totals().items():
            out.metrics.append(("set", "malb_dataplane_open_connections", (name,), n))
        return self.sync(now, out)

    def group_features(self, dpid: int, types: int, max_select_groups: int,
                       now: float) -> CoreResult:
        select = bool(types & (1 << ofwire.OFPGT_SELECT)) and max_select_groups > 0
        self.group_capable[dpid] = select
        out = CoreResult()
        if not select:
            out.warnings.append(f"switch {dpid:016x} has no select groups: short flows stay "
                                f"under per-flow control there")
        return self.sync(now, out)

    def _services(self) -> dict[str, dict[str, float] | None]:
        """Per microservice, the instance shares its select group should render, or None
        when its flows stay under per-flow control."""
        out = {}
        for m in self.cfg.microservices:
            # the baselines (srr, ln) keep a controller decision per flow, as the paper
            # defines them; a policy says whether the switch may balance its short flows
            on = (self.policy_core.strategy.dataplane
                  and self.policy_core.profiles.flow_class(m.name)[0] == "short")
            out[m.name] = self.policy_core.short_flow_shares(m.name) if on else None
        return out

    def sync(self, now: float, out: CoreResult | None = None) -> CoreResult:
        """Bring every switch's select groups and data-plane rules to what the pools,
        health, policy and flow classes say now, and end transitions whose grace period is
        over; only what changed is sent."""
        out = out or CoreResult()
        if not self.on:
            return out
        c = self.cfg.controller
        # connections to these may go on: their moved slots pass through the controller
        alive = {n for n in self.plan.instances if self.policy_core.healthy.get(n, True)}
        services = self._services()
        self.policy_core.set_switch_balanced(
            name for name, shares in services.items() if shares is not None)
        for name, shares in services.items():
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
                self.last_change[name] = {
                    "time": now, "slots_moved": len(moved),
                    "slots_in_transition": len(table.transitions),
                    "share_moved": round(len(moved) / table.size, 4), "slots": counts}
                out.infos.append("data-plane table of %s: %d of %d slots moved (%s)" % (
                    name, len(moved), table.size,
                    ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                    or "no instance: per-flow control"))
        views = {m.name: self.slot_tables[m.name].view() for m in self.cfg.microservices}
        owners = {name: dataplane.owners(v) for name, v in views.items() if v is not None}
        for dpid in sorted(self.switches):
            if not self.group_capable.get(dpid):
                continue
            installed = self.installed.setdefault(dpid, {})
            for m in self.cfg.microservices:
                view = views[m.name]
                have = installed.get(m.name)
                try:
                    if view is None:
                        if have is None:
                            continue
                        out.sends.append((dpid, self._remove(dpid, m)))
                        del installed[m.name]
                    else:
                        targets = {n: self._target(dpid, n) for n in owners[m.name]}
                        want = (view, tuple(targets.values()))
                        if want == have:
                            continue
                        out.sends.append((dpid, self._install(dpid, m, view, targets.__getitem__,
                                                              first=have is None)))
                        installed[m.name] = want
                except LookupError as exc:     # no path from this switch to an instance
                    out.warnings.append(f"switch {dpid:016x}: {m.name}: {exc}")
        return out

    def _install(self, dpid: int, m, view: tuple, target_of, first: bool) -> bytes:
        """The group (new, or its buckets replaced), and on first install the VIP rule and
        the reverse NAT rules; target_of gives the view's owners' targets on this switch.
        Buckets keep their positions, so only moved slots change."""
        buckets = packed_buckets(view, m, target_of)
        gid = DP_GROUP_BASE + m.index
        commands = (ofwire.OFPGC_ADD, ofwire.OFPGC_MODIFY) if first else (ofwire.OFPGC_MODIFY,)
        # the rules a moving slot's packets need in the switch before the buckets that use them
        buf = self._transition_rules(dpid, m, view, target_of)
        if first:
            self.counted.setdefault(dpid, {})[m.name] = set()
        buf += self._counter_rules(dpid, m, dataplane.owners(view))
        # ADD then MODIFY: a group a previous controller left is replaced (ADD fails on it)
        buf += b"".join(ofwire.group_mod(self.xid(dpid), command, ofwire.OFPGT_SELECT, gid,
                                         buckets) for command in commands)
        if not first:
            return buf
        c = self.cfg.controller
        for inst in self.cfg.slots:
            if inst.microservice != m.name:
                continue
            buf += ofwire.flow_mod(self.xid(dpid), dp_cookie(DP_VIP, m.index),
                                   PRIO_DP_SELF_CALL, {**dataplane.vip_match(
                                       m.protocol, m.vip, m.port), "ipv4_src": inst.ip},
                                   TO_CONTROLLER)
            for block in self.plan.local_blocks.get(dpid, ()):
                match, fields = dataplane.reverse_rule(m.protocol, inst.ip, m.port, block,
                                                       c.vip_mac, m.vip, m.port)
                buf += ofwire.flow_mod(
                    self.xid(dpid), dp_cookie(DP_REVERSE, m.index), PRIO_DP_REVERSE, match,
                    b"".join(ofwire.action_set_field(k, v) for k, v in fields), goto=HOST_TABLE)
        buf += ofwire.flow_mod(self.xid(dpid), dp_cookie(DP_VIP, m.index), PRIO_DP_GROUP,
                               dataplane.vip_match(m.protocol, m.vip, m.port),
                               ofwire.action_group(gid))
        return buf

    def _counter_rules(self, dpid: int, m, names: list[str]) -> bytes:
        """The connection counters of the instances named that this switch lacks: beside
        each of their reverse rules, with its actions. Only for instances that took slots:
        every poll reads them all (an instance that leaves keeps its counters until the
        group goes, so that its connections still end in the count)."""
        have = self.counted.get(dpid, {}).get(m.name)
        if not self.counting or m.protocol != "tcp" or have is None:
            return b""
        c, buf = self.cfg.controller, b""
        for name in names:
            if name in have:
                continue
            inst = self.plan.instances[name]
            for block in self.plan.local_blocks.get(dpid, ()):
                match, fields = dataplane.reverse_rule(m.protocol, inst.ip, m.port, block,
                                                       c.vip_mac, m.vip, m.port)
                actions = b"".join(ofwire.action_set_field(k, v) for k, v in fields)
                for what, counted in dataplane.counter_rules(match):
                    buf += ofwire.flow_mod(
                        self.xid(dpid), dp_cookie(COUNTER_KIND[what], m.index, inst.slot),
                        PRIO_DP_COUNT, counted, actions, goto=HOST_TABLE)
            have.add(name)
        return buf

    def _target(self, dpid: int, name: str) -> dataplane.Target:
        """Where this switch's buckets and rules send an instance's packets (LookupError:
        no path from it to the instance)."""
        b, inst = self.backends[name], self.plan.instances[name]
        at = self.plan.locations.where(name)
        return dataplane.Target(name, b.mac, b.ip, b.port, self.path.port_towards(dpid, inst),
                                at[1] if at is not None and at[0] == dpid else None,
                                mark=inst.slot + 1)

    def _transition_rules(self, dpid: int, m, view: tuple, target_of) -> bytes:
        """TRANSITION_TABLE's rules for the new owners of the view's slots in transition
        that this switch lacks (or has for another port), and on first use its catch-all."""
        sent = self.transition_rules.get(dpid)
        buf = b""
        for name in sorted({e[1] for e in view if isinstance(e, tuple) and len(e) == 2}):
            if sent is None:
                sent = self.transition_rules[dpid] = {}
                buf += ofwire.flow_mod(self.xid(dpid), dp_cookie(DP_TRANSITION_MISS, 0), 0, {},
                                       TO_CONTROLLER, table=dataplane.TRANSITION_TABLE)
            t = target_of(name)
            if sent.get(name) == t:
                continue
            for r in dataplane.transition_rules(t, m.protocol, m.port):
                actions = b"".join(ofwire.action_set_field(k, v) for k, v in r.set_fields) + \
                    (TO_CONTROLLER if r.out_port is None else ofwire.action_output(r.out_port))
                if r.commit_mark is not None:
                    actions = ofwire.action_ct(dataplane.TRANSITION_ZONE, commit=True,
                                               actions=ofwire.action_set_field(
                                                   "ct_mark", r.commit_mark)) + actions
                buf += ofwire.flow_mod(self.xid(dpid), dp_cookie(DP_TRANSITION, m.index),
                                       r.priority, r.match, actions,
                                       table=dataplane.TRANSITION_TABLE)
            sent[name] = t
        return buf

    def _remove(self, dpid: int, m) -> bytes:
        """Back to per-flow control: the VIP rule first (new flows reach the controller),
        then the reverse rules, the transition rules and the group."""
        buf = b"".join(ofwire.flow_delete(self.xid(dpid), dp_cookie(kind, m.index),
                                          0xFFFFFFFFFFFFFFFF) for kind in (DP_VIP, DP_REVERSE))
        # the counters, of every instance of the microservice
        buf += ofwire.flow_delete(self.xid(dpid), dp_cookie(DP_OPENED, m.index),
                                  COUNTERS_MASK | 0xFFFF)
        buf += ofwire.flow_delete(self.xid(dpid), dp_cookie(DP_TRANSITION, m.index),
                                  0xFFFFFFFFFFFFFFFF, table=dataplane.TRANSITION_TABLE)
        self.counted.get(dpid, {}).pop(m.name, None)
        sent = self.transition_rules.get(dpid, {})
        for inst in self.cfg.slots:
            if inst.microservice == m.name:
                sent.pop(inst.name, None)
        return buf + ofwire.group_mod(self.xid(dpid), ofwire.OFPGC_DELETE, ofwire.OFPGT_SELECT,
                                      DP_GROUP_BASE + m.index)

    def status(self) -> dict:
        c = self.cfg.controller.dataplane
        out = {"short_flows": c.short_flows, "table_size": c.table_size,
               "connection_poll_s": c.connection_poll_s, "microservices": {}}
        if not self.on:
            return out
        if self.counting:
            out["open_connections"] = self.policy_core.switch_connections.status(
                self.policy_core.clock())
        for name, table in self.slot_tables.items():
            out["microservices"][name] = {
                "slots": maglev.slot_counts(table.table or ()),
                "slots_in_transition": len(table.transitions),
                "switches": sorted(f"{d:016x}" for d, inst in self.installed.items()
                                   if name in inst),
                "last_change": self.last_change.get(name)}
        out["switches_without_select_groups"] = sorted(
            f"{d:016x}" for d, ok in self.group_capable.items() if not ok)
        return out
