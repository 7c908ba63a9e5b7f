"""How right were the least-load decisions?

    .venv/bin/python -m experiments.decision_audit results/<comparison> [--horizon 15]

For every run of a comparison (results/<comparison>/<policy>/run<k>/) and every weighted
least-load decision of a back-end job (the CPU-bound long flows) it takes the per-server
figures the policy saw (the decision's scores) and the CPU each server actually carried over
the next `horizon` seconds (the mean of the fresh server samples in the profiler's history;
the chosen server's less the profiled CPU of one job, the one being decided), and reports how
often the server chosen was the one that turned out least loaded, and by how much it was not
(regret, in CPU points).

On the same decisions it replays estimators of each server's CPU at the decision time from the
same history, and reports their error against what followed:
- rm10: the rolling mean of the last 10 samples (the paper's predictor; 30 s at 3 s periods);
- last: the latest sample alone (one period old);
- arma: the profiler's ARMA(2,1) over the last 50 samples;
- running: the latest sample less what the back-end jobs running then cost, plus what the
  jobs running at the decision cost (the controller's own assignments, the run's flow
  durations and per-flow CPU from the profiler: the idea behind the malb policy).
It also estimates the lag of rm10 behind the samples (the shift that best aligns them).

A second judge needs no future: every policy's back-end decisions (round robin's too)
against the job demand each server carried at the decision, from the clients' own records
(requests-*.csv: which instance served each job, from when to when) and the job sizes of
the workload (the `cpu` of each job class, over the server's CPU share). It says how well a
policy knew the present, which is all a policy can know; the next 15 s also hold jobs that
had not arrived.
Writes audit.json and audit.md in the comparison's directory (audit-at-decision.* with
--at-decision-only) and prints the tables.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys
from urllib.parse import parse_qs, urlparse

from common.cli import ArgumentParser, fail, positive_float
from common.config import load_config
from common.markdown import table
from profiler.predictors import Arma, RollingMean
from profiler.store import HistoryStore
from ryu_apps.estimators.running_flows import RunningFlows
from ryu_apps.estimators.survival import Survival

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


def jobs_of(run_dir: str) -> tuple[list[tuple[str, float, float, float]], list[str]]:
    """The run's back-end jobs as the clients saw them: (server, start, end, CPU demand in
    % of the server), the demand being the job's `cpu` (cores) over the server's share;
    and the servers that run the back-end."""
    cfg = load_config(os.path.join(run_dir, "config.yaml"))
    servers = sorted({i.server for i in cfg.instances if i.microservice == "backend"})
    server_of = {i.name: i.server for i in (*cfg.slots, *cfg.instances)}
    share = {srv.name: srv.cpu for srv in cfg.servers}
    with open(os.path.join(run_dir, "workload.json")) as fh:
        classes = json.load(fh)["classes"]
    cores = {}
    for c in classes:
        url = urlparse(c["path"])
        if url.path == "/job" and "cpu" in parse_qs(url.query):
            cores[c["name"]] = float(parse_qs(url.query)["cpu"][0])
    jobs = []
    for path in sorted(glob.glob(os.path.join(run_dir, "requests-*.csv"))):
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                srv = server_of.get(r.get("served_by", ""))
                if r.get("class") in cores and srv in share and r.get("started") and \
                        r.get("ended"):
                    jobs.append((srv, float(r["started"]), float(r["ended"]),
                                 100.0 * cores[r["class"]] / share[srv]))
    return jobs, servers


def demand_at(jobs: list[tuple[str, float, float, float]], servers, t: float,
              chosen: str) -> dict[str, float]:
    """Each server's job demand at t, without the job being decided: the chosen server's
    job that started last before t (its client sent the request a moment before the
    controller saw it)."""
    mine = [j for j in jobs if j[0] == chosen and t - 2.0 < j[1] <= t]
    deciding = max(mine, key=lambda j: j[1]) if mine else None
    return {s: sum(p for srv, a, e, p in jobs
                   if srv == s and a <= t and e > t and (srv, a, e, p) != deciding)
            for s in servers}


def judge_at_decision(run_dir: str) -> list[dict]:
    """Every back-end decision of the run with the job demand of each server at it."""
    with open(os.path.join(run_dir, "decisions.json")) as fh:
        decisions = json.load(fh)["decisions"]
    if not glob.glob(os.path.join(run_dir, "requests-*.csv")):
        return []
    jobs, servers = jobs_of(run_dir)
    servers = sorted(set(servers) | {d["server"] for d in decisions
                                     if d["microservice"] == "backend"})
    return [{"time": d["time"], "chosen": d["server"],
             "demand": demand_at(jobs, servers, d["time"], d["server"]),
             "weights": d.get("weights")}
            for d in decisions if d["microservice"] == "backend"]


def summarise_at_decision(rows: list[dict]) -> dict:
    """How often the chosen server had the least job demand at the decision (ties count),
    what random choice would reach, the mean regret in CPU points, and the lowest and
    highest weight the weighted decisions gave memory (None without any)."""
    if not rows:
        return {"decisions": 0}
    least = [min(r["demand"].values()) for r in rows]
    beta = [r["weights"][1] for r in rows if r.get("weights")]
    return {"decisions": len(rows),
            "memory_weight_range": [min(beta), max(beta)] if beta else None,
            "chose_least_demand": statistics.fmean(
                r["demand"][r["chosen"]] <= lo + 1e-9 for r, lo in zip(rows, least)),
            "random_least_demand": statistics.fmean(
                sum(v <= lo + 1e-9 for v in r["demand"].values()) / len(r["demand"])
                for r, lo in zip(rows, least)),
            "regret_cpu_points": statistics.fmean(
                r["demand"][r["chosen"]] - lo for r, lo in zip(rows, least))}


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


def choice_table(summaries: dict[str, dict], judged: str, hit: str, rand: str) -> list[str]:
    """Per policy: decisions, how often its server was the least by `judged`, random's
    share, the regret: the table's lines."""
    return table(["policy", "decisions", f"chose the least {judged}", "random would",
                  "regret (CPU points)"],
                 [[p, s["decisions"], f"{100 * s[hit]:.0f} %", f"{100 * s[rand]:.0f} %",
                   f"{s['regret_cpu_points']:.1f}"]
                  for p, s in summaries.items() if s.get("decisions")],
                 "lrrrr", compact=True).splitlines()


def markdown(per_policy: dict[str, dict], lags: list[int],
             at_decision: dict[str, dict] | None = None) -> str:
    lines = []
    if at_decision:
        lines += ["Every back-end decision against the job demand each server carried at it "
                  "(the clients' records):", ""]
        lines += choice_table(at_decision, "job demand", "chose_least_demand",
                               "random_least_demand")
        ranges = [f"{p} {100 * s['memory_weight_range'][0]:.0f}-"
                  f"{100 * s['memory_weight_range'][1]:.0f} %"
                  for p, s in at_decision.items() if s.get("memory_weight_range")]
        if ranges:
            lines += ["", "Memory's weight in the weighted decisions (lowest-highest): "
                      + ", ".join(ranges) + "."]
    if not per_policy:
        return "\n".join(lines) + "\n"
    if at_decision:
        lines += ["", "Least-load decisions against the CPU each server carried over the "
                      "next seconds (the profiler's samples):", ""]
    lines += choice_table(per_policy, "loaded", "chosen_least_loaded", "random_least_loaded")
    pooled: dict[str, list] = {}
    for s in per_policy.values():
        for kind, e in s.get("estimators", {}).items():
            pooled.setdefault(kind, []).append(e)
    estimators = []
    for kind, es in pooled.items():
        n = sum(e["n"] for e in es)
        w = lambda key: sum(e[key] * e["n"] for e in es) / n   # noqa: B023 -- used at once
        estimators.append([kind, n, f"{w('mae_cpu_points'):.1f}",
                           f"{100 * w('picks_least_loaded'):.0f} %",
                           f"{w('regret_cpu_points'):.1f}"])
    lines += ["", *table(["estimator", "decisions", "MAE (CPU points)", "its pick least loaded",
                          "regret (CPU points)"], estimators, "lrrrr", compact=True).splitlines()]
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
    p.add_argument("--at-decision-only", action="store_true",
                   help="only the judge at the decision (seconds; the estimators' replay "
                        "refits ARMA per decision and takes minutes)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.comparison):
        fail(f"{args.comparison}: no such directory", code=2)
    per_policy, lags, raw, at_decision = {}, [], {}, {}
    for policy in sorted(os.listdir(args.comparison)):
        pdir = os.path.join(args.comparison, policy)
        runs = sorted(d for d in os.listdir(pdir) if d.startswith("run")) \
            if os.path.isdir(pdir) else []
        rows, judged = [], []
        for run in runs:
            rdir = os.path.join(pdir, run)
            if not os.path.exists(os.path.join(rdir, "decisions.json")):
                continue
            judged += judge_at_decision(rdir)
            if args.at_decision_only:
                continue
            a = audit_run(rdir, args.horizon)
            rows += a["decisions"]
            lags += [v for v in a["lag_periods"].values() if v is not None]
            raw[f"{policy}/{run}"] = a
        if rows:
            per_policy[policy] = summarise(rows)
        if judged:
            at_decision[policy] = summarise_at_decision(judged)
    if not per_policy and not at_decision:
        fail(f"{args.comparison}: no run with least-load decisions of the back-end", code=2)
    md = markdown(per_policy, lags, at_decision)
    # the quick judge alone does not overwrite a full audit
    name = "audit-at-decision" if args.at_decision_only else "audit"
    with open(os.path.join(args.comparison, f"{name}.json"), "w") as fh:
        json.dump({"horizon_s": args.horizon, "summary": per_policy,
                   "at_decision": at_decision, "runs": raw}, fh)
    with open(os.path.join(args.comparison, f"{name}.md"), "w") as fh:
        fh.write(f"# Least-load decisions of the back-end against the next {args.horizon:g} s"
                 f"\n\nCommand: `python -m experiments.decision_audit {args.comparison}"
                 f"{' --at-decision-only' if args.at_decision_only else ''}`\n\n"
                 + md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
