"""ryu_apps/lazy_parse.py: flow-removed messages and flow-statistics entries parse to the same
objects as Ryu's own parser gives, every attribute, with the match read later."""
from __future__ import annotations

import struct

import pytest
from benchmarks import ofswitch
from ryu_apps import lazy_parse, ofwire
from ryu_apps.framework import module, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

ofproto_parser = module("ofproto.ofproto_parser")


class _Datapath:
    ofproto, ofproto_parser = ofp, parser


MATCHES = [{}, {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": "10.0.0.1", "tcp_src": 40000},
           {"eth_type": 0x0800, "ip_proto": 17, "ipv4_dst": "10.0.1.2", "udp_dst": 5353,
            "eth_dst": "02:00:00:00:01:02"}]


def rules():
    """Flow-mods as the controller sends them, in the emulated switch's table."""
    sw = ofswitch.Emulated("127.0.0.1", 1)
    sw.writer = type("W", (), {"sent": [], "write": lambda self, b: self.sent.append(b)})()
    for k, m in enumerate(MATCHES):
        actions = ofwire.action_set_field("ipv4_dst", "10.0.1.1") + ofwire.action_output(k + 2)
        buf = ofwire.flow_mod(k + 1, (0x4D4C << 48) | k, 100 + k, m, actions, idle_timeout=10,
                              flags=ofwire.OFPFF_SEND_FLOW_REM)
        sw._handle(ofswitch.FLOW_MOD, k + 1, buf)
    return sw


def parsed(buf: bytes):
    version, kind, length, xid = struct.unpack_from("!BBHI", buf)
    return ofproto_parser.msg(_Datapath(), version, kind, length, xid, buf)


@pytest.fixture
def ryu_parsers():
    """Ryu's own parsers, back in place after each test (as the app's stop puts them)."""
    yield
    lazy_parse.uninstall()


def test_uninstall_gives_back_ryus_own_parsers_and_messages(ryu_parsers):
    sw = rules()
    for r in sw.rules.values():
        r.created -= 20
    sw.expire(max(r.created for r in sw.rules.values()) + 20)
    buf = sw.writer.sent[0]
    before = type(parsed(buf))
    lazy_parse.install()
    assert lazy_parse.installed() and type(parsed(buf)) is not before
    lazy_parse.uninstall()
    assert not lazy_parse.installed()
    assert type(parsed(buf)) is before is parser.OFPFlowRemoved


def both(buf: bytes):
    ryu = parsed(buf)
    lazy_parse.install()
    return ryu, parsed(buf)


def test_flow_removed_is_ryus_message_with_the_match_parsed_when_read(ryu_parsers):
    sw = rules()
    for r in sw.rules.values():
        r.created -= 20
    sw.expire(max(r.created for r in sw.rules.values()) + 20)
    for buf in sw.writer.sent:
        ryu, lazy = both(buf)
        assert type(lazy).__name__ == "OFPFlowRemoved" and "match" not in vars(lazy)
        assert (lazy.cookie, lazy.reason, lazy.duration_sec, lazy.byte_count) == \
            (ryu.cookie, ryu.reason, ryu.duration_sec, ryu.byte_count)
        assert lazy.match.to_jsondict() == ryu.match.to_jsondict()
        assert str(lazy) == str(ryu) and lazy.to_jsondict() == ryu.to_jsondict()


def test_flow_statistics_entries_read_alike_before_and_after_their_match(ryu_parsers):
    sw = rules()
    sw._handle(ofswitch.MULTIPART_REQUEST, 9, ofwire.flow_stats_request(9, 0x4D4C << 48,
                                                                        0xFFFF << 48))
    buf, = sw.writer.sent
    ryu, lazy = both(buf)
    assert len(lazy.body) == len(ryu.body) == len(MATCHES)
    for a, b in zip(ryu.body, lazy.body):
        assert isinstance(b, parser.OFPFlowStats) and "match" not in vars(b)
        view, ports = lazy_parse.MatchView(b), lazy_parse.OutPorts(b)
        assert (b.cookie, b.packet_count, b.byte_count, b.duration_sec) == \
            (a.cookie, a.packet_count, a.byte_count, a.duration_sec)
        assert "match" not in vars(b)          # the fixed fields parse nothing else
        assert dict(view) == dict(a.match.items()) and view.get("nothing") is None
        assert list(ports) == [a.instructions[0].actions[-1].port] and ports[-1] == ports[0]
        assert str(b) == str(a) and b.to_jsondict() == a.to_jsondict()


def test_an_entry_that_was_never_read_still_prints_whole(ryu_parsers):
    sw = rules()
    sw._handle(ofswitch.MULTIPART_REQUEST, 9, ofwire.flow_stats_request(9, 0, 0))
    ryu, lazy = both(sw.writer.sent[0])
    assert str(lazy.body[1]) == str(ryu.body[1])
    with pytest.raises(AttributeError):
        lazy.body[0].no_such_field  # noqa: B018 -- the access is what raises
