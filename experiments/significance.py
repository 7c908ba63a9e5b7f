"""Statistics of a policy comparison over repeated, interleaved runs (plain functions).

Run k of every policy plays the same seeded workload (seed + k) in the same stretch of time
(policies interleaved: srr, ln, malb, srr, ...), so the runs pair up: MALB's figure in run k
is compared with each baseline's in run k. For every headline figure:

- per policy: the mean over runs and its 95 % confidence interval (Student's t, n - 1
  degrees of freedom);
- MALB (ours, CANDIDATE) against every other policy that ran: the mean paired difference,
  its ratio to the other's mean, a 95 % interval of the difference and the two-sided paired
  t-test's p-value (scipy.stats.ttest_rel). A difference is called significant when
  p < 0.05; with one run there is no interval and no test, and the summary says so.

The headline figures: the servers' spread (Table II); for every request class the runs
had (the paper's five, or a scenario's own), its mean RT, RT STDEV and RT p50, p95 and p99
(a stream class: its mean throughput) and failed requests; and every request but the
streams together, end to end: RT p50, p95, p99 and failed requests.
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from common.markdown import number, table
from experiments.evaluation import balancing_cpu_per_1000

ALPHA = 0.05


def _stats():
    """scipy.stats, imported on first use: it takes about 1.5 s, and every command line that
    imports this module would otherwise pay it before it could reject a bad flag."""
    from scipy import stats
    return stats

CANDIDATE = "malb"          # ours: tested against every other policy of the comparison

# (key, label, better): the figures a reader of Table II/III looks at first. `better` is the
# direction that is an improvement.
SERVER_HEADLINES = (
    ("cpu_stdev", "CPU STDEV across servers (%)", "lower"),
    # the same with the drain after the load phases, while the last requests finish
    ("cpu_stdev_with_drain", "CPU STDEV across servers, with the drain (%)", "lower"),
    ("net_stdev", "network STDEV across servers (%)", "lower"),
    ("energy_stdev", "energy STDEV across servers (W)", "lower"),
    # the balancer's own cost: controller, profiler, proxy and switch
    ("balancing_cpu", "balancing CPU s per 1,000 requests", "lower"),
)
PAPER_CLASSES = ("ui-light", "ui-medium", "backend-medium", "backend-heavy", "video")
STREAM_CLASSES = ("video",)


def _stream(cls: str, row: dict | None = None) -> bool:
    return (row or {}).get("metric") == "TP" or cls in STREAM_CLASSES


def class_headlines(cls: str, stream: bool) -> list[tuple[str, str, str]]:
    # failed requests are tested too: a policy whose requests time out would otherwise
    # look better on its completed requests' RT
    failed = (f"{cls}_failed", f"{cls} failed requests", "lower")
    if stream:
        return [(f"{cls}_tp", f"{cls} mean throughput (kB/s)", "higher"), failed]
    return [(f"{cls}_rt", f"{cls} mean RT (ms)", "lower"),
            (f"{cls}_rt_stdev", f"{cls} RT STDEV (ms)", "lower"),
            (f"{cls}_rt_p50", f"{cls} RT p50 (ms)", "lower"),
            (f"{cls}_rt_p95", f"{cls} RT p95 (ms)", "lower"),
            (f"{cls}_rt_p99", f"{cls} RT p99 (ms)", "lower"), failed]


END_TO_END = "all"          # the key prefix of the figures over every request but streams
END_TO_END_HEADLINES = tuple(
    (f"{END_TO_END}_{k}", f"all requests {label}", "lower")
    for k, label in (("rt_p50", "RT p50 (ms)"), ("rt_p95", "RT p95 (ms)"),
                     ("rt_p99", "RT p99 (ms)"), ("failed", "failed")))


def headlines(results: list[dict]) -> list[tuple[str, str, str]]:
    """The headline figures of these runs: the servers' first, then every class any run
    had (the paper's in its order, then the others by name)."""
    rows = {c: row for r in results for c, row in r.get("table3", {}).items()}
    order = [c for c in PAPER_CLASSES if c in rows] + \
        sorted(c for c in rows if c not in PAPER_CLASSES)
    e2e = END_TO_END_HEADLINES if any(r.get("end_to_end") for r in results) else ()
    return [*SERVER_HEADLINES, *(h for c in order for h in class_headlines(
        c, _stream(c, rows[c]))), *e2e]


# the paper's workload's headlines, for reference
HEADLINES = tuple(headlines([{"table3": {c: {} for c in PAPER_CLASSES}}]))


def headline_figures(result: dict) -> dict[str, float | None]:
    """The headline figures of one run's result.json."""
    t2, t3 = result.get("table2", {}), result.get("table3", {})
    out = {"cpu_stdev": t2.get("cpu", {}).get("stdev"),
           "cpu_stdev_with_drain": result.get("table2_with_drain", {}).get("cpu", {}).get(
               "stdev"),
           "net_stdev": t2.get("net", {}).get("stdev"),
           "energy_stdev": t2.get("energy", {}).get("stdev"),
           "balancing_cpu": balancing_cpu_per_1000(
               result, result["load_end"] - result["t0"])
           if "load_end" in result and "t0" in result else None}
    for cls, row in t3.items():
        out[f"{cls}_failed"] = row.get("failed")
        if _stream(cls, row):
            out[f"{cls}_tp"] = row.get("average")
        else:
            out.update({f"{cls}_rt": row.get("average"), f"{cls}_rt_stdev": row.get("stdev"),
                        f"{cls}_rt_p50": row.get("rt_p50"),
                        f"{cls}_rt_p95": row.get("rt_p95"),
                        f"{cls}_rt_p99": row.get("rt_p99")})
    e2e = result.get("end_to_end") or {}
    for k in ("rt_p50", "rt_p95", "rt_p99", "failed"):
        out[f"{END_TO_END}_{k}"] = e2e.get(k)
    return out


def mean_ci(values: list[float], confidence: float = 0.95) -> dict:
    """Mean and the half-width of its confidence interval (None with fewer than 2 values)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "ci": None}
    mean = statistics.fmean(values)
    if n < 2:
        return {"n": 1, "mean": mean, "ci": None}
    half = _stats().t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return {"n": n, "mean": mean, "ci": half}


def mean_ci_text(stats: dict | None, digits: int = 1) -> str:
    """A table cell from mean_ci's answer: "12.3 ± 4.5", the mean alone for one value, an
    en dash for none."""
    if not stats or stats["mean"] is None:
        return "–"
    return number(stats["mean"], digits) + \
        ("" if stats["ci"] is None else f" ± {number(stats['ci'], digits)}")


def paired(candidate: list[float], baseline: list[float], better: str = "lower") -> dict:
    """Candidate against baseline, run by run: mean difference (candidate - baseline), its
    ratio to the baseline's mean, a 95 % interval of the difference, the paired t-test's
    p-value, and whether the candidate is significantly better or worse."""
    if len(candidate) != len(baseline):
        raise ValueError(f"paired: {len(candidate)} runs against {len(baseline)}")
    diffs = [c - b for c, b in zip(candidate, baseline)]
    base = statistics.fmean(baseline) if baseline else None
    out = {"n": len(diffs), "diff": statistics.fmean(diffs) if diffs else None,
           "ratio": None, "ci": None, "p": None, "verdict": "not tested (one run)"}
    if out["diff"] is not None and base:
        out["ratio"] = out["diff"] / base
    if len(diffs) < 2:
        return out
    out["ci"] = mean_ci(diffs)["ci"]
    if statistics.pstdev(diffs) == 0:
        p = 0.0 if out["diff"] != 0 else 1.0     # identical differences: no spread to test
    else:
        p = float(_stats().ttest_rel(candidate, baseline).pvalue)
    out["p"] = p
    if p >= ALPHA:
        out["verdict"] = "not significant"
    else:
        improved = out["diff"] < 0 if better == "lower" else out["diff"] > 0
        out["verdict"] = "significantly better" if improved else "significantly worse"
    return out


def compare(runs: dict[str, list[dict]], candidate: str = CANDIDATE) -> dict:
    """{figure: {"label", "better", "policies": {p: mean_ci}, "vs": {other: paired}}} from
    each policy's list of run results (in run order; run k of each policy is a pair): the
    candidate against every other policy. A figure some policy's run k lacks (a process
    not metered, say) is compared over the other runs, all policies alike, and the entry
    names the runs left out (`runs_left_out`, numbered from 1); a figure fewer than two
    runs have for every policy is left out."""
    figures = {p: [headline_figures(r) for r in rs] for p, rs in runs.items()}
    out = {}
    for key, label, better in headlines([r for rs in runs.values() for r in rs]):
        values = {p: [f.get(key) for f in fs] for p, fs in figures.items()}
        count = min((len(v) for v in values.values()), default=0)
        whole = [k for k in range(count) if all(v[k] is not None for v in values.values())]
        if len(whole) < 2 and len(whole) < count or not whole:
            continue
        values = {p: [v[k] for k in whole] for p, v in values.items()}
        entry = {"label": label, "better": better,
                 "policies": {p: mean_ci(v) for p, v in values.items()}, "vs": {}}
        if len(whole) < count:
            entry["runs_left_out"] = [k + 1 for k in range(count) if k not in whole]
        if candidate in values:
            for p, v in values.items():
                if p != candidate:
                    entry["vs"][p] = paired(values[candidate], v, better)
        out[key] = entry
    return out


POOLED_QUANTILES = (95, 99)
BOOTSTRAP_RESAMPLES = 2000
MIN_RUNS_TO_RESAMPLE = 3


def pooled_tails(rts: dict[str, list[list[float]]], candidate: str = CANDIDATE,
                 quantiles: tuple[int, ...] = POOLED_QUANTILES, seed: int = 0) -> dict:
    """Tails of every request of a policy's runs pooled, with 95 % intervals where a
    t-interval over the runs' own tails does not fit (a run's p99 rests on its slowest few
    requests, and tails are not normal): resampling whole runs (a cluster bootstrap,
    scipy.stats.bootstrap over run indices, percentile method). The candidate against
    each other policy: the ratio of the pooled tails minus one, the same runs resampled
    for both (paired by schedule), significant when its interval leaves out 0.

    rts: policy -> runs (in run order, run k of each policy a pair) -> response times.
    Returns {"p95": {"policies": {p: {"value", "low", "high"}}, "vs": {p: {"ratio",
    "low", "high", "verdict"}}}, ...}; no interval with fewer than MIN_RUNS_TO_RESAMPLE
    runs."""
    arrays = {p: [np.asarray(r, dtype=float) for r in runs] for p, runs in rts.items()}
    n = min((len(runs) for runs in arrays.values()), default=0)
    index = np.arange(n)

    def pooled(p: str, q: int, idx) -> float:
        values = np.concatenate([arrays[p][int(i)] for i in idx])
        return float(np.percentile(values, q)) if values.size else float("nan")

    def interval(stat) -> tuple[float | None, float | None]:
        if n < MIN_RUNS_TO_RESAMPLE:
            return None, None
        res = _stats().bootstrap((index,), stat, vectorized=False, method="percentile",
                            n_resamples=BOOTSTRAP_RESAMPLES, rng=np.random.default_rng(seed))
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    out: dict = {}
    for q in quantiles:
        entry: dict = {"policies": {}, "vs": {}}
        for p in arrays:
            low, high = interval(lambda idx, p=p, q=q: pooled(p, q, idx))
            entry["policies"][p] = {"value": pooled(p, q, index), "low": low, "high": high}
        if candidate in arrays:
            for p in arrays:
                if p == candidate:
                    continue

                def ratio(idx, p=p, q=q) -> float:
                    return pooled(candidate, q, idx) / pooled(p, q, idx) - 1.0
                low, high = interval(ratio)
                verdict = "not tested (too few runs)" if low is None else \
                    "significantly better" if high < 0 else \
                    "significantly worse" if low > 0 else "not significant"
                entry["vs"][p] = {"ratio": ratio(index), "low": low, "high": high,
                                  "verdict": verdict}
        out[f"p{q}"] = entry
    return out


def pooled_tails_markdown(tails: dict, candidate: str = CANDIDATE,
                          names: dict | None = None) -> str:
    """One row per policy and tail: the pooled value, its interval, and the candidate's
    ratio to it with its interval and verdict."""
    names = names or {}
    rows = []
    for key, entry in tails.items():
        for p, v in entry["policies"].items():
            span = "–" if v["low"] is None else f"{_fmt(v['low'])}-{_fmt(v['high'])}"
            vs = entry["vs"].get(p)
            against = "–" if vs is None else f"{100 * vs['ratio']:+.1f} %" + (
                "" if vs["low"] is None else
                f" ({100 * vs['low']:+.1f} to {100 * vs['high']:+.1f} %)")
            rows.append([key, names.get(p, p), _fmt(v["value"]), span, against,
                         "–" if vs is None else vs["verdict"]])
    return table(["tail", "policy", "pooled RT (ms)", "95 % interval",
                  f"{names.get(candidate, candidate)} against it", "verdict"],
                 rows, "llrrrl", compact=True)


def _fmt(x, digits=1) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def markdown(comparison: dict, candidate: str = CANDIDATE, names: dict | None = None) -> str:
    """Two tables: means with 95 % intervals per policy; the candidate against each
    baseline (difference, ratio, interval, p, verdict)."""
    names = names or {}
    if not comparison:
        return "(no headline figure in every run)\n"
    policies = list(next(iter(comparison.values()))["policies"])

    def label(e: dict) -> str:
        gone = e.get("runs_left_out")
        return e["label"] if not gone else \
            f"{e['label']} (run {', '.join(map(str, gone))} left out: not measured in all)"
    means = []
    for e in comparison.values():
        cells = []
        for p in policies:
            m = e["policies"][p]
            cells.append(_fmt(m["mean"]) + ("" if m["ci"] is None else f" ± {_fmt(m['ci'])}"))
        means.append([label(e), *cells])
    vs = []
    for e in comparison.values():
        for p, d in e["vs"].items():
            ratio = "–" if d["ratio"] is None else f"{100 * d['ratio']:+.1f} %"
            ci = "–" if d["ci"] is None else f"± {_fmt(d['ci'])}"
            pv = "–" if d["p"] is None else f"{d['p']:.3f}"
            vs.append([label(e), names.get(p, p), _fmt(d["diff"]), ratio, ci, pv,
                       d["verdict"]])
    return (table(["figure", *(names.get(p, p) for p in policies)], means,
                  "l".ljust(len(policies) + 1, "r"), compact=True) + "\n" +
            table(["figure", "against", "difference", "ratio", "95 % interval", "p", "verdict"],
                  vs, "llrrrrl", compact=True))
