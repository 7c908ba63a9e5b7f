"""An emulated OpenFlow 1.3 switch on loopback, as cbench emulates switches: it drives a
controller alone, with no Open vSwitch, no hosts and no kernel on the path, so that what it
measures is the controller's own time per new flow (Ryu's parsing, the event queue, the app,
its encoding and sending).

The switch completes Ryu's handshake (hello, features, port description), answers echo and
barrier requests, keeps the flow-mods it is sent as a flow table, answers flow-statistics
requests from that table (by cookie and mask, in replies under 64 KiB) and port statistics
empty, and idles rules out: a rule whose idle timeout passed (no packet ever matches one
here) is removed, with a flow-removed message when its flags ask for one, unless it involves
a held client address (the long flows the benchmark keeps open). With `fins_after` set, a
flow's FIN watch (MALB's rule for the instance's FIN) sends that FIN to the controller the
given seconds after it was installed, as the rule would when the flow ends. It sends packet-ins of
TCP SYNs from configured clients to a VIP, each a new flow (a fresh client port), and times
each until the controller's packet-out carrying that SYN comes back.

- Emulated: the switch (connect, send_syn, wait for answers, the flow table's size).
- paced / closed_loop: SYNs at a fixed rate (latency), or with n outstanding (capacity).
"""
from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass, field

from common.stats import quantile
from ryu_apps import ofwire
from ryu_apps.flows import FIN_TAG

OFP_VERSION = 4
HELLO, ECHO_REQUEST, ECHO_REPLY, FEATURES_REQUEST, FEATURES_REPLY = 0, 2, 3, 5, 6
PACKET_IN, FLOW_REMOVED, PACKET_OUT, FLOW_MOD = 10, 11, 13, 14
MULTIPART_REQUEST, MULTIPART_REPLY, BARRIER_REQUEST, BARRIER_REPLY = 18, 19, 20, 21
MP_FLOW, MP_PORT_STATS, MP_PORT_DESC = 1, 4, 13
FC_ADD, FC_DELETE, FC_DELETE_STRICT = 0, 3, 4
OFPFF_SEND_FLOW_REM = 1
OFPRR_IDLE_TIMEOUT = 0
OFPR_ACTION = 1
MAX_REPLY = 60_000          # bytes of flow statistics per multipart reply (64 KiB limit)
LOW_BITS = 10
LOW = (1 << LOW_BITS) - 1
OXM_IPV4_DST, OXM_TCP_SRC, OXM_TCP_DST = 12, 13, 14


def header(msg_type: int, length: int, xid: int) -> bytes:
    return struct.pack("!BBHI", OFP_VERSION, msg_type, length, xid)


def message(msg_type: int, xid: int, body: bytes = b"") -> bytes:
    return header(msg_type, 8 + len(body), xid) + body


def in_port_match(port: int) -> bytes:
    """ofp_match with in_port only: type OXM, length 12, padded to 16."""
    return struct.pack("!HHII", 1, 12, 0x80000004, port) + b"\0" * 4


def packet_in(in_port: int, frame: bytes, cookie: int = 0) -> bytes:
    body = struct.pack("!IHBBQ", 0xFFFFFFFF, len(frame), OFPR_ACTION, 0, cookie) + \
        in_port_match(in_port) + b"\0\0" + frame
    return message(PACKET_IN, 0, body)


@dataclass
class Rule:
    cookie: int
    priority: int
    idle: int
    hard: int
    flags: int
    match: bytes          # ofp_match as sent, padded
    instructions: bytes
    created: float


class SwitchLost(ConnectionError):
    """The controller dropped an established connection (what a run reports as lost, unlike
    a controller that never answered, which is an error of the set-up)."""


@dataclass
class Emulated:
    """One switch (dpid 1) connected to host:port."""
    host: str
    port: int
    held: tuple[bytes, ...] = ()      # client addresses whose rules never idle out
    # seconds after its FIN watch is installed that a flow ends, and the (VIP, VIP MAC) its
    # FIN comes from once rewritten; None: no flow ends
    fins_after: float | None = None
    fins_from: tuple[str, str] = ("", "")
    fins_due: list[tuple[float, tuple, int, bytes]] = field(default_factory=list)
    fins_sent: int = 0
    rules: dict[tuple, Rule] = field(default_factory=dict)
    # the rules' keys by the low LOW_BITS of their cookie: a statistics request for one
    # slice of the cookies (MALB's) reads that slice, not the whole table
    by_low: dict[int, set] = field(default_factory=dict)
    pending: dict[tuple, float] = field(default_factory=dict)     # (ip, port) -> sent at
    # (sent at, seconds to the packet-out) of the SYNs answered
    latencies: list[tuple[float, float]] = field(default_factory=list)
    answered: asyncio.Event | None = None
    packet_outs: int = 0
    flow_mods: int = 0
    removed_sent: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    error: str | None = None
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task] = field(default_factory=list)

    async def connect(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        self.writer.write(message(HELLO, 1))
        self.tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._expire())]
        # ready once the controller asked for the ports; a connection it drops before
        # that ends the wait at once (check() says why)
        waiting = asyncio.create_task(self.ready.wait())
        await asyncio.wait([waiting, self.tasks[0]], timeout=timeout_s,
                           return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        self.check()
        if not self.ready.is_set():
            raise TimeoutError(f"the controller on port {self.port} did not ask for the "
                               f"switch's ports within {timeout_s:g} s")

    def close(self) -> None:
        """Stops the switch's tasks and closes its connection, whatever connect() got to."""
        for t in self.tasks:
            t.cancel()
        if self.writer is not None:
            self.writer.close()

    def send_syn(self, frame: bytes, key: tuple, in_port: int) -> None:
        self.pending[key] = time.perf_counter()
        self.writer.write(packet_in(in_port, frame))

    def send_frame(self, frame: bytes, in_port: int) -> None:
        self.writer.write(packet_in(in_port, frame))

    async def drained(self, timeout_s: float = 30.0) -> float:
        """Wait until every rule that idles out has (phases start from the same table);
        returns the seconds waited."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s and any(
                r.idle and not any(h in r.match for h in self.held)
                for r in self.rules.values()):
            await asyncio.sleep(0.25)
        await asyncio.sleep(0.5)         # the controller's share of the last removals
        return time.monotonic() - start

    # ---------------------------------------------------------------- controller's side
    def check(self) -> None:
        """Raise what stopped the connection, if anything did."""
        if self.error is not None:
            raise SwitchLost(f"the emulated switch's connection failed: {self.error}")

    async def _read(self) -> None:
        try:
            await self._read_messages()
        except Exception as exc:   # noqa: BLE001 -- kept, and raised by check() in the phase
            self.error = f"{type(exc).__name__}: {exc}"

    async def _read_messages(self) -> None:
        buf = b""
        while True:
            chunk = await self.reader.read(1 << 16)
            if not chunk:
                self.error = "the controller closed the connection"
                return
            buf += chunk
            while len(buf) >= 8:
                _v, kind, length, xid = struct.unpack_from("!BBHI", buf)
                if len(buf) < length:
                    break
                if length < 8:
                    raise ValueError(f"a message of length {length}")
                msg, buf = buf[:length], buf[length:]
                self._handle(kind, xid, msg)

    def _handle(self, kind: int, xid: int, msg: bytes) -> None:
        w = self.writer
        if kind == FEATURES_REQUEST:
            w.write(message(FEATURES_REPLY, xid, struct.pack("!QIBBxxII", 1, 0, 254, 0, 0x4F, 0)))
        elif kind == ECHO_REQUEST:
            w.write(message(ECHO_REPLY, xid, msg[8:]))
        elif kind == BARRIER_REQUEST:
            w.write(message(BARRIER_REPLY, xid))
        elif kind == MULTIPART_REQUEST:
            self._multipart(xid, msg)
        elif kind == FLOW_MOD:
            self.flow_mods += 1
            self._flow_mod(msg)
        elif kind == PACKET_OUT:
            self.packet_outs += 1
            self._packet_out(msg)

    def _multipart(self, xid: int, msg: bytes) -> None:
        mp_type, = struct.unpack_from("!H", msg, 8)
        if mp_type == MP_PORT_DESC:
            self.writer.write(message(MULTIPART_REPLY, xid, struct.pack("!HH4x", mp_type, 0)))
            self.ready.set()
        elif mp_type == MP_PORT_STATS:
            self.writer.write(message(MULTIPART_REPLY, xid, struct.pack("!HH4x", mp_type, 0)))
        elif mp_type == MP_FLOW:
            # ofp_flow_stats_request: table B, pad 3, out_port I, out_group I, pad 4,
            # cookie Q, cookie_mask Q, match
            cookie, mask = struct.unpack_from("!QQ", msg, 16 + 16)
            now = time.monotonic()
            parts, size = [], 0
            for r in self._rules_by_cookie(cookie, mask):
                age = now - r.created
                entry = struct.pack("!BxIIHHHH4xQQQ", 0, int(age), int(age % 1 * 1e9),
                                    r.priority, r.idle, r.hard, r.flags, r.cookie, 1, 74) + \
                    r.match + r.instructions
                entry = struct.pack("!H", 2 + len(entry)) + entry
                if size + len(entry) > MAX_REPLY:
                    self.writer.write(message(MULTIPART_REPLY, xid, struct.pack(
                        "!HH4x", mp_type, 1) + b"".join(parts)))
                    parts, size = [], 0
                parts.append(entry)
                size += len(entry)
            self.writer.write(message(MULTIPART_REPLY, xid, struct.pack("!HH4x", mp_type, 0)
                                      + b"".join(parts)))
        # meter and group features go unanswered: the controller then uses neither

    def _rules_by_cookie(self, cookie: int, mask: int):
        low = cookie & mask & LOW
        for b in range(LOW + 1):
            if b & mask & LOW != low:
                continue
            for key in self.by_low.get(b, ()):
                r = self.rules[key]
                if r.cookie & mask == cookie & mask:
                    yield r

    def _add(self, key: tuple, rule: Rule) -> None:
        old = self.rules.get(key)
        if old is not None:
            self._remove(key)
        self.rules[key] = rule
        self.by_low.setdefault(rule.cookie & LOW, set()).add(key)

    def _remove(self, key: tuple) -> Rule:
        rule = self.rules.pop(key)
        self.by_low[rule.cookie & LOW].discard(key)
        return rule

    def _flow_mod(self, msg: bytes) -> None:
        cookie, mask, _table, command, idle, hard, priority, _buf, _op, _og, flags = \
            struct.unpack_from("!QQBBHHHIIIH", msg, 8)
        match_len, = struct.unpack_from("!H", msg, 50)
        end = 48 + (match_len + 7) // 8 * 8
        match = msg[48:end]
        if command == FC_ADD:
            now = time.monotonic()
            self._add((priority, match), Rule(cookie, priority, idle, hard, flags, match,
                                              msg[end:], now))
            if self.fins_after is not None and cookie >> 48 == FIN_TAG:
                self.fins_due.append((now + self.fins_after, (priority, match), cookie,
                                      self._fin_frame(match)))
        elif command in (FC_DELETE, FC_DELETE_STRICT):
            for r in list(self._rules_by_cookie(cookie, mask)):
                if command == FC_DELETE or (r.priority, r.match) == (priority, match):
                    self._remove((r.priority, r.match))

    def _packet_out(self, msg: bytes) -> None:
        _buffer, _in_port, actions_len = struct.unpack_from("!IIH", msg, 8)
        f = ofwire.parse_frame(msg[24 + actions_len:])
        if f is None or f.ip_proto != ofwire.IPPROTO_TCP:
            return
        sent = self.pending.pop((f.ip_src, f.src_port), None)
        if sent is not None:
            self.latencies.append((sent, time.perf_counter() - sent))
            if self.answered is not None:
                self.answered.set()

    def _fin_frame(self, match: bytes) -> bytes:
        """The instance's FIN as the watch sends it on: from the VIP to the client."""
        fields = oxm_fields(match)
        vip, vip_mac = self.fins_from
        client_ip = ".".join(str(b) for b in fields[OXM_IPV4_DST])
        sport, = struct.unpack("!H", fields[OXM_TCP_SRC])
        dport, = struct.unpack("!H", fields[OXM_TCP_DST])
        return ofwire.tcp_frame("00:00:00:00:00:00", vip_mac, vip, client_ip, sport, dport, 5,
                                flags=ofwire.TCP_FIN | ofwire.TCP_ACK)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            now = time.monotonic()
            self.expire(now)
            self.send_fins(now)

    def send_fins(self, now: float) -> None:
        """The FINs due (installed in order, so due in order) of the watches still there
        (one the controller deleted, as its flow's rules idled out first, sends none)."""
        n = 0
        while n < len(self.fins_due) and self.fins_due[n][0] <= now:
            n += 1
        if not n:
            return
        due, self.fins_due = self.fins_due[:n], self.fins_due[n:]
        fins = [packet_in(2, frame, cookie) for _, key, cookie, frame in due
                if key in self.rules and self.rules[key].cookie == cookie]
        if fins:
            self.writer.write(b"".join(fins))
            self.fins_sent += len(fins)

    def expire(self, now: float) -> None:
        """Rules past their idle timeout go, each with a flow-removed when it asked for one;
        a held client's stay (its long flow's traffic keeps them)."""
        out = []
        for k, r in list(self.rules.items()):
            if r.idle and now - r.created > r.idle and \
                    not any(h in r.match for h in self.held):
                self._remove(k)
                if r.flags & OFPFF_SEND_FLOW_REM:
                    age = now - r.created
                    out.append(message(FLOW_REMOVED, 0, struct.pack(
                        "!QHBBIIHHQQ", r.cookie, r.priority, OFPRR_IDLE_TIMEOUT, 0,
                        int(age), int(age % 1 * 1e9), r.idle, r.hard, 1, 74) + r.match))
        if out:
            self.removed_sent += len(out)
            self.writer.write(b"".join(out))


def oxm_fields(match: bytes) -> dict[int, bytes]:
    """An OpenFlow 1.3 match's OXM fields (OpenFlow basic class) by field number."""
    length, = struct.unpack_from("!H", match, 2)
    out, i = {}, 4
    while i + 4 <= length:
        _cls, field_and_mask, n = struct.unpack_from("!HBB", match, i)
        out[field_and_mask >> 1] = match[i + 4:i + 4 + n]
        i += 4 + n
    return out


def syn_frame(vip_mac: str, client, vip: str, sport: int, dport: int) -> bytes:
    return ofwire.tcp_frame(vip_mac, client.mac, client.ip, vip, sport, dport, 1000,
                            flags=ofwire.TCP_SYN)


class Ports:
    """Fresh client ports, per client, in turn over the clients given."""

    def __init__(self, clients):
        self.clients, self.next, self.k = clients, {c.ip: 1024 for c in clients}, 0

    def take(self):
        c = self.clients[self.k % len(self.clients)]
        self.k += 1
        p = self.next[c.ip]
        self.next[c.ip] = p + 1 if p < 65535 else 1024
        return c, p


def summary(lat: list[float], seconds: float, offered: float | None, lost: int,
            sent: int) -> dict:
    """`sent`: every SYN of the phase (warm-up included); the rest counts those measured."""
    lat = sorted(lat)
    ms = (lambda v: None if v is None else round(v * 1e3, 3))
    return {"offered_per_s": offered, "sent": sent, "answered": len(lat), "lost": lost,
            "answered_per_s": round(len(lat) / seconds, 1),
            "p50_ms": ms(quantile(lat, 0.5, is_sorted=True)),
            "p90_ms": ms(quantile(lat, 0.9, is_sorted=True)),
            "p99_ms": ms(quantile(lat, 0.99, is_sorted=True)),
            "max_ms": ms(lat[-1] if lat else None)}


async def paced(sw: Emulated, ports: Ports, make_frame, rate: float, warmup_s: float,
                seconds: float, grace_s: float = 2.0) -> dict:
    """SYNs at `rate` per second for warmup_s + seconds; latencies of those sent after the
    warm-up (when the flow table has reached its steady size)."""
    start = time.perf_counter()
    k = 0
    total = warmup_s + seconds
    sw.latencies.clear()
    while True:
        now = time.perf_counter()
        due = start + k / rate
        if due - start >= total:
            break
        if due > now:
            await asyncio.sleep(due - now)
        sw.check()
        c, p = ports.take()
        sw.send_syn(make_frame(c, p), (c.ip, p), c.switch_port)
        k += 1
        if k % 64 == 0:
            await asyncio.sleep(0)                   # let the reader run in a burst
    await asyncio.sleep(grace_s)
    counted = start + warmup_s
    lost = sum(1 for t in sw.pending.values() if t >= counted)
    sw.pending.clear()
    return summary([lat for sent, lat in sw.latencies if sent >= counted], seconds, rate, lost,
                   k)


async def closed_loop(sw: Emulated, ports: Ports, make_frame, outstanding: int,
                      seconds: float, timeout_s: float = 2.0) -> dict:
    """`outstanding` SYNs in flight at all times for `seconds`: the controller's capacity."""
    sw.latencies.clear()
    sw.answered = asyncio.Event()
    stop = time.perf_counter() + seconds
    lost = sent = 0
    while time.perf_counter() < stop:
        sw.check()
        now = time.perf_counter()
        for key, t in list(sw.pending.items()):      # a SYN never answered frees its place
            if now - t > timeout_s:
                del sw.pending[key]
                lost += 1
        while len(sw.pending) < outstanding:
            c, p = ports.take()
            sw.send_syn(make_frame(c, p), (c.ip, p), c.switch_port)
            sent += 1
        sw.answered.clear()
        try:
            await asyncio.wait_for(sw.answered.wait(), 0.1)
        except TimeoutError:
            pass
    sw.answered = None
    sw.pending.clear()
    return summary([lat for _sent, lat in sw.latencies], seconds, None, lost, sent)
