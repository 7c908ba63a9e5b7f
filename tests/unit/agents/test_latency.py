"""Edge response times from two scrapes of a call-graph service's histograms."""
import pytest
from prometheus_client import Histogram

from agents.latency import call_deltas, parse_calls
from common.metrics import new_registry, render
from profiler.model import ProfilerModel
from profiler.predictors import RollingMean
from services.callgraph import LATENCY_BUCKETS
from tests.lib.profiler_samples import cfg, sample


def scrape(observations):
    """What a call-graph service's /metrics says after these (callee, seconds) calls."""
    r = new_registry("service")
    h = Histogram("callgraph_call_duration_seconds", "calls",
                  ("service", "instance_name", "callee"), buckets=LATENCY_BUCKETS, registry=r)
    for callee, seconds in observations:
        h.labels("productpage", "srv1-pp", callee).observe(seconds)
    return render(r)


def test_calls_between_two_scrapes_per_callee():
    first = [("details", 0.004)] * 10 + [("reviews", 0.020)] * 5
    later = first + [("details", 0.006)] * 20 + [("details", 0.045)]
    rows = call_deltas(parse_calls(scrape(first)), parse_calls(scrape(later)))
    assert [r["callee"] for r in rows] == ["details"]          # reviews made no new call
    (row,) = rows
    assert row["calls"] == 21
    assert row["mean_ms"] == pytest.approx((20 * 6 + 45) / 21, abs=1e-3)
    assert 5.0 <= row["p95_ms"] <= 7.5                          # inside the 5-7.5 ms bucket
    # a restarted service counts from its new numbers
    again = call_deltas(parse_calls(scrape(later)), parse_calls(scrape(first[:3])))
    assert again[0]["calls"] == 3


def test_the_profiler_takes_the_latencies_into_the_graph():
    m = ProfilerModel(cfg(), lambda: RollingMean(3))
    m.ingest_flows([], None, now=99.0, pairs={"interval_s": 3.0, "edges": [
        {"src": "srv1-ui", "dst": "srv2-be", "bytes": 3000, "flows": 3}]})
    s = sample("srv1", 100.0)
    s["containers"][1]["calls"] = {"interval_s": 5.0, "callees": [
        {"callee": "backend", "calls": 3, "mean_ms": 12.5, "p95_ms": 20.0}]}
    m.ingest_agent("srv1", s, None, 100.0)
    m.step(100.0)
    m.step(103.0)                         # the same sample again: not taken twice
    (edge,) = m.graph_view(103.0)["edges"]
    assert (edge["caller"], edge["callee"], edge["rt_ms"], edge["rt_p95_ms"]) == \
        ("ui", "backend", 12.5, 20.0)
    assert edge["bytes_per_s"] == 1000.0
    vertices = m.graph_view(103.0)["vertices"]
    assert vertices["video"]["instances"]["srv1-vid"]["cpu_cores"] == pytest.approx(0.1)
