"""Scenario 1 analysis (experiments/profiling_accuracy.py): known answers, phase splitting,
gaps, short phases, outputs and CLI errors. ARMA fits are replaced by an instant stand-in
except in one test, so the file runs in a few seconds."""
import csv
import json
import math
import os

import numpy as np
import pytest

from experiments import profiling_accuracy as pa
from profiler import predictors
from profiler.predictors import ArmaParams, RollingMean, walk_forward_mse
from profiler.store import HistoryStore
from tests.conftest import run_module

PERIOD = 3.0


# -- synthetic fixture ------------------------------------------------------------------

def make_workload(microservices=("video", "ui", "backend"), phase_len=60, seed=3,
                  t0=1000.0, gap_every=0):
    """Series and phases shaped like the paper's runs: per microservice, three consecutive
    phases (load ramping 1 -> 3, stable at 3, ramping 3 -> 1) of ``phase_len`` samples every
    3 s; cpu/net follow the load with noise, memory drifts slowly. Every ``gap_every``-th
    sample is None (unreadable). Returns (series_by_key, phases)."""
    rng = np.random.default_rng(seed)
    base = {"video": (0.5, 19.0, 22.0), "ui": (3.0, 12.0, 6.0), "backend": (12.0, 15.0, 1.0)}
    series, phases = {}, []
    t = t0
    for ms in microservices:
        cpu0, mem0, net0 = base.get(ms, (5.0, 10.0, 5.0))
        loads = np.concatenate([np.linspace(1, 3, phase_len), np.full(phase_len, 3.0),
                                np.linspace(3, 1, phase_len)])
        times = t + PERIOD * np.arange(len(loads))
        for k, name in enumerate(pa.PHASES):
            phases.append({"microservice": ms, "phase": name,
                           "start": float(times[k * phase_len]),
                           "end": float(times[k * phase_len]) + PERIOD * phase_len})
        values = {"cpu": cpu0 * loads / 3 * rng.lognormal(0, 0.2, len(loads)),
                  "mem": mem0 * (0.8 + 0.2 * loads / 3) + rng.normal(0, 0.05, len(loads)),
                  "net": net0 * loads / 3 * rng.lognormal(0, 0.1, len(loads))}
        for r in pa.RESOURCES:
            series[(ms, r)] = [(float(tt), None if gap_every and i % gap_every == 0
                                else float(v)) for i, (tt, v) in enumerate(zip(times, values[r]))]
        t = float(times[-1]) + 600.0   # the next microservice's separate run
    return series, phases


@pytest.fixture
def fake_fit(monkeypatch):
    """Instant stand-in for the statsmodels ARMA fit."""
    calls = []

    def fit(y, order):
        calls.append(len(y))
        p, q = order
        return ArmaParams(float(np.mean(y)), (0.5,) + (0.0,) * (p - 1), (0.0,) * q), 0.0
    monkeypatch.setattr(predictors, "fit_arma", fit)
    return calls


def one_phase(values, start=0.0, ms="video", phase="stable", resource="cpu"):
    series = {(ms, resource): [(start + PERIOD * i, v) for i, v in enumerate(values)]}
    phases = [{"microservice": ms, "phase": phase, "start": start,
               "end": start + PERIOD * len(values)}]
    return series, phases


def rows_for(rows, **match):
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


# -- known answers ----------------------------------------------------------------------

def test_constant_series_has_zero_mse_for_every_predictor_and_window():
    # The real ARMA fit: a flat window is fitted exactly (no statsmodels call).
    series, phases = one_phase([7.5] * 120)
    rows = pa.analyse(series, phases, resources=("cpu",))
    assert {(r["predictor"], r["window"]) for r in rows} == \
        {("rm", 2), ("rm", 5), ("rm", 10), ("arma", 20), ("arma", 50), ("arma", 100)}
    for r in rows:
        assert r["mse"] == 0.0, r
        assert r["n"] == 120 - r["window"] and r["note"] is None


@pytest.mark.parametrize("slope", [0.5, -2.0])
def test_linear_ramp_rm_mse_is_exact(slope):
    # A full window of a ramp lags it by (w + 1) / 2 steps: squared error
    # slope^2 * ((w + 1) / 2)^2 at every scored point.
    n = 50
    series, phases = one_phase([10.0 + slope * i for i in range(n)], phase="increasing")
    rows = pa.analyse(series, phases, arma_windows=(), resources=("cpu",))
    assert len(rows) == 3
    for r in rows:
        w = r["window"]
        assert r["mse"] == pytest.approx(slope ** 2 * ((w + 1) / 2) ** 2, rel=1e-12)
        assert r["n"] == n - w


def test_score_all_matches_walk_forward_mse_and_the_partial_window_formula():
    slope, n = 1.5, 40
    values = [slope * i for i in range(n)]
    series, phases = one_phase(values)
    rows = pa.analyse(series, phases, rm_windows=(2, 5, 10), arma_windows=(), score="all",
                      resources=("cpu",))
    for r in rows:
        w = r["window"]
        expected = walk_forward_mse(values, lambda: RollingMean(w))  # noqa: B023 -- at once
        assert r["mse"] == pytest.approx(expected["mse"]) and r["n"] == expected["n"] == n - 1
        # k samples seen (k < w): lag (k + 1) / 2; afterwards (w + 1) / 2
        exact = sum(slope ** 2 * ((min(k, w) + 1) / 2) ** 2 for k in range(1, n)) / (n - 1)
        assert r["mse"] == pytest.approx(exact)


def test_real_arma_fit_gives_a_finite_mse():
    rng = np.random.default_rng(1)
    values = list(20 + np.cumsum(rng.normal(0, 0.3, 30)))
    series, phases = one_phase(values)
    rows = pa.analyse(series, phases, rm_windows=(), arma_windows=(8,), resources=("cpu",))
    (r,) = rows
    assert r["predictor"] == "arma" and r["n"] == 30 - 8
    assert math.isfinite(r["mse"]) and r["mse"] >= 0


# -- phases, gaps, short phases ---------------------------------------------------------

def test_phases_split_by_time_half_open():
    # Each phase is constant at its own level: any sample leaking across a boundary
    # would give a non-zero error and a different mean / count.
    levels = {"increasing": 1.0, "stable": 5.0, "decreasing": 2.0}
    series = {("ui", "mem"): []}
    phases = []
    for k, (name, level) in enumerate(levels.items()):
        start = 100.0 + 60.0 * k
        phases.append({"microservice": "ui", "phase": name, "start": start, "end": start + 60})
        series[("ui", "mem")] += [(start + 3.0 * i, level) for i in range(20)]  # t < end
    series[("ui", "mem")].append((99.0, 1000.0))      # before every phase
    series[("ui", "mem")].append((280.0, 1000.0))     # == the last end: excluded
    rows = pa.analyse(series, phases, rm_windows=(2,), arma_windows=(), resources=("mem",))
    assert [(r["phase"], r["samples"], r["mean"], r["mse"]) for r in rows] == \
        [("increasing", 20, 1.0, 0.0), ("stable", 20, 5.0, 0.0), ("decreasing", 20, 2.0, 0.0)]


def test_unsorted_series_are_ordered_by_time():
    values = [3.0 * i for i in range(30)]
    series, phases = one_phase(values)
    series[("video", "cpu")].reverse()
    (r,) = pa.analyse(series, phases, rm_windows=(2,), arma_windows=(), resources=("cpu",))
    assert r["mse"] == pytest.approx(9.0 * 1.5 ** 2)


def test_nones_are_skipped():
    slope, n = 2.0, 30
    series, phases = one_phase([slope * i for i in range(n)])
    # unreadable samples between the readable ones: skipped, not read as 0
    series[("video", "cpu")] += [(PERIOD * i + 1.0, None) for i in range(n - 1)]
    rows = pa.analyse(series, phases, rm_windows=(2, 5), arma_windows=(), resources=("cpu",))
    for r in rows:
        assert r["samples"] == n
        assert r["mse"] == pytest.approx(slope ** 2 * ((r["window"] + 1) / 2) ** 2)


def test_too_short_phase_gives_none_with_a_note_and_never_crashes(fake_fit):
    series, phases = one_phase([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    phases.append({"microservice": "nobody", "phase": "stable", "start": 0, "end": 10})
    rows = pa.analyse(series, phases, resources=("cpu",))
    assert len(rows) == 12
    short = rows_for(rows, microservice="video")
    assert [r["window"] for r in short if r["mse"] is not None] == [2, 5]
    for r in short:
        if r["window"] >= 6:
            assert r["mse"] is None and r["n"] == 0
            assert "6 samples" in r["note"] and f"needs at least {r['window'] + 1}" in r["note"]
    for r in rows_for(rows, microservice="nobody"):
        assert r["mse"] is None and r["n"] == 0 and r["samples"] == 0
        assert "0 samples" in r["note"]


def test_arma_window_smaller_than_the_order_needs_is_a_note(fake_fit):
    series, phases = one_phase([float(i % 3) for i in range(20)])
    (r,) = pa.analyse(series, phases, rm_windows=(), arma_windows=(3,), resources=("cpu",))
    assert r["mse"] is None and r["n"] == 0 and "needs a window of at least" in r["note"]


@pytest.mark.parametrize("phases, message", [
    ({"microservice": "x"}, "phases: expected a list"),
    (["x"], "phases[0]: expected an object"),
    ([{"microservice": "x", "phase": "ramp", "start": 0, "end": 1}], "phases[0].phase"),
    ([{"microservice": "", "phase": "stable", "start": 0, "end": 1}], "phases[0].microservice"),
    ([{"microservice": "x", "phase": "stable", "start": "0", "end": 1}], "phases[0].start"),
    ([{"microservice": "x", "phase": "stable", "start": 5, "end": 1}], "must be before end"),
    ([{"microservice": "x", "phase": "stable", "start": 0, "end": 1, "x": 1}],
     "phases[0].x: unknown field"),
    ([{"microservice": "x", "phase": "stable", "start": 0, "end": 1},
      {"microservice": "x", "phase": "stable", "start": 2, "end": 3}], "phases[1]: a second"),
])
def test_bad_phases_name_the_field(phases, message):
    with pytest.raises(ValueError) as err:
        pa.analyse({}, phases)
    assert message in str(err.value)


# -- loading ----------------------------------------------------------------------------

def _history(tmp_path, series):
    path = str(tmp_path / "history.sqlite")
    store = HistoryStore(path, retention_s=1e9)
    times = sorted({t for pts in series.values() for t, _ in pts})
    by = {key: dict(pts) for key, pts in series.items()}
    for t in times:
        rows = []
        for ms in sorted({k[0] for k in series}):
            if any(t in by.get((ms, r), {}) for r in pa.RESOURCES):
                rows.append({"microservice": ms,
                             **{r: by.get((ms, r), {}).get(t) for r in pa.RESOURCES}})
        store.add_microservice_samples(t, rows)
    return store, path


def test_load_history_from_sqlite_and_csv_export_agree(tmp_path):
    series, _ = make_workload(phase_len=8, gap_every=5)
    store, path = _history(tmp_path, series)
    store.export_csv(str(tmp_path / "csv"))
    store.close()
    from_db = pa.load_history(path)
    from_dir = pa.load_history(str(tmp_path / "csv"))
    from_file = pa.load_history(str(tmp_path / "csv" / "microservice_samples.csv"))
    assert from_db == from_dir == from_file
    assert set(from_db) == set(series)
    for key, pts in series.items():
        assert [t for t, _ in from_db[key]] == [t for t, _ in pts]
        for (_, a), (_, b) in zip(from_db[key], pts):
            assert (a is None and b is None) or a == pytest.approx(b)


def test_load_history_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        pa.load_history(str(tmp_path / "missing.sqlite"))
    with pytest.raises(FileNotFoundError, match="no microservice_samples.csv"):
        pa.load_history(str(tmp_path))
    bad = tmp_path / "other.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(pa.InputError, match="missing column"):
        pa.load_history(str(bad))


# -- outputs ----------------------------------------------------------------------------

def _md_tables(text):
    """{microservice: {(resource label, phase): {column: cell}}} from mse.md."""
    tables, ms, header = {}, None, None
    for line in text.splitlines():
        if line.startswith("## "):
            ms, header = line[3:].strip(), None
            tables[ms] = {}
        elif ms and line.startswith("| ") and header is None:
            header = [c.strip() for c in line.strip("|").split("|")]
        elif ms and line.startswith("| ") and header:
            cells = [c.strip() for c in line.strip("|").split("|")]
            tables[ms][(cells[0], cells[1])] = dict(zip(header, cells))
    return tables


def test_write_outputs_every_row_in_csv_md_and_a_png(tmp_path, fake_fit):
    series, phases = make_workload(phase_len=60)
    rows = pa.analyse(series, phases)
    assert len(rows) == 3 * 3 * 3 * 6
    paths = pa.write_outputs(rows, str(tmp_path / "out"))
    assert set(paths) == {"csv", "md", "png"}

    with open(paths["csv"]) as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == len(rows)
    assert list(table[0]) == list(pa.CSV_COLUMNS)

    md = open(paths["md"]).read()
    tables = _md_tables(md)
    assert set(tables) == {"video", "ui", "backend"}
    for r in rows:
        line = tables[r["microservice"]][(pa.RESOURCE_LABELS[r["resource"]], r["phase"])]
        label = f"{'RM' if r['predictor'] == 'rm' else 'ARMA'} w={r['window']}"
        assert line[label].strip("*") == pa.fmt_mse(r["mse"]), (r, line)
    # the best of each row is bold, and only the best
    groups = {}
    for r in rows:
        groups.setdefault((r["microservice"], r["resource"], r["phase"]), []).append(r)
    for (ms, res, ph), group in groups.items():
        line = tables[ms][(pa.RESOURCE_LABELS[res], ph)]
        best = min(r["mse"] for r in group if r["mse"] is not None)
        bold = {c for c, v in line.items() if v.startswith("**")}
        assert bold == {f"{'RM' if r['predictor'] == 'rm' else 'ARMA'} w={r['window']}"
                        for r in group if r["mse"] == best}, (ms, res, ph, line)
    # ARMA w=100 cannot be scored on 60 samples: "–" in the table, explained in the notes
    assert all(line["ARMA w=100"] == "–" for lines in tables.values() for line in lines.values())
    assert "arma w=100 needs at least 101" in md

    with open(paths["png"], "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(paths["png"]) > 10_000


def test_fmt_mse():
    assert pa.fmt_mse(None) == "–" and pa.fmt_mse(0.0) == "0"
    assert pa.fmt_mse(1.23456) == "1.235" and pa.fmt_mse(2e-5) == "2.00e-05"


# -- CLI --------------------------------------------------------------------------------

@pytest.fixture
def inputs(tmp_path):
    series, phases = make_workload(phase_len=15)
    store, path = _history(tmp_path, series)
    store.close()
    phases_path = tmp_path / "phases.json"
    phases_path.write_text(json.dumps({"phases": phases}))
    return path, str(phases_path)


def test_cli_analyse_writes_the_outputs(tmp_path, inputs, fake_fit, capsys):
    history, phases = inputs
    out = tmp_path / "res"
    code = pa.main(["analyse", "--history", history, "--phases", phases, "--out", str(out),
                    "--arma-windows", "8,20"])
    assert code == 0
    assert sorted(os.listdir(out)) == ["mse.csv", "mse.md", "mse.png"]
    with open(out / "mse.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 3 * 3 * 5
    assert "135 rows" in capsys.readouterr().out


@pytest.mark.parametrize("setup, message", [
    (lambda d: ("missing.sqlite", "phases.json"), "--history: "),
    (lambda d: (None, "missing.json"), "--phases: "),
    (lambda d: (None, d.joinpath("bad.json").write_text("[{") and "bad.json"),
     "not valid JSON"),
    (lambda d: (None, d.joinpath("p.json").write_text(
        '[{"microservice": "ui", "phase": "rising", "start": 0, "end": 9}]') and "p.json"),
     "phases[0].phase: expected one of increasing, stable, decreasing, got 'rising'"),
])
def test_cli_errors_exit_2_and_name_the_problem(tmp_path, inputs, setup, message):
    # as a process: a traceback would end up on its stderr, where this test can see it
    history, phases = inputs
    h, p = setup(tmp_path)
    res = run_module("experiments.profiling_accuracy", "analyse", "--history",
                     history if h is None else str(tmp_path / h),
                     "--phases", str(tmp_path / p) if p != "phases.json" else phases,
                     "--out", str(tmp_path / "o"), timeout=60)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "o").exists()


def test_cli_usage_errors_exit_2(capsys):
    for argv in ([], ["analyse"], ["live"], ["analyse", "--history", "h", "--phases", "p",
                                            "--out", "o", "--rm-windows", "two"]):
        with pytest.raises(SystemExit) as exc:
            pa.main(argv)
        assert exc.value.code == 2


def test_cli_module_exit_code_for_a_missing_file(tmp_path):
    res = run_module("experiments.profiling_accuracy", "analyse", "--history",
                     str(tmp_path / "nope.sqlite"), "--phases", str(tmp_path / "p.json"),
                     "--out", str(tmp_path / "o"), timeout=60)
    assert res.returncode == 2
    assert "--history:" in res.stderr and "no such file" in res.stderr
    assert "Traceback" not in res.stderr
