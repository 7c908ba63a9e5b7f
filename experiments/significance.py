"""Statistics of a policy comparison over repeated, interleaved runs (plain functions).

Run k of every policy plays the same seeded workload (seed + k) in the same stretch of time
(policies interleaved: srr, ln, malb, srr, ...), so the runs pair up: MALB's figure in run k
is compared with each baseline's in run k. For every headline figure:

- per policy: the mean over runs and its 95 % confidence interval (Student's t, n - 1
  degrees of freedom);
- MALB against each baseline: the mean paired difference, its ratio to the baseline's mean,
  a 95 % interval of the difference and the two-sided paired t-test's p-value
  (scipy.stats.ttest_rel). A difference is called significant when p < 0.05; with one run
  there is no interval and no test, and the summary says so.
"""
from __future__ import annotations

import math
import statistics

from scipy import stats as sps

ALPHA = 0.05

# (key, label, better): the figures a reader of Table II/III looks at first. `better` is the
# direction that is an improvement.
HEADLINES = (
    ("cpu_stdev", "CPU STDEV across servers (%)", "lower"),
    # the same with the drain after the load phases, while the last requests finish
    ("cpu_stdev_with_drain", "CPU STDEV across servers, with the drain (%)", "lower"),
    ("net_stdev", "network STDEV across servers (%)", "lower"),
    ("energy_stdev", "energy STDEV across servers (W)", "lower"),
    ("ui-light_rt", "ui-light mean RT (ms)", "lower"),
    ("ui-medium_rt", "ui-medium mean RT (ms)", "lower"),
    ("ui-light_rt_stdev", "ui-light RT STDEV (ms)", "lower"),
    ("ui-medium_rt_stdev", "ui-medium RT STDEV (ms)", "lower"),
    ("backend-medium_rt", "backend-medium mean RT (ms)", "lower"),
    ("backend-heavy_rt", "backend-heavy mean RT (ms)", "lower"),
    ("video_tp", "video mean throughput (kB/s)", "higher"),
)


def headline_figures(result: dict) -> dict[str, float | None]:
    """The headline figures of one run's result.json."""
    t2, t3 = result.get("table2", {}), result.get("table3", {})
    out = {"cpu_stdev": t2.get("cpu", {}).get("stdev"),
           "cpu_stdev_with_drain": result.get("table2_with_drain", {}).get("cpu", {}).get(
               "stdev"),
           "net_stdev": t2.get("net", {}).get("stdev"),
           "energy_stdev": t2.get("energy", {}).get("stdev")}
    for cls in ("ui-light", "ui-medium", "backend-medium", "backend-heavy"):
        row = t3.get(cls, {})
        out[f"{cls}_rt"] = row.get("average")
        out[f"{cls}_rt_stdev"] = row.get("stdev")
    out["video_tp"] = t3.get("video", {}).get("average")
    return out


def mean_ci(values: list[float], confidence: float = 0.95) -> dict:
    """Mean and the half-width of its confidence interval (None with fewer than 2 values)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "ci": None}
    mean = statistics.fmean(values)
    if n < 2:
        return {"n": 1, "mean": mean, "ci": None}
    half = sps.t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return {"n": n, "mean": mean, "ci": half}


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
        p = float(sps.ttest_rel(candidate, baseline).pvalue)
    out["p"] = p
    if p >= ALPHA:
        out["verdict"] = "not significant"
    else:
        improved = out["diff"] < 0 if better == "lower" else out["diff"] > 0
        out["verdict"] = "significantly better" if improved else "significantly worse"
    return out


def compare(runs: dict[str, list[dict]], candidate: str = "malb") -> dict:
    """{figure: {"label", "better", "policies": {p: mean_ci}, "vs": {baseline: paired}}} from
    each policy's list of run results (in run order; run k of each policy is a pair)."""
    figures = {p: [headline_figures(r) for r in rs] for p, rs in runs.items()}
    out = {}
    for key, label, better in HEADLINES:
        values = {p: [f[key] for f in fs] for p, fs in figures.items()}
        if any(v is None for vs in values.values() for v in vs):
            continue
        entry = {"label": label, "better": better,
                 "policies": {p: mean_ci(v) for p, v in values.items()}, "vs": {}}
        if candidate in values:
            for p, v in values.items():
                if p != candidate:
                    entry["vs"][p] = paired(values[candidate], v, better)
        out[key] = entry
    return out


def _fmt(x, digits=1) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def markdown(comparison: dict, candidate: str = "malb", names: dict | None = None) -> str:
    """Two tables: means with 95 % intervals per policy; the candidate against each
    baseline (difference, ratio, interval, p, verdict)."""
    names = names or {}
    if not comparison:
        return "(no headline figure in every run)\n"
    policies = list(next(iter(comparison.values()))["policies"])
    head = "| figure | " + " | ".join(names.get(p, p) for p in policies) + " |\n"
    head += "|---|" + "---:|" * len(policies) + "\n"
    rows = ""
    for e in comparison.values():
        cells = []
        for p in policies:
            m = e["policies"][p]
            cells.append(_fmt(m["mean"]) + ("" if m["ci"] is None else f" ± {_fmt(m['ci'])}"))
        rows += f"| {e['label']} | " + " | ".join(cells) + " |\n"
    vs = "\n| figure | against | difference | ratio | 95 % interval | p | verdict |\n" \
         "|---|---|---:|---:|---:|---:|---|\n"
    for e in comparison.values():
        for p, d in e["vs"].items():
            ratio = "–" if d["ratio"] is None else f"{100 * d['ratio']:+.1f} %"
            ci = "–" if d["ci"] is None else f"± {_fmt(d['ci'])}"
            pv = "–" if d["p"] is None else f"{d['p']:.3f}"
            vs += (f"| {e['label']} | {names.get(p, p)} | {_fmt(d['diff'])} | {ratio} | {ci} "
                   f"| {pv} | {d['verdict']} |\n")
    return head + rows + vs
