"""Edge response times from the call-graph services' Prometheus histograms, as plain
functions: the agent scrapes a service's /metrics, and from two scrapes gets, per callee,
how many calls it made in between, their mean and their p95 latency (the response time of
that edge of the communication graph, as its caller sees it)."""
from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from common.stats import histogram_quantile

CALL_METRIC = "callgraph_call_duration_seconds"


def parse_calls(text: str) -> dict[str, dict]:
    """{callee: {"count", "sum", "buckets": [(le, cumulative count), ...]}} from a
    call-graph service's metrics text."""
    out: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        if family.name != CALL_METRIC:
            continue
        for s in family.samples:
            callee = s.labels.get("callee")
            if callee is None:
                continue
            h = out.setdefault(callee, {"count": 0.0, "sum": 0.0, "buckets": []})
            if s.name.endswith("_bucket"):
                h["buckets"].append((float(s.labels["le"]), float(s.value)))
            elif s.name.endswith("_sum"):
                h["sum"] = float(s.value)
            elif s.name.endswith("_count"):
                h["count"] = float(s.value)
    for h in out.values():
        h["buckets"].sort()
    return out


def call_deltas(before: dict[str, dict], after: dict[str, dict]) -> list[dict]:
    """Per callee, the calls made between two scrapes: count, mean and p95 in ms. A
    restarted service (counters went down) starts over from its new counts."""
    rows = []
    for callee, now in sorted(after.items()):
        old = before.get(callee)
        if old is None or now["count"] < old["count"]:
            old = {"count": 0.0, "sum": 0.0, "buckets": [(b, 0.0) for b, _ in now["buckets"]]}
        calls = now["count"] - old["count"]
        if calls <= 0:
            continue
        was = dict(old["buckets"])
        buckets = [(b, c - was.get(b, 0.0)) for b, c in now["buckets"]]
        p95 = histogram_quantile(0.95, buckets)
        rows.append({"callee": callee, "calls": int(calls),
                     "mean_ms": round(1000.0 * (now["sum"] - old["sum"]) / calls, 3),
                     "p95_ms": None if p95 is None or math.isinf(p95) else
                     round(1000.0 * p95, 3)})
    return rows
