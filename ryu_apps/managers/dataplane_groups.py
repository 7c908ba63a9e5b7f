"""DataplaneGroups: data-plane mode (controller.dataplane.short_flows: switch). Per
microservice whose short flows the switch may balance, one Maglev slot table shared by
every switch, rendered as an OpenFlow select group with the VIP rule and the stateless
reverse NAT in front of it, and (controller.dataplane.transitions: switch) the rules that
keep a moving slot's connections in the switch; kept in step with the pools, health, policy
and flow classes, only what changed sent. The slot tables, buckets and rules themselves:
ryu_apps/dataplane.py."""
from __future__ import annotations

from ryu_apps import dataplane, maglev, ofwire
from ryu_apps.managers.base import TO_CONTROLLER, Manager
from ryu_apps.managers.switch_rules import HOST_TABLE
from ryu_apps.result import Result

# VIP:port to the select group above the VIP's to-controller rule; the stateless reverse NAT
# above the orphan rules it replaces, below the per-flow NAT pairs (flows that did go
# through the controller keep theirs)
PRIO_DP_GROUP, PRIO_DP_REVERSE = 120, 170
# an instance calling its own microservice's VIP: to the controller, which never gives it
# itself (the group might: the switch cannot send it back out of its own port)
PRIO_DP_SELF_CALL = PRIO_DP_GROUP + 1
DP_COOKIE = 0x4D44 << 48   # "MD": data-plane rules, never polled with the NAT rules
# cookie kinds (bits 32-39), microservice index in the low bits
DP_VIP, DP_REVERSE, DP_TRANSITION, DP_TRANSITION_MISS = 1, 2, 3, 4
DP_GROUP_BASE = 0x4D000    # select group id = base + microservice index


def dp_cookie(kind: int, ms_index: int) -> int:
    return DP_COOKIE | kind << 32 | ms_index


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

    def switch_up(self, dpid: int, now: float) -> list[bytes]:
        if not self.on:
            return []
        # whether the switch has select groups decides per-flow or data-plane mode
        self.installed[dpid] = {}
        self.transition_rules.pop(dpid, None)
        self.group_capable.pop(dpid, None)
        return [ofwire.multipart_request(self.xid(dpid), ofwire.OFPMP_GROUP_FEATURES)]

    def pools_changed(self, now: float, out: Result) -> None:
        self.sync(now, out)

    def group_features(self, dpid: int, types: int, max_select_groups: int,
                       now: float) -> Result:
        select = bool(types & (1 << ofwire.OFPGT_SELECT)) and max_select_groups > 0
        self.group_capable[dpid] = select
        out = Result()
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

    def sync(self, now: float, out: Result | None = None) -> Result:
        """Bring every switch's select groups and data-plane rules to what the pools,
        health, policy and flow classes say now, and end transitions whose grace period is
        over; only what changed is sent."""
        out = out or Result()
        if not self.on:
            return out
        c = self.cfg.controller
        # connections to these may go on: their moved slots pass through the controller
        alive = {n for n in self.plan.instances if self.policy_core.healthy.get(n, True)}
        services = self._services()
        self.policy_core.switch_balanced = frozenset(
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
        for dpid in sorted(self.switches):
            if not self.group_capable.get(dpid):
                continue
            installed = self.installed.setdefault(dpid, {})
            for m in self.cfg.microservices:
                view = self.slot_tables[m.name].view()
                have = installed.get(m.name)
                try:
                    if view is None:
                        if have is None:
                            continue
                        out.sends.append((dpid, self._remove(dpid, m)))
                        del installed[m.name]
                    else:
                        targets = {n: self._target(dpid, n) for n in dataplane.owners(view)}
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
        packed: dict[object, bytes] = {}
        parts = []
        for bk in dataplane.buckets(view, m.protocol, m.port, target_of,
                                    ofwire.OFPP_CONTROLLER):
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
        buckets = b"".join(parts)
        gid = DP_GROUP_BASE + m.index
        commands = (ofwire.OFPGC_ADD, ofwire.OFPGC_MODIFY) if first else (ofwire.OFPGC_MODIFY,)
        # the rules a moving slot's packets need in the switch before the buckets that use them
        buf = self._transition_rules(dpid, m, view, target_of)
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
        buf += ofwire.flow_delete(self.xid(dpid), dp_cookie(DP_TRANSITION, m.index),
                                  0xFFFFFFFFFFFFFFFF, table=dataplane.TRANSITION_TABLE)
        sent = self.transition_rules.get(dpid, {})
        for inst in self.cfg.slots:
            if inst.microservice == m.name:
                sent.pop(inst.name, None)
        return buf + ofwire.group_mod(self.xid(dpid), ofwire.OFPGC_DELETE, ofwire.OFPGT_SELECT,
                                      DP_GROUP_BASE + m.index)

    def status(self) -> dict:
        c = self.cfg.controller.dataplane
        out = {"short_flows": c.short_flows, "table_size": c.table_size, "microservices": {}}
        if not self.on:
            return out
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
