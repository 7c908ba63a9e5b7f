"""Ryu's OpenFlow 1.3 parser for flow-removed messages and flow-statistics entries, with the
match and instructions parsed on first access rather than on arrival.

Ryu parses every message on the event loop before any app sees it. At a thousand new flows
per second the controller receives two flow-removed messages per flow and thousands of
flow-statistics entries per second, and Ryu's parsing of their matches and instructions (a
Python object per field and action) was about a quarter of the controller's time
(benchmarks.controller_alone with py-spy, docs/controller.md). MALB reads only their fixed
fields (cookie, duration, counters, reason) except when it adopts a rule it did not install.
install() swaps in these parsers while the MALB app runs (uninstall() at its stop puts Ryu's
back; `--malb-eager-parse` leaves Ryu's in place). The swap is for the whole ryu-manager
process, as Ryu keeps one parser table, but other apps in it see the same messages: every
attribute is still there, parsed by Ryu's own code when first read, and the classes are
Ryu's subclasses under Ryu's names (tests/unit/ryu_apps/test_lazy_parse.py). Holds install,
uninstall, installed, OFPFlowStats and OFPFlowRemoved (Ryu's, lazy), MatchView and OutPorts
(an entry's match and output ports for the controller core, lazy).
"""
from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from ryu_apps.framework import ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser, round_up, \
    stringify

_FLOW_STATS_FIXED = struct.Struct(ofp.OFP_FLOW_STATS_0_PACK_STR)
_FLOW_REMOVED_FIXED = struct.Struct(ofp.OFP_FLOW_REMOVED_PACK_STR0)
_MATCH_AT = ofp.OFP_FLOW_REMOVED_SIZE - ofp.OFP_MATCH_SIZE


class _Lazy:
    """Ryu's match (and instructions) of a message, parsed from its buffer when first read."""
    _lazy = ("match",)

    def __getattr__(self, name):
        if name not in type(self)._lazy or "_at" not in self.__dict__:
            raise AttributeError(name)
        self._load()
        return self.__dict__[name]

    def stringify_attrs(self):
        if "_at" in self.__dict__:
            self._load()
        return ((k, v) for k, v in stringify.obj_python_attrs(self)
                if k not in ("_buf", "_at"))


class OFPFlowStats(_Lazy, parser.OFPFlowStats):
    """Named as Ryu's class, which is how it prints and converts to JSON."""
    _lazy = ("match", "instructions")

    @classmethod
    def parser(cls, buf, offset):
        st = cls.__new__(cls)
        (st.length, st.table_id, st.duration_sec, st.duration_nsec, st.priority,
         st.idle_timeout, st.hard_timeout, st.flags, st.cookie, st.packet_count,
         st.byte_count) = _FLOW_STATS_FIXED.unpack_from(buf, offset)
        st._buf, st._at = buf, offset + ofp.OFP_FLOW_STATS_0_SIZE
        return st

    def _load(self) -> None:
        buf, offset = self.__dict__.pop("_buf"), self.__dict__.pop("_at")
        self.match = parser.OFPMatch.parser(buf, offset)
        match_length = round_up(self.match.length, 8)
        left = self.length - (ofp.OFP_FLOW_STATS_SIZE - ofp.OFP_MATCH_SIZE + match_length)
        offset += match_length
        self.instructions = []
        while left > 0:
            inst = parser.OFPInstruction.parser(buf, offset)
            self.instructions.append(inst)
            offset += inst.len
            left -= inst.len


class OFPFlowRemoved(_Lazy, parser.OFPFlowRemoved):
    """Named as Ryu's class: Ryu maps a message to its event by the class's name."""

    @classmethod
    def parser(cls, datapath, version, msg_type, msg_len, xid, buf):
        msg = cls.__new__(cls)
        parser.MsgBase.__init__(msg, datapath)
        msg.set_headers(version, msg_type, msg_len, xid)
        msg.set_buf(buf)
        (msg.cookie, msg.priority, msg.reason, msg.table_id, msg.duration_sec,
         msg.duration_nsec, msg.idle_timeout, msg.hard_timeout, msg.packet_count,
         msg.byte_count) = _FLOW_REMOVED_FIXED.unpack_from(msg.buf, ofp.OFP_HEADER_SIZE)
        msg._buf, msg._at = msg.buf, _MATCH_AT
        return msg

    def _load(self) -> None:
        buf, offset = self.__dict__.pop("_buf"), self.__dict__.pop("_at")
        self.match = parser.OFPMatch.parser(buf, offset)


# Ryu's own parsers, as the framework loaded them: what uninstall() puts back
_RYU_PARSERS = (parser.OFPFlowStatsReply.cls_stats_body_cls,
                parser._MSG_PARSERS[ofp.OFPT_FLOW_REMOVED])


def install() -> None:
    """From now on, in this process, flow-removed messages and flow-statistics entries
    parse their match (and instructions) on first access."""
    parser.OFPFlowStatsReply.cls_stats_body_cls = OFPFlowStats
    parser._MSG_PARSERS[ofp.OFPT_FLOW_REMOVED] = OFPFlowRemoved.parser


def uninstall() -> None:
    """Ryu's own parsers again."""
    (parser.OFPFlowStatsReply.cls_stats_body_cls,
     parser._MSG_PARSERS[ofp.OFPT_FLOW_REMOVED]) = _RYU_PARSERS


def installed() -> bool:
    return parser.OFPFlowStatsReply.cls_stats_body_cls is OFPFlowStats


class MatchView(Mapping):
    """A flow-statistics entry's match as a mapping, parsed when first read (the controller
    core reads it only to adopt a rule it did not install)."""

    def __init__(self, entry):
        self._entry, self._fields = entry, None

    def _get(self) -> dict:
        if self._fields is None:
            self._fields = dict(self._entry.match.items())
        return self._fields

    def __getitem__(self, key):
        return self._get()[key]

    def __iter__(self):
        return iter(self._get())

    def __len__(self):
        return len(self._get())


class OutPorts(Sequence):
    """The output actions' ports of a flow-statistics entry, in order, parsed when first read."""

    def __init__(self, entry):
        self._entry, self._ports = entry, None

    def _get(self) -> tuple:
        if self._ports is None:
            self._ports = tuple(a.port for i in self._entry.instructions
                                for a in getattr(i, "actions", []) if hasattr(a, "port"))
        return self._ports

    def __getitem__(self, index):
        return self._get()[index]

    def __len__(self):
        return len(self._get())
