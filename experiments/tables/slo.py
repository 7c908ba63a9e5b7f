"""docs/slo.md's results tables: the SLO loops against the fixed maximum and the kernel's
governors, one service and the call graph, from the runs' summary.json (written by
`python -m experiments.slo_energy`, copied to data/slo/eval-one and data/slo/eval-callgraph).

- one_service_table, call_graph_table: the two tables, each figure the mean ± 95 % interval
  over the runs (significance.mean_ci), energy against the fixed maximum's in the same run;
- BLOCKS: where they go.
"""
from __future__ import annotations

from common.markdown import number, table
from experiments import significance
from experiments.tables.block import Block

# what the page calls each policy
LABELS = {"max": "fixed max", "ondemand": "ondemand", "schedutil": "schedutil",
          "slo-client": "SLO loop, client SLI (`slo-client`)",
          "slo": "SLO loop, service SLI (`slo`)",
          "slo-paper": "SLO loop, paper's band (`slo-paper`)",
          "slo-split": "split budgets (`slo-split`)",
          "slo-whole": "whole target per loop (`slo-whole`)"}
ONE_SERVICE_ORDER = ("max", "ondemand", "schedutil", "slo-client", "slo", "slo-paper")


def over_runs(runs: list[dict], key: str, digits: int = 1, scale: float = 1.0,
              unit: str = "") -> str:
    """One figure over the runs: mean ± 95 % interval (the value alone for one run)."""
    text = significance.mean_ci_text(significance.mean_ci(
        [scale * r[key] for r in runs if r.get(key) is not None]), digits)
    return text if text == "–" else text + unit


def energy_vs_max(runs: list[dict], maximum: list[dict]) -> str:
    """Energy against the fixed maximum's in the same run, in %."""
    ratios = [100 * (mine["energy_j"] / theirs["energy_j"] - 1)
              for mine, theirs in zip(runs, maximum)
              if mine.get("energy_j") is not None and theirs.get("energy_j")]
    text = significance.mean_ci_text(significance.mean_ci(ratios))
    return text if text == "–" else f"{text} %"


def _profile(summary: dict) -> dict[str, list[dict]]:
    """The step profile's runs per policy (the published comparisons play only it);
    ValueError unless every policy played as many runs as the fixed maximum, against
    which each is paired."""
    res = summary["profiles"]["step"]
    counts = {p: len(runs) for p, runs in res.items()}
    if "max" not in res or not res["max"] or set(counts.values()) != {counts["max"]}:
        raise ValueError(f"runs per policy {counts}: each as many as the fixed maximum's")
    return res


def _ordered(res: dict[str, list[dict]], order: tuple[str, ...]) -> list[str]:
    return [p for p in order if p in res] + [p for p in res if p not in order]


def _caption(summary: dict, head: str) -> str:
    runs = len(next(iter(_profile(summary).values())))
    return (f"Mean ± 95 % interval over the {runs} runs; {head}; code at "
            f"{summary['commit']} ({summary['when'][:10]}).")


def one_service_table(summary: dict) -> str:
    res = _profile(summary)
    target = summary["slo"]["target_ms"]
    rows = [[LABELS.get(p, p), energy_vs_max(res[p], res["max"]),
             over_runs(res[p], "energy_per_request_mj"),
             over_runs(res[p], "client_stable_within_slo_share", 1, 100, " %"),
             over_runs(res[p], "stable_within_slo_share", 1, 100, " %"),
             over_runs(res[p], "p95_ms"), over_runs(res[p], "mean_freq_mhz", 0),
             over_runs(res[p], "freq_changes_per_min")]
            for p in _ordered(res, ONE_SERVICE_ORDER)]
    return table([f"step, {target:g} ms", "energy vs max", "mJ/request",
                  "within SLO at the client (stable)", "within SLO at the service (stable)",
                  "client p95 ms", "mean MHz", "changes/min"], rows, "lrrrrrrr") + \
        "\n" + _caption(summary, "frequency emulated, energy modelled") + "\n"


def _per_run(runs: list[dict]) -> str:
    """Each run's share of stable intervals within the SLO at the client (– for a run
    without one)."""
    return " / ".join("–" if r.get("client_stable_within_slo_share") is None
                      else f"{100 * r['client_stable_within_slo_share']:.1f}" for r in runs)


def _loop_mhz(runs: list[dict], service: str) -> str:
    """A loop's mean frequency over the runs (the loops are keyed service@agent)."""
    values = [v["mean_freq_mhz"] for r in runs for k, v in r.get("loops", {}).items()
              if k.split("@")[0] == service and v.get("mean_freq_mhz") is not None]
    return number(sum(values) / len(values), 0) if values else "–"


def call_graph_table(summary: dict) -> str:
    res = _profile(summary)
    target = summary["slo"]["target_ms"]
    rows = [[LABELS.get(p, p), energy_vs_max(res[p], res["max"]),
             over_runs(res[p], "energy_per_request_mj", 0),
             over_runs(res[p], "client_stable_within_slo_share", 1, 100, " %"),
             _per_run(res[p]), over_runs(res[p], "p95_ms"),
             f"{_loop_mhz(res[p], 'front')} / {_loop_mhz(res[p], 'data')}"]
            for p in _ordered(res, tuple(LABELS))]
    return table([f"step, {target:g} ms end to end", "energy vs max", "mJ/request",
                  "within SLO at the client (stable)", "per run", "client p95 ms",
                  "front / data MHz"], rows, "lrrrlrr") + \
        "\n" + _caption(summary, "energy is the four loops' together; frequency emulated, "
                                 "energy modelled") + "\n"


BLOCKS = (
    Block("docs/slo.md", "one service, held-out loads", ("slo/eval-one/summary.json",),
          one_service_table),
    Block("docs/slo.md", "call graph, held-out loads", ("slo/eval-callgraph/summary.json",),
          call_graph_table),
)
