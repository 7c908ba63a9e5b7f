"""Data-plane mode as plain Python (no Ryu, no I/O): a short-flow microservice's Maglev slot
table rendered as one select-group bucket per slot, the rules around the group, and the slots
in transition while their old owner still runs. Why 127 slots by default, how Open vSwitch
picks a bucket, and what moves when the pool changes: docs/controller.md, "Data-plane mode".

- SlotTable: one microservice's slots, changed with minimal moves, and their transitions;
- quantise: the instances' weights rounded, so that a small drift rebuilds nothing;
- buckets, Bucket, Target, owners: the group's buckets, one per slot in slot order, and
  the instances they name;
- transition_rules, TransitionRule, TRANSITION_*: where a moving slot's packets go in the
  switch (controller.dataplane.transitions: switch): a new TCP connection committed to the
  connection tracker and sent to the slot's new owner, one the tracker holds for that
  owner to it, anything else (a flow under way) to the controller;
- vip_match, reverse_rule: the rule sending VIP:port to the group, the stateless reverse NAT;
- counter_rules, OPENED, CLOSED: copies of a reverse rule that count an instance's SYN-ACKs,
  FINs and resets (its open connections: estimators/switch_connections.py);
- disruption: the share of the hash space whose instance changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Collection, Mapping, Sequence

from ryu_apps import maglev
from ryu_apps.ofwire import (CT_NEW, CT_TRACKED, ETH_TYPE_IP, IPPROTO, IPPROTO_TCP, TCP_ACK,
                             TCP_FIN, TCP_RST, TCP_SYN)

MIN_TABLE_SIZE = 61      # Maglev's balance needs slots well above the instances
MAX_TABLE_SIZE = 509     # one group mod of 509 buckets stays under OpenFlow's 64 KiB
DEFAULT_TABLE_SIZE = 127 # within OVS's 256 dp_hash values: no upcall per connection
WEIGHT_STEP = 0.05       # weights are rounded to this share of the largest: a small drift
                         # of the profiler's figures does not rebuild the table
# in-switch transitions: a moving slot's bucket sends its packets through the connection
# tracker in this zone (its own: tracker mode's per-switch zones stay below it), on
# into this table (table 1 holds the reverse NAT's host rules)
TRANSITION_ZONE = 0xFFFF
TRACKER_HOLDS_S = 25.0    # a transition's length at most: Open vSwitch's userspace tracker
                          # may forget a connection it sees one way 30 s after its SYN
TRANSITION_TABLE = 2
PRIO_TR_START, PRIO_TR_KEEP, PRIO_TR_HANDOVER = 30, 20, 10   # the catch-all: 0


def quantise(weights: Mapping[str, float]) -> dict[str, float]:
    """Weights relative to the largest, rounded to WEIGHT_STEP (a positive weight never
    rounds to 0)."""
    top = max(weights.values(), default=0.0)
    if top <= 0:
        return {n: 1.0 for n in weights}
    return {n: max(WEIGHT_STEP, round(w / top / WEIGHT_STEP) * WEIGHT_STEP) if w > 0 else 0.0
            for n, w in weights.items()}


class SlotTable:
    """One microservice's Maglev slots and how they change."""

    def __init__(self, size: int = DEFAULT_TABLE_SIZE, in_switch: bool = False):
        """`in_switch`: a moving slot's new connections are kept by the switch (its
        connection tracker), not by the controller's rule pairs."""
        if not maglev.is_prime(size) or not MIN_TABLE_SIZE <= size <= MAX_TABLE_SIZE:
            raise ValueError(f"table_size: a prime from {MIN_TABLE_SIZE} to {MAX_TABLE_SIZE}, "
                             f"got {size!r}")
        self.size, self.in_switch = size, in_switch
        self.table: tuple[str, ...] | None = None
        self.members: dict[str, float] = {}      # quantised
        self.weights: dict[str, float] = {}      # as given
        # slot -> (old owner, until when its packets go to the controller)
        self.transitions: dict[int, tuple[str, float]] = {}
        self.began: dict[int, float] = {}        # in the switch: slot -> its transition's start
        self._view: tuple | None = None          # view(), until the table or a transition changes

    def update(self, members: Mapping[str, float], now: float = 0.0,
               alive: Collection[str] = (), grace_s: float = 0.0) -> list[int]:
        """Set the instances in service and their weights; the slots whose owner changed
        (all of them when the table appears or disappears). Moved slots whose old owner is
        in `alive` are in transition until now + grace_s."""
        weights, members = dict(members), quantise(members) if members else {}
        old, before, self.weights = self.table, self.weights, weights
        if members == self.members and old is not None:
            return []
        self._view = None
        if not members or not any(members.values()):
            self.table, self.members, self.transitions = None, {}, {}
            return list(range(self.size)) if old is not None else []
        names = sorted(members)
        target = maglev.build_table(names, [members[n] for n in names], self.size)
        # compared before quantising: when the largest leaves, the others' weights relative
        # to the new largest round differently although their proportions stand
        shrunk = old is not None and set(members) < set(self.members) and \
            quantise({n: before[n] for n in members}) == members
        if shrunk and old is not None:     # (shrunk says it; for the type checker)
            # only the slots of the instances that left move
            new = tuple(o if o in members else t for o, t in zip(old, target))
        else:
            new = target
        self.table, self.members = new, dict(members)
        if old is None:
            self.transitions = {}
            return list(range(self.size))
        moved = maglev.changed_slots(old, new)
        for k in moved:
            if k in self.transitions:        # moving again: it keeps its first old owner
                if self.in_switch:
                    # the connections the switch committed to the owner it leaves need a
                    # packet through the transition table (to the controller, which gives
                    # each a rule pair) before it ends: a full period from this move, while
                    # the tracker still holds the slot's first connections
                    first, until = self.transitions[k]
                    self.transitions[k] = (first, max(until, min(
                        now + grace_s, self.began[k] + TRACKER_HOLDS_S)))
                continue
            if grace_s > 0 and old[k] in alive:
                self.transitions[k] = (old[k], now + grace_s)
                self.began[k] = now
        if not self.in_switch:
            # back with its old owner: nothing to protect (in the switch, the connections
            # committed to the owner in between still need the transition table)
            for k in [k for k, (o, _) in self.transitions.items() if new[k] == o]:
                del self.transitions[k]
        return moved

    def expire(self, now: float) -> bool:
        """End the transitions whose grace period is over; whether any ended."""
        done = [k for k, (_, until) in self.transitions.items() if until <= now]
        for k in done:
            del self.transitions[k]
        if done:
            self._view = None
        self.began = {k: t for k, t in self.began.items() if k in self.transitions}
        return bool(done)

    def view(self) -> tuple | None:
        """What the buckets render: per slot its owner, or while in transition (old owner,)
        or in the switch (old owner, new owner); None without a table."""
        if self.table is None:
            return None
        if self._view is None:
            tr = self.transitions
            self._view = tuple((tr[k][0], o) if k in tr else o
                               for k, o in enumerate(self.table)) if self.in_switch else \
                tuple((tr[k][0],) if k in tr else o for k, o in enumerate(self.table))
        return self._view


def owners(view: Sequence) -> list[str]:
    """The instances a view names (owners, old and new), sorted."""
    return sorted({n for e in view for n in (e if isinstance(e, tuple) else (e,))})


@dataclass(frozen=True)
class Target:
    """Where a bucket sends a packet: the instance's addresses and the switch port."""
    name: str
    mac: str
    ip: str
    port: int          # the instance's L4 port
    out_port: int      # towards it on this switch
    watch_port: int | None   # its own port when it hangs on this switch, else None
    mark: int = 0      # in-switch transitions: its number (> 0) in a register and a mark


@dataclass(frozen=True)
class Bucket:
    """A select-group bucket: set these fields, then output, or with `track` on through
    the connection tracker into TRANSITION_TABLE (plain data; the manager packs)."""
    instance: str
    set_fields: tuple[tuple[str, object], ...]
    out_port: int | None
    watch_port: int | None
    track: bool = False


def forward_fields(t: Target, protocol: str, vport: int) -> tuple[tuple[str, object], ...]:
    """A client's packet to the VIP, rewritten to the instance."""
    fields: list[tuple[str, object]] = [("eth_dst", t.mac), ("ipv4_dst", t.ip)]
    if t.port != vport:
        fields.append((f"{protocol}_dst", t.port))
    return tuple(fields)


def buckets(view: Sequence, protocol: str, vport: int, target_of: Callable[[str], Target],
            controller_port: int) -> list[Bucket]:
    """One bucket per slot, in slot order (OpenFlow 1.3 numbers buckets by position), from
    SlotTable.view(). A slot in transition marks its packets with the old owner's MAC as
    destination, so that the controller knows whose flows they may be, and sends them to
    the controller, or in the switch (old owner, new owner) puts the new owner's mark in
    reg0 and sends them through the connection tracker (transition_rules)."""
    cache: dict[object, Bucket] = {}
    out = []
    for entry in view:
        b = cache.get(entry)
        if b is None:
            if isinstance(entry, tuple) and len(entry) == 2:
                old, new = target_of(entry[0]), target_of(entry[1])
                b = Bucket(new.name, (("eth_dst", old.mac), ("reg0", new.mark)), None, None,
                           track=True)
            elif isinstance(entry, tuple):
                t = target_of(entry[0])
                b = Bucket(t.name, (("eth_dst", t.mac),), controller_port, None)
            else:
                t = target_of(entry)
                b = Bucket(t.name, forward_fields(t, protocol, vport), t.out_port, t.watch_port)
            cache[entry] = b
        out.append(b)
    return out


@dataclass(frozen=True)
class TransitionRule:
    """A TRANSITION_TABLE rule: on a match, commit the connection to the tracker with this
    mark (when not None), set these fields and output, to the controller when out_port is
    None (plain data; the manager packs)."""
    priority: int
    match: dict
    commit_mark: int | None
    set_fields: tuple[tuple[str, object], ...]
    out_port: int | None


def transition_rules(t: Target, protocol: str, vport: int) -> list[TransitionRule]:
    """One instance's rules in TRANSITION_TABLE, where a moving slot's bucket put its new
    owner's mark in reg0:

    - a connection's first SYN (the tracker has no entry: +new) from a slot moving to the
      instance: committed with its mark, to it;
    - a packet of a connection committed to it, from a slot moving to it: to it. The rule
      reads the mark, not +est: once the client's data runs past the window that the
      tracker, which never sees the answers, allows, the packets are +inv, with the mark;
    - from a slot moving to another instance (the slot moved on): with the instance's MAC
      as destination to the controller, which keeps the connection on it with a rule pair.

    The table's catch-all sends the rest, the old owner's flows under way, which the tracker
    does not hold, to the controller, their destination MAC the old owner's."""
    fields = forward_fields(t, protocol, vport)
    tcp = {"eth_type": ETH_TYPE_IP, "ip_proto": IPPROTO_TCP}
    mine = {**tcp, "ct_state": (CT_TRACKED, CT_TRACKED), "ct_mark": t.mark}
    return [TransitionRule(PRIO_TR_START, {
                **tcp, "ct_state": (CT_TRACKED | CT_NEW,) * 2,
                "tcp_flags": (TCP_SYN, TCP_SYN | TCP_ACK), "reg0": t.mark},
                t.mark, fields, t.out_port),
            TransitionRule(PRIO_TR_KEEP, {**mine, "reg0": t.mark}, None, fields, t.out_port),
            TransitionRule(PRIO_TR_HANDOVER, mine, None, (("eth_dst", t.mac),), None)]


def vip_match(protocol: str, vip: str, vport: int) -> dict:
    """The traffic the group balances: new and established flows to VIP:port."""
    return {"eth_type": ETH_TYPE_IP, "ip_proto": IPPROTO[protocol], "ipv4_dst": vip,
            f"{protocol}_dst": vport}


def reverse_rule(protocol: str, inst_ip: str, inst_port: int, block: str, vip_mac: str,
                 vip: str, vport: int) -> tuple[dict, tuple[tuple[str, object], ...]]:
    """(match, fields to set) of the stateless reverse NAT of one instance's answers towards
    one /24 of callers on this switch; core.py then goes to the host table."""
    match = {"eth_type": ETH_TYPE_IP, "ip_proto": IPPROTO[protocol], "ipv4_src": inst_ip,
             f"{protocol}_src": inst_port, "ipv4_dst": (block, "255.255.255.0")}
    fields: list[tuple[str, object]] = [("eth_src", vip_mac), ("ipv4_src", vip)]
    if inst_port != vport:
        fields.append((f"{protocol}_src", vport))
    return match, tuple(fields)


OPENED, CLOSED = "opened", "closed"


def counter_rules(reverse_match: dict) -> list[tuple[str, dict]]:
    """(what it counts, match) of the rules beside a TCP reverse rule that count the
    instance's SYN-ACKs (a connection accepted), FINs and resets (one ended), above it and
    with its actions: their packet counts are the connections the instance opened and
    ended towards those callers."""
    return [(OPENED, {**reverse_match, "tcp_flags": (TCP_SYN | TCP_ACK,) * 2}),
            (CLOSED, {**reverse_match, "tcp_flags": (TCP_FIN, TCP_FIN)}),
            (CLOSED, {**reverse_match, "tcp_flags": (TCP_RST, TCP_RST)})]


def disruption(old: Sequence[str] | None, new: Sequence[str] | None) -> float:
    """The share of the hash space (of new and established flows) whose instance changes."""
    if old is None or new is None:
        return 0.0 if old is new else 1.0
    return len(maglev.changed_slots(old, new)) / len(new)
