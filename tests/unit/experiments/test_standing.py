"""The docs' generated results tables (experiments/standing.py): current with data/, and
rendered from the figures they name."""
import pytest

from experiments import standing


def test_the_results_tables_in_the_docs_are_current():
    assert standing.main(["--check"]) == 0, "run python -m experiments.standing"


def _suite(**policies):
    """A one-scenario suite.json: policy -> CPU STDEV mean; ours against each."""
    stats = {p: {"n": 5, "mean": m, "ci": 1.0} for p, m in policies.items()}
    vs = {p: {"n": 5, "diff": policies["malb"] - m, "ratio": policies["malb"] / m - 1,
              "ci": 0.5, "p": 0.01, "p_holm": 0.2 if p == "srr" else 0.01,
              "verdict": "significantly better"} for p, m in policies.items() if p != "malb"}
    worse = {"n": 5, "diff": 30.0, "ratio": 0.25, "ci": 9.0, "p": 0.01,
             "verdict": "significantly worse"}
    return {"scenarios": {"paper": {
        "cpu_stdev": {"policies": stats, "vs": vs}, "vs": vs, "best_practical": "lc",
        "seeds": "schedule seeds 1-5 (evaluation range)", "commit": "abc1234",
        "classes": {"ui_rt_p99": {"label": "ui RT p99 (ms)",
                                  "vs": {"haproxy-leastconn": worse, "lc": {}}}}}}}


def test_the_standing_table_marks_a_p_value_that_holm_does_not_hold():
    # what the clients saw is against HAProxy leastconn
    md = standing.standing_table(_suite(srr=10.0, lc=8.0, malb=6.0))
    row = next(line for line in md.splitlines() if line.startswith("| paper"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "6.0 ± 1.0"
    assert cells[2] == "-40.0 % (-4.0 ± 0.5)" and cells[3] == "0.010† (0.200)"
    assert cells[4] == "least connections 8.0 ± 1.0" and cells[6] == "0.010 (0.010)"
    assert cells[7] == "worse: ui p99 +25 %"
    assert "code at abc1234" in md and "Schedule seeds 1-5" in md


def test_the_cpu_table_bolds_the_lowest_and_lists_the_policies_left_out():
    md = standing.cpu_table(_suite(srr=10.0, lc=5.0, malb=6.0), ("srr", "malb"))
    assert "| paper | 10.0 ± 1.0 | 6.0 ± 1.0 |" in md     # lc, the lowest, not a column
    assert "Also ran: paper: least connections 5.0 ± 1.0." in md
    md = standing.cpu_table(_suite(srr=10.0, lc=5.0, malb=6.0))
    assert "| **5.0 ± 1.0** |" in md


def test_a_block_is_spliced_between_its_markers_and_nothing_else_moves():
    begin, end = standing.markers("x", "eval-9")
    doc = f"head\n{begin}\nold\n{end}\ntail\n"
    assert standing.splice(doc, begin, end, "new\n") == f"head\n{begin}\nnew\n{end}\ntail\n"
    with pytest.raises(ValueError):
        standing.splice("no markers", begin, end, "new\n")
    with pytest.raises(ValueError):
        standing.splice(f"{end}\n{begin}\n", begin, end, "new\n")
