"""Prometheus text exposition (format 0.0.4) without a client library: counters, gauges and
histograms with labels, rendered on demand. Pure Python; thread safe."""
from __future__ import annotations

import math
import threading

DEFAULT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5)


def _labels(names: tuple[str, ...], values: tuple, extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: float) -> str:
    if v == math.inf:
        return "+Inf"
    return repr(float(v)) if isinstance(v, float) else str(v)


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: tuple[str, ...] = ()):
        self.name, self.help, self.label_names = name, help_text, tuple(labels)
        self.lock = threading.Lock()

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    kind = "counter"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.values: dict[tuple, float] = {}

    def inc(self, *labels, amount: float = 1) -> None:
        with self.lock:
            self.values[labels] = self.values.get(labels, 0) + amount

    def get(self, *labels) -> float:
        return self.values.get(labels, 0)

    def render(self) -> list[str]:
        with self.lock:
            return self.header() + [f"{self.name}{_labels(self.label_names, k)} {_num(v)}"
                                    for k, v in sorted(self.values.items())]


class Gauge(Counter):
    kind = "gauge"

    def set(self, *labels, value: float) -> None:
        with self.lock:
            self.values[labels] = value


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name, help_text, labels=(), buckets=DEFAULT_BUCKETS):
        super().__init__(name, help_text, labels)
        self.buckets = tuple(sorted(buckets)) + (math.inf,)
        self.series: dict[tuple, list] = {}     # labels -> [bucket counts..., sum]

    def observe(self, value: float, *labels) -> None:
        with self.lock:
            s = self.series.setdefault(labels, [0] * len(self.buckets) + [0.0])
            for k, bound in enumerate(self.buckets):
                if value <= bound:
                    s[k] += 1
            s[-1] += value

    def count(self, *labels) -> int:
        s = self.series.get(labels)
        return s[len(self.buckets) - 1] if s else 0

    def quantile(self, q: float, *labels) -> float | None:
        """Upper bound of the bucket holding quantile q (what Prometheus would estimate)."""
        s = self.series.get(labels)
        if not s or not s[len(self.buckets) - 1]:
            return None
        target = q * s[len(self.buckets) - 1]
        for k, bound in enumerate(self.buckets):
            if s[k] >= target:
                return bound
        return math.inf

    def render(self) -> list[str]:
        out = self.header()
        with self.lock:
            for labels, s in sorted(self.series.items()):
                for k, bound in enumerate(self.buckets):
                    le = f'le="{_num(bound) if bound != math.inf else "+Inf"}"'
                    out.append(f"{self.name}_bucket{_labels(self.label_names, labels, le)} {s[k]}")
                out.append(f"{self.name}_sum{_labels(self.label_names, labels)} {_num(s[-1])}")
                out.append(f"{self.name}_count{_labels(self.label_names, labels)} "
                           f"{s[len(self.buckets) - 1]}")
        return out


class Registry:
    def __init__(self):
        self.metrics: list[_Metric] = []

    def add(self, metric):
        self.metrics.append(metric)
        return metric

    def counter(self, name, help_text, labels=()) -> Counter:
        return self.add(Counter(name, help_text, labels))

    def gauge(self, name, help_text, labels=()) -> Gauge:
        return self.add(Gauge(name, help_text, labels))

    def histogram(self, name, help_text, labels=(), buckets=DEFAULT_BUCKETS) -> Histogram:
        return self.add(Histogram(name, help_text, labels, buckets))

    def render(self) -> str:
        lines = []
        for m in self.metrics:
            lines += m.render()
        return "\n".join(lines) + "\n"


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
