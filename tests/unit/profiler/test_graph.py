"""The communication graph: edges from the controller's pairs, smoothed; nothing unseen."""
import math

import pytest

from profiler.graph import GraphBook, ewma_alpha
from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FlowRecord, FlowTable, make_cookie


def book(window_s=30.0):
    return GraphBook({"srv1-pp": "productpage", "srv2-rev": "reviews", "srv3-rat": "ratings",
                      "srv1-rev": "reviews"}, {"cli1": "s1", "cli2": "s1"}, window_s)


def report(interval, *rows):
    return {"interval_s": interval, "edges": [
        {"src": s, "dst": d, "bytes": b, "flows": f} for s, d, b, f in rows]}


def test_pairs_become_edges_between_microservices_and_from_the_clients():
    g = book()
    touched = g.add_report(report(3.0, ("cli1", "srv1-pp", 3000, 3), ("cli2", "srv1-pp", 3000, 3),
                                  ("srv1-pp", "srv2-rev", 600, 3),
                                  ("srv1-pp", "srv1-rev", 600, 3),
                                  ("10.9.9.9", "srv1-pp", 999, 1)), now=100.0)
    assert touched == 2                       # the foreign sender is left out
    view = g.view(100.0, [])
    edges = {(e["caller"], e["callee"]): e for e in view["edges"]}
    assert set(edges) == {("clients@s1", "productpage"), ("productpage", "reviews")}
    # the first observation is the level: two clients x 3000 B in 3 s
    assert edges[("clients@s1", "productpage")]["bytes_per_s"] == 2000.0
    assert edges[("productpage", "reviews")]["flows_per_s"] == 2.0
    assert ("reviews", "ratings") not in edges          # never seen: unknown, not zero


def test_edges_are_smoothed_and_decay_only_when_a_report_says_nothing_went():
    g = book(window_s=30.0)
    g.add_report(report(3.0, ("srv2-rev", "srv3-rat", 3000, 1)), now=100.0)
    g.add_report(report(3.0, ("srv2-rev", "srv3-rat", 6000, 1)), now=103.0)
    a = ewma_alpha(3.0, 30.0)
    e = g.edges[("reviews", "ratings")]
    assert e.bytes_per_s == pytest.approx(1000 + a * (2000 - 1000))
    level = e.bytes_per_s
    g.add_report(report(3.0), now=106.0)          # a report without it: nothing went
    assert e.bytes_per_s == pytest.approx(level * (1 - a)) and e.last_seen == 103.0
    assert g.view(110.0, [])["edges"][0]["age_s"] == 7.0
    assert ewma_alpha(30.0, 30.0) == pytest.approx(1 - math.exp(-1))


def test_response_times_only_for_edges_seen_in_the_traffic():
    g = book()
    g.add_latency("reviews", "ratings", 12.0, 20.0, 3.0)
    assert not g.edges
    g.add_report(report(3.0, ("srv2-rev", "srv3-rat", 300, 1)), now=100.0)
    g.add_latency("reviews", "ratings", 12.0, 20.0, 3.0)
    g.add_latency("reviews", "ratings", 24.0, None, 3.0)
    e = g.edges[("reviews", "ratings")]
    assert e.rt_ms == pytest.approx(12 + ewma_alpha(3.0, 30.0) * 12) and e.rt_p95_ms == 20.0


def test_the_controller_counts_bytes_and_new_flows_per_sender_and_instance():
    t = FlowTable(idle_timeout=5)
    rec = FlowRecord(flow_id=make_cookie(0, 2, 7, t.next_seq()), dpid=1, protocol="tcp",
                     client_ip="10.0.1.1", client_port=40000, client_in_port=3,
                     vip="10.0.0.100", vport=9002, microservice="reviews",
                     instance="srv2-rev", server="srv2", created=1.0, last_active=1.0)
    t.add(rec)
    t.on_stats(rec.flow_id | (DIR_FORWARD << 44), 1.0, 500, 5, now=2.0)
    t.on_stats(rec.flow_id | (DIR_REVERSE << 44), 1.0, 7000, 6, now=2.0)
    t.on_stats(rec.flow_id | (DIR_FORWARD << 44), 2.0, 800, 7, now=3.0)
    taken = t.take_pairs()
    assert taken == ({("10.0.1.1", "srv2-rev"): 7800}, {("10.0.1.1", "srv2-rev"): 1})
    assert t.take_pairs() == ({}, {})
    t.restore_pairs(taken)                   # the report did not arrive: sent again
    t.add(FlowRecord(flow_id=make_cookie(0, 2, 7, t.next_seq()), dpid=1, protocol="tcp",
                     client_ip="10.0.1.1", client_port=40001, client_in_port=3,
                     vip="10.0.0.100", vport=9002, microservice="reviews",
                     instance="srv2-rev", server="srv2", created=4.0, last_active=4.0),
          new=False)                         # adopted from an earlier controller: not new
    assert t.take_pairs() == ({("10.0.1.1", "srv2-rev"): 7800}, {("10.0.1.1", "srv2-rev"): 1})


def test_vertex_use_is_smoothed_over_the_window_and_follows_moves():
    g = book(window_s=30.0)
    g.add_use("srv1", {"srv1-pp": (0.4, 20.0), "srv1-rev": (0.2, 10.0)}, 100.0)
    g.add_use("srv1", {"srv1-pp": (0.0, 20.0), "srv1-rev": (0.2, 10.0)}, 103.0)   # load stops
    g.add_use("srv1", {"srv1-pp": (0.0, 20.0), "srv1-rev": (0.2, 10.0)}, 103.0)   # same sample
    a = ewma_alpha(3.0, 30.0)
    v = g.vertices(["productpage", "reviews", "ratings"])
    # a graph read right after a burst still shows the load it carried
    assert v["productpage"]["cpu_cores"] == pytest.approx(round(0.4 * (1 - a), 4))
    assert v["ratings"] == {"instances": {}, "cpu_cores": None, "memory_mb": None}
    g.add_use("srv2", {"srv2-rev": (None, 8.0)}, 103.5)          # unreadable CPU: not a zero
    assert g.vertices(["reviews"])["reviews"]["cpu_cores"] == pytest.approx(0.2)
    # reviews left srv1: it leaves the graph with the server's next sample
    g.add_use("srv1", {"srv1-pp": (0.0, 20.0)}, 106.0)
    assert set(g.vertices(["reviews"])["reviews"]["instances"]) == {"srv2-rev"}
