"""Every process's Prometheus metrics, on prometheus_client (the service images use Debian's
python3-prometheus-client, the rest the pinned one from PyPI).

- new_registry(process): a registry of the process's own, with prometheus_client's process
  collector (CPU seconds, resident memory, open descriptors, start time) and
  `malb_build_info` (the process, its commit when it runs from a git checkout, Python's
  version) already in it;
- series(metric, *labels): the child of a metric for these label values (the metric itself
  when it has no labels), so that code naming a metric and its labels as data (the
  controller core's Result.metrics) needs no special case;
- render(registry): the text exposition for GET /metrics, and CONTENT_TYPE to serve it with.

Names and units follow Prometheus's conventions (docs/metrics.md lists every metric): base
units (seconds, bytes, hertz, joules), `_total` counters for what only grows (rates are the
query's business: PromQL's rate()), `_ratio` for shares of 1, `_info` for build facts.
Several registries live side by side in one process (a test's services, agents and
controller), so nothing is registered in prometheus_client's global registry.
"""
from __future__ import annotations

import platform

import prometheus_client
from prometheus_client import CollectorRegistry, Info, ProcessCollector, generate_latest

from common.procs import git_commit

# the classic text format generate_latest writes, which every Prometheus reads (0.26's
# CONTENT_TYPE_LATEST names 1.0.0, which Prometheus 2 does not know)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# no `<counter>_created` series beside every counter and histogram (they double the text
# and no query here needs them); Debian's 0.16 in the images has no switch and keeps them
if hasattr(prometheus_client, "disable_created_metrics"):
    prometheus_client.disable_created_metrics()
_COMMIT: str | None = None      # read once per process: "unknown" in the images (no git)


def new_registry(process: str) -> CollectorRegistry:
    """A registry for one process (`controller`, `profiler`, `agent`, `service`)."""
    global _COMMIT
    if _COMMIT is None:
        _COMMIT = git_commit()
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    Info("malb_build", "The process and the code it runs.", registry=registry).info(
        {"process": process, "commit": _COMMIT, "python": platform.python_version()})
    return registry


def series(metric, *labels):
    """The metric's child for these label values (the metric itself without labels)."""
    return metric.labels(*labels) if labels else metric


def render(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()
