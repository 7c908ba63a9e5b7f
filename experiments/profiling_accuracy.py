"""Scenario 1 of the MALB paper (section IV.A): how accurately RM and ARMA predict each
microservice's CPU, memory and network use, per workload phase.

The paper runs each microservice type separately under three user patterns (gradually
increasing, stable, gradually decreasing load), predicts every 3 s monitoring period the
next utilization sample with RM (windows 2, 5, 10) and ARMA (windows 20, 50, 100), and
compares the predictors by the Mean Squared Error of those one-step predictions.

    python -m experiments.profiling_accuracy analyse --history PATH --phases PHASES.json \\
        --out DIR

``--history`` is the profiler's SQLite history (``profiler.history_path``), a directory of
CSVs written by ``HistoryStore.export_csv``, or its ``microservice_samples.csv``. The
series analysed are the measured ``cpu``, ``mem`` and ``net`` columns of
``microservice_samples`` (percent of the server's capacity, mean over the readable
instances), i.e. what the profiler's predictors are fed online.

``PHASES.json`` is a list (or ``{"phases": [...]}``) of
``{"microservice": "video", "phase": "increasing"|"stable"|"decreasing", "start": t0,
"end": t1}``, times in the history's clock (seconds). A phase holds the samples with
``start <= t < end``.

Evaluation (:func:`analyse`): for each phase, microservice and resource, a fresh predictor
is run over the phase's samples (gaps, i.e. None, skipped) with
:func:`profiler.predictors.walk_forward_mse`: it predicts each sample from the ones before
it, then sees it, exactly as the profiler does online (each phase is evaluated on its own,
like the paper's separate runs). By default only predictions made with a full window are
scored (sample index >= window), so every window is judged on what it is, and a phase
needs at least window + 1 samples; ``score="all"`` scores every prediction
walk_forward_mse makes (RM from the second sample on with a partial window; ARMA before
its first fit predicts the window mean). ARMA is refitted every ``refit_every`` updates
(default 10, the profiler's default): the paper does not say how often it refits.

Outputs (:func:`write_outputs`): ``mse.csv`` (one row per microservice, resource, phase,
predictor and window), ``mse.md`` (one table per microservice, best MSE of each row in
bold) and ``mse.png`` (grouped bars).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from numbers import Real
from collections.abc import Iterable, Sequence

from common.cli import ArgumentParser, bounded, choice_list, number_list, positive_float, \
    positive_int
from common.config import ConfigError, check_deployable, load_config, load_config_data
from common.markdown import table
from profiler.predictors import Arma, RollingMean, walk_forward_mse
from profiler.store import HistoryStore
from profiler.weights import RESOURCES

PHASES = ("increasing", "stable", "decreasing")
RM_WINDOWS = (2, 5, 10)            # the paper's RM windows
ARMA_WINDOWS = (20, 50, 100)       # the paper's ARMA windows
ARMA_ORDER = (2, 1)                # the profiler's default order
ARMA_REFIT_EVERY = 10              # not stated in the paper; the profiler's default
SCORES = ("full", "all")
CSV_COLUMNS = ("microservice", "resource", "phase", "predictor", "window", "mse", "n",
               "samples", "mean", "note")
RESOURCE_LABELS = {"cpu": "CPU", "mem": "memory", "net": "network"}


class InputError(ValueError):
    """A problem with the input files; the message names the file or field."""


# ---------------------------------------------------------------------------- analysis

def _check_phases(phases) -> list[dict]:
    if not isinstance(phases, list):
        raise ValueError(f"phases: expected a list of phases, got {type(phases).__name__}")
    seen = set()
    clean = []
    for k, ph in enumerate(phases):
        where = f"phases[{k}]"
        if not isinstance(ph, dict):
            raise ValueError(f"{where}: expected an object with microservice, phase, start, end")
        unknown = sorted(set(ph) - {"microservice", "phase", "start", "end"})
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: unknown field "
                             f"(known: end, microservice, phase, start)")
        ms = ph.get("microservice")
        if not isinstance(ms, str) or not ms:
            raise ValueError(f"{where}.microservice: expected a non-empty string, got {ms!r}")
        name = ph.get("phase")
        if name not in PHASES:
            raise ValueError(f"{where}.phase: expected one of {', '.join(PHASES)}, got {name!r}")
        bounds = []
        for key in ("start", "end"):
            v = ph.get(key)
            if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
                raise ValueError(f"{where}.{key}: expected a time in seconds, got {v!r}")
            bounds.append(float(v))
        if not bounds[0] < bounds[1]:
            raise ValueError(f"{where}: start ({bounds[0]:g}) must be before end ({bounds[1]:g})")
        if (ms, name) in seen:
            raise ValueError(f"{where}: a second {name!r} phase for {ms!r}")
        seen.add((ms, name))
        clean.append({"microservice": ms, "phase": name, "start": bounds[0], "end": bounds[1]})
    return clean


def _check_windows(name: str, windows: Iterable[int]) -> tuple[int, ...]:
    windows = tuple(windows)
    for w in windows:
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ValueError(f"{name}: expected integers >= 1, got {w!r}")
    return windows


def phase_values(series: Sequence[tuple[float, float | None]], start: float,
                 end: float) -> list[float]:
    """Values with ``start <= t < end``, in time order, Nones (unreadable) skipped."""
    return [float(v) for t, v in sorted(series, key=lambda tv: tv[0])
            if start <= t < end and v is not None]


def _score(values: list[float], factory, window: int, score: str) -> tuple[float | None, int]:
    result = walk_forward_mse(values, factory)
    if score == "all":
        return result["mse"], result["n"]
    errors = [(guess - value) ** 2 for i, (guess, value)
              in enumerate(zip(result["predictions"], values))
              if i >= window and guess is not None]
    return (sum(errors) / len(errors) if errors else None), len(errors)


def analyse(series_by_key: dict, phases: list[dict],
            rm_windows: Sequence[int] = RM_WINDOWS,
            arma_windows: Sequence[int] = ARMA_WINDOWS,
            arma_order: tuple[int, int] = ARMA_ORDER,
            refit_every: int = ARMA_REFIT_EVERY,
            score: str = "full",
            resources: Sequence[str] = RESOURCES) -> list[dict]:
    """MSE of one-step predictions per phase, microservice, resource, predictor and window.

    ``series_by_key``: {(microservice, resource): [(t, value or None), ...]}.
    ``phases``: [{"microservice", "phase", "start", "end"}, ...] (validated; ValueError
    names the faulty field). ARMA fits run inline (statsmodels, tens of ms each).

    Returns rows {microservice, resource, phase, predictor ("rm"|"arma"), window, mse, n,
    samples, mean, note}: ``n`` predictions scored, ``samples`` values in the phase,
    ``mean`` their mean; when the phase is too short for a window, mse None, n 0 and a note.
    """
    phases = _check_phases(phases)
    rm_windows = _check_windows("rm_windows", rm_windows)
    arma_windows = _check_windows("arma_windows", arma_windows)
    if score not in SCORES:
        raise ValueError(f"score: expected one of {', '.join(SCORES)}, got {score!r}")
    if isinstance(refit_every, bool) or not isinstance(refit_every, int) or refit_every < 1:
        raise ValueError(f"refit_every: expected an integer >= 1, got {refit_every!r}")
    configs = [("rm", w) for w in rm_windows] + [("arma", w) for w in arma_windows]
    rows = []
    for ph in phases:
        for resource in resources:
            values = phase_values(series_by_key.get((ph["microservice"], resource), []),
                                  ph["start"], ph["end"])
            mean = sum(values) / len(values) if values else None
            for kind, window in configs:
                row = {"microservice": ph["microservice"], "resource": resource,
                       "phase": ph["phase"], "predictor": kind, "window": window,
                       "mse": None, "n": 0, "samples": len(values), "mean": mean,
                       "note": None}
                rows.append(row)
                need = window + 1 if score == "full" else 2
                if len(values) < need:
                    row["note"] = (f"{len(values)} samples in the phase; {kind} w={window} "
                                   f"needs at least {need}"
                                   + (" (a full window, then one to score)"
                                      if score == "full" else ""))
                    continue
                if kind == "rm":
                    def factory(w=window):
                        return RollingMean(w)
                else:
                    try:   # an order needing more samples than the window: not a crash
                        Arma(arma_order, window, refit_every)
                    except ValueError as exc:
                        row["note"] = f"arma w={window}: {exc}"
                        continue

                    def factory(w=window):
                        return Arma(arma_order, w, refit_every)
                mse, n = _score(values, factory, window, score)
                row["mse"], row["n"] = mse, n
                if mse is None:
                    row["note"] = "no prediction could be scored"
    return rows


# ---------------------------------------------------------------------------- input

def _parse_number(text: str, where: str) -> float | None:
    if text is None or text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: not a number: {text!r}") from None
    return value if math.isfinite(value) else None


def _load_csv(path: str) -> dict:
    out: dict = {}
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("t", "microservice", *RESOURCES)
                   if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: not a microservice_samples export (missing column "
                             f"{missing[0]!r})")
        for line, row in enumerate(reader, start=2):
            t = _parse_number(row["t"], f"{path}:{line}: t")
            if t is None:
                raise InputError(f"{path}:{line}: t: missing time")
            for r in RESOURCES:
                out.setdefault((row["microservice"], r), []).append(
                    (t, _parse_number(row[r], f"{path}:{line}: {r}")))
    return out


def _load_sqlite(path: str) -> dict:
    try:
        with HistoryStore.open_read_only(path) as store:
            rows = store.rows("microservice_samples", ("microservice", "cpu", "mem", "net"))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    out: dict = {}
    for t, ms, *values in rows:
        for r, v in zip(RESOURCES, values):
            out.setdefault((ms, r), []).append((float(t), None if v is None else float(v)))
    return out


def load_history(path: str) -> dict:
    """{(microservice, resource): [(t, value or None), ...]} from the profiler's SQLite
    history, an ``export_csv`` directory, or its ``microservice_samples.csv``.
    Raises FileNotFoundError or InputError naming the file."""
    if os.path.isdir(path):
        csv_path = os.path.join(path, "microservice_samples.csv")
        if not os.path.isfile(csv_path):
            raise FileNotFoundError(f"{path}: no microservice_samples.csv in this directory")
        return _load_csv(csv_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file or directory")
    with open(path, "rb") as fh:
        magic = fh.read(16)
    if magic.startswith(b"SQLite format 3"):
        return _load_sqlite(path)
    return _load_csv(path)


def load_phases(path: str) -> list[dict]:
    """Phases from a JSON file (a list, or {"phases": [...]}), validated."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with open(path) as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text (JSON) file") from None
    if isinstance(data, dict) and "phases" in data:
        data = data["phases"]
    try:
        return _check_phases(data)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None


# ---------------------------------------------------------------------------- output

def fmt_mse(value: float | None) -> str:
    """How an MSE is written in mse.md ("–" when there is none)."""
    if value is None:
        return "–"
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def _columns(rows: list[dict]) -> list[tuple[str, int]]:
    order = {"rm": 0, "arma": 1}
    return sorted({(r["predictor"], r["window"]) for r in rows},
                  key=lambda c: (order.get(c[0], 2), c[1]))


def _label(kind: str, window: int) -> str:
    return f"{'RM' if kind == 'rm' else 'ARMA' if kind == 'arma' else kind} w={window}"


def _ordered(values: Iterable[str], preferred: Sequence[str]) -> list[str]:
    values = list(dict.fromkeys(values))
    return [v for v in preferred if v in values] + [v for v in values if v not in preferred]


def render_markdown(rows: list[dict], title: str = "Scenario 1: prediction MSE") -> str:
    columns = _columns(rows)
    lines = [f"# {title}", "",
             "Mean squared error of one-step predictions of each microservice's measured use "
             "(percent of server capacity) per workload phase; lower is better, the best of "
             "each row in **bold**; *samples* = readable samples in the phase, *mean* = their "
             "mean; – = no MSE (see the notes). mse.csv also has *n*, the predictions scored.",
             ""]
    microservices = list(dict.fromkeys(r["microservice"] for r in rows))
    for ms in microservices:
        mine = [r for r in rows if r["microservice"] == ms]
        cell = {(r["resource"], r["phase"], r["predictor"], r["window"]): r for r in mine}
        body = []
        notes: dict[str, list[str]] = {}    # note text -> where it applies
        for res in _ordered((r["resource"] for r in mine), RESOURCES):
            for ph in _ordered((r["phase"] for r in mine if r["resource"] == res), PHASES):
                found = [cell.get((res, ph, *c)) for c in columns]
                values = [r["mse"] for r in found if r is not None and r["mse"] is not None]
                best = min(values) if values else None
                first = next(r for r in found if r is not None)
                cells = []
                for c, r in zip(columns, found):
                    text = fmt_mse(None if r is None else r["mse"])
                    if r is not None and r["mse"] is not None and r["mse"] == best:
                        text = f"**{text}**"
                    cells.append(text)
                    if r is not None and r["note"]:
                        notes.setdefault(f"{_label(*c)}: {r['note']}", []).append(
                            f"{RESOURCE_LABELS.get(res, res)} {ph}")
                mean = "–" if first["mean"] is None else f"{first['mean']:.3g}"
                body.append([RESOURCE_LABELS.get(res, res), ph, first["samples"], mean, *cells])
        lines += [f"## {ms}", "",
                  table(["resource", "phase", "samples", "mean", *(_label(*c) for c in columns)],
                        body, "llrr".ljust(len(columns) + 4, "r"), compact=True)]
        if notes:
            lines += ["Notes:", "", *(f"- {note} ({', '.join(where)})"
                                      for note, where in notes.items()), ""]
    return "\n".join(lines)


def write_csv(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_COLUMNS})


def plot(rows: list[dict], path: str, title: str = "Scenario 1: one-step prediction MSE") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.transforms import blended_transform_factory

    columns = _columns(rows)
    microservices = list(dict.fromkeys(r["microservice"] for r in rows)) or ["(none)"]
    groups = [(res, ph) for res in _ordered((r["resource"] for r in rows), RESOURCES)
              for ph in _ordered((r["phase"] for r in rows), PHASES)]
    positive = [r["mse"] for r in rows if r["mse"] is not None and r["mse"] > 0]
    has_zero = any(r["mse"] == 0 for r in rows)
    spread = max(positive) / min(positive) if positive else 1.0
    log = spread >= 100
    fig, axes = plt.subplots(len(microservices), 1, squeeze=False,
                             figsize=(max(8.0, 1.1 * max(len(groups), 1) + 2),
                                      3.2 * len(microservices) + 0.8))
    width = 0.8 / max(len(columns), 1)
    cmap = plt.get_cmap("tab10")
    x = np.arange(len(groups))
    for ax, ms in zip(axes[:, 0], microservices):
        cell = {(r["resource"], r["phase"], r["predictor"], r["window"]): r["mse"]
                for r in rows if r["microservice"] == ms}
        for k, c in enumerate(columns):
            heights = [cell.get((res, ph, *c)) for res, ph in groups]
            offs = x - 0.4 + width * (k + 0.5)
            ax.bar(offs, [np.nan if h is None else h for h in heights], width,
                   label=_label(*c), color=cmap(k % 10),
                   hatch="//" if c[0] == "arma" else None, edgecolor="white", linewidth=0.3)
            for xo, h in zip(offs, heights):
                if h is None:   # not enough samples: say so where the bar would be
                    ax.text(xo, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=6,
                            color="0.4", transform=blended_transform_factory(ax.transData,
                                                                             ax.transAxes))
        if log:
            if has_zero:
                ax.set_yscale("symlog", linthresh=min(positive))
            else:
                ax.set_yscale("log")
        ax.set_title(ms, loc="left", fontsize=10, fontweight="bold")
        ax.set_ylabel("MSE" + (" (log scale)" if log else ""))
        ax.set_xticks(x)
        ax.set_xticklabels([f"{RESOURCE_LABELS.get(res, res)}\n{ph}" for res, ph in groups],
                           fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        for boundary in range(1, len(groups)):
            if groups[boundary][0] != groups[boundary - 1][0]:
                ax.axvline(boundary - 0.5, color="0.7", linewidth=0.8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncol=min(len(columns), 6), fontsize=8,
               frameon=False)
    fig.suptitle(title, x=0.01, ha="left", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(rows: list[dict], out_dir: str) -> dict[str, str]:
    """Write mse.csv, mse.md and mse.png into ``out_dir``; return their paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {name: os.path.join(out_dir, f"mse.{name}") for name in ("csv", "md", "png")}
    write_csv(rows, paths["csv"])
    with open(paths["md"], "w") as fh:
        fh.write(render_markdown(rows))
    plot(rows, paths["png"])
    return paths


# ---------------------------------------------------------------------------- CLI

def _cmd_analyse(args, fail) -> int:
    try:
        series = load_history(args.history)
    except (FileNotFoundError, InputError) as exc:
        return fail(f"--history: {exc}")
    try:
        phases = load_phases(args.phases)
    except (FileNotFoundError, InputError) as exc:
        return fail(f"--phases: {exc}")
    try:
        rows = analyse(series, phases, args.rm_windows, args.arma_windows, args.arma_order,
                       args.refit_every, args.score)
    except ValueError as exc:
        return fail(str(exc))
    paths = write_outputs(rows, args.out)
    scored = sum(1 for r in rows if r["mse"] is not None)
    print(f"{len(rows)} rows ({scored} with an MSE) for {len(phases)} phases; "
          f"written {', '.join(paths.values())}")
    return 0


# ---------------------------------------------------------------------------- live run

# What one request of each microservice type asks for, and how its rate relates to the
# paper's 1 -> 3 requests/s. The paper's servers were whole machines; ours are 0.4-core
# shares of a 2-core VM, so back-end jobs (10 s at 15 % of a CPU each) come at a tenth of
# the rate, or the servers would sit at 100 % and every series would be flat.
LIVE_REQUESTS = {
    "video": {"path": "/stream?rate=200&seconds=10", "rate_scale": 1.0},
    "ui": {"path": "/object?size=1000000", "rate_scale": 1.0},
    "backend": {"path": "/job?seconds=10&cpu=0.15", "rate_scale": 0.1},
}


def live_spec(ms, phase_s: float, rate_from: float, rate_to: float, seed: int) -> dict:
    req = LIVE_REQUESTS[ms.name]
    lo, hi = rate_from * req["rate_scale"], rate_to * req["rate_scale"]
    return {"seed": seed, "arrivals": "poisson",
            "phases": [{"name": "increasing", "seconds": phase_s, "from": lo, "to": hi},
                       {"name": "stable", "seconds": phase_s, "from": hi, "to": hi},
                       {"name": "decreasing", "seconds": phase_s, "from": hi, "to": lo}],
            "classes": [{"name": ms.name, "weight": 1, "host": ms.vip, "port": ms.port,
                         "path": req["path"]}]}


def run_live(out_dir: str, microservices: Sequence[str], phase_s: float, period_s: float,
             rate_from: float, rate_to: float, seed: int, config_path: str | None = None
             ) -> tuple[str, list[dict]]:
    """Run each microservice type on its own through the three phases on the testbed (all
    of it: controller, agents, profiler), and return (history path, phases)."""
    from experiments.stack import Stack   # deferred: Mininet, for live runs only
    data = load_config_data(config_path)
    data.setdefault("profiler", {}).update(period_s=period_s)
    history = os.path.join(os.path.abspath(out_dir), "history.sqlite")
    phases = []
    with Stack(data, os.path.join(out_dir, "run"), history_path=history) as st:
        n_clients = len(st.cfg.testbed.clients)
        for name in microservices:
            ms = st.cfg.microservice(name)
            spec_path = os.path.join(st.run_dir, f"spec-{name}.json")
            with open(spec_path, "w") as fh:
                json.dump(live_spec(ms, phase_s, rate_from, rate_to, seed), fh)
            t0 = time.time() + 2
            st.start_loadgen(spec_path, t0, tag=name)
            for j, phase in enumerate(PHASES):
                phases.append({"microservice": name, "phase": phase,
                               "start": t0 + j * phase_s, "end": t0 + (j + 1) * phase_s})
                print(f"[scenario1] {name}: {phase} ({phase_s:.0f} s)", flush=True)
                time.sleep(max(0.0, t0 + (j + 1) * phase_s - time.time()))
            deadline = time.time() + 120
            while time.time() < deadline and len(st.loadgen_summaries(name)) < n_clients:
                time.sleep(1)
            time.sleep(2 * period_s)   # idle gap: the next type starts from quiet servers
    with open(os.path.join(out_dir, "phases.json"), "w") as fh:
        json.dump(phases, fh, indent=1)
    return history, phases


def _cmd_live(args, fail) -> int:
    try:
        check_deployable(load_config(args.config, {"profiler": {"period_s": args.period}}))
    except ConfigError as exc:
        return fail(f"configuration: {exc}")
    if os.geteuid() != 0:
        print("error: live runs need root (Open vSwitch, Docker, namespaces); run it with "
              "sudo", file=sys.stderr)
        return 1
    names = args.microservices
    history, phases = run_live(args.out, names, args.phase_seconds, args.period,
                               args.rate_from, args.rate_to, args.seed, args.config)
    rows = analyse(load_history(history), phases, args.rm_windows, args.arma_windows,
                   args.arma_order, args.refit_every, args.score)
    paths = write_outputs(rows, args.out)
    print(f"history {history}; phases {args.out}/phases.json; written {', '.join(paths.values())}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The CLI: one subparser per subcommand (``analyse``; more can be added here)."""
    ap = ArgumentParser(prog="python -m experiments.profiling_accuracy",
                        description="Scenario 1: accuracy of the profiler's "
                                    "RM and ARMA predictions per workload phase.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    an = sub.add_parser("analyse", help="MSE per microservice, resource, phase and predictor "
                                        "from a recorded history",
                        description="Compute the MSE of RM and ARMA one-step predictions per "
                                    "phase from a profiler history.")
    an.add_argument("--history", required=True,
                    help="profiler SQLite history, export_csv directory or "
                         "microservice_samples.csv")
    an.add_argument("--phases", required=True, help="JSON list of {microservice, phase, "
                                                    "start, end}")
    an.add_argument("--out", required=True, help="output directory (mse.csv, mse.md, mse.png)")
    an.add_argument("--rm-windows", type=number_list(int, 1), default=RM_WINDOWS,
                    help="default 2,5,10 (the paper's)")
    an.add_argument("--arma-windows", type=number_list(int, 1), default=ARMA_WINDOWS,
                    help="default 20,50,100 (the paper's)")
    an.add_argument("--arma-order", type=number_list(int, 0, 10, length=2), default=ARMA_ORDER,
                    help="P,Q (default 2,1)")
    an.add_argument("--refit-every", type=positive_int, default=ARMA_REFIT_EVERY,
                    help="ARMA refit interval in samples (default 10; not stated in the paper)")
    an.add_argument("--score", choices=SCORES, default="full",
                    help="full: score predictions made with a full window (default); "
                         "all: every prediction")
    an.set_defaults(func=_cmd_analyse)

    lv = sub.add_parser("live", help="run the workload on the testbed, record, then analyse",
                        description="Each microservice type on its own through increasing, "
                                    "stable and decreasing load; then the MSE tables.")
    lv.add_argument("--out", required=True, help="output directory")
    lv.add_argument("--microservices", type=choice_list(tuple(LIVE_REQUESTS)),
                    default=list(LIVE_REQUESTS))
    lv.add_argument("--phase-seconds", type=positive_float, default=120.0,
                    help="length of each phase (default 120; the paper: 600)")
    lv.add_argument("--period", type=bounded(float, 0.1, 3600), default=1.0,
                    help="profiler period in seconds (default 1, so a 120 s phase holds "
                         "enough samples for ARMA w=100; the paper: 3)")
    lv.add_argument("--rate-from", type=positive_float, default=1.0,
                    help="requests/s (paper: 1)")
    lv.add_argument("--rate-to", type=positive_float, default=3.0, help="requests/s (paper: 3)")
    lv.add_argument("--seed", type=int, default=1)
    lv.add_argument("--config", help="base configuration (default configs/paper.yaml)")
    for a in an._actions:
        if a.dest in ("rm_windows", "arma_windows", "arma_order", "refit_every", "score"):
            lv._add_action(a)
    lv.set_defaults(func=_cmd_live)
    return ap


def main(argv: list[str] | None = None) -> int:
    # ARMA fits with one BLAS thread: two doubled each fit's CPU time on a 2-core machine
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = build_parser()
    args = ap.parse_args(argv)      # usage errors exit 2 (argparse)

    def fail(message: str) -> int:
        print(f"{ap.prog} {args.command}: error: {message}", file=sys.stderr)
        return 2
    return args.func(args, fail)


if __name__ == "__main__":
    sys.exit(main())
