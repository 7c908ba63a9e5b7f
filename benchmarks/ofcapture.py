"""Packet-in to flow-mod latency, measured on the wire.

A tcpdump capture of the controller's OpenFlow connection on loopback is reassembled into
the two byte streams and decoded with Ryu's own OpenFlow 1.3 parser. Each packet-in is
paired with the first flow-mod that carries the same key (the new flow's TCP source port
for MALB, the new source MAC for a learning switch); the latency is the time between the
segment completing the packet-in and the segment completing that flow-mod. Both apps are
measured the same way, from outside, so the figures compare.

Holds openflow_stream (a capture's OpenFlow messages, streams reassembled), latencies (a
capture file decoded and paired) and capture_latency (a capture taken
while a client's pktgen sends new flows at a rate, and its percentiles in ms: ms).
"""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

from common.procs import ROOT
from common.stats import quantile
from ryu_apps.framework import module, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

ethernet, packet, tcp = (module(f"lib.packet.{name}") for name in ("ethernet", "packet", "tcp"))


class _Datapath:
    ofproto = ofp
    ofproto_parser = parser


@dataclass
class Message:
    time: float
    msg: object


def read_pcap(path: str):
    """Yield (timestamp, src port, dst port, seq, payload) for TCP segments with data."""
    with open(path, "rb") as fh:
        data = fh.read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    nano = struct.unpack(endian + "I", data[:4])[0] == 0xA1B23C4D
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        frame = data[off:off + incl]
        off += incl
        t = sec + frac / (1e9 if nano else 1e6)
        if linktype == 1:          # Ethernet (loopback on Linux)
            if frame[12:14] != b"\x08\x00":
                continue
            ip = frame[14:]
        elif linktype == 113:      # Linux cooked
            ip = frame[16:]
        else:
            raise ValueError(f"unsupported pcap link type {linktype}")
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 6:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        seg = ip[ihl:total]
        sport, dport, seq = struct.unpack("!HHI", seg[:8])
        doff = (seg[12] >> 4) * 4
        payload = seg[doff:]
        if payload:
            yield t, sport, dport, seq, payload


def openflow_stream(path: str):
    """(time, source port, destination port, message bytes) of every complete OpenFlow
    message in a capture, each TCP stream reassembled (retransmitted bytes skipped); the
    time is that of the segment completing the message."""
    streams: dict[tuple[int, int], dict] = {}
    for t, sport, dport, seq, payload in read_pcap(path):
        s = streams.setdefault((sport, dport), {"next": None, "buf": b""})
        if s["next"] is None:
            s["next"] = seq
        if seq < s["next"]:                       # retransmission of bytes we have
            skip = s["next"] - seq
            if skip >= len(payload):
                continue
            payload, seq = payload[skip:], s["next"]
        s["buf"] += payload
        s["next"] = seq + len(payload)
        buf = s["buf"]
        while len(buf) >= 8:
            _version, _mtype, length, _xid = struct.unpack("!BBHI", buf[:8])
            if length < 8 or len(buf) < length:
                break
            yield t, sport, dport, buf[:length]
            buf = buf[length:]
        s["buf"] = buf


def openflow_messages(path: str, controller_port: int = 6653) -> tuple[list, list]:
    """(packet-ins from the switch, flow-mods from the controller), decoded, with times."""
    from_switch, from_controller = [], []
    for t, _sport, dport, msg in openflow_stream(path):
        version, mtype, length, xid = struct.unpack("!BBHI", msg[:8])
        if version == ofp.OFP_VERSION and mtype in (ofp.OFPT_PACKET_IN, ofp.OFPT_FLOW_MOD):
            cls = parser.OFPPacketIn if mtype == ofp.OFPT_PACKET_IN else parser.OFPFlowMod
            (from_switch if dport == controller_port else from_controller).append(
                Message(t, cls.parser(_Datapath, version, mtype, length, xid, msg)))
    return sorted(from_switch, key=lambda m: m.time), sorted(from_controller, key=lambda m: m.time)


def packet_in_key(msg, mode: str):
    pkt = packet.Packet(msg.data)
    if mode == "syn":
        seg = pkt.get_protocol(tcp.tcp)
        return seg.src_port if seg and seg.bits & tcp.TCP_SYN and not seg.bits & tcp.TCP_ACK \
            else None
    eth = pkt.get_protocol(ethernet.ethernet)
    return eth.src if eth else None


def flow_mod_key(msg, mode: str):
    m = msg.match
    if mode == "syn":
        return m.get("tcp_src") if "tcp_src" in m else None
    return m.get("eth_src") if "eth_src" in m else None


def latencies(path: str, mode: str, controller_port: int = 6653) -> dict:
    ins, outs = openflow_messages(path, controller_port)
    first_in: dict = {}
    for m in ins:
        key = packet_in_key(m.msg, mode)
        if key is not None and key not in first_in:
            first_in[key] = m.time
    first_mod: dict = {}
    for m in outs:
        if m.msg.command != ofp.OFPFC_ADD:
            continue
        key = flow_mod_key(m.msg, mode)
        if key in first_in and key not in first_mod and m.time >= first_in[key]:
            first_mod[key] = m.time
    values = sorted(first_mod[k] - first_in[k] for k in first_mod)
    span = (max(first_mod.values()) - min(first_in.values())) if first_mod else 0.0
    return {"packet_ins": len(first_in), "answered": len(first_mod),
            "unanswered": len(first_in) - len(first_mod), "latencies_s": values,
            "answered_per_s": len(first_mod) / span if span > 0 else None}


def capture_latency(cli, client, gen: str, rate: float, seconds: float, pcap: str, mode: str,
                    keep_pcap: bool = False) -> dict:
    """Packet-in to flow-mod latency on the wire while the client's pktgen sends `gen`
    frames (each a new flow) at `rate` for `seconds`."""
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-B", "16384", "-U",
                             "-w", pcap, "tcp port 6653"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    out = cli.cmd(f"{sys.executable} {ROOT}/benchmarks/pktgen.py {gen} "
                  f"--intf {client.name}-eth0 --src-mac {client.mac} --src-ip {client.ip} "
                  f"--rate {rate} --seconds {seconds}")
    time.sleep(2.0)
    dump.send_signal(signal.SIGINT)
    err = dump.communicate(timeout=20)[1].decode()
    sent = json.loads(out.strip().splitlines()[-1])
    lat = latencies(pcap, mode)
    dropped = next((line for line in err.splitlines() if "dropped by kernel" in line), "")
    if not keep_pcap:
        os.unlink(pcap)
    return {"offered_per_s": rate, "sent": sent["sent"], "send_seconds": sent["seconds"],
            "packet_ins": lat["packet_ins"], "answered": lat["answered"],
            "answered_per_s": lat["answered_per_s"],
            "p50_ms": ms(quantile(lat["latencies_s"], 0.5)),
            "p99_ms": ms(quantile(lat["latencies_s"], 0.99)),
            "max_ms": ms(max(lat["latencies_s"]) if lat["latencies_s"] else None),
            "capture_drops": dropped.split()[0] if dropped else "0"}


def ms(v):
    return None if v is None else round(v * 1000, 3)
