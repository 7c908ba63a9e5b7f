"""Tracker mode (controller.dataplane.short_flows: tracker): a short-flow TCP connection is
still decided by the controller, but its address translation is kept by Open vSwitch's
connection tracker instead of a rule pair, so the flow table does not change per connection
(docs/controller.md, "Tracker mode"). Plain Python: OpenFlow messages as bytes.

On a switch, in table 0, TCP to a VIP's service port, and the instances' answers to callers
on that switch (where the orphan rules go), pass through the tracker (`ct(nat)`, in the
switch's own zone) into CT_TABLE. There:

- a new connection to a VIP comes to the controller (the catch-all), which answers with one
  packet-out: `ct(commit, nat(dst=instance), ct_mark=client port)` and on into CT_TABLE;
- a client's segment, translated, goes towards its instance (a rule per instance, sent
  with the first connection to it);
- an answer, translated back to the VIP, goes out of the port its connection came in on
  (a rule per client port, sent with the first connection from it); its FIN or reset also
  comes to the controller (cookie FIN_TAG: the flow's end, flowpath.fin);
- anything else, as before the tracker: to the controller (an answer the tracker does not
  hold is an orphan; a segment to a VIP it does not hold, a resumption or a reset).

- Tracker: the per-switch rules sent so far, and the messages of a connection's start;
- ct_zone, table_rules, answer_rule: the static parts;
- CT_TABLE, PRIO_*: the table and priorities.
"""
from __future__ import annotations

from ryu_apps import ofwire
from ryu_apps.flows import FIN_TAG

CT_TABLE = 1
PRIO_TRACK_VIP = 110        # table 0: above the VIPs' to-controller rules and health probes
PRIO_TRACK_ANSWER = 160     # table 0: above the orphan rules, below the NAT rule pairs
PRIO_CT_WATCH, PRIO_CT_PASS = 20, 10      # CT_TABLE
WATCH_COOKIE = FIN_TAG << 48              # a watched end, with no flow id: by its 5-tuple
TRACKED, NEW, REPLY = ofwire.CT_TRACKED, ofwire.CT_NEW, ofwire.CT_REPLY
TO_CONTROLLER = ofwire.action_output(ofwire.OFPP_CONTROLLER, ofwire.OFPCML_NO_BUFFER)


def ct_zone(dpid: int) -> int:
    """The switch's own tracker zone (1..65535): Open vSwitch's userspace bridges share one
    tracker, and an answer must be translated back only at the switch that translated its
    connection, not again at each switch on its way."""
    return (dpid - 1) % 0xFFFF + 1


def track(dpid: int) -> bytes:
    return ofwire.action_ct(ct_zone(dpid), CT_TABLE, actions=ofwire.action_nat())


def table_rules(xid, dpid: int, vips: list[tuple[str, int]], meter: int | None) -> bytes:
    """TCP to each (VIP, port) through the tracker, and CT_TABLE's catch-all to the
    controller (through the new flows' packet-in meter, as the VIP rules)."""
    buf = b""
    for vip, port in vips:
        buf += ofwire.flow_mod(xid(dpid), 0, PRIO_TRACK_VIP, {
            "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP, "ipv4_dst": vip,
            "tcp_dst": port}, track(dpid))
    return buf + ofwire.flow_mod(xid(dpid), 0, 0, {}, TO_CONTROLLER, table=CT_TABLE,
                                 meter=meter)


def answer_rule(xid, dpid: int, inst_ip: str, port: int, dst: tuple[str, str]) -> bytes:
    """An instance's TCP answers to `dst` (an address and mask) through the tracker."""
    return ofwire.flow_mod(xid(dpid), 0, PRIO_TRACK_ANSWER, {
        "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP, "ipv4_src": inst_ip,
        "tcp_src": port, "ipv4_dst": dst}, track(dpid))


class Tracker:
    """What each switch has been sent beyond the static rules, and a connection's start."""

    def __init__(self, vip_mac: str):
        self.vip_mac = vip_mac
        self.ports: dict[int, set[int]] = {}             # per switch: client ports
        self.towards: dict[int, dict[str, int]] = {}     # per switch: instance -> out port

    def forget(self, dpid: int) -> None:
        """The switch (re)connected: what it had been sent may be gone."""
        self.ports.pop(dpid, None)
        self.towards.pop(dpid, None)

    def start(self, xid, dpid: int, in_port: int, data: bytes, inst_name: str, inst_mac: str,
              inst_ip: str, inst_port: int, vport: int, out_port: int) -> bytes:
        """The rules this connection needs that the switch lacks, then the packet-out that
        commits it to the tracker towards the instance."""
        buf = b""
        if self.towards.setdefault(dpid, {}).get(inst_name) != out_port:
            buf += ofwire.flow_mod(xid(dpid), 0, PRIO_CT_PASS, {
                "eth_type": ofwire.ETH_TYPE_IP, "ip_proto": ofwire.IPPROTO_TCP,
                "ipv4_dst": inst_ip, "tcp_dst": inst_port, "ct_state": (TRACKED, TRACKED | REPLY)},
                ofwire.action_set_field("eth_dst", inst_mac) + ofwire.action_output(out_port),
                table=CT_TABLE)
            self.towards[dpid][inst_name] = out_port
        if in_port not in self.ports.setdefault(dpid, set()):
            back = ofwire.action_set_field("eth_src", self.vip_mac) + \
                ofwire.action_output(in_port)
            answer = {"eth_type": ofwire.ETH_TYPE_IP, "ct_state": (TRACKED | REPLY,) * 2,
                      "ct_mark": in_port}
            buf += ofwire.flow_mod(xid(dpid), 0, PRIO_CT_PASS, answer, back, table=CT_TABLE)
            for flag in (ofwire.TCP_FIN, ofwire.TCP_RST):
                buf += ofwire.flow_mod(xid(dpid), WATCH_COOKIE, PRIO_CT_WATCH, {
                    **answer, "ip_proto": ofwire.IPPROTO_TCP, "tcp_flags": (flag, flag)},
                    back + TO_CONTROLLER, table=CT_TABLE)
            self.ports[dpid].add(in_port)
        nat = ofwire.action_nat(inst_ip, inst_port if inst_port != vport else None)
        commit = ofwire.action_ct(ct_zone(dpid), CT_TABLE, commit=True, actions=nat +
                                  ofwire.action_set_field("ct_mark", in_port))
        return buf + ofwire.packet_out(xid(dpid), in_port, commit, data)
