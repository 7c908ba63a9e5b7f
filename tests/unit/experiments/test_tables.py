"""The parts' generated results tables (experiments/tables/): each figure from the runs it
names, and every block's markers present in its page."""
import os

import pytest

from experiments import standing
from experiments.tables import BLOCKS, Block, slo
from tests.conftest import ROOT


def _run(energy, per_request, within, p95, mhz, **extra):
    return {"energy_j": energy, "energy_per_request_mj": per_request,
            "client_stable_within_slo_share": within, "stable_within_slo_share": 1.0,
            "p95_ms": p95, "mean_freq_mhz": mhz, "freq_changes_per_min": 0.0, **extra}


def _summary(policies):
    return {"profiles": {"step": policies}, "slo": {"target_ms": 90.0},
            "commit": "abc1234", "when": "2026-12-01T10:00:00"}


def test_the_one_service_table_is_each_policy_over_its_runs_against_the_maximum():
    md = slo.one_service_table(_summary({
        "max": [_run(100.0, 60.0, 1.0, 40.0, 2100), _run(200.0, 62.0, 0.9, 44.0, 2100)],
        "slo": [_run(50.0, 30.0, 0.5, 140.0, 1000), _run(150.0, 32.0, 0.7, 160.0, 1000)]}))
    rows = {line.split(" | ")[0].strip("| "): line for line in md.splitlines()}
    # energy against the maximum in the same run: -50 % and -25 %
    assert rows["SLO loop, service SLI (`slo`)"].startswith(
        "| SLO loop, service SLI (`slo`) | -37.5 ± ")
    assert "| 31.0 ± " in rows["SLO loop, service SLI (`slo`)"]
    assert "| 60.0 ± " in rows["SLO loop, service SLI (`slo`)"]         # within, in %
    assert "code at abc1234 (2026-12-01)" in md


def test_the_call_graph_table_gives_each_run_and_the_loops_frequencies():
    loops = {"front@http://a": {"mean_freq_mhz": 2000}, "data@http://b": {"mean_freq_mhz": 1500}}
    md = slo.call_graph_table(_summary({
        "max": [_run(100.0, 700.0, 1.0, 100.0, 2100, loops=loops)],
        "slo-split": [_run(80.0, 600.0, 0.889, 170.0, 1800, loops=loops)]}))
    row = next(line for line in md.splitlines() if line.startswith("| split budgets"))
    assert "| -20.0 % |" in row and "| 88.9 |" in row and "| 2,000 / 1,500 |" in row


def test_every_block_has_its_markers_in_its_page():
    for block in BLOCKS:
        begin, end = standing.markers(block.name, block.sources)
        with open(os.path.join(ROOT, block.doc), encoding="utf-8") as fh:
            text = fh.read()
        assert text.count(begin) == 1 and text.count(end) == 1, (block.doc, block.name)


def test_a_run_without_a_figure_is_a_dash_and_unpaired_runs_are_refused():
    loops = {"front@a": {"mean_freq_mhz": None}, "data@b": {"mean_freq_mhz": 1500}}
    gap = _run(80.0, 600.0, None, 170.0, None, loops=loops)
    md = slo.call_graph_table(_summary({"max": [_run(100.0, 700.0, 1.0, 100.0, 2100)],
                                        "slo-split": [gap]}))
    row = next(line for line in md.splitlines() if line.startswith("| split budgets"))
    assert "| – | 170.0 | – / 1,500 |" in row
    with pytest.raises(ValueError, match="runs per policy"):
        slo.one_service_table(_summary({"max": [_run(1, 1, 1, 1, 1)],
                                        "slo": [_run(1, 1, 1, 1, 1)] * 2}))


def test_a_block_that_cannot_render_is_named_with_its_data(monkeypatch):
    broken = Block("docs/slo.md", "x", ("slo/eval-one/summary.json",),
                   lambda summary: summary["no such key"])
    monkeypatch.setattr(standing, "BLOCKS", (broken,))
    with pytest.raises(ValueError, match=r"docs/slo.md \(x\) from data/slo/eval-one/"
                                         r"summary.json: KeyError"):
        standing.render({"docs/slo.md": ""})
