"""A soak: the whole stack (testbed, controller, agents, profiler) under a steady open-loop
load for a long while, sampling everything that could grow without bound.

    sudo .venv/bin/python -m experiments.soak [--minutes 60] [--rate 20] [--policy malb]
                                              [--short-flows tracker] [--sample-s 10]
                                              [--out results/soak]

Sampled every --sample-s seconds (samples.csv): each platform process's resident memory,
open file descriptors and threads (the controller, every agent, the profiler); the
controller's flow records (active, and all it keeps) and each switch's rules; the
profiler's mean period duration since the last sample and its history database's size on
disk. Progress lines as it goes.

The verdict per figure (summary.md, summary.json, growth.png), declared here before any
run: the growth per hour is the least-squares slope over the second half of the run (the
first half is warm-up: caches, the history's first rows, the flows' steady state). A figure
**levels off** when that growth is at most LEVEL_SHARE of its mean over the second half per
hour, or below its kind's floor (FLOORS: changes smaller than that are noise for a process
of this size); else it **grows**. The history database grows by design until its rows
reach the profiler's retention (a week by default), so the soak sets the retention to
--history-retention-min (15 by default): pruning then runs within the run, and the
database is judged as every other figure. The run fails (exit 1) when any figure grows.

- growth(), verdict(), verdicts(): the rule, plain functions (unit-tested);
- sample_process(), switch_rules(): what one sample reads (/proc, ovs-ofctl);
- run(): the soak on the real stack.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import urllib.request

from common import lab
from common.cli import ArgumentParser, add_short_flows, bounded, fail, require_testbed, \
    with_short_flows
from common.config import ConfigError, DEFAULT_MICROSERVICES, POLICIES
from common.markdown import number, table
from common.paths import WORK

LEVEL_SHARE = 0.05            # growth per hour at most 5 % of the mean: levels off
# kinds of figures: the growth per hour below which a change is noise
FLOORS = {"rss_mb": 5.0, "fds": 5.0, "threads": 2.0, "flow_records": 50.0,
          "active_flows": 50.0, "rules": 50.0, "period_s": 0.05, "history_mb": 1.0}
COLUMNS_OF_PROCESS = ("rss_mb", "fds", "threads")


# ------------------------------------------------------------------ the rule
def growth(points: list[tuple[float, float]]) -> dict:
    """Least-squares growth per hour over the second half of (time s, value) points, with
    the second half's mean; None values are left out."""
    pts = [(t, v) for t, v in points if v is not None]
    half = pts[len(pts) // 2:]
    if len(half) < 3:
        return {"per_hour": None, "mean": None, "n": len(half)}
    n = len(half)
    mt = sum(t for t, _ in half) / n
    mv = sum(v for _, v in half) / n
    stt = sum((t - mt) ** 2 for t, _ in half)
    slope = sum((t - mt) * (v - mv) for t, v in half) / stt if stt > 0 else 0.0
    return {"per_hour": slope * 3600.0, "mean": mv, "n": n}


def verdict(kind: str, g: dict) -> str:
    if g["per_hour"] is None:
        return "too few samples"
    if g["per_hour"] <= max(FLOORS[kind], LEVEL_SHARE * abs(g["mean"])):
        return "levels off"
    return "grows"


def verdicts(rows: list[dict]) -> list[dict]:
    """One line per figure of the samples: its kind, first and last value, mean over the
    second half, growth per hour and verdict."""
    out = []
    figures = [k for k in rows[0] if k not in ("time", "elapsed_s")] if rows else []
    for name in figures:
        kind = name.rsplit(".", 1)[-1]
        if kind not in FLOORS:
            continue
        points = [(r["elapsed_s"], r[name]) for r in rows]
        g = growth(points)
        values = [v for _, v in points if v is not None]
        out.append({"figure": name, "kind": kind, "first": values[0] if values else None,
                    "last": values[-1] if values else None, "mean_second_half": g["mean"],
                    "growth_per_hour": g["per_hour"],
                    "verdict": verdict(kind, g)})
    return out


# ------------------------------------------------------------------ one sample
def sample_process(pid: int) -> dict:
    """Resident memory (MB), open file descriptors and threads of a process (None each
    when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            status = dict(line.split(":", 1) for line in fh if ":" in line)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return {k: None for k in COLUMNS_OF_PROCESS}
    return {"rss_mb": int(status["VmRSS"].split()[0]) / 1024.0, "fds": fds,
            "threads": int(status["Threads"])}


def switch_rules(switch: str) -> int | None:
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-aggregate", switch],
                         capture_output=True, text=True)
    for part in out.stdout.split():
        if part.startswith("flow_count="):
            return int(part.split("=", 1)[1])
    return None


def _metric_sum_count(text: str, name: str) -> tuple[float, float] | None:
    total = count = None
    for line in text.splitlines():
        if line.startswith(f"{name}_sum"):
            total = float(line.split()[-1])
        elif line.startswith(f"{name}_count"):
            count = float(line.split()[-1])
    return None if total is None or count is None else (total, count)


# ------------------------------------------------------------------ the run
def spec(rate: float, seconds: float, seed: int) -> dict:
    """A steady mix of the paper's three services: small objects, short streams, short
    jobs."""
    vip = "10.0.0.100"
    return {"seed": seed, "arrivals": "poisson",
            "phases": [{"name": "steady", "seconds": seconds, "from": rate, "to": rate}],
            "classes": [
                {"name": "ui", "host": vip, "port": 8002, "weight": 0.7,
                 "path": "/object?size=20000"},
                {"name": "video", "host": vip, "port": 8001, "weight": 0.2,
                 "path": "/stream?rate=100&seconds=2"},
                {"name": "backend", "host": vip, "port": 8003, "weight": 0.1,
                 "path": "/job?seconds=1&cpu=0.05"}]}


def run(args) -> int:
    from experiments.stack import Stack      # deferred: Mininet, Docker

    os.makedirs(args.out, exist_ok=True)
    data = with_short_flows({"testbed": {"clients": 2}, "microservices": DEFAULT_MICROSERVICES,
                             "controller": {"idle_timeout_s": 10},
                             "profiler": {"retention_s": args.history_retention_min * 60.0}},
                            args.short_flows)
    seconds = args.minutes * 60.0
    with Stack(data, os.path.join(args.out, "run"), policy=args.policy) as st:
        args.testbed = st.testbed.describe()
        args.short_flows = st.cfg.controller.dataplane.short_flows    # what ran, recorded
        st.wait_monitoring(60)
        spec_path = os.path.join(args.out, "spec.json")
        with open(spec_path, "w") as fh:
            json.dump(spec(args.rate, seconds, args.seed), fh)
        t0 = time.time() + 2
        st.start_loadgen(spec_path, t0, timeout_s=30)
        history = st.history_path
        procs = {"controller": st.controller, "profiler": st.profiler,
                 **{f"agent-{k}": v for k, v in st.agents.items()}}
        rows, last_period = [], None
        with open(os.path.join(args.out, "samples.csv"), "w", newline="") as fh:
            writer = None
            while True:
                now = time.time()
                elapsed = now - t0
                row = {"time": round(now, 1), "elapsed_s": round(elapsed, 1)}
                for name, svc in procs.items():
                    for k, v in sample_process(svc.proc.pid).items():
                        row[f"{name}.{k}"] = v
                status = st.controller_get("/malb/status")
                row["controller.active_flows"] = status["active_flows"]
                row["controller.flow_records"] = status["flow_records"]
                for sw in st.cfg.testbed.switches:
                    row[f"{sw.name}.rules"] = switch_rules(sw.name)
                with urllib.request.urlopen(f"{st.cfg.profiler.url}/metrics",
                                            timeout=5) as r:
                    period = _metric_sum_count(r.read().decode(),
                                               "malb_profiler_period_seconds")
                row["profiler.period_s"] = None
                if period and last_period and period[1] > last_period[1]:
                    row["profiler.period_s"] = ((period[0] - last_period[0]) /
                                                (period[1] - last_period[1]))
                last_period = period
                size = sum(os.path.getsize(p) for p in (history, history + "-wal")
                           if os.path.exists(p))
                row["profiler.history_mb"] = size / 1e6
                rows.append(row)
                if writer is None:
                    writer = csv.DictWriter(fh, fieldnames=list(row))
                    writer.writeheader()
                writer.writerow(row)
                fh.flush()
                print(f"[soak] {elapsed / 60:5.1f}/{args.minutes:g} min: controller "
                      f"{row['controller.rss_mb']:.0f} MB, {status['flow_records']} flow "
                      f"records, {row.get('s1.rules')} rules on s1", flush=True)
                if elapsed >= seconds:
                    break
                time.sleep(max(0.0, args.sample_s - (time.time() - now)))
    lines = verdicts(rows)
    write_summary(args, lines, rows)
    grows = [x["figure"] for x in lines if x["verdict"] == "grows"]
    print(f"[soak] {'grows: ' + ', '.join(grows) if grows else 'every figure levels off'}; "
          f"{args.out}/summary.md")
    return 1 if grows else 0


def write_summary(args, lines: list[dict], rows: list[dict]) -> None:
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump({**getattr(args, "stamp", {}), "minutes": args.minutes, "rate": args.rate,
                   "policy": args.policy, "short_flows": args.short_flows,
                   "testbed": getattr(args, "testbed", None),
                   "level_share": LEVEL_SHARE, "floors": FLOORS, "figures": lines}, fh,
                  indent=2)
    body = table(["figure", "first", "last", "mean (2nd half)", "growth / h", "verdict"],
                 [[x["figure"], number(x["first"]), number(x["last"]),
                   number(x["mean_second_half"]), number(x["growth_per_hour"]), x["verdict"]]
                  for x in lines])
    with open(os.path.join(args.out, "summary.md"), "w") as fh:
        stamp = getattr(args, "stamp", None)
        ran = f"\n\nCommit {stamp['commit']}, started {stamp['when']}." if stamp else ""
        tb = getattr(args, "testbed", None)
        ran += f"\n\nTestbed: {tb['backend']}, {tb['datapath']} datapath." if tb else ""
        fh.write(f"# Soak: {args.minutes:g} min at {args.rate:g} requests/s, policy "
                 f"{args.policy}\n\n    sudo .venv/bin/python -m experiments.soak "
                 f"{' '.join(sys.argv[1:])}{ran}\n\nGrowth per hour: the least-squares slope over "
                 f"the second half of the run. Levels off: at most {LEVEL_SHARE:.0%} of its "
                 f"mean per hour, or below its kind's floor.\n\n{body}\n")
    plot(args.out, rows)


def plot(out: str, rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    kinds = sorted({k.rsplit(".", 1)[-1] for k in rows[0] if "." in k})
    fig, grid = plt.subplots(len(kinds), 1, figsize=(8, 2.2 * len(kinds)), sharex=True,
                             squeeze=False)
    axes = grid[:, 0]
    for ax, kind in zip(axes, kinds):
        for name in [k for k in rows[0] if k.endswith("." + kind)]:
            ax.plot([r["elapsed_s"] / 60 for r in rows], [r[name] for r in rows],
                    label=name.rsplit(".", 1)[0])
        ax.set_ylabel(kind)
        ax.legend(fontsize=6, loc="upper left")
    axes[-1].set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "growth.png"), dpi=100)


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m experiments.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=bounded(float, 1, 1440), default=60.0)
    p.add_argument("--rate", type=bounded(float, 0.5, 500), default=20.0,
                   help="requests per second, all clients together")
    p.add_argument("--policy", choices=POLICIES, default="malb")
    add_short_flows(p, "the short flows")
    p.add_argument("--sample-s", type=bounded(float, 1, 600), default=10.0)
    p.add_argument("--history-retention-min", type=bounded(float, 1, 10080), default=15.0,
                   help="the profiler's history retention for the run, so that its pruning "
                        "runs within it")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=os.path.join(WORK, "results", "soak"))
    args = p.parse_args(argv)
    require_testbed("the soak")
    # the code and time the run starts with (a commit landing during the hour is not it)
    args.stamp = lab.stamp(lab.invocation("experiments.soak", argv).strip(), with_images=True)
    try:
        return run(args)
    except ConfigError as exc:
        fail(str(exc), code=2)


if __name__ == "__main__":
    sys.exit(main())
