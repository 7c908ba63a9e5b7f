"""The baseline per-flow balancer: a minimal round-robin NAT Ryu app, written the way a Ryu
tutorial would (Ryu's packet library to parse, its message classes to build), for the
benchmarks to compare MALB's per-flow path with in the same run.

    MALB_CONFIG=configs/paper.yaml ryu-manager benchmarks/naive_nat.py

Per microservice VIP:port of the configuration, each new TCP/UDP flow goes to the next
instance in turn: a forward rule (client to VIP rewritten to the instance), a reverse rule
(instance to client rewritten back to the VIP), both idling out after 10 s, and the first
packet sent on. ARP for a VIP is answered; everything else is a learning switch, as
ryu.app.simple_switch_13, except that an instance's frames (from its MAC or its address, ARP
too) get no L2 rule: one would carry an answer that beats its flow's reverse rule to the
switch, or hits a datapath entry cached before that rule, to the client without the VIP's
address. Such an answer that reaches the controller is sent on rewritten as its flow's
reverse rule would, and a flow's packet that reaches the controller again (a SYN
retransmitted before its rules were in) keeps its instance. No health checks, statistics,
barrier or flow records beyond that map. One switch.

- NaiveNat: the Ryu app.
"""
from common.config import load_config
from ryu_apps.framework import CONFIG_DISPATCHER, MAIN_DISPATCHER, App, module, ofp_event, \
    ofproto_v1_3, set_ev_cls

arp, ethernet, ipv4, packet, tcp, udp = (
    module(f"lib.packet.{name}") for name in ("arp", "ethernet", "ipv4", "packet", "tcp", "udp"))

IDLE_S = 10


class NaiveNat(App):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cfg = load_config()
        self.vip_mac = cfg.controller.vip_mac
        # (vip, port) -> the instances serving it, and the next one's index
        self.pools = {(ms.vip, ms.port): cfg.instances_of(ms.name) for ms in cfg.microservices}
        self.next = dict.fromkeys(self.pools, 0)
        self.vips = {ms.vip for ms in cfg.microservices}
        self.instance_ips = {i.ip for i in cfg.instances}
        self.instance_macs = {i.mac for i in cfg.instances}
        self.mac_to_port = {}
        # (instance ip, its port, client ip, client port) -> (vip, vport, client's switch port)
        self.reverse = {}
        self.assigned = {}     # (client ip, client port, vip, vport) -> its instance

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        parser, ofp = dp.ofproto_parser, dp.ofproto
        self.add_flow(dp, 0, parser.OFPMatch(),
                      [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)])

    def add_flow(self, dp, priority, match, actions, idle=0, table=0):
        parser = dp.ofproto_parser
        inst = [parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, table_id=table, priority=priority,
                                      match=match, instructions=inst, idle_timeout=idle))

    def packet_out(self, dp, in_port, actions, data):
        dp.send_msg(dp.ofproto_parser.OFPPacketOut(
            datapath=dp, buffer_id=dp.ofproto.OFP_NO_BUFFER, in_port=in_port, actions=actions,
            data=data))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp, in_port = msg.datapath, msg.match["in_port"]
        parser, ofp = dp.ofproto_parser, dp.ofproto
        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        self.mac_to_port.setdefault(dp.id, {})[eth.src] = in_port
        a, ip = pkt.get_protocol(arp.arp), pkt.get_protocol(ipv4.ipv4)
        if a is not None and a.opcode == arp.ARP_REQUEST and a.dst_ip in self.vips:
            reply = packet.Packet()
            reply.add_protocol(ethernet.ethernet(ethertype=eth.ethertype, dst=eth.src,
                                                 src=self.vip_mac))
            reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=self.vip_mac,
                                       src_ip=a.dst_ip, dst_mac=a.src_mac, dst_ip=a.src_ip))
            reply.serialize()
            self.packet_out(dp, ofp.OFPP_CONTROLLER, [parser.OFPActionOutput(in_port)],
                            reply.data)
            return
        l4 = (pkt.get_protocol(tcp.tcp) or pkt.get_protocol(udp.udp)) if ip else None
        if l4 is not None and (ip.dst, l4.dst_port) in self.pools:
            self.balance(dp, in_port, msg.data, ip, l4)
            return
        if l4 is not None and ip.src in self.instance_ips:
            nat = self.reverse.get((ip.src, l4.src_port, ip.dst, l4.dst_port))
            if nat is not None:       # an answer that reached us before its reverse rule did
                vip, vport, port = nat
                self.packet_out(dp, in_port, [parser.OFPActionSetField(eth_src=self.vip_mac),
                                              parser.OFPActionSetField(ipv4_src=vip),
                                              parser.OFPActionOutput(port)], msg.data)
                return
        out = self.mac_to_port[dp.id].get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD and eth.src not in self.instance_macs and \
                not (ip is not None and ip.src in self.instance_ips):
            self.add_flow(dp, 1, parser.OFPMatch(in_port=in_port, eth_dst=eth.dst,
                                                 eth_src=eth.src), actions)
        self.packet_out(dp, in_port, actions, msg.data)

    def balance(self, dp, in_port, data, ip, l4):
        parser = dp.ofproto_parser
        key = (ip.dst, l4.dst_port)
        flow = (ip.src, l4.src_port, ip.dst, l4.dst_port)
        inst = self.assigned.get(flow)
        if inst is None:       # a retransmitted SYN that beat its rules keeps its instance
            pool = self.pools[key]
            inst = self.assigned[flow] = pool[self.next[key] % len(pool)]
            self.next[key] += 1
        proto = "tcp" if isinstance(l4, tcp.tcp) else "udp"
        fwd = parser.OFPMatch(eth_type=0x0800, ip_proto=ip.proto, ipv4_src=ip.src,
                              ipv4_dst=ip.dst, **{f"{proto}_src": l4.src_port,
                                                  f"{proto}_dst": l4.dst_port})
        to_inst = [parser.OFPActionSetField(eth_dst=inst.mac),
                   parser.OFPActionSetField(ipv4_dst=inst.ip),
                   parser.OFPActionOutput(inst.switch_port)]
        rev = parser.OFPMatch(eth_type=0x0800, ip_proto=ip.proto, ipv4_src=inst.ip,
                              ipv4_dst=ip.src, **{f"{proto}_src": l4.dst_port,
                                                  f"{proto}_dst": l4.src_port})
        to_client = [parser.OFPActionSetField(eth_src=self.vip_mac),
                     parser.OFPActionSetField(ipv4_src=ip.dst),
                     parser.OFPActionOutput(in_port)]
        self.reverse[(inst.ip, l4.dst_port, ip.src, l4.src_port)] = (ip.dst, l4.dst_port,
                                                                      in_port)
        self.add_flow(dp, 10, rev, to_client, IDLE_S)
        self.add_flow(dp, 10, fwd, to_inst, IDLE_S)
        self.packet_out(dp, in_port, to_inst, data)
