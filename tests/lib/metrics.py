"""Reading a process's /metrics text in tests: one sample's value, what in it breaks
Prometheus's naming conventions (https://prometheus.io/docs/practices/naming/), and every
process's text as its registry renders it (process_texts)."""
from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

# the prefixes of our processes' metrics, and of prometheus_client's process collector
PREFIXES = ("malb_", "rom_", "callgraph_", "process_")
# units Prometheus does not use: a base unit instead (seconds, bytes, hertz, a 0-1 ratio),
# and no pre-computed rates (a counter, and the query's rate())
OFF_UNITS = re.compile(r"_(percent|ms|milliseconds|us|mhz|ghz|kb|mb|kib|mib|per_second|"
                       r"per_s|bps)(_|$)")
# the labels Prometheus sets on every series it scrapes
TARGET_LABELS = {"instance", "job"}
# a metric whose help says it times something must say _seconds
TIME_WORDS = re.compile(r"\b(time to|latency|how long|round trip|seconds)\b", re.I)


def value(text: str, name: str, **labels) -> float | None:
    """The value of the sample `name` (its full name: `x_total`, `x_count`, `x_bucket`) whose
    labels include these; None when there is none."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == str(v) for k, v in labels.items()):
                return s.value
    return None


def families(text: str) -> dict[str, str]:
    """{family name as exposed (a counter's with _total): type}."""
    return {family.name + ("_total" if family.type == "counter" else ""): family.type
            for family in text_string_to_metric_families(text)}


def convention_problems(text: str) -> list[str]:
    """Every way the text's metrics break the conventions, one sentence each."""
    problems = []
    for family in text_string_to_metric_families(text):
        name, kind = family.name, family.type
        if kind == "gauge" and name.endswith("_created"):
            continue        # prometheus_client's own creation times (Debian's 0.16 writes them)
        exposed = name + ("_total" if kind == "counter" else "")
        if not exposed.startswith(PREFIXES):
            problems.append(f"{exposed}: not one of our prefixes {PREFIXES}")
        if OFF_UNITS.search(exposed):
            problems.append(f"{exposed}: a unit Prometheus does not use "
                            f"({OFF_UNITS.search(exposed).group(1)})")
        if kind == "gauge" and exposed.endswith("_total"):
            problems.append(f"{exposed}: a gauge named like a counter")
        if kind in ("counter", "gauge", "histogram") and TIME_WORDS.search(family.documentation) \
                and not re.search(r"_seconds(_total)?$", exposed):
            problems.append(f"{exposed}: its help times something, its name does not say "
                            f"_seconds ({family.documentation!r})")
        if kind in ("unknown", "untyped"):
            problems.append(f"{exposed}: no type")
        if not family.documentation:
            problems.append(f"{exposed}: no help")
        clash = {k for sample in family.samples for k in sample.labels} & TARGET_LABELS
        if clash:
            problems.append(f"{exposed}: label {sorted(clash)[0]} is the one Prometheus gives "
                            f"every series of a target (ours would become exported_...)")
    return problems


def process_texts() -> dict[str, str]:
    """What each kind of process serves on /metrics, from its own registry (the agent with
    its SLO runner, as `python -m agents` builds it), before any traffic."""
    import services.callgraph as callgraph
    import services.rom as rom
    from common.metrics import render
    from ryu_apps.controller_metrics import ControllerMetrics
    from tests.lib.agents import make_agent
    from tests.unit.profiler.test_profiler_service import make_service
    agent, _slo, _routes = make_agent()
    profiler = make_service()
    try:
        return {"controller": render(ControllerMetrics().registry),
                "agent": render(agent.metrics), "profiler": render(profiler.metrics),
                "rom service": render(rom.Metrics("ui").registry),
                "callgraph service": render(callgraph.Metrics("reviews").registry)}
    finally:
        agent.pool.shutdown()
        profiler.stop()
