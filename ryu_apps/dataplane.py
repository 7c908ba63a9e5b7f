"""Data-plane mode as plain Python (no Ryu, no I/O): a short-flow microservice's Maglev slot
table rendered as one select-group bucket per slot, the rules around the group, and the slots
in transition while their old owner still runs. Why at least 257 slots, how Open vSwitch
picks a bucket, and what moves when the pool changes: docs/controller.md, "Data-plane mode".

- SlotTable: one microservice's slots, changed with minimal moves, and their transitions;
- quantise: the instances' weights rounded, so that a small drift rebuilds nothing;
- buckets, Bucket, Target: the group's buckets, one per slot in slot order;
- vip_match, reverse_rule: the rule sending VIP:port to the group, the stateless reverse NAT;
- disruption: the share of the hash space whose instance changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

from ryu_apps import maglev
from ryu_apps.ofwire import ETH_TYPE_IP, IPPROTO

MIN_TABLE_SIZE = 61      # Maglev's balance needs slots well above the instances
MAX_TABLE_SIZE = 509     # one group mod of 509 buckets stays under OpenFlow's 64 KiB
DEFAULT_TABLE_SIZE = 257 # above OVS's 256 dp_hash values: its even default method
WEIGHT_STEP = 0.05       # weights are rounded to this share of the largest: a small drift
                         # of the profiler's figures does not rebuild the table


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

    def __init__(self, size: int = DEFAULT_TABLE_SIZE):
        if not maglev.is_prime(size) or not MIN_TABLE_SIZE <= size <= MAX_TABLE_SIZE:
            raise ValueError(f"table_size: a prime from {MIN_TABLE_SIZE} to {MAX_TABLE_SIZE}, "
                             f"got {size!r}")
        self.size = size
        self.table: tuple[str, ...] | None = None
        self.members: dict[str, float] = {}      # quantised
        self.weights: dict[str, float] = {}      # as given
        # slot -> (old owner, until when its packets go to the controller)
        self.transitions: dict[int, tuple[str, float]] = {}

    def update(self, members: Mapping[str, float], now: float = 0.0,
               alive: Collection[str] = (), grace_s: float = 0.0) -> list[int]:
        """Set the instances in service and their weights; the slots whose owner changed
        (all of them when the table appears or disappears). Moved slots whose old owner is
        in `alive` go through the controller until now + grace_s."""
        weights, members = dict(members), quantise(members) if members else {}
        old, before, self.weights = self.table, self.weights, weights
        if members == self.members and old is not None:
            return []
        if not members or not any(members.values()):
            self.table, self.members, self.transitions = None, {}, {}
            return list(range(self.size)) if old is not None else []
        names = sorted(members)
        target = maglev.build_table(names, [members[n] for n in names], self.size)
        # compared before quantising: when the largest leaves, the others' weights relative
        # to the new largest round differently although their proportions stand
        shrunk = old is not None and set(members) < set(self.members) and \
            quantise({n: before[n] for n in members}) == members
        if shrunk:
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
                continue
            if grace_s > 0 and old[k] in alive:
                self.transitions[k] = (old[k], now + grace_s)
        for k in [k for k, (o, _) in self.transitions.items() if new[k] == o]:
            del self.transitions[k]          # back with its old owner: nothing to protect
        return moved

    def expire(self, now: float) -> bool:
        """End the transitions whose grace period is over; whether any ended."""
        done = [k for k, (_, until) in self.transitions.items() if until <= now]
        for k in done:
            del self.transitions[k]
        return bool(done)

    def view(self) -> tuple | None:
        """What the buckets render: per slot its owner, or (old owner,) while in
        transition; None without a table."""
        if self.table is None:
            return None
        tr = self.transitions
        return tuple((tr[k][0],) if k in tr else o for k, o in enumerate(self.table))


@dataclass(frozen=True)
class Target:
    """Where a bucket sends a packet: the instance's addresses and the switch port."""
    name: str
    mac: str
    ip: str
    port: int          # the instance's L4 port
    out_port: int      # towards it on this switch
    watch_port: int | None   # its own port when it hangs on this switch, else None


@dataclass(frozen=True)
class Bucket:
    """A select-group bucket: set these fields, then output (plain data; core.py packs)."""
    instance: str
    set_fields: tuple[tuple[str, object], ...]
    out_port: int
    watch_port: int | None


def buckets(view: Sequence, protocol: str, vport: int, target_of: Callable[[str], Target],
            controller_port: int) -> list[Bucket]:
    """One bucket per slot, in slot order (OpenFlow 1.3 numbers buckets by position), from
    SlotTable.view(): a slot in transition sends its packets to the controller with the old
    owner's MAC as destination, so the controller knows whose flows they may be."""
    cache: dict[object, Bucket] = {}
    out = []
    for entry in view:
        b = cache.get(entry)
        if b is None:
            if isinstance(entry, tuple):
                t = target_of(entry[0])
                b = Bucket(t.name, (("eth_dst", t.mac),), controller_port, None)
            else:
                t = target_of(entry)
                fields: list[tuple[str, object]] = [("eth_dst", t.mac), ("ipv4_dst", t.ip)]
                if t.port != vport:
                    fields.append((f"{protocol}_dst", t.port))
                b = Bucket(t.name, tuple(fields), t.out_port, t.watch_port)
            cache[entry] = b
        out.append(b)
    return out


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


def disruption(old: Sequence[str] | None, new: Sequence[str] | None) -> float:
    """The share of the hash space (of new and established flows) whose instance changes."""
    if old is None or new is None:
        return 0.0 if old is new else 1.0
    return len(maglev.changed_slots(old, new)) / len(new)
