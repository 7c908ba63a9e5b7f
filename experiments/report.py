"""Tables, plots and the summary of a load-balancing comparison (experiments/lb_comparison.py).

Everything here reads the per-policy results computed by experiments/evaluation.py; the
paper's own figures (Kalafatidis & Mamatas, Tables II and III) are quoted for comparison in
the paper's scenario, labelled as the paper's, never mixed with ours; its MALB figures stand
beside the paper's rule (malb-paper) only.

Holds the paper's tables, POLICY_NAMES (how each policy is named in tables and plots),
Markdown tables (Table II, Table III with p50/p99 RT and failures, Fig. 3, each server's
CPU), the CSV files and the plots.
"""
from __future__ import annotations

import csv
import math
import os

from common.markdown import number, table
from ryu_apps import policies

# The paper's Table II (average over 10 runs of 30 min, four servers).
PAPER_TABLE2 = {
    "srr": {"cpu": (17.3, 44.2), "mem": (2.1, 5.2), "net": (9.3, 23.6), "energy": (27.1, 70.1)},
    "ln": {"cpu": (15.0, 38.4), "mem": (2.0, 5.1), "net": (9.45, 24.3), "energy": (24.7, 62.8)},
    "malb": {"cpu": (11.2, 29.2), "mem": (1.9, 5.1), "net": (10.1, 25.1),
             "energy": (18.3, 47.7)},
}
# The paper's Table III: requests, metric, (SRR, LN, MALB) averages, (SRR, LN, MALB) STDEVs.
PAPER_TABLE3 = {
    "ui-light": (1600, "RT", (448, 460, 429), (313, 256, 201)),
    "ui-medium": (1500, "RT", (1175, 1177, 1068), (552, 493, 336)),
    "backend-medium": (900, "RT", (10226, 10224, 10224), (198, 125, 89)),
    "backend-heavy": (550, "RT", (30232, 30230, 30223), (142, 118, 86)),
    "video": (650, "TP", (1560, 1818, 1767), (36, 40, 43)),
}
RESOURCE_NAMES = {"cpu": "CPU", "mem": "Memory", "net": "Network", "energy": "Energy"}
# the controller's policies as their registry titles them, then the outside balancers
POLICY_NAMES = {**{p: policies.title(p) for p in policies.names()},
                "haproxy-roundrobin": "HAProxy roundrobin",
                "haproxy-leastconn": "HAProxy leastconn",
                "haproxy-agent": "HAProxy leastconn + agent weights",
                "nginx-leastconn": "nginx least_conn"}
# The paper's MALB figures are its rule's: they stand beside malb-paper, not beside ours.
PAPER_TABLE2["malb-paper"] = PAPER_TABLE2.pop("malb")
PAPER_COLUMN = {"srr": 0, "ln": 1, "malb-paper": 2}    # policy -> its column in PAPER_TABLE3


def table2_markdown(results: dict[str, dict], with_paper: bool = True) -> str:
    pols = list(results)
    head = ["metric"] + [f"{POLICY_NAMES.get(p, p)} {RESOURCE_NAMES[r]}"
                         for p in pols for r in RESOURCE_NAMES]
    rows = []
    for stat in ("stdev", "range"):
        label = "STDEV" if stat == "stdev" else "Range"
        rows.append([label] + [number(results[p]["table2"][r][stat])
                               for p in pols for r in RESOURCE_NAMES])
        if with_paper:
            rows.append([f"paper's {label}"] + [
                number(PAPER_TABLE2[p][r][0 if stat == "stdev" else 1])
                if p in PAPER_TABLE2 else "–" for p in pols for r in RESOURCE_NAMES])
    return table(head, rows, "l".ljust(len(head), "r"), compact=True)


def _count(value) -> str:
    """A request count; a mean over runs keeps one decimal only when it has one."""
    if value is None:
        return "–"
    return f"{value:g}" if float(value).is_integer() else f"{value:.1f}"


def table3_markdown(results: dict[str, dict], with_paper: bool = True) -> str:
    pols = list(results)
    classes = sorted({c for p in pols for c in results[p]["table3"]},
                     key=lambda c: (list(PAPER_TABLE3).index(c) if c in PAPER_TABLE3 else 99, c))
    cols = (["class", "requests", "metric"] + [f"{POLICY_NAMES.get(p, p)} AVG" for p in pols] +
            [f"{POLICY_NAMES.get(p, p)} STDEV" for p in pols] +
            [f"{POLICY_NAMES.get(p, p)} Jain" for p in pols] +
            [f"{POLICY_NAMES.get(p, p)} RT p50" for p in pols] +
            [f"{POLICY_NAMES.get(p, p)} RT p95" for p in pols] +
            [f"{POLICY_NAMES.get(p, p)} RT p99" for p in pols] + ["failed"])
    body = []
    for c in classes:
        rows = [results[p]["table3"].get(c, {}) for p in pols]
        metric = next((f"{r['metric']} ({r['unit']})" for r in rows if r), "")
        body.append(
            [c, " / ".join(_count(r.get("requests")) for r in rows), metric] +
            [number(r.get("average"), 0) for r in rows] +
            [number(r.get("stdev"), 0) for r in rows] +
            [number(r.get("jain"), 3) for r in rows] +
            [number(r.get("rt_p50"), 0) for r in rows] +
            [number(r.get("rt_p95"), 0) for r in rows] +
            [number(r.get("rt_p99"), 0) for r in rows] +
            [" / ".join(_count(r.get("failed")) for r in rows)])
        if with_paper and c in PAPER_TABLE3:
            n, m, avg, sd = PAPER_TABLE3[c]
            idx = PAPER_COLUMN
            body.append(
                [f"paper's {c}", str(n), m] +
                [str(avg[idx[p]]) if p in idx else "–" for p in pols] +
                [str(sd[idx[p]]) if p in idx else "–" for p in pols] +
                ["–" for _ in pols] * 4 + ["–"])
    return table(cols, body, "l".ljust(len(cols), "r"), compact=True)


def fig3_markdown(results: dict[str, dict]) -> str:
    rows = []
    for p, res in results.items():
        for r in ("cpu", "net"):
            f = res["fig3"].get(r)
            if not f:
                continue
            rows.append([POLICY_NAMES.get(p, p), RESOURCE_NAMES[r], number(f["average"]),
                         number(f["worst_case"]), f["most_loaded_server"] or "differs by run",
                         number(f["most_loaded_average"]), number(f["most_loaded_worst_case"]),
                         "yes" if f["above_threshold"] else "no"])
    return table(["policy", "resource", "average", "worst case (all servers)",
                  "most loaded server", "its average", "its worst case", "above 70 %"],
                 rows, "llrrlrrl", compact=True)


def per_server_markdown(results: dict[str, dict], which: str) -> str:
    """Each server's average CPU per policy (% of its own capacity), under a line that
    says `which` averages they are, or "" when no policy's figures have it (summaries
    recorded before it was kept)."""
    rows = {p: (res["fig3"].get("cpu") or {}).get("per_server_average")
            for p, res in results.items()}
    servers = sorted({n for v in rows.values() if v for n in v})
    if not servers:
        return ""
    return (f"\nEach server's average CPU over the load phases (% of its own capacity; "
            f"{which}):\n\n" +
            table(["policy", *servers],
                  [[POLICY_NAMES.get(p, p)] + [number(v.get(n)) for n in servers]
                   for p, v in rows.items() if v], "l".ljust(len(servers) + 1, "r"),
                  compact=True))


def write_csvs(results: dict[str, dict], out_dir: str) -> list[str]:
    paths = [os.path.join(out_dir, "table2.csv"), os.path.join(out_dir, "table3.csv"),
             os.path.join(out_dir, "fig3.csv")]
    with open(paths[0], "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "metric", "stdev", "range", "timestamps"])
        for p, res in results.items():
            for r, v in res["table2"].items():
                w.writerow([p, r, v["stdev"], v["range"], v["timestamps"]])
    with open(paths[1], "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "class", "requests", "completed", "failed", "metric", "unit",
                    "average", "stdev", "jain", "rt_p50_ms", "rt_p95_ms", "rt_p99_ms"])
        for p, res in results.items():
            for c, v in res["table3"].items():
                w.writerow([p, c, v["requests"], v["completed"], v["failed"], v["metric"],
                            v["unit"], v["average"], v["stdev"], v["jain"], v.get("rt_p50"),
                            v.get("rt_p95"), v.get("rt_p99")])
    with open(paths[2], "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "resource", "average", "worst_case", "most_loaded_server",
                    "most_loaded_average", "most_loaded_worst_case"])
        for p, res in results.items():
            for r in ("cpu", "net"):
                f = res["fig3"].get(r)
                if f:
                    w.writerow([p, r, f["average"], f["worst_case"], f["most_loaded_server"],
                                f["most_loaded_average"], f["most_loaded_worst_case"]])
    return paths


def plot_fig3(results: dict[str, dict], path: str) -> None:
    """Fig. 3 as horizontal bars, a row per policy (readable for ten and more), each
    resource on its own scale (network use goes well past 100 %), the legend below the
    panels; written as PNG at `path` and as SVG beside it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pols = list(results)
    bars = (("average", "average (all servers)", "#8da0cb"),
            ("worst_case", "worst case, all servers", "#66c2a5"),
            ("most_loaded_worst_case", "worst case, most loaded server", "#a56cc1"))
    height = 0.26
    inches = 1.6 + 0.62 * len(pols)
    fig, axes = plt.subplots(1, 2, figsize=(12, inches), sharey=True)
    for ax, r in zip(axes, ("cpu", "net")):
        top = 0.0
        for k, (key, label, colour) in enumerate(bars):
            vals = [(results[p]["fig3"].get(r) or {}).get(key) or 0 for p in pols]
            ys = [i + (k - 1) * height for i in range(len(pols))]
            ax.barh(ys, vals, height, label=label, color=colour)
            for y, v in zip(ys, vals):
                ax.text(v, y, f" {v:.0f}", va="center", fontsize=7)
            top = max([top, *vals])
        ax.axvline(70, color="#d62728", linestyle="--", linewidth=1,
                   label="elasticity threshold (70 %)")
        ax.set_yticks(range(len(pols)), [POLICY_NAMES.get(p, p) for p in pols], fontsize=9)
        ax.set_title(f"{RESOURCE_NAMES[r]} use (% of server capacity)", fontsize=10)
        ax.set_xlim(0, max(100.0, top * 1.12))       # room for the values at the bars' ends
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlabel("percent")
    axes[0].invert_yaxis()                           # the first policy on top (shared axis)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle("Provider side: average and worst-case (top 3 % of samples) use")
    fig.tight_layout(rect=(0, 0.35 / inches, 1, 1))   # the legend's strip at the bottom
    fig.savefig(path, dpi=120)
    fig.savefig(os.path.splitext(path)[0] + ".svg")
    plt.close(fig)


def plot_timelines(timelines: dict[str, dict], path: str, resource: str = "cpu") -> None:
    """timelines: policy -> {server: [(t from start, value), ...]}"""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pols = list(timelines)
    fig, axes = plt.subplots(len(pols), 1, figsize=(10, 2.6 * len(pols)), sharex=True,
                             squeeze=False)
    for ax, p in zip(axes[:, 0], pols):
        for server, pts in sorted(timelines[p].items()):
            ax.plot([t for t, _ in pts], [v for _, v in pts], label=server, linewidth=1.2)
        ax.axhline(70, color="#d62728", linestyle="--", linewidth=0.8)
        ax.set_ylabel(f"{RESOURCE_NAMES[resource]} %")
        ax.set_title(f"{POLICY_NAMES.get(p, p)}: {RESOURCE_NAMES[resource]} use per server",
                     fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=4, loc="upper right")
    axes[-1, 0].set_xlabel("seconds since the workload started")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_response_times(requests: dict[str, list[dict]], path: str) -> None:
    """CDF of response times per class (RT classes) and policy."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = sorted({r["class"] for rows in requests.values() for r in rows
                      if not r["class"].startswith("video")})
    if not classes:
        return
    fig, axes = plt.subplots(1, len(classes), figsize=(3.6 * len(classes), 3.4), squeeze=False)
    for ax, c in zip(axes[0], classes):
        for p, rows in requests.items():
            rts = sorted(float(r["latency_s"]) * 1000 for r in rows
                         if r["class"] == c and not r.get("error"))
            if rts:
                ax.plot(rts, [(k + 1) / len(rts) for k in range(len(rts))],
                        label=POLICY_NAMES.get(p, p))
        ax.set_title(c, fontsize=10)
        ax.set_xlabel("response time (ms)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("fraction of requests")
    # the legend below the panels, not over the curves (ten policies fill a panel)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    rows = math.ceil(len(labels) / 5)
    fig.set_size_inches(3.6 * len(classes), 3.4 + 0.25 * rows)
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, (0.3 + 0.25 * rows) / (3.4 + 0.25 * rows), 1, 1))
    fig.savefig(path, dpi=110)
    fig.savefig(os.path.splitext(path)[0] + ".svg")
    plt.close(fig)
