"""The controller core on a network the testbed did not build (`network:` in the
configuration): instances at addresses of the user's choosing, some without a switch port
(found from their answers to the probes), two switches whose link nobody configured (found
by LLDP). Played through the fake switches of tests/lib/fakeswitch.py."""
from __future__ import annotations

import pytest

from common.config import ConfigError, check_testbed_builds, parse_config_file_data
from ryu_apps import ofwire
from ryu_apps.core import PortStat
from ryu_apps.flows import fin_cookie, flow_id_of
from ryu_apps.framework import ofproto_v1_3
from ryu_apps.managers.flow_statistics import FlowStat
from ryu_apps.links import Links, lldp_frame, parse_lldp
from tests.lib.controller import NOW, answer_of, inject, new_core
from tests.lib.fakeswitch import FakeNetwork, decode, fields_of

S1, S2 = 0x10, 0x20
LINK = (S1, 5, S2, 1)              # s1 port 5 - s2 port 1: the controller is not told
CLIENT = {"ip": "192.168.50.1", "mac": "00:00:00:00:00:01", "at": (S1, 1)}
VIP = "192.168.50.100"
WHERE = {"h1-web": (S1, 3), "h2-web": (S2, 2), "h3-web": (S2, 3)}   # where they really are


def network_config(**overrides) -> dict:
    data = {
        "servers": [{"name": "h1"}, {"name": "h2"}, {"name": "h3"}],
        "microservices": [{"name": "web", "port": 80, "vip": VIP, "flow_class": "short"}],
        "controller": {"health": {"method": "tcp"}},
        "network": {
            "switches": [{"name": "s1", "dpid": S1}, {"name": "s2", "dpid": "0000000000000020"}],
            "instances": [
                {"microservice": "web", "server": "h1", "ip": "192.168.50.11",
                 "mac": "00:00:00:00:01:01", "switch": "s1", "port": 3},
                {"microservice": "web", "server": "h2", "ip": "192.168.50.12",
                 "mac": "00:00:00:00:01:02"},
                {"microservice": "web", "server": "h3", "ip": "192.168.50.13",
                 "mac": "00:00:00:00:01:03", "switch": "s2"},
            ]}}
    for key, value in overrides.items():
        data[key] = value
    return data


def setup(policy="srr"):
    cfg = parse_config_file_data(network_config(), "own.yaml")
    ctl = new_core(cfg, policy)
    net = FakeNetwork(cfg, links=[LINK])
    for s in cfg.testbed.switches:
        net.apply(ctl.switch_connected(s.dpid, NOW).sends)
    return cfg, ctl, net


def feed_punted(ctl, net, now):
    """Packet-outs that crossed a link and came to the controller from the far switch."""
    from tests.lib.fakeswitch import frame_of
    results = []
    while net.punted:
        dpid, in_port, pkt, rule = net.punted.pop(0)
        r = ctl.packet_in(dpid, in_port, frame_of(pkt), now, rule.cookie if rule else 0)
        net.apply(r.sends)
        results.append(r)
    return results


def discover(ctl, net, now):
    """The switches report their ports, the controller sends LLDP, the frames come back."""
    for dpid, ports in ((S1, (1, 3, 5, 0xFFFFFFFE)), (S2, (1, 2, 3))):
        ctl.port_stats(dpid, [PortStat(p, 0, 0) for p in ports], now)
    net.apply(ctl.discover_links(now).sends)
    return feed_punted(ctl, net, now)


def answer_probes(cfg, ctl, net, now, who=("h2-web", "h3-web"), where=WHERE):
    """A probe round; each listed instance answers the probe copy that reached its port."""
    before = len(net.delivered)
    net.apply(ctl.probe_health(now).sends)
    results = []
    for dpid, port, pkt in net.delivered[before:]:
        inst = next((i for i in cfg.slots if i.ip == pkt.get("ipv4_dst")), None)
        if inst is not None and inst.name in who and (dpid, port) == where[inst.name]:
            results += inject(ctl, net, dpid, port, answer_of(pkt), now + 0.1)[1]
    return results


def test_the_configuration_declares_instances_where_the_user_has_them():
    cfg = parse_config_file_data(network_config(), "own.yaml")
    assert cfg.declared_network and [s.dpid for s in cfg.testbed.switches] == [S1, S2]
    h1, h2, h3 = cfg.slots
    assert (h1.name, h1.ip, h1.dpid, h1.switch_port) == ("h1-web", "192.168.50.11", S1, 3)
    assert (h2.dpid, h2.switch_port) == (None, None)
    assert (h3.dpid, h3.switch_port) == (S2, None)
    assert cfg.instances == cfg.slots and cfg.microservice("web").servers == ("h1", "h2", "h3")
    assert not cfg.testbed.trunks and not cfg.testbed.clients
    with pytest.raises(ConfigError, match="network.instances: this configuration describes "
                                          "your own network"):
        check_testbed_builds(cfg)


def _instances(**change):
    data = network_config()
    data["network"]["instances"][1].update(change)
    return data


@pytest.mark.parametrize("data, message", [
    (_instances(microservice="api"), r"network.instances\[1\].microservice: unknown "
                                     r"microservice 'api'"),
    (_instances(server="h9"), r"network.instances\[1\].server: unknown server 'h9'"),
    (_instances(ip="192.168.50.11"), r"network.instances\[1\].ip: duplicate instance address"),
    (_instances(mac="00:00:00:00:01:01"), r"network.instances\[1\].mac: duplicate instance MAC"),
    (_instances(mac="01:00:00:00:01:01"), r"network.instances\[1\].mac: .* multicast"),
    (_instances(port=4), r"network.instances\[1\].port: a port needs its switch"),
    (_instances(switch="s7"), r"network.instances\[1\].switch: unknown switch 's7'"),
    (_instances(server="h1"), r"network.instances\[1\].server: a second instance of web on h1"),
    (_instances(ip="10.0.0.1x"), r"network.instances\[1\].ip: not an IPv4 address"),
    (network_config(network={"instances": network_config()["network"]["instances"]}),
     r"network.switches: required with network.instances"),
    (network_config(network={"switches": [{"name": "s1", "dpid": 1}]}),
     r"network.switches: only with network.instances"),
    (network_config(network={**network_config()["network"],
                             "switches": [{"name": "s1", "dpid": "zz"}]}),
     r"network.switches\[0\].dpid: expected a datapath id"),
    (network_config(microservices=[{"name": "web", "port": 80, "vip": VIP, "replicas": 2}]),
     r"microservices\[0\].replicas: with network.instances"),
    (network_config(microservices=[{"name": "web", "port": 80, "vip": VIP},
                                   {"name": "db", "port": 5432, "vip": "192.168.50.101"}]),
     r"network.instances: no instance of db"),
    (network_config(microservices=[{"name": "web", "port": 80, "vip": "192.168.50.12"}]),
     r"microservices\[0\].vip: 192.168.50.12 collides with a host address"),
    (network_config(controller={"health": {"method": "none"}}),
     r"network.instances\[1\].port: needed with controller.health.method none"),
    (network_config(testbed={"proxy": True}), r"testbed.proxy: .* not with network.instances"),
])
def test_a_wrong_declaration_is_one_line_naming_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        parse_config_file_data(data, "own.yaml")


def test_lldp_frames_say_where_they_left_and_nothing_else_is_taken_for_one():
    assert parse_lldp(lldp_frame(0x20, 7)) == (0x20, 7)
    assert parse_lldp(lldp_frame(0xFEDCBA9876543210, 0xFFFFFF00)) == (0xFEDCBA9876543210,
                                                                      0xFFFFFF00)
    other = lldp_frame(1, 1).replace(b"dpid:", b"host:")
    assert parse_lldp(other) is None and parse_lldp(b"\x00" * 60) is None
    assert parse_lldp(lldp_frame(1, 1)[:20]) is None
    links = Links(period_s=1.0)
    links.ports_seen(1, [1, 2, 0xFFFFFFFE])
    assert links.heard(2, 9, lldp_frame(1, 2), 0.0) is True
    assert links.heard(2, 9, lldp_frame(1, 2), 0.5) is False
    assert links.heard(2, 9, b"\x00" * 60, 0.5) is None
    assert links.edge_ports(1) == {1} and links.edge_ports(3) is None
    assert links.adjacency() == [(1, 2, 2, 9)]
    assert links.expire(3.0) == [] and len(links.expire(4.1)) == 2 and links.edge_ports(1) == {1, 2}


def test_links_are_found_and_instances_located_from_their_answers_to_the_probes():
    cfg, ctl, net = setup()
    st = ctl.status()
    assert st["instances_unlocated"] == ["h2-web", "h3-web"] and st["links"] == []
    assert st["instance_locations"]["h1-web"] == {"switch": f"{S1:016x}", "port": 3,
                                                  "how": "configured"}
    view = ctl.instances_view()
    assert not view["h2-web"]["healthy"] and view["h2-web"]["health"] == "not located yet"
    results = discover(ctl, net, NOW)
    assert [r.kinds for r in results] == [["lldp"], ["lldp"]]
    assert ctl.status()["links"] == [{"a": f"{S1:016x}", "a_port": 5, "b": f"{S2:016x}",
                                      "b_port": 1}]
    # unlocated instances are probed out of every edge port of both switches, never a link
    before = len(net.delivered)
    results = answer_probes(cfg, ctl, net, NOW + 1)
    probed = {(d, p) for d, p, pkt in net.delivered[before:]
              if pkt.get("ipv4_dst") == "192.168.50.12"}
    assert probed == {(S1, 1), (S1, 3), (S2, 2), (S2, 3)}
    assert any("instance h2-web (192.168.50.12) found at switch 0000000000000020 port 2" in
               line for r in results for line in r.infos)
    st = ctl.status()
    assert st["instances_unlocated"] == []
    assert st["instance_locations"]["h3-web"] == {"switch": f"{S2:016x}", "port": 3,
                                                  "how": "learned"}
    assert all(ctl.instances_view()[n]["healthy"] for n in WHERE)
    # located, an instance is probed out of its own port only
    before = len(net.delivered)
    net.apply(ctl.probe_health(NOW + 3).sends)
    assert {(d, p) for d, p, pkt in net.delivered[before:]
            if pkt.get("ipv4_dst") == "192.168.50.12"} == {(S2, 2)}


def test_an_answer_from_the_wrong_switch_or_mac_is_not_taken_for_its_location():
    cfg, ctl, net = setup()
    discover(ctl, net, NOW)
    # h3-web is configured on s2: its MAC seen on s1 says nothing; h2 answers with a MAC
    # other than its configured one: a warning, and it stays unlocated
    wrong = {"h2-web": (S2, 2), "h3-web": (S1, 1)}
    before = len(net.delivered)
    net.apply(ctl.probe_health(NOW + 1).sends)
    warnings = []
    for dpid, port, pkt in net.delivered[before:]:
        inst = next((i for i in cfg.slots if i.ip == pkt.get("ipv4_dst")), None)
        if inst is not None and wrong.get(inst.name) == (dpid, port):
            answer = answer_of(pkt)
            if inst.name == "h2-web":
                answer["eth_src"] = "00:00:00:00:09:09"
            for r in inject(ctl, net, dpid, port, answer, NOW + 1.1)[1]:
                warnings += r.warnings
    assert ctl.status()["instances_unlocated"] == ["h2-web", "h3-web"]
    assert any("answers from MAC 00:00:00:00:09:09, configured 00:00:00:00:01:02" in w
               for w in warnings)


def located(healthy=("h2-web",)):
    """The network set up, the link found, h2 and h3 located; only `healthy` in the pool."""
    cfg, ctl, net = setup()
    discover(ctl, net, NOW)
    answer_probes(cfg, ctl, net, NOW + 1)
    for b in ctl.policy_core.pools["web"]:
        ctl.policy_core.set_health(b.name, b.name in healthy)
    return cfg, ctl, net


def client_segment(cfg, port: int, flags: int, seq: int = 1000) -> dict:
    """The client's TCP segment to the VIP from `port`."""
    return fields_of(ofwire.tcp_frame(cfg.controller.vip_mac, CLIENT["mac"], CLIENT["ip"], VIP,
                                      port, 80, seq, flags=flags))


def idle_out(ctl, net, now: float) -> None:
    """Every NAT rule idles out, each with its flow-removed."""
    for sw in net.switches.values():
        for rule in sw.nat_rules():
            sw.remove(rule.cookie)
            net.apply(ctl.flow_removed(sw.dpid, rule.cookie, 12.0, 100, 2,
                                       ofwire.OFPRR_IDLE_TIMEOUT, now).sends)


def test_a_client_on_one_switch_reaches_an_instance_found_on_the_other_and_back():
    cfg, ctl, net = located()
    syn = client_segment(cfg, 40000, ofwire.TCP_SYN)
    before = len(net.delivered)
    leaves, results = inject(ctl, net, *CLIENT["at"], syn, NOW + 2)
    assert [r.kinds for r in results] == [["new_flow"]]
    # the first packet crosses the link and meets no rule on s2 yet: the controller's L2
    # path takes it to where the probes found the instance
    assert [r.kinds for r in feed_punted(ctl, net, NOW + 2)] == [["l2"]]
    arrived = [(d, p, pkt) for d, p, pkt in [*leaves, *net.delivered[before:]]
               if pkt.get("ipv4_dst") == "192.168.50.12"]
    assert arrived and arrived[0][:2] == WHERE["h2-web"]
    # its answer goes back over the link, rewritten to the VIP on the client's switch
    pkt = arrived[0][2]
    back, results = inject(ctl, net, *WHERE["h2-web"], answer_of(pkt), NOW + 2.1)
    assert [r.kinds for r in results] in ([], [["l2"]])
    (dpid, port, out), = back or [e for e in net.delivered if e[2].get("ipv4_dst") ==
                                  CLIENT["ip"]][-1:]
    assert (dpid, port) == CLIENT["at"] and out["ipv4_src"] == VIP
    # the segments that follow are carried by the switches both ways
    ack = {**syn, "tcp_flags": ofwire.TCP_ACK}
    (leave,), results = inject(ctl, net, *CLIENT["at"], ack, NOW + 2.2)
    assert leave[:2] == WHERE["h2-web"] and all(r.kinds != ["new_flow"] for r in results)
    # the connection outlives its rules: the instance's next answer comes to the controller
    # on the client's switch (an orphan rule for this client), which resumes the flow
    idle_out(ctl, net, NOW + 20)
    back, results = inject(ctl, net, *WHERE["h2-web"], answer_of(pkt, flags=ofwire.TCP_ACK),
                           NOW + 20.1)
    assert ["resumed"] in [r.kinds for r in results]
    (dpid, port, out), = [e for e in net.delivered if e[2].get("ipv4_dst") == CLIENT["ip"]][-1:]
    assert (dpid, port) == CLIENT["at"] and out["ipv4_src"] == VIP
    # a reconnected switch gets the client's orphan rules back
    net.switches[S1].rules.clear()
    net.apply(ctl.switch_connected(S1, NOW + 21).sends)
    assert any(r.priority == 150 and r.match.get("ipv4_dst") in (
        CLIENT["ip"], (CLIENT["ip"], "255.255.255.255")) for r in net.switches[S1].rules)


def test_an_instance_going_down_is_looked_for_again_and_found_where_it_moved():
    cfg, ctl, net = setup()
    discover(ctl, net, NOW)
    answer_probes(cfg, ctl, net, NOW + 1)
    r = ctl.health_result("h2-web", False, "refused", NOW + 2)
    r = ctl.health_result("h2-web", False, "refused", NOW + 2)
    assert "h2-web" in ctl.status()["instances_unlocated"]
    assert any("looked for again" in line for line in r.infos)
    moved = {**WHERE, "h2-web": (S1, 1)}
    results = answer_probes(cfg, ctl, net, NOW + 4, who=("h2-web",), where=moved)
    assert any("h2-web (192.168.50.12) found at switch 0000000000000010 port 1" in line
               for r in results for line in r.infos)
    assert ctl.instances_view()["h2-web"]["healthy"]


def test_a_link_not_heard_for_a_while_is_gone_and_new_flows_across_it_are_dropped():
    cfg, ctl, net = setup()
    discover(ctl, net, NOW)
    answer_probes(cfg, ctl, net, NOW + 1)
    r = ctl.discover_links(NOW + 60)       # nothing came back for a minute
    assert any("link gone: switch 0000000000000010 port 5" in w for w in r.warnings)
    assert ctl.status()["links"] == []
    for b in ctl.policy_core.pools["web"]:
        ctl.policy_core.set_health(b.name, b.name == "h2-web")
    syn = fields_of(ofwire.tcp_frame(cfg.controller.vip_mac, CLIENT["mac"], CLIENT["ip"], VIP,
                                     40001, 80, 1000, flags=ofwire.TCP_SYN))
    _, results = inject(ctl, net, *CLIENT["at"], syn, NOW + 61)
    (r,) = results
    assert r.kinds == ["new_flow", "no_path"] and r.decision is None
    assert "no path from switch 16 to h2-web" in r.warnings[0]
    assert ctl.flows.active_count() == 0


def _bucket_ports(net, dpid: int, ip: str) -> set[int]:
    """The output ports of a switch's select-group buckets that send to this address."""
    ports = set()
    for buckets in net.switches[dpid].groups.values():
        for _, _, actions in buckets:
            sets = {a.key: a.value for a in actions if hasattr(a, "key")}
            if sets.get("ipv4_dst") == ip:
                ports |= {a.port for a in actions if hasattr(a, "port")}
    return ports


def dataplane_setup(groups=True):
    """Data-plane mode on the two switches (with select groups unless told otherwise), the
    link found, h2 and h3 located."""
    data = network_config()
    data["controller"] = {**data["controller"], "dataplane": {"short_flows": "switch"}}
    cfg = parse_config_file_data(data, "own.yaml")
    ctl = new_core(cfg, "maglev")
    net = FakeNetwork(cfg, links=[LINK])
    for s in cfg.testbed.switches:
        net.apply(ctl.switch_connected(s.dpid, NOW).sends)
        if groups:
            net.apply(ctl.group_features(s.dpid, 1 << ofwire.OFPGT_SELECT, 8, NOW).sends)
    discover(ctl, net, NOW)
    answer_probes(cfg, ctl, net, NOW + 1)
    return cfg, ctl, net


def rediscover(ctl, net, ports: dict, times=(NOW + 30, NOW + 60)):
    """Discovery rounds with the switches' ports as given: links not heard again expire."""
    for now in times:
        for dpid, numbers in ports.items():
            ctl.port_stats(dpid, [PortStat(p, 0, 0) for p in numbers], now)
        net.apply(ctl.discover_links(now).sends)
        feed_punted(ctl, net, now)


def test_data_plane_buckets_follow_a_link_that_moved_to_another_port():
    cfg, ctl, net = dataplane_setup()
    # h2 and h3 found: their slots pass through the controller for the grace period first
    net.apply(ctl.sync_dataplane(NOW + 1 + cfg.controller.idle_timeout_s + 1).sends)
    assert _bucket_ports(net, S1, "192.168.50.12") == {5}       # over the link to s2
    # the link is recabled to s1's port 6: found by LLDP, the old one forgotten
    del net.trunk[(S1, 5)], net.trunk[(S2, 1)]
    net.trunk[(S1, 6)], net.trunk[(S2, 1)] = (S2, 1), (S1, 6)
    rediscover(ctl, net, {S1: (1, 3, 6, 0xFFFFFFFE), S2: (1, 2, 3)})
    assert ctl.status()["links"] == [{"a": f"{S1:016x}", "a_port": 6, "b": f"{S2:016x}",
                                      "b_port": 1}]
    net.apply(ctl.sync_dataplane(NOW + 61).sends)
    assert _bucket_ports(net, S1, "192.168.50.12") == {6}
    assert _bucket_ports(net, S1, "192.168.50.11") == {3}       # h1 on s1 itself


def test_a_switch_reconnecting_while_an_instance_of_its_flows_is_lost_gets_the_rest():
    # a flow to h2-web, then h2-web stops answering (looked for again: no path to it) and
    # s1 reconnects: its base rules and its other flows' rules still go, with a warning
    cfg, ctl, net = located(("h1-web", "h2-web"))
    for port in (40000, 40001, 40002, 40003):
        syn = client_segment(cfg, port, ofwire.TCP_SYN)
        assert ["new_flow"] in [r.kinds for r in inject(ctl, net, *CLIENT["at"], syn,
                                                         NOW + 2)[1]]
    by_instance = {rec.instance for rec in ctl.flows.active(S1)}
    assert by_instance == {"h1-web", "h2-web"}
    for _ in range(2):
        ctl.health_result("h2-web", False, "refused", NOW + 3)
    assert "h2-web" in ctl.status()["instances_unlocated"]
    net.switches[S1].rules.clear()
    r = ctl.switch_connected(S1, NOW + 4)
    net.apply(r.sends)
    rules = net.switches[S1].rules
    assert any(rule.match.get("ipv4_dst") == VIP for rule in rules)        # base rules
    restored = {rule.match.get("tcp_src") for rule in rules
                if rule.match.get("ipv4_src") == CLIENT["ip"]}
    assert restored == {rec.client_port for rec in ctl.flows.active(S1)
                        if rec.instance == "h1-web"}
    assert any("2 flows not restored" in w and "h2-web 2" in w for w in r.warnings)
    # they stay open (the switch may still hold their rules: a control channel that
    # dropped); a segment that comes to the controller is dropped while no path leads to
    # h2-web (logged once), and gets the flow's rules once h2-web answers again
    lost = [rec for rec in ctl.flows.active(S1) if rec.instance == "h2-web"]
    assert len(lost) == 2 and not any(rec.rules_sent for rec in lost)
    lost = lost[0]
    ack = client_segment(cfg, lost.client_port, ofwire.TCP_ACK, 1001)
    for k, logged in ((0, 1), (1, 0)):
        leaves, results = inject(ctl, net, *CLIENT["at"], ack, NOW + 5 + k)
        assert not leaves and [r.kinds for r in results] == [["repeat", "no_path"]]
        assert len(results[0].warnings) == logged and lost.ended is None
    answer_probes(cfg, ctl, net, NOW + 6, who=("h2-web",))
    assert "h2-web" not in ctl.status()["instances_unlocated"]
    leaves, results = inject(ctl, net, *CLIENT["at"], ack, NOW + 7)
    assert [r.kinds for r in results][:1] == [["repeat"]] and lost.rules_sent == NOW + 7
    assert lost.client_port in {rule.match.get("tcp_src") for rule in net.switches[S1].rules
                                if rule.match.get("ipv4_src") == CLIENT["ip"]}
    # and the next one is carried by s1's rule, over the link (on s2, L2 as before)
    leaves, results = inject(ctl, net, *CLIENT["at"], ack, NOW + 8)
    assert [r.kinds for r in results] in ([], [["l2"]])


def test_a_switch_back_within_its_links_time_to_live_gets_every_flow_along_them():
    # s1's control channel drops with a flow across the link to h2-web, and comes back
    # (the switch restarted: no rules left) before the link's time to live: the link is
    # still known, so the flow's rules go out with the reconnection
    cfg, ctl, net = located()
    inject(ctl, net, *CLIENT["at"], client_segment(cfg, 40000, ofwire.TCP_SYN), NOW + 2)
    rec, = ctl.flows.active(S1)
    link_ttl = 3.5 * cfg.controller.monitoring_period_s            # heard last at NOW
    r = ctl.switch_gone(S1, NOW + link_ttl - 1)
    assert len(ctl.status()["links"]) == 1 and not r.sends
    net.switches[S1].rules.clear()
    r = ctl.switch_connected(S1, NOW + link_ttl - 0.5)
    net.apply(r.sends)
    assert not r.warnings and "1 NAT flows restored" in r.infos[0]
    assert rec.rules_sent == NOW + link_ttl - 0.5
    assert rec.client_port in {rule.match.get("tcp_src") for rule in net.switches[S1].rules}
    # gone for longer, the link expires (nothing heard from s1): not restored then
    ctl.switch_gone(S1, NOW + link_ttl)
    r = ctl.discover_links(NOW + link_ttl + 0.5)
    assert any("link gone" in w for w in r.warnings) and ctl.status()["links"] == []
    r = ctl.switch_connected(S1, NOW + link_ttl + 1)
    assert any("1 flows not restored" in w for w in r.warnings)


def stats_reply(sw, xid=None):
    """The switch's answer to its last flow statistics request (or the one `xid` names):
    the xid and every NAT rule it holds."""
    if xid is None:
        xid = [r for r in sw.requests if r.mp_type == ofwire.OFPMP_FLOW][-1].xid
    return xid, [FlowStat(rule.cookie, 1.0, 100, 2, rule.match) for rule in sw.nat_rules()]


def reconnect_without(cfg, ctl, net, instance, keep=0, flows=2, ports=(40000, 40001)):
    """Flows from the client (from `ports`) to the healthy instances, `instance` then
    lost, and s1 back from a restart with the rules of the first `keep` of its flows only
    (a control channel that dropped keeps them all). Its flows, by client port."""
    for port in ports:
        inject(ctl, net, *CLIENT["at"], client_segment(cfg, port, ofwire.TCP_SYN), NOW + 2)
    lost = sorted((rec for rec in ctl.flows.active(S1) if rec.instance == instance),
                  key=lambda rec: rec.client_port)
    assert len(lost) == flows
    for _ in range(2):
        ctl.health_result(instance, False, "refused", NOW + 3)
    sw = net.switches[S1]
    kept = {rec.flow_id for rec in lost[:keep]}
    sw.rules[:] = [rule for rule in sw.rules if flow_id_of(rule.cookie) in kept]
    net.apply(ctl.switch_connected(S1, NOW + 4).sends)
    assert {rec.rules_sent for rec in lost} == {0.0}
    return lost


def test_a_flow_not_restored_ends_once_the_switch_shows_it_lost_its_rules():
    # s1 reconnects while h2-web is lost: it kept the rules of one of h2-web's two flows
    # (a control channel that dropped) and lost the other's. The statistics requested with
    # the reconnection, once all their parts are in, show which: the lost one, which no
    # packet brought back, ends (its next packet would resume it); the other stays open
    cfg, ctl, net = located(("h1-web", "h2-web"))
    kept, gone = reconnect_without(cfg, ctl, net, "h2-web", keep=1, flows=2,
                                   ports=(40000, 40001, 40002, 40003))
    xid, entries = stats_reply(net.switches[S1])
    half = len(entries) // 2
    r = ctl.flow_stats(S1, entries[:half], NOW + 4.1, xid, more=True)
    assert not r.warnings and gone.ended is None
    r = ctl.flow_stats(S1, entries[half:], NOW + 4.2, xid)
    assert [w for w in r.warnings if "1 flows not restored at its reconnection ended" in w]
    assert gone.ended == NOW + 4.2 and gone.end_reason == "rules_lost" and kept.ended is None
    assert ctl.flows.resumable(key=gone.key) is gone
    # reported as lasting to its last traffic, not to when its loss was found
    assert gone.duration_s(cfg.controller.idle_timeout_s) == gone.last_active - gone.created
    # the polling's replies that follow end nothing more
    assert not ctl.flow_stats(S1, entries, NOW + 5, xid + 1).warnings and kept.ended is None


def test_a_flow_given_its_rules_before_the_statistics_come_is_not_ended():
    cfg, ctl, net = located(("h2-web",))
    lost, _ = reconnect_without(cfg, ctl, net, "h2-web")
    xid, entries = stats_reply(net.switches[S1])          # asked before its rules went
    answer_probes(cfg, ctl, net, NOW + 5, who=("h2-web",))     # found again
    inject(ctl, net, *CLIENT["at"], client_segment(cfg, lost.client_port, ofwire.TCP_ACK,
                                                   1001), NOW + 6)
    assert lost.rules_sent == NOW + 6
    r = ctl.flow_stats(S1, entries, NOW + 6.1, xid)
    assert [w for w in r.warnings if "1 flows not restored" in w]    # the other one
    assert lost.ended is None


def test_statistics_asked_before_a_switch_went_again_end_nothing():
    # s1 drops again before answering: that request's answer, if it comes, is not the
    # reconnection's; the next reconnection asks again and its answer decides
    cfg, ctl, net = located(("h2-web",))
    reconnect_without(cfg, ctl, net, "h2-web")
    old_xid, entries = stats_reply(net.switches[S1])
    ctl.switch_gone(S1, NOW + 5)
    assert not ctl.flow_stats(S1, entries, NOW + 5.1, old_xid).warnings
    net.apply(ctl.switch_connected(S1, NOW + 6).sends)
    xid, entries = stats_reply(net.switches[S1])
    assert xid != old_xid
    assert not ctl.flow_stats(S1, entries, NOW + 6.1, old_xid).warnings
    r = ctl.flow_stats(S1, entries, NOW + 6.2, xid)
    assert [w for w in r.warnings if "2 flows not restored" in w]


def test_a_long_watched_flow_whose_rules_were_lost_goes_dormant_and_loses_its_watch():
    # a long-flow microservice under malb: each flow's FIN is watched. Lost with the
    # switch's rules, it goes on for the policy and the profiler until its FIN, as when its
    # rules idle out, and the watch the switch may still hold is deleted
    ms = [{"name": "web", "port": 80, "vip": VIP, "flow_class": "long"}]
    cfg = parse_config_file_data(network_config(microservices=ms), "own.yaml")
    ctl = new_core(cfg, "malb")
    net = FakeNetwork(cfg, links=[LINK])
    for s in cfg.testbed.switches:
        net.apply(ctl.switch_connected(s.dpid, NOW).sends)
    discover(ctl, net, NOW)
    answer_probes(cfg, ctl, net, NOW + 1)
    for b in ctl.policy_core.pools["web"]:
        ctl.policy_core.set_health(b.name, b.name == "h2-web")
    lost, _ = reconnect_without(cfg, ctl, net, "h2-web")
    assert lost.fin_watch
    xid, entries = stats_reply(net.switches[S1])
    r = ctl.flow_stats(S1, entries, NOW + 4.1, xid)
    assert lost.ended == NOW + 4.1 and lost.dormant and lost.running
    deleted = [m for _, buf in r.sends for m in decode(buf)
               if getattr(m, "command", None) == ofproto_v1_3.OFPFC_DELETE]
    assert {m.cookie for m in deleted} >= {fin_cookie(lost.flow_id)}


def test_a_segment_under_way_from_a_moving_slot_with_no_path_left_is_dropped():
    # data-plane mode: a segment marked with its old owner's MAC (a slot in transition)
    # stays with that owner on a rule pair; with the link towards it gone, it is dropped
    cfg, ctl, net = dataplane_setup(groups=False)
    del net.trunk[(S1, 5)], net.trunk[(S2, 1)]             # the link unplugged
    rediscover(ctl, net, {S1: (1, 3, 0xFFFFFFFE), S2: (2, 3)})
    assert ctl.status()["links"] == []
    ack = ofwire.tcp_frame("00:00:00:00:01:02", CLIENT["mac"], CLIENT["ip"], VIP, 40000, 80,
                           1001, 1, flags=ofwire.TCP_ACK)
    r = ctl.packet_in(S1, CLIENT["at"][1], ack, NOW + 61)
    assert r.kinds == ["dp_transition", "no_path"] and not r.sends
    assert any("no path from switch" in w for w in r.warnings)


def test_a_segment_that_would_resume_a_flow_with_no_path_leaves_it_ended():
    # a flow to h2-web whose rules idled out; h2-web is lost; the client's next segment
    # is dropped and the flow stays ended (not resumed without rules, not reported again)
    cfg, ctl, net = located()
    inject(ctl, net, *CLIENT["at"], client_segment(cfg, 40000, ofwire.TCP_SYN), NOW + 2)
    idle_out(ctl, net, NOW + 20)
    rec, = ctl.flows.flows.values()
    assert rec.ended == NOW + 20
    ctl.policy_core.set_health("h2-web", True)
    for _ in range(2):
        ctl.health_result("h2-web", False, "refused", NOW + 21)
    assert "h2-web" in ctl.status()["instances_unlocated"]
    ack = client_segment(cfg, 40000, ofwire.TCP_ACK, 1001)
    leaves, results = inject(ctl, net, *CLIENT["at"], ack, NOW + 22)
    assert not leaves and [r.kinds for r in results] == [["no_path"]]
    assert rec.ended == NOW + 20 and ctl.flows.active_count() == 0
    answer_probes(cfg, ctl, net, NOW + 23, who=("h2-web",))
    leaves, results = inject(ctl, net, *CLIENT["at"], ack, NOW + 24)
    assert [r.kinds for r in results][:1] == [["resumed"]] and rec.ended is None
