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
    begin, end = standing.markers("x", ("eval-9/suite.json",))
    doc = f"head\n{begin}\nold\n{end}\ntail\n"
    assert standing.splice(doc, begin, end, "new\n") == f"head\n{begin}\nnew\n{end}\ntail\n"
    with pytest.raises(ValueError):
        standing.splice("no markers", begin, end, "new\n")
    with pytest.raises(ValueError):
        standing.splice(f"{end}\n{begin}\n", begin, end, "new\n")


def _entry(label, means, diff, ci, p, verdict=None):
    """A suite.json figure: each policy's mean, ours against HAProxy leastconn."""
    return {"label": label, "policies": {k: {"n": 5, "mean": m, "ci": 1.0}
                                         for k, m in means.items()},
            "vs": {"haproxy-leastconn": {"n": 5, "diff": diff, "ratio": diff / means[
                "haproxy-leastconn"], "ci": ci, "p": p, "verdict": verdict or "x"}}}


def test_the_aims_table_judges_each_aim_by_its_registered_rule():
    cpu = {p: {"n": 5, "mean": m, "ci": 1.0} for p, m in (("haproxy-leastconn", 9.0),
                                                              ("malb", 6.0))}
    # significantly below the best practical baseline's, Holm-corrected: met
    vs = {"haproxy-leastconn": {"n": 5, "diff": -3.0, "ratio": -1 / 3, "ci": 1.0, "p": 0.004,
                                "p_holm": 0.012, "verdict": "significantly better"}}
    cell = {"cpu_stdev": {"policies": cpu, "vs": vs}, "vs": vs,
            "best_practical": "haproxy-leastconn", "commit": "abc1234",
            "seeds": "schedule seeds 1016-1020 (evaluation range)"}
    both = {"haproxy-leastconn": 100.0, "malb": 95.0}
    cell["classes"] = {
        # the interval's upper end, +9, is within a tenth of 100: met
        "all_rt_p50": _entry("all RT p50 (ms)", both, -5.0, 14.0, 0.4),
        # +11 is not, though the mean difference is below zero
        "all_rt_p99": _entry("all RT p99 (ms)", both, -5.0, 16.0, 0.5),
        # lower but not significantly: not met
        "balancing_cpu": _entry("balancing CPU", {"haproxy-leastconn": 20.0, "malb": 19.0},
                                -1.0, 2.0, 0.2)}
    md = standing.aims_table({"scenarios": {"hotel-dataplane": cell}})
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines()
            if line.startswith("| hotel-dataplane")]
    assert [r[3] for r in rows] == ["**met**", "not met", "**met**", "not met"]
    assert "at most +10 allowed" in rows[0][2] and "(-19 to +9)" in rows[0][2]
    assert "Still to run: social-dataplane, paper" in md


def test_the_p95_aim_fails_on_one_class_significantly_worse():
    suite = _suite(srr=10.0, lc=8.0, malb=6.0)
    classes = suite["scenarios"]["paper"]["classes"]
    classes["ui_rt_p95"] = _entry("ui RT p95 (ms)", {"haproxy-leastconn": 1.0, "malb": 1.0},
                                  0.0, 0.1, 0.9)
    classes["ui_rt_p95"]["vs"]["lc"] = {"n": 5, "diff": 9.0, "ratio": 0.3, "ci": 2.0,
                                        "p": 0.01, "verdict": "significantly worse"}
    classes["all_rt_p95"] = {"label": "all", "vs": {"lc": {"p": 0.01, "ratio": 0.1,
                                                           "verdict": "significantly worse"}}}
    rows = [line for line in standing.aims_table(suite).splitlines()
            if line.startswith("| paper")]
    assert "baseline's (least connections)" in rows[0] and rows[0].endswith("| **met** |")
    assert "worse: ui +30 %" in rows[1] and rows[1].endswith("| not met |")


def test_what_clients_saw_names_end_to_end_first_and_counts_the_rest():
    def figure(label, ratio, verdict):
        return {"label": label, "vs": {"haproxy-leastconn": {
            "n": 5, "ratio": ratio, "verdict": f"significantly {verdict}"}}}
    classes = {f"c{k}": figure(f"class{k} RT p95 (ms)", -0.1 * k, "better") for k in range(1, 6)}
    classes |= {"all": figure("all requests RT p99 (ms)", -0.5, "better"),
                "cpu": figure("balancing CPU s per 1,000 requests", -0.2, "better"),
                "w": figure("ui mean throughput (Mbit/s)", -0.04, "worse")}
    text = standing._client_text({"classes": classes}, "haproxy-leastconn")
    assert text == ("worse: ui throughput -4 %; better: all requests p99 -50 %, balancing "
                    "CPU -20 %, class1 p95 -10 %, class2 p95 -20 % and 3 more")
    assert standing._client_text({"classes": {}}, "haproxy-leastconn") == "level"
