"""A second per-flow peer for the benchmarks: benchmarks/naive_nat.py's round robin, with the
translation kept by Open vSwitch's connection tracker instead of a rule pair per flow.

    MALB_CONFIG=configs/paper.yaml ryu-manager benchmarks/naive_ct.py

The controller still decides every new TCP connection (its SYN comes as a packet-in), but
answers with one packet-out that commits the connection to the tracker with the instance as
its destination (`ct(commit, nat(dst=...))`, the client's switch port kept in its ct_mark)
and installs no rule. Static rules do the rest: segments to a VIP:port and an instance's
answers from its service port go through the tracker (`ct(nat)`), which rewrites them both
ways for the connections it holds; after it, a rule per instance sends a segment on towards
the instance and a rule per client port sends an answer, from the VIP again, out of the
port its connection came in on. The flow table then changes only when a client port is
first seen, not per connection: Open vSwitch revalidates its cached datapath flows after
every change of the tables (docs/controller.md, "Where the figures stand").

What it leaves out, being a peer to measure with and not a balancer: UDP goes as in
naive_nat, no connection's end or bytes reach the controller, and the tracker's entries end
by its own timeouts. One switch, one zone.

- NaiveCt: the Ryu app.
"""
from benchmarks.naive_nat import NaiveNat
from ryu_apps.framework import CONFIG_DISPATCHER, module, ofp_event, set_ev_cls

tcp = module("lib.packet.tcp")
nicira_ext = module("ofproto.nicira_ext")

ZONE = 7
CT_TABLE = 1
# Open vSwitch's ct_state bits (ovs-fields(7))
CT_NEW, CT_REPLY, CT_TRACKED = 0x01, 0x08, 0x20
NAT_DST = 1 << 1            # NX_NAT_F_DST: translate the destination


class NaiveCt(NaiveNat):

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reply_ports: dict[int, set[int]] = {}   # per switch, client ports with a rule

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        super().features(ev)
        dp = ev.msg.datapath
        parser, ofp = dp.ofproto_parser, dp.ofproto
        self.reply_ports[dp.id] = set()
        track = [parser.NXActionCT(flags=0, zone_src="", zone_ofs_nbits=ZONE,
                                   recirc_table=CT_TABLE, alg=0,
                                   actions=[parser.NXActionNAT(flags=0)])]
        for vip, port in self.pools:
            self.add_flow(dp, 100, parser.OFPMatch(eth_type=0x0800, ip_proto=6, ipv4_dst=vip,
                                                   tcp_dst=port), track)
            # a new connection to the VIP: the controller decides
            self.add_flow(dp, 10, parser.OFPMatch(eth_type=0x0800, ip_proto=6, ipv4_dst=vip,
                                                  tcp_dst=port,
                                                  ct_state=(CT_TRACKED | CT_NEW,
                                                            CT_TRACKED | CT_NEW)),
                          [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)],
                          table=CT_TABLE)
            for inst in self.pools[(vip, port)]:
                self.add_flow(dp, 100, parser.OFPMatch(eth_type=0x0800, ip_proto=6,
                                                       ipv4_src=inst.ip, tcp_src=port), track)
                self.add_flow(dp, 10, parser.OFPMatch(
                    eth_type=0x0800, ip_proto=6, ipv4_dst=inst.ip, tcp_dst=port,
                    ct_state=(CT_TRACKED, CT_TRACKED | CT_REPLY)),
                    [parser.OFPActionSetField(eth_dst=inst.mac),
                     parser.OFPActionOutput(inst.switch_port)], table=CT_TABLE)

    def balance(self, dp, in_port, data, ip, l4):
        if not isinstance(l4, tcp.tcp):
            super().balance(dp, in_port, data, ip, l4)
            return
        parser = dp.ofproto_parser
        key = (ip.dst, l4.dst_port)
        # a SYN retransmitted before the first one's commit reached the tracker keeps its
        # instance; the tracker holds the translation from then on
        flow = (ip.src, l4.src_port, ip.dst, l4.dst_port)
        inst = self.assigned.pop(flow, None)
        if inst is None:
            pool = self.pools[key]
            inst = pool[self.next[key] % len(pool)]
            self.next[key] += 1
        self.assigned[flow] = inst
        if len(self.assigned) > 4096:          # the oldest go: the tracker has them
            del self.assigned[next(iter(self.assigned))]
        if in_port not in self.reply_ports[dp.id]:
            self.reply_ports[dp.id].add(in_port)
            self.add_flow(dp, 10, parser.OFPMatch(eth_type=0x0800, ct_mark=in_port,
                                                  ct_state=(CT_TRACKED | CT_REPLY,
                                                            CT_TRACKED | CT_REPLY)),
                          [parser.OFPActionSetField(eth_src=self.vip_mac),
                           parser.OFPActionOutput(in_port)], table=CT_TABLE)
        nat = parser.NXActionNAT(flags=NAT_DST,
                                 range_ipv4_min=inst.ip, range_ipv4_max=inst.ip)
        commit = parser.NXActionCT(flags=nicira_ext.NX_CT_F_COMMIT, zone_src="",
                                   zone_ofs_nbits=ZONE, recirc_table=CT_TABLE, alg=0,
                                   actions=[nat, parser.OFPActionSetField(ct_mark=in_port)])
        self.packet_out(dp, in_port, [commit], data)
