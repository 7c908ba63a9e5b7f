"""benchmarks/breakdown.py: captures written as tcpdump writes them (pcap, Ethernet) are read
back into the six points of each connection and its parts."""
import struct

import pytest

from benchmarks import breakdown, ofswitch
from ryu_apps import ofwire

CLIENT, VIP, INST = "10.0.0.1", "10.0.0.100", "10.0.1.2"
CMAC, VMAC, IMAC = "02:00:00:00:00:01", "02:00:00:00:00:64", "02:00:00:00:01:02"


def pcap(path, frames):
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for t, frame in frames:
            fh.write(struct.pack("<IIII", int(t), int(round(t % 1 * 1e6)), len(frame),
                                 len(frame)))
            fh.write(frame)


def syn(sport, dst=VIP, dmac=VMAC):
    return ofwire.tcp_frame(dmac, CMAC, CLIENT, dst, sport, 8002, 1, flags=ofwire.TCP_SYN)


def synack(sport, src=VIP, smac=VMAC):
    return ofwire.tcp_frame(CMAC, smac, src, CLIENT, 8002, sport, 9, ack=2,
                            flags=ofwire.TCP_SYN | ofwire.TCP_ACK)


def channel_segment(payload, to_controller, seq):
    sport, dport = (40000, 6653) if to_controller else (6653, 40000)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18, 65535, 0, 0)
    return ofwire.ethernet("00:00:00:00:00:00", "00:00:00:00:00:00", ofwire.ETH_TYPE_IP,
                           ofwire.ipv4("127.0.0.1", "127.0.0.1", 6, tcp + payload))


def test_six_points_make_five_parts_and_the_total(tmp_path):
    base = 1000.0
    # two connections; the second's SYN-ACK never came back: not complete
    pcap(tmp_path / "client.pcap", [(base, syn(40001)), (base + 0.0051, synack(40001)),
                                    (base + 0.001, syn(40002))])
    pcap(tmp_path / "inst.pcap", [(base + 0.004, syn(40001, INST, IMAC)),
                                  (base + 0.0045, synack(40001, INST, IMAC)),
                                  (base + 0.005, syn(40002, INST, IMAC))])
    pin = ofswitch.packet_in(3, syn(40001))
    pout = ofwire.packet_out(7, 3, ofwire.action_output(5), syn(40001, INST, IMAC))
    pin2 = ofswitch.packet_in(3, syn(40002))
    pcap(tmp_path / "chan.pcap", [
        (base + 0.0005, channel_segment(pin, True, 1)),
        (base + 0.003, channel_segment(pout, False, 1)),
        (base + 0.0015, channel_segment(pin2, True, 1 + len(pin)))])
    rows = breakdown.breakdown(breakdown.port_times(str(tmp_path / "client.pcap"), CLIENT),
                               [breakdown.port_times(str(tmp_path / "inst.pcap"), CLIENT)],
                               breakdown.channel_times(str(tmp_path / "chan.pcap"), 6653))
    assert list(rows) == [40001]
    got = {k: round(v * 1e3, 2) for k, v in rows[40001].items()}
    assert got == {"switch_in": 0.5, "controller": 2.5, "switch_out": 1.0, "server": 0.5,
                   "return": 0.6, "total": 5.1}
    s = breakdown.summary(rows)
    assert s["controller"]["p50_ms"] == pytest.approx(2.5)


def test_the_capture_pairs_a_packet_in_with_its_flow_mod_across_split_segments(tmp_path):
    """benchmarks/ofcapture.py on the same reassembled stream: a flow-mod split over two
    segments counts when its second arrives; a retransmitted segment changes nothing."""
    from benchmarks import ofcapture
    pin = ofswitch.packet_in(3, syn(40001))
    mod = ofwire.flow_mod(8, 1, 200, {"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": CLIENT,
                                      "tcp_src": 40001}, ofwire.action_output(5))
    pcap(tmp_path / "chan.pcap", [
        (1000.0, channel_segment(pin, True, 1)),
        (1000.001, channel_segment(mod[:30], False, 1)),
        (1000.001, channel_segment(mod[:30], False, 1)),          # retransmitted
        (1000.002, channel_segment(mod[30:], False, 31))])
    r = ofcapture.latencies(str(tmp_path / "chan.pcap"), "syn")
    assert (r["packet_ins"], r["answered"]) == (1, 1)
    assert r["latencies_s"][0] == pytest.approx(0.002)
