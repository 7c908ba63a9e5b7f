"""Send one bare TCP segment and print the flags of the answer (run on a client host).

    python3 rawtcp.py SRC_IP DST_IP DST_PORT FLAGS      # FLAGS: hex, e.g. 0x10 for ACK

Prints e.g. "answer flags=0x04 seq=1234" or "no answer". Only the standard library: the
segment is built by hand (the kernel adds the IP header), the answer read from a raw socket.
"""
import random
import select
import socket
import struct
import sys
import time


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def main() -> int:
    src, dst, dport, flags = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4], 16)
    sport, seq, ack = random.randint(41000, 42000), random.getrandbits(32), random.getrandbits(32)
    header = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 1024, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, 20)
    header = header[:16] + struct.pack("!H", checksum(pseudo + header)) + header[18:]
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
