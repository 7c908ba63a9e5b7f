"""Send one bare TCP segment and print the flags of the answer (run on a client host).

    python3 rawtcp.py SRC_IP DST_IP DST_PORT FLAGS      # FLAGS: hex, e.g. 0x10 for ACK

Prints e.g. "answer flags=0x04 seq=1234" or "no answer". Only the standard library: the
segment is built by ryu_apps/ofwire.py (the kernel adds the IP header), the answer is read
from a raw socket.
"""
import os
import random
import select
import socket
import struct
import sys
import time

# runs with the system python3 inside a client host: find the project's modules by path
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from ryu_apps.ofwire import tcp_segment


def main() -> int:
    src, dst, dport, flags = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4], 16)
    sport, seq, ack = random.randint(41000, 42000), random.getrandbits(32), random.getrandbits(32)
    header = tcp_segment(src, dst, sport, dport, seq, ack, flags, window=1024)
    rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    tx.sendto(header, (dst, 0))
    deadline = time.time() + 3
    while time.time() < deadline:
        if not select.select([rx], [], [], 0.2)[0]:
            continue
        pkt, (addr, _) = rx.recvfrom(65535)
        ihl = (pkt[0] & 0x0F) * 4
        p_sport, p_dport, p_seq = struct.unpack("!HHI", pkt[ihl:ihl + 8])
        if addr == dst and p_sport == dport and p_dport == sport:
            print(f"answer flags=0x{pkt[ihl + 13]:02x} seq={p_seq} expected_seq={ack}")
            return 0
    print("no answer")
    return 1


if __name__ == "__main__":
    sys.exit(main())
