"""docs/experiments.md's results tables, from the runs committed under data/.

- model_table: Scenario 2 as a fluid model (experiments.lb_model): CPU STDEV across
  servers per scenario and policy, mean ± 95 % interval over the runs, from each
  scenario's data/model/suite/<scenario>/model.json (the figures) and model.md (the
  servers, phases and seed the figures were run with, which the JSON does not hold);
- accuracy_table: Scenario 1, the MSE of RM's and ARMA's one-step predictions of each
  microservice type's CPU and network use per phase, from data/profiler/scenario1/mse.csv:
  what experiments.profiling_accuracy.analyse computed from the series the live run
  recorded (beside it), with mse-settings.json: its settings and commits (a test marked
  e2e computes it again and compares, as the ARMA fits take minutes);
- BLOCKS: where they go.
"""
from __future__ import annotations

import csv
import io
import math
import re
import shlex

from common.markdown import table
from experiments import profiling_accuracy, report, significance
from experiments.tables.block import Block

# ---------------------------------------------------------------- Scenario 2, the model

# the scenarios the page shows, in its order (each a folder of data/model/suite/)
MODEL_SCENARIOS = ("paper", "heavy-tail", "antagonist", "unequal")
MODEL_RUNS = "model/suite"
# a column per policy, in this order and under these heads (a policy that ran but is not
# named here gets a column after them, under its report name)
MODEL_HEADS = {"srr": "SRR", "ln": "LN", "wrr": "WRR", "wlc": "WLC", "lc": "LC",
               "p2c": "P2C", "prequal": "Prequal", "malb-paper": "MALB-paper",
               "malb": "MALB", "oracle": "oracle"}
MODEL_FIGURE = "cpu_stdev"
SERVER = re.compile(r"(\w+) ([\d.]+) CPU /")
PHASES = re.compile(r"Phases: ([^,;]+)")
SEED = re.compile(r"seed (\d+) \(run k: seed \+ k\)")


def model_sources(scenarios: tuple[str, ...] = MODEL_SCENARIOS) -> tuple[str, ...]:
    """Each scenario's model.json then its model.md, in the scenarios' order: render gets
    them as pairs."""
    return tuple(f"{MODEL_RUNS}/{s}/model.{ext}" for s in scenarios for ext in ("json", "md"))


def scenario_of(run: dict) -> str:
    """The scenario a model.json was run on, as its command line names it (none named: the
    workload's default, paper)."""
    words = shlex.split(run["command"])
    for k, word in enumerate(words):
        if word == "--scenario" and k + 1 < len(words):
            return words[k + 1]
        if word.startswith("--scenario="):
            return word.split("=", 1)[1]
    return "paper"


def server_cpus(summary: str) -> list[str]:
    """Each server's CPU share as model.md's setup line gives it, in server order."""
    return [cpu for _, cpu in SERVER.findall(summary)]


def scenario_label(run: dict, summary: str) -> str:
    """The scenario's name, with the servers' CPU shares when they are not all equal (the
    figure then depends on them)."""
    cpus = server_cpus(summary)
    name = scenario_of(run)
    return f"{name} ({', '.join(cpus)})" if len(set(cpus)) > 1 else name


def model_policies(runs: list[dict]) -> list[str]:
    """Every policy that ran in any scenario: MODEL_HEADS' order first, then the others."""
    ran = list(dict.fromkeys(p for r in runs for p in r["comparison"][MODEL_FIGURE]["policies"]))
    return [p for p in MODEL_HEADS if p in ran] + [p for p in ran if p not in MODEL_HEADS]


def _setup(run: dict, summary: str) -> str:
    """Runs, seeds and phases of one scenario, from its model.md's setup line."""
    seed, phases = SEED.search(summary), PHASES.search(summary)
    seeds = "" if not seed else \
        f", seeds {int(seed[1]) + 1}-{int(seed[1]) + run['runs']}"
    return f"{run['runs']} runs per policy{seeds}, {phases[1] if phases else '?'} phases"


def _same_or_each(texts: dict[str, str]) -> str:
    """One text when every scenario has the same, else each scenario's."""
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return "; ".join(f"{t} ({s})" for s, t in texts.items())


def model_table(*loaded) -> str:
    """CPU STDEV across servers (%), a row per scenario and a column per policy, mean ± 95 %
    interval over the runs (en dash: the policy did not run there); the caption gives the
    runs, seeds, phases and code of the figures."""
    pairs = list(zip(loaded[::2], loaded[1::2]))
    runs = [run for run, _ in pairs]
    shown = model_policies(runs)
    rows = []
    for run, summary in pairs:
        stats = run["comparison"][MODEL_FIGURE]["policies"]
        rows.append([scenario_label(run, summary),
                     *(significance.mean_ci_text(stats.get(p)) for p in shown)])
    heads = [MODEL_HEADS.get(p) or report.POLICY_NAMES.get(p, p) for p in shown]
    label = runs[0]["comparison"][MODEL_FIGURE]["label"]
    setup = _same_or_each({scenario_of(r): _setup(r, s) for r, s in pairs})
    code = _same_or_each({scenario_of(r): r["commit"] for r in runs})
    return table(["scenario", *heads], rows, "l" + "r" * len(shown)) + "\n" + \
        (f"{label} over the load phases of the fluid model, mean ± 95 % interval over the "
         f"runs; {setup}; "
         f"code at {code}.") + "\n"


# ---------------------------------------------------------- Scenario 1, profiling accuracy

ACCURACY_SOURCES = ("profiler/scenario1/mse.csv", "profiler/scenario1/mse-settings.json")
# the resources the page shows: memory hardly moves (its MSEs are all below 0.001)
SHOWN_RESOURCES = ("cpu", "net")
PREDICTOR_NAMES = {"rm": "RM", "arma": "ARMA"}


def _value(text: str | None) -> float | None:
    """A figure as write_csv wrote it: a number, or None for an empty or not finite
    cell."""
    if text is None or not text.strip():
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _column(row: dict) -> tuple[str, int]:
    """The table's column of one of analyse's rows: its predictor and window."""
    return row["predictor"], row["window"]


def _head(column: tuple[str, int]) -> str:
    """"RM w=2", as mse.md and the paper name a predictor."""
    kind, window = column
    return f"{PREDICTOR_NAMES.get(kind, kind)} w={window}"


def _cells(found: list[dict | None]) -> list[str]:
    """A row's MSEs as mse.md writes them, the lowest (and any equal to it) in bold."""
    values = [r["mse"] for r in found if r is not None and r["mse"] is not None]
    # the best as written: two MSEs that print alike are both bold
    best = profiling_accuracy.fmt_mse(min(values)) if values else None
    cells = []
    for r in found:
        mse = None if r is None else r["mse"]
        text = profiling_accuracy.fmt_mse(mse)
        cells.append(f"**{text}**" if mse is not None and text == best else text)
    return cells


def accuracy_markdown(rows: list[dict], settings: dict) -> str:
    """The table of analyse's rows: a row per microservice type, resource and phase, a
    column per predictor and window; settings: what the rows were computed with, where and
    from which recording (mse-settings.json)."""
    order = {"rm": 0, "arma": 1}
    columns = sorted({_column(r) for r in rows}, key=lambda c: (order.get(c[0], 2), c[1]))
    cell = {(r["microservice"], r["resource"], r["phase"], *_column(r)): r for r in rows}
    body = []
    for ms, resource, phase in dict.fromkeys(
            (r["microservice"], r["resource"], r["phase"]) for r in rows):
        found = [cell.get((ms, resource, phase, *c)) for c in columns]
        mean = next(r["mean"] for r in found if r is not None)
        body.append([ms, profiling_accuracy.RESOURCE_LABELS.get(resource, resource), phase,
                     "–" if mean is None else f"{mean:#.3g}", *_cells(found)])
    p, q = settings["arma_order"]
    return table(["type", "resource", "phase", "mean (%)", *map(_head, columns)], body,
                 "lll" + "r" * (len(columns) + 1)) + "\n" + (
        "MSE of one-step predictions per phase, each phase with a fresh predictor and only "
        f"predictions made with a full window scored (ARMA({p},{q}) refitted every "
        f"{settings['refit_every']} samples); the best of each row in bold; computed by "
        f"experiments.profiling_accuracy.analyse at {settings['computed_at']} from the "
        f"series the live run recorded (committed with {settings['recorded_with']}).") + "\n"


def _sorted_rows(rows: list[dict]) -> list[dict]:
    """analyse's rows by phase then resource; the page reads by type, resource, phase."""
    resources = {r: k for k, r in enumerate(SHOWN_RESOURCES)}
    types = list(dict.fromkeys(r["microservice"] for r in rows))
    return sorted(rows, key=lambda r: (types.index(r["microservice"]),
                                       resources.get(r["resource"], len(resources)),
                                       profiling_accuracy.PHASES.index(r["phase"])))


def mse_rows(text: str, resources: tuple[str, ...] = SHOWN_RESOURCES) -> list[dict]:
    """analyse's rows as profiling_accuracy.write_csv wrote them (an empty cell: none),
    those of the shown resources."""
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        if row["resource"] in resources:
            rows.append({**row, "window": int(row["window"]), "mse": _value(row["mse"]),
                         "mean": _value(row["mean"])})
    return rows


def accuracy_table(mse_csv: str, settings: dict) -> str:
    """Scenario 1's MSEs, with the settings they were computed with."""
    return accuracy_markdown(_sorted_rows(mse_rows(mse_csv)), settings)


BLOCKS: tuple[Block, ...] = (
    Block("docs/experiments.md", "fluid model, CPU balance", model_sources(), model_table),
    Block("docs/experiments.md", "scenario 1, prediction accuracy", ACCURACY_SOURCES,
          accuracy_table),
)
