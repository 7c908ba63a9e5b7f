"""The controller's shell (ryu_apps/malb.py) without ryu-manager: the app is built with its
port check, threads and REST server stubbed, Ryu events (Ryu's own message classes where they
matter) go to its handlers, and what it sends to a fake datapath is applied to a fake switch.
This checks the shell's decoding and sending; the core's behaviour is test_core.py's."""
from __future__ import annotations

import types

import pytest

from common.metrics import render
from ryu_apps import loop_stalls, malb, ofwire, peers
from ryu_apps.framework import DEAD_DISPATCHER, ofproto_v1_3 as ofp, \
    ofproto_v1_3_parser as parser
from tests.lib.fakeswitch import CONTROLLER, fields_of
from tests.lib.metrics import convention_problems, value
from tests.lib.shell import NOW, connect, event, make_app


def syn(app, sport):
    c = app.cfg.testbed.clients[0]
    ms = app.cfg.microservice("ui")
    return c, ofwire.tcp_frame(app.cfg.controller.vip_mac, c.mac, c.ip, ms.vip, sport, ms.port,
                               1, flags=ofwire.TCP_SYN)


def test_a_switch_connects_and_a_new_flow_is_sent_counted_and_timed(app):
    dp = connect(app)
    sw = dp.switch
    assert app.status()["switches"] == ["0000000000000001"]
    assert sw.lookup({"eth_type": 0x88B5, "eth_dst": "x"}).actions[0].port == CONTROLLER
    # the meter features reply, as Ryu parses it
    app._meter_features(event(dp, body=[parser.OFPMeterFeaturesStats(
        max_meter=8, band_types=1 << ofp.OFPMBT_DROP, capabilities=ofp.OFPMF_PKTPS,
        max_bands=1, max_color=0)]))
    assert set(sw.meters) == {1, 2}
    app._group_features(event(dp, body=parser.OFPGroupFeaturesStats(
        types=1 << ofp.OFPGT_SELECT, capabilities=0, max_groups=[8, 8, 8, 8],
        actions=[0, 0, 0, 0])))
    c, frame = syn(app, 40000)
    app._packet_in(event(dp, match={"in_port": c.switch_port}, data=frame, cookie=0))
    assert len(sw.nat_rules()) == 2
    port, pkt = sw.run(sw.packet_outs[-1].actions, fields_of(frame))[0][:2]
    assert pkt["ipv4_dst"] != app.cfg.microservice("ui").vip and port != CONTROLLER
    metrics = render(app.metrics)
    assert value(metrics, "malb_packet_in_total", kind="new_flow") == 1
    assert value(metrics, "malb_decision_latency_seconds_count") == 1
    assert value(metrics, "malb_handler_seconds_count", event="packet_in") == 1
    assert value(metrics, "malb_build_info", process="controller") == 1
    assert convention_problems(metrics) == []
    assert app.decisions[-1]["client"] == f"{c.ip}:40000"


def test_statistics_removals_and_port_events_are_decoded(app):
    dp = connect(app)
    c, frame = syn(app, 40001)
    app._packet_in(event(dp, match={"in_port": c.switch_port}, data=frame, cookie=0))
    rules = dp.switch.nat_rules()
    # a restarted controller learns the flow from the switch's flow statistics reply
    fresh = malb.MalbController()
    dp2 = connect(fresh)
    body = [parser.OFPFlowStats(table_id=0, duration_sec=4, duration_nsec=0, priority=200,
                                idle_timeout=10, hard_timeout=0, flags=1, cookie=r.cookie,
                                packet_count=3, byte_count=300,
                                match=parser.OFPMatch(**r.match),
                                instructions=[parser.OFPInstructionActions(
                                    ofp.OFPIT_APPLY_ACTIONS, r.actions)])
            for r in rules]
    fresh._flow_stats(event(dp2, body=body, xid=9, flags=0))
    assert fresh.status()["active_flows"] == 1
    assert value(render(fresh.metrics), "malb_active_flows") == 1
    for r in rules:
        fresh._flow_removed(event(dp2, cookie=r.cookie, duration_sec=9, duration_nsec=0,
                                  byte_count=900, packet_count=9,
                                  reason=ofp.OFPRR_IDLE_TIMEOUT))
    assert fresh.status()["active_flows"] == 0
    # port counters and a port going down
    inst = app.cfg.instances_of("ui")[0]
    for k in range(2):
        app._port_stats(event(dp, body=[types.SimpleNamespace(
            port_no=inst.switch_port, rx_bytes=k * 10**6, tx_bytes=0)]))
    app._port_status(event(dp, reason=ofp.OFPPR_MODIFY, desc=types.SimpleNamespace(
        port_no=inst.switch_port, state=ofp.OFPPS_LINK_DOWN)))
    assert app.instances_view()[inst.name]["healthy"] is False
    assert value(render(app.metrics), "malb_instance_healthy", instance_name=inst.name) == 0
    app._state_change(types.SimpleNamespace(datapath=dp, state=DEAD_DISPATCHER))
    assert app.status()["switches"] == []


def test_the_profiler_exchange_posts_the_report_and_applies_the_answer(app, monkeypatch):
    posted = []
    answers = {"profiles": {"microservices": {"ui": {"weights": {"alpha": 0, "beta": 1,
                                                                 "gamma": 0}}}},
               "servers": {"servers": {}}}
    monkeypatch.setattr(peers, "post_json", lambda url, body, timeout, token=None:
                        posted.append((url, body)))
    monkeypatch.setattr(peers, "get_json", lambda url, timeout: answers[url.rsplit("/")[-1]])
    app.policy_core.clock = lambda: NOW          # the weights' age is judged by the policy core
    app.peers.profiler_exchange(NOW, 1.0)
    assert posted[0][0].endswith("/flows") and "pairs" in posted[0][1]
    assert app.status()["microservices"]["ui"]["weights"]["beta"] == 1.0
    assert app.status()["profiler"]["reachable"] is True

    def refused(url, timeout):
        raise peers.HttpError("refused")
    monkeypatch.setattr(peers, "get_json", refused)
    app.peers.profiler_exchange(NOW + 3, 1.0)
    assert app.status()["profiler"]["reachable"] is False
    assert value(render(app.metrics), "malb_profiler_requests_total", call="any",
                 result="error") == 1
    # REST's calls go through the core
    app.set_draining("srv1-ui", True)
    assert app.instances_view()["srv1-ui"]["draining"] is True


def test_garbage_collections_are_timed_outside_the_collector(app, monkeypatch):
    # registered with the collector; what a collection's callback records is observed later,
    # by the lag loop, so the callback never takes a metric's lock
    assert app.stalls.gc_watch in malb.gc.callbacks
    app.stalls.gc_watch("start", {"generation": 2, "collected": 0, "uncollectable": 0})
    app.stalls.gc_watch("stop", {"generation": 2, "collected": 5, "uncollectable": 0})
    assert value(render(app.metrics), "malb_gc_pause_seconds_count", generation="2") is None
    # the lag loop counts them after each tick
    ticks = []

    class Stop(Exception):
        pass

    def sleep(seconds):
        ticks.append(seconds)
        if len(ticks) > 1:
            raise Stop
    monkeypatch.setattr(loop_stalls.hub, "sleep", sleep)
    with pytest.raises(Stop):
        app.stalls.lag_loop()
    metrics = render(app.metrics)
    assert value(metrics, "malb_gc_pause_seconds_count", generation="2") == 1
    assert value(metrics, "malb_event_loop_lag_seconds_count") == 1
    assert convention_problems(metrics) == []


@pytest.mark.parametrize("eager", [False, True])
def test_the_lazy_parsers_are_in_place_while_the_app_runs_unless_ryus_are_asked_for(
        monkeypatch, eager):
    built = make_app(monkeypatch, **({"MALB_EAGER_PARSE": "1"} if eager else {}))
    app = next(built)
    assert malb.lazy_parse.installed() is not eager
    app.threads = []             # stubbed: nothing was spawned
    app.stop()                   # as the app manager unloads it
    assert not malb.lazy_parse.installed()
    next(built, None)            # the fixture's own cleanup
