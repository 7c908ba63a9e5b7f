"""benchmarks/ofswitch.py: what the emulated switch sends parses with Ryu's own OpenFlow 1.3
parser as a real switch's would, and its flow table follows the controller's flow-mods."""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from benchmarks import ofswitch
from ryu_apps import ofwire
from ryu_apps.framework import module, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

ofproto_parser = module("ofproto.ofproto_parser")


class _Datapath:
    ofproto, ofproto_parser = ofp, parser


class _Writer:
    def __init__(self):
        self.sent = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)


def parse(buf: bytes) -> list:
    out, pos = [], 0
    while pos < len(buf):
        version, kind, length, xid = struct.unpack_from("!BBHI", buf, pos)
        out.append(ofproto_parser.msg(_Datapath(), version, kind, length, xid,
                                      buf[pos:pos + length]))
        pos += length
    return out


def switch() -> ofswitch.Emulated:
    sw = ofswitch.Emulated("127.0.0.1", 1, held=(bytes([10, 0, 0, 9]),))
    sw.writer = _Writer()
    return sw


def handle(sw, buf: bytes) -> None:
    _v, kind, _length, xid = struct.unpack_from("!BBHI", buf)
    sw._handle(kind, xid, buf)


def nat_rule(sw, cookie: int, client: str, sport: int, idle: int = 10) -> None:
    handle(sw, ofwire.flow_mod(7, cookie, 200, {"eth_type": 0x0800, "ip_proto": 6,
                                                "ipv4_src": client, "tcp_src": sport},
                               ofwire.action_output(3), idle_timeout=idle,
                               flags=ofwire.OFPFF_SEND_FLOW_REM))


def test_a_packet_in_parses_with_its_port_frame_and_cookie():
    frame = ofwire.tcp_frame("02:00:00:00:00:64", "02:00:00:00:00:01", "10.0.0.1",
                             "10.0.0.100", 40000, 8002, 1, flags=ofwire.TCP_SYN)
    msg, = parse(ofswitch.packet_in(5, frame, cookie=77))
    assert isinstance(msg, parser.OFPPacketIn)
    assert (msg.match["in_port"], msg.data, msg.cookie, msg.reason) == \
        (5, frame, 77, ofp.OFPR_ACTION)


def test_the_handshake_features_and_port_description_make_it_ready():
    sw = switch()
    handle(sw, ofswitch.message(ofswitch.FEATURES_REQUEST, 3))
    features, = parse(sw.writer.sent.pop())
    assert isinstance(features, parser.OFPSwitchFeatures) and features.datapath_id == 1
    assert not sw.ready.is_set()
    handle(sw, ofswitch.message(ofswitch.MULTIPART_REQUEST, 4,
                                struct.pack("!HH4x", ofswitch.MP_PORT_DESC, 0)))
    reply, = parse(sw.writer.sent.pop())
    assert isinstance(reply, parser.OFPPortDescStatsReply) and reply.xid == 4
    assert sw.ready.is_set()
    handle(sw, ofwire.barrier_request(9))
    handle(sw, ofwire.echo_request(10, b"x"))
    barrier, echo = parse(b"".join(sw.writer.sent))
    assert (barrier.xid, echo.xid, echo.data) == (9, 10, b"x")


def test_flow_statistics_answer_by_cookie_and_mask_in_replies_under_64_kib():
    sw = switch()
    for k in range(2000):
        nat_rule(sw, (0x4D4C << 48) | k, "10.0.0.1", 1024 + k)
    nat_rule(sw, 0x1234, "10.0.0.1", 80)            # not in the slice's cookie range
    assert len(sw.rules) == 2001 and sw.flow_mods == 2001
    handle(sw, ofwire.flow_stats_request(11, (0x4D4C << 48) | 1, (0xFFFF << 48) | 1))
    replies = [m for buf in sw.writer.sent for m in parse(buf)]
    assert len(replies) > 1 and all(len(m.buf) <= 65535 for m in replies)
    assert [bool(m.flags & ofp.OFPMPF_REPLY_MORE) for m in replies] == \
        [True] * (len(replies) - 1) + [False]
    stats = [st for m in replies for st in m.body]
    assert sorted(st.cookie & 0xFFFF for st in stats) == list(range(1, 2000, 2))
    st = next(s for s in stats if s.cookie & 0xFFFF == 1)
    assert (st.match["ipv4_src"], st.match["tcp_src"], st.idle_timeout, st.priority) == \
        ("10.0.0.1", 1025, 10, 200)
    assert st.instructions[0].actions[0].port == 3


def test_rules_idle_out_with_a_flow_removed_unless_they_are_held_and_deletes_apply():
    sw = switch()
    nat_rule(sw, (0x4D4C << 48) | 1, "10.0.0.1", 1024, idle=1)
    nat_rule(sw, (0x4D4C << 48) | 2, "10.0.0.9", 1025, idle=1)      # the held client's
    nat_rule(sw, (0x4D46 << 48) | 3, "10.0.0.1", 1026, idle=1)
    handle(sw, ofwire.flow_delete(12, 0x4D46 << 48, 0xFFFF << 48))
    assert sorted(r.cookie & 0xFF for r in sw.rules.values()) == [1, 2]
    for r in sw.rules.values():
        r.created -= 5
    sw.expire(now=max(r.created for r in sw.rules.values()) + 5)
    removed, = parse(b"".join(sw.writer.sent))
    assert isinstance(removed, parser.OFPFlowRemoved)
    assert (removed.cookie & 0xFF, removed.reason, removed.match["tcp_src"]) == \
        (1, ofp.OFPRR_IDLE_TIMEOUT, 1024)
    assert [r.cookie & 0xFF for r in sw.rules.values()] == [2]


def test_a_packet_out_answers_the_syn_it_carries():
    sw = switch()
    frame = ofwire.tcp_frame("02:00:00:00:01:01", "02:00:00:00:00:01", "10.0.0.1",
                             "10.0.1.1", 40000, 8002, 1, flags=ofwire.TCP_SYN)
    sw.pending[("10.0.0.1", 40000)] = 0.0
    handle(sw, ofwire.packet_out(13, 5, ofwire.action_output(2), frame))
    assert not sw.pending and len(sw.latencies) == 1 and sw.packet_outs == 1


def test_the_controllers_histograms_over_a_phase_per_event_kind():
    from benchmarks.modes import handler_quantiles

    def text(n_fast, n_slow, lag):
        rows = []
        for le, c in (("5e-05", n_fast), ("0.0001", n_fast), ("0.01", n_fast + n_slow),
                      ("+Inf", n_fast + n_slow)):
            rows.append(f'malb_handler_seconds_bucket{{event="packet_in",le="{le}"}} {c}')
        rows.append(f'malb_handler_seconds_count{{event="packet_in"}} {n_fast + n_slow}')
        rows += [f'malb_event_loop_lag_seconds_bucket{{le="{le}"}} {c}'
                 for le, c in (("0.001", lag), ("+Inf", lag))]
        rows += [f'malb_gc_pause_seconds_bucket{{generation="2",le="{le}"}} {c}'
                 for le, c in (("0.1", lag // 5), ("+Inf", lag // 5))]
        rows.append(f'malb_gc_pause_seconds_count{{generation="2"}} {lag // 5}')
        return "\n".join(rows) + "\n"
    q = handler_quantiles(text(10, 0, 5), text(1000, 20, 105))
    assert q["packet_in"] == {"count": 1010, "p50_ms_at_most": 0.05, "p99_ms_at_most": 10.0}
    assert q["event_loop_lag"]["count"] == 100
    assert q["gc_2"] == {"count": 20, "p50_ms_at_most": 100.0, "p99_ms_at_most": 100.0}


def test_a_controller_that_resets_the_connection_stops_the_phase_with_the_reason():
    """Ryu closes a switch whose reads stall past its socket timeout with packet-ins still
    unread, which the switch sees as a reset: the next check() in a phase raises it, and the
    reader task ends without an exception nobody retrieves."""
    async def scenario():
        async def controller(reader, writer):
            await reader.read(8)                     # the switch's HELLO, then more unread
            await asyncio.sleep(0.1)
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()                           # closed with a linger of 0: a reset

        server = await asyncio.start_server(controller, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        sw = ofswitch.Emulated("127.0.0.1", port)
        sw.reader, sw.writer = await asyncio.open_connection("127.0.0.1", port)
        sw.writer.write(ofswitch.message(ofswitch.HELLO, 1))
        task = asyncio.create_task(sw._read())
        await asyncio.wait_for(task, 5)
        server.close()
        sw.writer.close()
        return sw, task

    sw, task = asyncio.run(scenario())
    assert task.exception() is None
    assert sw.error is not None
    with pytest.raises(ofswitch.SwitchLost, match="connection failed"):
        sw.check()


def serve_once(controller, timeout_s: float = 2.0
               ) -> tuple[ofswitch.Emulated, BaseException | None]:
    """An emulated switch's connect(timeout_s) to a local server running `controller`; what
    it raised, and the switch, closed."""
    async def scenario():
        server = await asyncio.start_server(controller, "127.0.0.1", 0)
        sw = ofswitch.Emulated("127.0.0.1", server.sockets[0].getsockname()[1])
        try:
            await sw.connect(timeout_s=timeout_s)
            error = None
        except Exception as exc:    # noqa: BLE001 -- the test asserts what it was
            error = exc
        finally:
            sw.close()
            server.close()
        return sw, error
    return asyncio.run(scenario())


def test_connect_ends_at_once_when_the_controller_drops_the_handshake():
    """A controller that closes the connection before it asks for the ports is a lost
    switch, said at once, not a wait for the whole timeout."""
    async def controller(reader, writer):
        await reader.read(8)
        writer.close()
    start = time.monotonic()
    sw, error = serve_once(controller, timeout_s=120.0)
    assert isinstance(error, ofswitch.SwitchLost)
    assert "closed the connection" in str(error)
    assert time.monotonic() - start < 60.0         # not at the timeout: at the close


def test_connect_to_a_silent_controller_times_out_and_is_not_a_lost_switch():
    async def controller(reader, writer):
        await asyncio.sleep(5)
    sw, error = serve_once(controller, timeout_s=0.5)
    assert isinstance(error, TimeoutError)
    assert not isinstance(error, ofswitch.SwitchLost)
    assert "did not ask for the switch's ports" in str(error)


def test_connect_becomes_ready_when_the_controller_asks_for_the_ports():
    async def controller(reader, writer):
        await reader.read(8)
        writer.write(ofswitch.message(ofswitch.MULTIPART_REQUEST, 7,
                                      struct.pack("!HH4x", ofswitch.MP_PORT_DESC, 0)))
        await reader.read(64)
    sw, error = serve_once(controller)
    assert error is None and sw.ready.is_set()


def test_nothing_listening_is_a_refused_connection_not_a_lost_switch():
    """An app that never started: connect() raises OSError, which controller_alone reports
    as an error of the run, not as a lost switch."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]           # bound, not listening: refused
        sw = ofswitch.Emulated("127.0.0.1", port)
        with pytest.raises(OSError) as raised:
            asyncio.run(sw.connect(timeout_s=0.3))
    assert not isinstance(raised.value, ofswitch.SwitchLost)
    sw.close()


def test_a_fin_watch_sends_the_instances_fin_as_rewritten_once_its_flow_ends():
    # the watch as MALB builds it (flowpath.nat_rules): the instance's FIN, rewritten to
    # the VIP, copied to the controller with the watch's cookie; a watch deleted before
    # then (its flow's rules idled out first) sends nothing
    from ryu_apps.flows import fin_cookie
    sw = switch()
    sw.fins_after, sw.fins_from = 5.0, ("10.0.0.100", "02:00:00:00:00:64")
    rev = ofwire.reverse_actions("tcp", "02:00:00:00:00:64", "10.0.0.100", 8003, 8003, 1)
    for flow_id, sport in ((0x11, 40001), (0x12, 40002)):
        handle(sw, ofwire.fin_watch(7, fin_cookie(flow_id), 201, 600, "10.0.0.11", 8003,
                                    "10.0.0.1", sport, rev))
    handle(sw, ofwire.flow_delete(8, fin_cookie(0x12), 0xFFFFFFFFFFFFFFFF))
    due = sw.fins_due[0][0]
    sw.send_fins(due - 0.1)
    assert not sw.writer.sent and len(sw.fins_due) == 2
    sw.send_fins(due + 1.0)
    msg, = parse(sw.writer.sent.pop())
    f = ofwire.parse_frame(msg.data)
    assert msg.cookie == fin_cookie(0x11) and sw.fins_sent == 1 and not sw.fins_due
    assert (f.ip_src, f.src_port, f.ip_dst, f.dst_port) == ("10.0.0.100", 8003, "10.0.0.1",
                                                            40001)
    assert f.tcp_flags & ofwire.TCP_FIN and f.eth_src == "02:00:00:00:00:64"
