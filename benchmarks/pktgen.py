"""Send raw frames that each start a new flow at the controller, at a fixed rate.

Runs inside a client host's namespace, with the project's virtualenv Python:

    python3 benchmarks/pktgen.py syn --intf cli1-eth0 --src-mac .. --src-ip .. \\
        --dst-mac <VIP MAC> --dst-ip <VIP> --dport 8002 --rate 500 --seconds 5
    python3 benchmarks/pktgen.py mac --intf cli1-eth0 --dst-mac <instance MAC> ...

- syn: TCP SYNs from fresh source ports: each one is a new flow to the VIP (MALB decides);
- mac: UDP frames from fresh source MACs: each one is unknown to a learning switch
  (simple_switch_13 learns it and installs a flow).
Prints one JSON line: frames sent, seconds, and the keys used (source ports or MACs).
"""
from __future__ import annotations

import argparse
import json
import socket
import time

from ryu_apps.ofwire import ETH_TYPE_IP, ethernet, ipv4, tcp_segment, udp_datagram


def tcp_syn(src: str, dst: str, sport: int, dport: int, seq: int) -> bytes:
    return ipv4(src, dst, 6, tcp_segment(src, dst, sport, dport, seq))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=("syn", "mac"))
    p.add_argument("--intf", required=True)
    p.add_argument("--src-mac", required=True)
    p.add_argument("--src-ip", required=True)
    p.add_argument("--dst-mac", required=True)
    p.add_argument("--dst-ip", required=True)
    p.add_argument("--dport", type=int, default=8002)
    p.add_argument("--rate", type=float, required=True, help="frames per second")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--first-key", type=int, default=0,
                   help="offset of the generated keys (source ports above 20000, or source "
                        "MACs): runs that follow each other must not reuse keys")
    args = p.parse_args(argv)

    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((args.intf, 0))
    count = int(args.rate * args.seconds)
    keys = []
    started = time.perf_counter()
    for k in range(count):
        due = started + k / args.rate
        while True:
            wait = due - time.perf_counter()
            if wait <= 0:
                break
            time.sleep(min(wait, 0.01))
        if args.mode == "syn":
            sport = 20000 + (args.first_key + k) % 40000
            frame = ethernet(args.dst_mac, args.src_mac, ETH_TYPE_IP,
                             tcp_syn(args.src_ip, args.dst_ip, sport, args.dport, 1000 + k))
            keys.append(sport)
        else:
            n = args.first_key + k
            src_mac = "02:be:%02x:%02x:%02x:%02x" % ((n >> 24) & 255, (n >> 16) & 255,
                                                     (n >> 8) & 255, n & 255)
            frame = ethernet(args.dst_mac, src_mac, ETH_TYPE_IP,
                             udp_datagram(args.src_ip, args.dst_ip, 40000, 9, b"malb-bench"))
            keys.append(src_mac)
        sock.send(frame)
    elapsed = time.perf_counter() - started
    print(json.dumps({"sent": count, "seconds": round(elapsed, 3), "mode": args.mode,
                      "first_key": keys[0] if keys else None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
