"""Where a per-flow connection's setup time goes, on the wire: a client's SYN to the VIP
until its SYN-ACK, cut at every place the packets can be seen, in one run.

    sudo .venv/bin/python -m benchmarks.breakdown [--policy srr] [--rate 200] [--seconds 5]
                                                  [--tracker] [--out results/bench]

One testbed (the paper's, host agents and profiler running, the controller per flow with
--policy; with --tracker, in tracker mode: the packet-out commits the connection to Open
vSwitch's connection tracker and no rule is sent). While a client opens --rate new
connections per second to the ui VIP for --seconds (benchmarks/connect.py --rate), tcpdump
captures, on the same clock: the switch port of the client, the switch ports of the ui
instances, and the OpenFlow channel on loopback. For each connection (its client port):

  t0 the SYN enters the switch          (client's port)
  t1 the packet-in carrying it          (OpenFlow channel, switch to controller)
  t2 the packet-out carrying it         (OpenFlow channel, controller to switch; the rule
                                         pair and the barrier precede it in the same write)
  t3 the SYN leaves towards the instance (instance's port)
  t4 the SYN-ACK comes back             (instance's port)
  t5 the SYN-ACK leaves to the client   (client's port)

switch in = t1 - t0 (Open vSwitch: the datapath miss, the upcall, the packet-in), controller
= t2 - t1 (Ryu's parsing, the event queue, MALB's handler, the send), switch out = t3 - t2
(the flow-mods, the barrier and the packet-out applied), server = t4 - t3, return = t5 - t4
(the answer through the new reverse rule), total = t5 - t0. The controller's own histograms
over the same seconds (its handler for packet-ins, its event loop's lag) split the
controller's part into the handler and the rest (parsing, queue, send). Reported: p50, p90
and p99 of each part; breakdown.json and breakdown.md in --out.
"""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time

from benchmarks.modes import VIP_UI, base_config, histogram, histogram_quantile, metrics_text
from benchmarks.ofcapture import openflow_stream
from common import lab
from common.cli import ArgumentParser, bounded, require_testbed
from common.config import POLICIES
from common.markdown import table
from common.paths import WORK
from common.procs import ROOT, git_commit
from common.stats import quantile
from experiments.stack import Stack
from ryu_apps import ofwire
from topologies.clean import clean_testbed

OFPT_PACKET_IN, OFPT_PACKET_OUT = 10, 13
PARTS = ("switch_in", "controller", "switch_out", "server", "return", "total")
SPANS = {"switch_in": ("t0", "t1"), "controller": ("t1", "t2"), "switch_out": ("t2", "t3"),
         "server": ("t3", "t4"), "return": ("t4", "t5"), "total": ("t0", "t5")}


def pcap_frames(path: str):
    """(time, Ethernet frame) of a pcap file (Ethernet link type)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    nano = struct.unpack(endian + "I", data[:4])[0] == 0xA1B23C4D
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        yield sec + frac / (1e9 if nano else 1e6), data[off:off + incl]
        off += incl


def port_times(path: str, client_ip: str) -> dict[str, dict[int, float]]:
    """On one switch port: when each client port's SYN (from the client) and SYN-ACK (to
    it) were first seen."""
    syn, synack = {}, {}
    for t, frame in pcap_frames(path):
        f = ofwire.parse_frame(frame)
        if f is None or f.ip_proto != ofwire.IPPROTO_TCP:
            continue
        flags = f.tcp_flags & (ofwire.TCP_SYN | ofwire.TCP_ACK)
        if flags == ofwire.TCP_SYN and f.ip_src == client_ip:
            syn.setdefault(f.src_port, t)
        elif flags == ofwire.TCP_SYN | ofwire.TCP_ACK and f.ip_dst == client_ip:
            synack.setdefault(f.dst_port, t)
    return {"syn": syn, "synack": synack}


def channel_times(path: str, controller_port: int) -> dict[str, dict[int, float]]:
    """On the OpenFlow channel: when the packet-in and the packet-out carrying each client
    port's SYN were first seen (the segment completing the message)."""
    out: dict[str, dict[int, float]] = {"packet_in": {}, "packet_out": {}}
    for t, sport, dport, msg in openflow_stream(path):
        kind = msg[1]
        if kind == OFPT_PACKET_IN and dport == controller_port:
            match_len = struct.unpack_from("!H", msg, 26)[0]
            frame, key = msg[24 + (match_len + 7) // 8 * 8 + 2:], "packet_in"
        elif kind == OFPT_PACKET_OUT and sport == controller_port:
            actions_len = struct.unpack_from("!H", msg, 16)[0]
            frame, key = msg[24 + actions_len:], "packet_out"
        else:
            continue
        f = ofwire.parse_frame(frame)
        if f is not None and f.ip_proto == ofwire.IPPROTO_TCP and \
                f.tcp_flags & (ofwire.TCP_SYN | ofwire.TCP_ACK) == ofwire.TCP_SYN:
            out[key].setdefault(f.src_port, t)
    return out


def breakdown(client: dict, instances: list[dict], channel: dict) -> dict:
    """Per client port (connections seen at every point), each part's seconds."""
    rows = {}
    for port, t0 in client["syn"].items():
        times = {"t0": t0, "t1": channel["packet_in"].get(port),
                 "t2": channel["packet_out"].get(port), "t5": client["synack"].get(port)}
        for inst in instances:
            if port in inst["syn"]:
                times["t3"], times["t4"] = inst["syn"][port], inst["synack"].get(port)
        if all(times.get(k) is not None for k in ("t0", "t1", "t2", "t3", "t4", "t5")):
            rows[port] = {part: times[b] - times[a] for part, (a, b) in SPANS.items()}
    return rows


def summary(rows: dict) -> dict:
    out = {}
    for part in PARTS:
        values = sorted(r[part] for r in rows.values())
        out[part] = {q: (None if not values else
                         round(1e3 * quantile(values, p, is_sorted=True), 3))
                     for q, p in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99))}
    return out


def interface_of(switch: str, port: int) -> str:
    out = subprocess.run(["ovs-vsctl", "-f", "csv", "--no-headings", "--columns=name,ofport",
                          "list", "Interface"], capture_output=True, text=True, timeout=10).stdout
    for line in out.splitlines():
        name, _, ofport = line.partition(",")
        if ofport.strip() == str(port) and name.startswith(f"{switch}-"):
            return name
    raise LookupError(f"no interface of {switch} has OpenFlow port {port}")


def run(args, say=print) -> dict:
    clean_testbed(quiet=True)
    data = base_config()
    if args.tracker:
        data["controller"]["dataplane"] = {"short_flows": "tracker"}
    stack = Stack(data, os.path.join(args.out, "breakdown-run"), policy=args.policy)
    with stack:
        stack.wait_for(lambda: stack.controller_get("/malb/status")["profiler"]["reachable"],
                       60, "the controller reaches the profiler")
        cfg = stack.cfg
        cli = stack.testbed.node("cli1")
        client = cfg.testbed.clients[0]
        switch = cfg.testbed.switches[0].name
        uis = cfg.instances_of("ui")
        vip = cfg.microservice("ui").vip
        cli.cmd(f"ping -c 1 -W 1 {vip}")
        rest = cfg.controller.rest_port
        captures = {"client": interface_of(switch, client.switch_port),
                    **{i.name: interface_of(switch, i.switch_port) for i in uis}}
        procs, paths = [], {}
        for name, intf in captures.items():
            paths[name] = os.path.join(args.out, f"breakdown-{name}.pcap")
            procs.append(subprocess.Popen(
                ["tcpdump", "-i", intf, "-s", "96", "-B", "16384", "-U", "-w", paths[name],
                 "tcp port 8002"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        paths["channel"] = os.path.join(args.out, "breakdown-channel.pcap")
        procs.append(subprocess.Popen(
            ["tcpdump", "-i", "lo", "-s", "0", "-B", "16384", "-U", "-w", paths["channel"],
             f"tcp port {cfg.controller.ofp_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.5)
        before = metrics_text(rest)
        say(f"[breakdown] {args.rate:g} connections/s for {args.seconds:g} s through the ui "
            f"VIP ({args.policy}), captured at {len(procs)} points")
        cli.cmd(f"{sys.executable} {ROOT}/benchmarks/connect.py --target {vip}:{VIP_UI} "
                f"--rate {args.rate} --seconds {args.seconds}")
        after = metrics_text(rest)
        time.sleep(1.0)
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait(timeout=20)
        client_t = port_times(paths["client"], client.ip)
        inst_t = [port_times(paths[i.name], client.ip) for i in uis]
        chan = channel_times(paths["channel"], cfg.controller.ofp_port)
        if not args.keep_pcaps:
            for path in paths.values():
                os.unlink(path)
    clean_testbed(quiet=True)
    rows = breakdown(client_t, inst_t, chan)
    result = {"policy": args.policy, "tracker": args.tracker, "rate": args.rate,
              "seconds": args.seconds,
              "syns_seen": len(client_t["syn"]), "complete": len(rows),
              "parts": summary(rows)}
    for key, name, labels in (("handler", "malb_handler_seconds", 'event="packet_in",'),
                              ("event_loop_lag", "malb_event_loop_lag_seconds", "")):
        h0, h1 = histogram(before, name, labels), histogram(after, name, labels)
        result[f"controller_{key}"] = {
            q: (None if histogram_quantile(h0, h1, p) is None
                else round(1e3 * histogram_quantile(h0, h1, p), 3))
            for q, p in (("p50_ms_at_most", 0.5), ("p99_ms_at_most", 0.99))}
    return result


def markdown(r: dict) -> str:
    rows = [[part, r["parts"][part]["p50_ms"], r["parts"][part]["p90_ms"],
             r["parts"][part]["p99_ms"]] for part in PARTS]
    h, lag = r["controller_handler"], r["controller_event_loop_lag"]
    mode = ", tracker mode" if r.get("tracker") else ""
    return (f"## Per-flow connection setup, part by part ({r['policy']}{mode})\n\n"
            f"{r['rate']:g} new connections/s for {r['seconds']:g} s through the ui VIP; "
            f"{r['complete']} of {r['syns_seen']} SYNs seen at every point.\n\n" +
            table(["part", "p50 ms", "p90 ms", "p99 ms"], rows, "lrrr") +
            f"\nIn the controller over the same seconds (histogram bucket bounds): a "
            f"packet-in's handler p50 <= {h['p50_ms_at_most']} ms, p99 <= "
            f"{h['p99_ms_at_most']} ms; the event loop's lag p50 <= {lag['p50_ms_at_most']} "
            f"ms, p99 <= {lag['p99_ms_at_most']} ms.\n")


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m benchmarks.breakdown", description=__doc__.split("\n")[0])
    p.add_argument("--policy", choices=POLICIES, default="srr")
    p.add_argument("--rate", type=bounded(float, 1, 2000), default=200.0)
    p.add_argument("--seconds", type=bounded(float, 1, 60), default=5.0)
    p.add_argument("--tracker", action="store_true",
                   help="short flows in tracker mode (controller.dataplane.short_flows)")
    p.add_argument("--keep-pcaps", action="store_true")
    p.add_argument("--out", default=os.path.join(WORK, "results", "bench"))
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    require_testbed("the breakdown benchmark")
    os.makedirs(args.out, exist_ok=True)
    r = run(args)
    command = lab.invocation("benchmarks.breakdown", argv or sys.argv[1:]).strip()
    md = f"# Connection setup, part by part\n\nCommand: `{command}`  \nCommit: " \
        f"{git_commit()}\n\n" + markdown(r)
    lab.write_results(args.out, "breakdown", {"command": command, "commit": git_commit(),
                                              **r}, md, default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
