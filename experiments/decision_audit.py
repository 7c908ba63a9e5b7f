"""How right were the least-load decisions? (issue 12, item 1)

    .venv/bin/python -m experiments.decision_audit results/<comparison> [--horizon 15]

For every run of a comparison (results/<comparison>/<policy>/run<k>/) and every weighted
least-load decision of a back-end job (the CPU-bound long flows) it takes the per-server
figures the policy saw (the decision's scores) and the CPU each server actually carried over
the next `horizon` seconds (the mean of the fresh server samples in the profiler's history;
the chosen server's less the profiled CPU of one job, the one being decided), and reports how often the server chosen was the one that turned out least loaded, and by how
much it was not (regret, in CPU points).

On the same decisions it replays estimators of each server's CPU at the decision time from the
same history, and reports their error against what followed:
- rm10: the rolling mean of the last 10 samples (the paper's predictor; 30 s at 3 s periods);
- last: the latest sample alone (one period old);
- arma: the profiler's ARMA(2,1) over the last 50 samples;
- running: the latest sample less what the back-end jobs running then cost, plus what the
  jobs running at the decision cost (the controller's own assignments, the run's flow
  durations and per-flow CPU from the profiler: the idea behind the malb policy).
It also estimates the lag of rm10 behind the samples (the shift that best aligns them).
Writes audit.json and audit.md in the comparison's directory and prints the table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

from common.cli import ArgumentParser, fail, positive_float
from profiler.predictors import Arma, RollingMean
from profiler.store import HistoryStore
from ryu_apps.running import RunningFlows, Survival

ESTIMATORS = ("rm10", "last", "arma", "running")


def server_series(history: str) -> dict[str, list[tuple[float, float]]]:
    """{server: [(t, cpu %)]} of the fresh samples, in time order."""
    with HistoryStore.open_read_only(history) as store:
        rows = store.rows("server_samples", ("server", "cpu", "stale"))
    out: dict[str, list[tuple[float, float]]] = {}
    for t, server, cpu, stale in rows:
        if not stale and cpu is not None:
            out.setdefault(server, []).append((t, cpu))
    for s in out.values():
        s.sort()
    return out


def actual_after(series: list[tuple[float, float]], t: float, horizon: float) -> float | None:
    vals = [v for ts, v in series if t < ts <= t + horizon]
    return statistics.fmean(vals) if vals else None


def before(series: list[tuple[float, float]], t: float) -> list[float]:
    return [v for ts, v in series if ts <= t]


def estimate(kind: str, past: list[float]) -> float | None:
    if not past:
        return None
    if kind == "last":
        return past[-1]
    if kind == "rm10":
        p = RollingMean(10)
    else:
        p = Arma((2, 1), window=50, refit_every=1)
    for v in past[-50:]:
        p.update(v)
    out = p.predict()
    return None if out is None else max(0.0, out)


def lag_periods(series: list[tuple[float, float]], window: int = 10, max_shift: int = 20
                ) -> int | None:
    """The shift (in samples) by which the rolling mean of `window` samples best matches the
    samples themselves (least squared difference)."""
    vals = [v for _t, v in series]
    if len(vals) < window + max_shift + 5:
        return None
    rm = [statistics.fmean(vals[max(0, i - window + 1):i + 1]) for i in range(len(vals))]
    best, best_err = None, math.inf
    for shift in range(max_shift + 1):
        pairs = [(rm[i], vals[i - shift]) for i in range(window + shift, len(vals))]
        err = statistics.fmean((a - b) ** 2 for a, b in pairs)
        if err < best_err:
            best, best_err = shift, err
    return best


def audit_run(run_dir: str, horizon: float) -> dict:
    with open(os.path.join(run_dir, "decisions.json")) as fh:
        decisions = json.load(fh)["decisions"]
    with open(os.path.join(run_dir, "profiles.json")) as fh:
        profile = json.load(fh)["microservices"].get("backend", {})
    series = server_series(os.path.join(run_dir, "history.sqlite"))
    quantiles = (profile.get("flows") or {}).get("quantiles_s")
    per_flow = (profile.get("per_flow") or {}).get("cpu")
    survival = {"backend": Survival(quantiles)} if quantiles else {}
    running = RunningFlows()
    rows = []
    for d in sorted(decisions, key=lambda x: x["time"]):
        t = d["time"]
        if d["microservice"] == "backend" and d["algorithm"] == "weighted-least-load" \
                and d.get("scores"):
            actual = {s: actual_after(series.get(s, []), t, horizon) for s in d["scores"]}
            if None not in actual.values() and per_flow is not None:
                # the chosen server also carries the job being decided: what it would have
                # carried without it is what the choice should be judged on
                actual[d["server"]] = max(0.0, actual[d["server"]] - per_flow)
                est = {}
                for kind in ESTIMATORS:
                    e = {}
                    for s in actual:
                        past = [(ts, v) for ts, v in series.get(s, []) if ts <= t]
                        if kind == "running":
                            if not past or not survival or per_flow is None:
                                e = None
                                break
                            ts_last, v_last = past[-1]
                            then = running.expected(s, ts_last - 1.5, survival)
                            now = running.expected(s, t, survival)
                            e[s] = max(0.0, v_last - per_flow * then.get("backend", 0.0)) + \
                                per_flow * now.get("backend", 0.0)
                        else:
                            e[s] = estimate(kind, [v for _ts, v in past])
                            if e[s] is None:
                                e = None
                                break
                    est[kind] = e
                rows.append({"time": t, "policy": d["policy"], "chosen": d["server"],
                             "seen": d["scores"], "actual": actual, "estimates": est})
        running.add(d["server"], d["microservice"], t)
    return {"decisions": rows,
            "lag_periods": {s: lag_periods(v) for s, v in series.items()}}


def summarise(rows: list[dict]) -> dict:
    """Share of decisions whose server turned out least loaded, mean regret, and per
    estimator its mean absolute error and how often its least loaded server was."""
    if not rows:
        return {"decisions": 0}
    hits = [r["actual"][r["chosen"]] <= min(r["actual"].values()) + 1e-9 for r in rows]
    regret = [r["actual"][r["chosen"]] - min(r["actual"].values()) for r in rows]
    out = {"decisions": len(rows), "chosen_least_loaded": sum(hits) / len(rows),
           "regret_cpu_points": statistics.fmean(regret),
           "random_least_loaded": statistics.fmean(1 / len(r["actual"]) for r in rows),
           "estimators": {}}
    for kind in ESTIMATORS:
        ok = [r for r in rows if r["estimates"].get(kind)]
        if not ok:
            continue
        errs = [abs(r["estimates"][kind][s] - r["actual"][s]) for r in ok for s in r["actual"]]
        best = [min(r["estimates"][kind], key=r["estimates"][kind].get) for r in ok]
        out["estimators"][kind] = {
            "n": len(ok), "mae_cpu_points": statistics.fmean(errs),
            "picks_least_loaded": statistics.fmean(
                r["actual"][b] <= min(r["actual"].values()) + 1e-9 for r, b in zip(ok, best)),
            "regret_cpu_points": statistics.fmean(
                r["actual"][b] - min(r["actual"].values()) for r, b in zip(ok, best))}
    return out


def markdown(per_policy: dict[str, dict], lags: list[int]) -> str:
    lines = ["| policy | decisions | chose the least loaded | random would | regret (CPU points) |",
             "|---|---:|---:|---:|---:|"]
    for p, s in per_policy.items():
        if s.get("decisions"):
            lines.append(f"| {p} | {s['decisions']} | {100 * s['chosen_least_loaded']:.0f} % | "
                         f"{100 * s['random_least_loaded']:.0f} % | "
                         f"{s['regret_cpu_points']:.1f} |")
    lines += ["", "| estimator | decisions | MAE (CPU points) | its pick least loaded | "
              "regret (CPU points) |", "|---|---:|---:|---:|---:|"]
    pooled: dict[str, list] = {}
    for s in per_policy.values():
        for kind, e in s.get("estimators", {}).items():
            pooled.setdefault(kind, []).append(e)
    for kind, es in pooled.items():
        n = sum(e["n"] for e in es)
        w = lambda key: sum(e[key] * e["n"] for e in es) / n   # noqa: E731
        lines.append(f"| {kind} | {n} | {w('mae_cpu_points'):.1f} | "
                     f"{100 * w('picks_least_loaded'):.0f} % | {w('regret_cpu_points'):.1f} |")
    if lags:
        lines += ["", f"Lag of a rolling mean of 10 samples behind the samples: median "
                      f"{statistics.median(lags):g} periods (over {len(lags)} server series)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m experiments.decision_audit", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("comparison", help="a results directory of experiments.lb_comparison")
    p.add_argument("--horizon", type=positive_float, default=15.0,
                   help="seconds after a decision over which the actual load is averaged "
                        "(default 15)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.comparison):
        fail(f"{args.comparison}: no such directory", code=2)
    per_policy, lags, raw = {}, [], {}
    for policy in sorted(os.listdir(args.comparison)):
        pdir = os.path.join(args.comparison, policy)
        runs = sorted(d for d in os.listdir(pdir) if d.startswith("run")) \
            if os.path.isdir(pdir) else []
        rows = []
        for run in runs:
            rdir = os.path.join(pdir, run)
            if not os.path.exists(os.path.join(rdir, "decisions.json")):
                continue
            a = audit_run(rdir, args.horizon)
            rows += a["decisions"]
            lags += [v for v in a["lag_periods"].values() if v is not None]
            raw[f"{policy}/{run}"] = a
        if rows:
            per_policy[policy] = summarise(rows)
    if not per_policy:
        fail(f"{args.comparison}: no run with least-load decisions of the back-end", code=2)
    md = markdown(per_policy, lags)
    with open(os.path.join(args.comparison, "audit.json"), "w") as fh:
        json.dump({"horizon_s": args.horizon, "summary": per_policy, "runs": raw}, fh)
    with open(os.path.join(args.comparison, "audit.md"), "w") as fh:
        fh.write(f"# Least-load decisions of the back-end against the next {args.horizon:g} s"
                 f"\n\nCommand: `python -m experiments.decision_audit {args.comparison}`\n\n"
                 + md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
