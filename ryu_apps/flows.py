"""Bookkeeping of the NAT flows the controller installed (plain Python, no Ryu): each flow's
record, found by its cookie, its client-side 5-tuple or its instance-side 4-tuple, and what
the profiler is told of it (docs/controller.md: "How a decision is made", steps 4-6, and
"Connections that outlive their rules").

- make_cookie, parse_cookie, fin_cookie, flow_id_of: the cookies of a flow's rules;
- FlowRecord: one flow: its addresses, instance, counters, and how and when it ended;
- FlowTable: the flows, active and recently ended (resume); their statistics, removals,
  FIN and dormancy; the reports and traffic pairs for the profiler.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections.abc import Iterator

from ryu_apps.estimators.running_flows import DEFAULT_MAX_AGE_S

COOKIE_TAG = 0x4D4C
FIN_TAG = 0x4D46         # a long TCP flow's FIN watch (flowpath.py), beside its rule pair
DIR_FORWARD, DIR_REVERSE = 1, 2
_SEQ_BITS = 24
REPORT_SCAN_SLICE = 2000   # flow records looked at between two of the report scan's pauses


def make_cookie(direction: int, ms_index: int, inst_index: int, seq: int) -> int:
    """A NAT rule's cookie: COOKIE_TAG, the direction, the microservice's and the instance's
    index and a sequence number. The cookie alone says which microservice and instance a
    rule serves, so statistics map back to flows and a restarted controller rebuilds its
    table from the switch's rules."""
    return ((COOKIE_TAG << 48) | (direction << 44) | ((ms_index & 0xFF) << 36)
            | ((inst_index & 0xFFF) << 24) | (seq & ((1 << _SEQ_BITS) - 1)))


def parse_cookie(cookie: int) -> tuple[int, int, int, int] | None:
    """(direction, microservice index, instance index, seq), or None if not ours."""
    if cookie >> 48 != COOKIE_TAG:
        return None
    return ((cookie >> 44) & 0xF, (cookie >> 36) & 0xFF, (cookie >> 24) & 0xFFF,
            cookie & ((1 << _SEQ_BITS) - 1))


def fin_cookie(flow_id: int) -> int:
    """The cookie of a flow's FIN watch: its flow id under FIN_TAG (not a NAT rule: the
    statistics, the flow-removed messages and the adoption leave it alone)."""
    return (FIN_TAG << 48) | (flow_id & ((1 << 48) - 1))


def flow_id_of(cookie: int) -> int:
    """The cookie with the direction cleared: the same for both rules of a flow."""
    return cookie & ~(0xF << 44)


def _of(counts: tuple, direction: int) -> tuple:
    """(bytes, packets) of one direction from FlowRecord's (b, p, b, p)."""
    return counts[:2] if direction == DIR_FORWARD else counts[2:]


def _with(counts: tuple, direction: int, value: tuple) -> tuple:
    """FlowRecord's (b, p, b, p) with one direction's (bytes, packets) replaced."""
    return value + counts[2:] if direction == DIR_FORWARD else counts[:2] + value


# Slots, and counters and removals in tuples of numbers: an ended record then holds nothing
# the cyclic garbage collector follows but itself. A busy controller keeps tens of thousands
# of records, and every full collection walks them all with the event loop stopped.
@dataclass(slots=True)
class FlowRecord:
    flow_id: int                      # cookie without direction
    dpid: int
    protocol: str                     # tcp | udp
    client_ip: str
    client_port: int
    client_in_port: int
    vip: str
    vport: int
    microservice: str
    instance: str
    server: str
    created: float
    last_active: float
    backend_ip: str = ""
    backend_port: int = 0
    bytes_fwd: int = 0
    bytes_rev: int = 0
    packets: int = 0
    # The switch's counters restart at zero whenever the rules are installed again (a
    # resumed flow, a restarted switch): what earlier rules counted is kept in base. Both
    # hold bytes and packets per direction, DIR_FORWARD's first: (b, p, b, p), flat, so
    # that the collector stops following them after it has seen them once.
    raw: tuple = (0, 0, 0, 0)
    base: tuple = (0, 0, 0, 0)
    rule_age_s: float = 0.0          # from the switch: seconds since the rules were installed
    ended: float | None = None
    end_reason: str = ""
    reported: bool = False            # a completed record goes to the profiler once
    removed: tuple = ()               # directions whose rule is gone
    rules_sent: float = 0.0           # when the controller last sent this flow's rules
    dirty: bool = True                # the profiler must hear of it at the next report
    told_at: float = 0.0              # when the profiler last heard of it while active
    fin_watch: bool = False           # its FIN goes to the controller too (flowpath.py)
    told_long: bool = False           # whether that report had it past the threshold
    fin_at: float | None = None       # when a watch saw its end (the instance's FIN or reset;
                                      # tracked: the client's reset too)
    dormant: bool = False             # rules idled out, connection open: FIN not yet seen
    tracked: bool = False             # no rules: the switch's connection tracker NATs it
    recommits: int = 0                # tracked: its commit sent again (flowpath.vip_packet)

    @property
    def key(self) -> tuple:
        return (self.dpid, self.protocol, self.client_ip, self.client_port, self.vip, self.vport)

    @property
    def reverse_key(self) -> tuple:
        return (self.protocol, self.backend_ip, self.backend_port, self.client_ip,
                self.client_port)

    @property
    def running(self) -> bool:
        """Whether the flow is still going, as the profiler is told: its rules are on the
        switch, or it is dormant; a watched flow's FIN ends it."""
        return self.fin_at is None and (self.ended is None or self.dormant)

    def duration_s(self, idle_timeout: int, now: float | None = None) -> float:
        """Watched to its FIN: to the FIN; dormant: until `now` (it is known to go on).
        Ended by idle timeout: to the removal minus the idle tail. Still active, a tracked
        flow that ended unseen (no_fin), or one whose rules a switch lost (rules_lost): from
        the first packet to the last traffic seen (a rule idling towards its timeout is not
        a flow that is still going; of a tracked connection the controller sees only the
        first packet, so a SYN flood's half-open connections are no evidence of long flows;
        lost rules say nothing of when the flow stopped)."""
        if self.fin_at is not None:
            return max(0.0, self.fin_at - self.created)
        if self.dormant:
            until = self.ended if now is None else now
            assert until is not None            # only an ended flow goes dormant
            return max(0.0, until - self.created)
        if self.ended is not None and self.end_reason not in ("no_fin", "rules_lost"):
            tail = idle_timeout if self.end_reason == "idle_timeout" else 0
            return max(0.0, self.ended - tail - self.created)
        return max(0.0, self.last_active - self.created)

    def count(self, direction: int, byte_count: int, packet_count: int) -> None:
        """Take a rule's counters (bytes, packets) into the flow's totals."""
        last = _of(self.raw, direction)
        if byte_count < last[0] or packet_count < last[1]:
            # the rule was installed anew since the last reading: its counts restarted
            self.rebase(direction)
        self.raw = _with(self.raw, direction, (byte_count, packet_count))
        base = _of(self.base, direction)
        if direction == DIR_FORWARD:
            self.bytes_fwd, self.packets = base[0] + byte_count, base[1] + packet_count
        else:
            self.bytes_rev = base[0] + byte_count

    def rebase(self, direction: int) -> None:
        """The rule of that direction is (re)installed: its counters start from zero."""
        b, r = _of(self.base, direction), _of(self.raw, direction)
        self.base = _with(self.base, direction, (b[0] + r[0], b[1] + r[1]))
        self.raw = _with(self.raw, direction, (0, 0))

    def as_record(self, idle_timeout: int, epoch: str = "", now: float | None = None) -> dict:
        return {"flow_id": f"{epoch}{self.dpid:x}:{self.flow_id:x}",
                "microservice": self.microservice,
                "server": self.server, "instance": self.instance,
                "client": f"{self.client_ip}:{self.client_port}", "protocol": self.protocol,
                "duration_s": round(self.duration_s(idle_timeout, now), 3),
                "bytes": self.bytes_fwd + self.bytes_rev, "bytes_to_server": self.bytes_fwd,
                "bytes_to_client": self.bytes_rev, "packets": self.packets,
                "active": self.running,
                "end_reason": "fin" if self.fin_at is not None else self.end_reason or None}


@dataclass
class FlowTable:
    idle_timeout: int
    keep_ended: int = 5000
    # What the profiler is told about active flows (take_report): once when they pass its
    # short/long threshold, and a keep-alive every refresh_s, within its TTL for them.
    threshold_s: float | None = None
    refresh_s: float = 60.0
    # A dormant flow that never shows its FIN ends for the profiler this long after it
    # started, as the policy core drops a watched flow.
    dormant_max_s: float = DEFAULT_MAX_AGE_S
    # A tracked flow (no rules, no counters) whose end was not seen ends after this
    # (controller.dataplane.tracked_max_s): age_out_tracked.
    tracked_max_s: float = 30.0
    # Sequence numbers restart with each controller process: the epoch (its start time)
    # keeps the flow ids it reports apart from those of an earlier process.
    epoch: str = field(default_factory=lambda: f"{time.time_ns() // 1_000_000:x}.")
    flows: dict[int, FlowRecord] = field(default_factory=dict)      # flow_id -> record
    by_key: dict[tuple, int] = field(default_factory=dict)          # 5-tuple key -> flow_id
    by_reverse: dict[tuple, int] = field(default_factory=dict)      # instance side, active
    ended_by_key: dict[tuple, int] = field(default_factory=dict)    # ended flows, to resume
    ended_by_reverse: dict[tuple, int] = field(default_factory=dict)
    # ended flow ids, oldest first, apart by whether the profiler has them yet (for _trim)
    _ended: dict[bool, dict[int, None]] = field(
        default_factory=lambda: {True: {}, False: {}})
    _seq: int = 0
    # traffic between each client (an address: a host, or an instance calling another
    # microservice) and the instance serving it, since the last take_pairs(): bytes both
    # ways and new flows. What the communication graph is built from.
    pair_bytes: dict[tuple[str, str], int] = field(default_factory=dict)
    pair_flows: dict[tuple[str, str], int] = field(default_factory=dict)
    # active flows per instance, kept as flows start, end and resume (REST asks often)
    _active_of: dict[str, int] = field(default_factory=dict)
    # active tracked flow ids, oldest first (age_out_tracked)
    _tracked: dict[int, None] = field(default_factory=dict)

    def next_seq(self) -> int:
        self._seq = self._seq % ((1 << _SEQ_BITS) - 1) + 1    # 1 .. 2^24 - 1, then 1 again
        return self._seq

    def new_flow_id(self, ms_index: int, inst_index: int) -> int:
        """A cookie no record holds, also after the sequence wrapped or rules of an earlier
        controller were adopted."""
        for _ in range(1 << _SEQ_BITS):
            fid = make_cookie(0, ms_index, inst_index, self.next_seq())
            if fid not in self.flows:
                return fid
        raise RuntimeError("no free flow cookie: the flow table is full")

    def lookup(self, key: tuple) -> FlowRecord | None:
        fid = self.by_key.get(key)
        rec = self.flows.get(fid) if fid is not None else None
        return rec if rec is not None and rec.ended is None else None

    def lookup_reverse(self, reverse_key: tuple) -> FlowRecord | None:
        """The active flow an instance's packet belongs to (by the instance side)."""
        fid = self.by_reverse.get(reverse_key)
        rec = self.flows.get(fid) if fid is not None else None
        return rec if rec is not None and rec.ended is None else None

    def add(self, rec: FlowRecord, new: bool = True) -> None:
        """Keep a flow's record; new: a flow that just started (not one adopted from the
        rules of an earlier controller), counted for its pair."""
        if new:
            pair = (rec.client_ip, rec.instance)
            self.pair_flows[pair] = self.pair_flows.get(pair, 0) + 1
        self.flows[rec.flow_id] = rec
        if rec.ended is None:
            self._count_active(rec.instance, 1)
            if rec.tracked:
                self._tracked[rec.flow_id] = None
        self.by_key[rec.key] = rec.flow_id
        if rec.backend_ip:
            self.by_reverse[rec.reverse_key] = rec.flow_id
        parsed = parse_cookie(rec.flow_id)
        if parsed and parsed[3] > self._seq:   # adopted: go on after the earlier controller
            self._seq = parsed[3]

    def on_stats(self, cookie: int, age_s: float, byte_count: int, packet_count: int,
                 now: float) -> FlowRecord | None:
        parsed = parse_cookie(cookie)
        # a tagged cookie with no direction of ours is not a rule of a flow
        if parsed is None or parsed[0] not in (DIR_FORWARD, DIR_REVERSE):
            return None
        rec = self.flows.get(flow_id_of(cookie))
        if rec is None:
            return None
        old = rec.bytes_fwd + rec.bytes_rev
        rec.count(parsed[0], byte_count, packet_count)
        rec.rule_age_s = max(rec.rule_age_s, age_s)
        grown = rec.bytes_fwd + rec.bytes_rev - old
        if grown > 0:
            rec.last_active = now
            self.add_pair_bytes(rec.client_ip, rec.instance, grown)
        return rec

    def add_pair_bytes(self, client_ip: str, instance: str, grown: int) -> None:
        """Bytes a pair exchanged: grown on a flow's rules, or on the tracker's counting
        rules of a client port and an instance (tracked connections have no rules)."""
        pair = (client_ip, instance)
        self.pair_bytes[pair] = self.pair_bytes.get(pair, 0) + grown

    def take_pairs(self) -> tuple[dict, dict]:
        """(bytes, new flows) per (client address, instance) since the last call."""
        taken = self.pair_bytes, self.pair_flows
        self.pair_bytes, self.pair_flows = {}, {}
        return taken

    def restore_pairs(self, taken: tuple[dict, dict]) -> None:
        """A report that did not arrive: its pairs go out with the next one."""
        for mine, old in zip((self.pair_bytes, self.pair_flows), taken):
            for pair, n in old.items():
                mine[pair] = mine.get(pair, 0) + n

    def on_removed(self, cookie: int, age_s: float, byte_count: int, packet_count: int,
                   reason: str, now: float) -> FlowRecord | None:
        rec = self.on_stats(cookie, age_s, byte_count, packet_count, now)
        if rec is None:
            return rec
        parsed = parse_cookie(cookie)
        assert parsed is not None               # on_stats found its flow by it
        direction = parsed[0]
        if direction not in rec.removed:
            rec.removed += (direction,)
        if rec.ended is not None:
            # the other rule of the pair: the flow lasted until its last packet either way
            rec.ended = max(rec.ended, now)
            return rec
        self._end(rec, now, reason)
        return rec

    def _end(self, rec: FlowRecord, now: float, reason: str) -> None:
        rec.ended = now
        rec.end_reason = reason
        self._count_active(rec.instance, -1)
        self._tracked.pop(rec.flow_id, None)
        if self.by_key.get(rec.key) == rec.flow_id:
            del self.by_key[rec.key]
        if self.by_reverse.get(rec.reverse_key) == rec.flow_id:
            del self.by_reverse[rec.reverse_key]
        self.ended_by_key[rec.key] = rec.flow_id
        if rec.backend_ip:
            self.ended_by_reverse[rec.reverse_key] = rec.flow_id
        self._ended[rec.reported][rec.flow_id] = None
        self._trim()

    def lost(self, rec: FlowRecord, now: float) -> None:
        """Its rules are not on its switch: a reconnection could not send them (no path to
        its instance), and the statistics requested with it did not list them. It ends as
        if both had been removed (end_reason rules_lost), so that its next packet resumes
        it."""
        rec.removed = (DIR_FORWARD, DIR_REVERSE)
        self._end(rec, now, "rules_lost")

    def resumable(self, key: tuple | None = None, reverse_key: tuple | None = None
                  ) -> FlowRecord | None:
        """The ended flow resume() would bring back, left as it is."""
        index, k = (self.ended_by_key, key) if key is not None else \
            (self.ended_by_reverse, reverse_key)
        rec = self.flows.get(index.get(k, -1)) if k is not None else None
        return None if rec is None or rec.ended is None else rec

    def resume(self, key: tuple | None = None, reverse_key: tuple | None = None
               ) -> FlowRecord | None:
        """An ended flow whose traffic came back (by its 5-tuple at the edge switch, or by
        the instance's side): active again, same instance, same cookie."""
        rec = self.resumable(key, reverse_key)
        if rec is None:
            return None
        self.ended_by_key.pop(rec.key, None)
        self.ended_by_reverse.pop(rec.reverse_key, None)
        self._ended[rec.reported].pop(rec.flow_id, None)
        # The controller installs both rules again: a removed one counts from zero, one
        # still on the switch is replaced and keeps its counters (OpenFlow 1.3 ADD).
        for direction in rec.removed:
            rec.rebase(direction)
        rec.ended, rec.end_reason, rec.removed, rec.dormant = None, "", (), False
        self._count_active(rec.instance, 1)
        if rec.fin_at is None:      # past its FIN the profiler has had its end already
            rec.reported, rec.dirty = False, True
        self.by_key[rec.key] = rec.flow_id
        if rec.backend_ip:
            self.by_reverse[rec.reverse_key] = rec.flow_id
        return rec

    def fin(self, key: tuple, now: float) -> FlowRecord | None:
        """A watched flow's FIN (by its client-side 5-tuple): the flow ends now for the
        profiler, told at the next report. None if no flow with that tuple is active."""
        rec = self.lookup(key)
        if rec is None or not rec.fin_watch or rec.fin_at is not None:
            return None
        rec.fin_at, rec.dormant = now, False
        if rec.tracked and rec.ended is None:
            # no rule will be removed: the FIN (or a reset) is its end
            rec.removed = (DIR_FORWARD, DIR_REVERSE)
            self._end(rec, now, "fin")
        return rec

    def untrack(self, rec: FlowRecord) -> None:
        """A tracked flow goes on a rule pair (the switch's tracker lost or refused it)."""
        rec.tracked = False
        self._tracked.pop(rec.flow_id, None)

    def tracked_count(self) -> int:
        """How many active flows are tracked (no rules on a switch)."""
        return len(self._tracked)

    def age_out_tracked(self, now: float) -> list[FlowRecord]:
        """End the tracked flows whose end was not seen within tracked_max_s (a SYN flood's
        half-open connections, a client gone without a reset), oldest first: they stop
        counting for the flow cap, and the caller tells the policy. Reported with the
        traffic seen (their first packet), end_reason no_fin."""
        gone = []
        for fid in self._tracked:
            rec = self.flows[fid]
            if now - rec.created <= self.tracked_max_s:
                break
            gone.append(rec)
        for rec in gone:
            rec.removed = (DIR_FORWARD, DIR_REVERSE)
            self._end(rec, now, "no_fin")
        return gone

    def go_dormant(self, rec: FlowRecord) -> None:
        """A watched flow's rules idled out before its FIN (the controller's policy core
        holds it open): for the profiler it goes on until its FIN."""
        if rec.fin_watch and rec.fin_at is None and rec.ended is not None:
            rec.dormant = True

    def _mark_reported(self, rec: FlowRecord, reported: bool) -> None:
        self._ended[rec.reported].pop(rec.flow_id, None)
        rec.reported = reported
        if rec.ended is not None:
            self._ended[reported][rec.flow_id] = None

    def _trim(self) -> None:
        """Keep the newest keep_ended reported records (for GET /malb/flows); unreported
        ones too, up to ten times that (the profiler may be away for a while)."""
        for reported, limit in ((True, self.keep_ended), (False, 10 * self.keep_ended)):
            ended = self._ended[reported]
            while len(ended) > limit:
                fid = next(iter(ended))
                del ended[fid]
                r = self.flows.pop(fid)
                if self.ended_by_key.get(r.key) == fid:
                    del self.ended_by_key[r.key]
                if self.ended_by_reverse.get(r.reverse_key) == fid:
                    del self.ended_by_reverse[r.reverse_key]

    def report_failed(self, records: list[FlowRecord]) -> None:
        """A report did not arrive: send these again next time."""
        for rec in records:
            if rec.running:
                rec.dirty = True
            else:
                self._mark_reported(rec, False)

    def active_count(self) -> int:
        """How many flows are active, without a scan: by_key holds exactly the active ones
        (for the monitoring path, which asks on every statistics reply)."""
        return len(self.by_key)

    def _count_active(self, instance: str, step: int) -> None:
        n = self._active_of.get(instance, 0) + step
        if n > 0:
            self._active_of[instance] = n
        else:
            self._active_of.pop(instance, None)

    def active_per_instance(self) -> dict[str, int]:
        """Active flows per instance (those with any), without a scan."""
        return dict(self._active_of)

    def active(self, dpid: int | None = None) -> list[FlowRecord]:
        return [r for r in self.flows.values()
                if r.ended is None and (dpid is None or r.dpid == dpid)]

    def take_report(self, now: float, grace_s: float = 5.0) -> list[FlowRecord]:
        """What the profiler must hear, each completed flow once: a watched flow at its FIN
        (its bytes as the last statistics counted them), any other when both of its rules
        are gone (so both byte counts are final), or grace_s after the first went; a running
        flow (active or dormant) when it is new to the profiler (new, resumed, adopted, or
        its last report was lost), when its duration first passes threshold_s (the evidence
        of a long-flow class), and otherwise every refresh_s while it lasts. Not every
        period: a busy controller has tens of thousands of active flows, which the profiler
        only counts. Callers turn them into dicts with as_record(now=now)."""
        return [rec for rec in self.report_scan(now, grace_s) if rec is not None]

    def report_scan(self, now: float, grace_s: float = 5.0,
                    pause_every: int = REPORT_SCAN_SLICE) -> Iterator[FlowRecord | None]:
        """take_report's records one by one, with a None after every `pause_every` records
        looked at: the scan of tens of thousands of records (about 20 ms at 13,000) can
        then give the event loop its turn in between. The scan runs over the records there
        were when it began; one trimmed meanwhile is skipped, one added meanwhile waits for
        the next report."""
        for k, rec in enumerate(list(self.flows.values())):
            if k and k % pause_every == 0:
                yield None
            if self.flows.get(rec.flow_id) is not rec:
                continue
            if rec.dormant and now - rec.created > self.dormant_max_s:
                rec.dormant = False        # no FIN came: it ended with its last traffic
            if rec.running:
                long = self.threshold_s is not None and \
                    rec.duration_s(self.idle_timeout, now) > self.threshold_s
                if rec.dirty or (long and not rec.told_long) or \
                        now - rec.told_at >= self.refresh_s:
                    rec.dirty, rec.told_at, rec.told_long = False, now, long
                    yield rec
            elif not rec.reported and (rec.fin_at is not None or len(rec.removed) >= 2
                                       # not running, no FIN: it has ended
                                       or (rec.ended is not None and now - rec.ended > grace_s)):
                self._mark_reported(rec, True)
                yield rec
        self._trim()
