"""Links between switches found by LLDP, as Ryu's `--observe-links`, faucet and ONOS find
them, in plain Python: in the user's own network (`network:`) nobody told the controller
where the switches meet. Every monitoring period each connected switch sends a discovery
frame out of each of its ports (the ports its port statistics list); a frame that comes
back as a packet-in from another switch is a link, both ends known. Links not heard for
LINK_TTL_PERIODS periods are gone.

- lldp_frame(), parse_lldp(): the frame (chassis id: the dpid, port id: the port);
- Links: ports per switch, links with when last heard, the edge ports (no link), and the
  next hops between switches over them (flowpath.next_hops' shape).
"""
from __future__ import annotations

import struct

from ryu_apps.ofwire import ETH_TYPE_LLDP

LLDP_DST = bytes.fromhex("0180c200000e")     # nearest bridge: switches do not forward it
LLDP_SRC = bytes.fromhex("020000ff0001")
OFPP_MAX = 0xFFFFFF00                        # above: reserved ports (LOCAL, CONTROLLER)
LINK_TTL_PERIODS = 3.5
CHASSIS_PREFIX = b"dpid:"


def _tlv(kind: int, value: bytes) -> bytes:
    return struct.pack("!H", kind << 9 | len(value)) + value


def lldp_frame(dpid: int, port: int) -> bytes:
    """An LLDP frame saying it left switch `dpid` by `port` (chassis id subtype 7, locally
    assigned, "dpid:<16 hex>"; port id subtype 2, port component, the port as 4 bytes)."""
    return (LLDP_DST + LLDP_SRC + struct.pack("!H", ETH_TYPE_LLDP) +
            _tlv(1, b"\x07" + CHASSIS_PREFIX + b"%016x" % dpid) +
            _tlv(2, b"\x02" + struct.pack("!I", port)) +
            _tlv(3, struct.pack("!H", 120)) + _tlv(0, b""))


def parse_lldp(data: bytes) -> tuple[int, int] | None:
    """(dpid, port) of one of our discovery frames; None for anything else (another
    controller's or a host's LLDP)."""
    if len(data) < 14 or struct.unpack_from("!H", data, 12)[0] != ETH_TYPE_LLDP:
        return None
    pos, dpid, port = 14, None, None
    while pos + 2 <= len(data):
        head, = struct.unpack_from("!H", data, pos)
        kind, length = head >> 9, head & 0x1FF
        value = data[pos + 2:pos + 2 + length]
        if kind == 0 or len(value) < length:
            break
        if kind == 1 and value[:1] == b"\x07" and value[1:6] == CHASSIS_PREFIX:
            try:
                dpid = int(value[6:], 16)
            except ValueError:
                return None
        elif kind == 2 and value[:1] == b"\x02" and len(value) == 5:
            port, = struct.unpack("!I", value[1:])
        pos += 2 + length
    if dpid is None or port is None:
        return None
    return dpid, port


class Links:
    def __init__(self, period_s: float):
        self.ttl_s = LINK_TTL_PERIODS * period_s
        self.ports: dict[int, set[int]] = {}
        # (dpid, port) -> ((peer dpid, peer port), when last heard)
        self.links: dict[tuple[int, int], tuple[tuple[int, int], float]] = {}

    def ports_seen(self, dpid: int, ports) -> None:
        self.ports[dpid] = {p for p in ports if 0 < p <= OFPP_MAX}

    def switch_gone(self, dpid: int) -> None:
        """Its control channel dropped: no discovery frames from it until its ports are
        listed again. Its links stay until they expire: its data plane may go on forwarding
        (fail mode secure), and a switch back within the links' time to live gets its
        flows' rules at once, along them."""
        self.ports.pop(dpid, None)

    def frames(self, dpid: int) -> list[tuple[int, bytes]]:
        """The discovery frames to send out of each port of a switch."""
        return [(p, lldp_frame(dpid, p)) for p in sorted(self.ports.get(dpid, ()))]

    def heard(self, dpid: int, in_port: int, data: bytes, now: float) -> bool | None:
        """A packet-in of an LLDP frame. None: not ours; else True when the link is new."""
        sent = parse_lldp(data)
        if sent is None:
            return None
        if sent[0] == dpid:
            return False      # a loop back to the same switch: not a link between two
        here = (dpid, in_port)
        new = self.links.get(here, (None,))[0] != sent
        # both directions: the other end's frame may come a period later
        self.links[here] = (sent, now)
        self.links[sent] = (here, now)
        return new

    def expire(self, now: float) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        gone = [(k, peer) for k, (peer, seen) in self.links.items() if now - seen > self.ttl_s]
        for k, _ in gone:
            del self.links[k]
        return gone

    def link_ports(self, dpid: int) -> set[int]:
        return {p for d, p in self.links if d == dpid}

    def edge_ports(self, dpid: int) -> set[int] | None:
        """A switch's ports that lead to no other switch; None while its ports are unknown."""
        ports = self.ports.get(dpid)
        return None if ports is None else ports - self.link_ports(dpid)

    def adjacency(self) -> list[tuple[int, int, int, int]]:
        """Each link once as (dpid a, port a, dpid b, port b)."""
        return [(a[0], a[1], b[0], b[1]) for a, (b, _) in sorted(self.links.items()) if a < b]

    def view(self) -> list[dict]:
        return [{"a": f"{a:016x}", "a_port": ap, "b": f"{b:016x}", "b_port": bp}
                for a, ap, b, bp in self.adjacency()]
