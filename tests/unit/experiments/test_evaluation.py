"""Scenario 2 statistics on small fixtures with hand-computed answers."""
import pytest

from experiments import report
from experiments.evaluation import (energy_per_server, fig3, in_periods, jain, mean_fig3,
                                    mean_of_runs, percentile, server_power, table2, table3,
                                    worst_case)


def test_power_model_by_hand():
    # idle: every component at 40 % of busy: 0.4 x (160+36+25+12+25+10) = 107.2 W
    assert server_power(0, 0, 0) == pytest.approx(107.2)
    # CPU busy: 160 W, others at baseline 0.4 x 108 = 43.2
    assert server_power(100, 0, 0) == pytest.approx(203.2)
    # CPU at 50 %: 2u - u^1.4 = 1 - 0.5^1.4 = 0.6210709; 160 x (0.4 + 0.6 x 0.6210709)
    assert server_power(50, 0, 0) == pytest.approx(160 * (0.4 + 0.6 * 0.6210709) + 43.2)
    # memory and network are linear: +0.6 x 36 x 0.5 and +0.6 x 25 x 1
    assert server_power(0, 50, 100) - server_power(0, 0, 0) == pytest.approx(10.8 + 15.0)
    assert server_power(150, -5, 0) == server_power(100, 0, 0)      # clipped to [0, 100] %


def test_table2_averages_per_timestamp_spread():
    samples = {1.0: {"a": {"cpu": 10, "mem": 5, "net": 0}, "b": {"cpu": 30, "mem": 5, "net": 4}},
               2.0: {"a": {"cpu": 20, "mem": 5, "net": 2}, "b": {"cpu": 20, "mem": 7, "net": None}}}
    t = table2(samples)
    assert t["cpu"] == {"stdev": 5.0, "range": 10.0, "timestamps": 2}   # (10+0)/2, (20+0)/2
    assert t["mem"]["stdev"] == pytest.approx(0.5) and t["mem"]["range"] == pytest.approx(1.0)
    assert t["net"] == {"stdev": 2.0, "range": 4.0, "timestamps": 1}    # missing: skipped
    e = abs(server_power(10, 5, 0) - server_power(30, 5, 4))
    assert t["energy"]["range"] == pytest.approx(e) and t["energy"]["timestamps"] == 1


def test_worst_case_and_fig3():
    assert worst_case(list(range(1, 101))) == pytest.approx(99.0)      # top 3 of 100
    assert worst_case([5.0]) == 5.0 and worst_case([]) is None
    samples = {float(t): {"a": {"cpu": 10.0, "net": 1.0}, "b": {"cpu": 50.0 + t, "net": 2.0}}
               for t in range(100)}
    f = fig3(samples)
    assert f["cpu"]["most_loaded_server"] == "b"
    assert f["cpu"]["most_loaded_worst_case"] == pytest.approx(148.0)  # 149, 148, 147
    assert f["cpu"]["worst_case"] == pytest.approx((148.0 + 10.0) / 2)
    assert f["cpu"]["average"] == pytest.approx((10 * 100 + sum(50 + t for t in range(100))) / 200)
    assert f["cpu"]["above_threshold"] and f["threshold"] == 70.0
    assert f["cpu"]["per_server_average"] == pytest.approx({"a": 10.0, "b": 99.5})


def test_jain():
    assert jain([3, 3, 3]) == pytest.approx(1.0)
    assert jain([1, 0]) == pytest.approx(0.5)
    assert jain([1, 2, 3]) == pytest.approx(36 / (3 * 14))
    assert jain([]) is None


def test_table3_counts_every_request_and_uses_the_right_metric():
    rows = [{"class": "ui-light", "latency_s": "0.2", "error": ""},
            {"class": "ui-light", "latency_s": "0.4", "error": ""},
            {"class": "ui-light", "latency_s": "", "error": "timeout"},
            {"class": "video", "latency_s": "10", "throughput_kB_s": "100", "error": ""},
            {"class": "video", "latency_s": "10", "throughput_kB_s": "300", "error": ""}]
    t = table3(rows)
    ui = t["ui-light"]
    assert (ui["requests"], ui["completed"], ui["failed"]) == (3, 2, 1)
    assert ui["metric"] == "RT" and ui["average"] == pytest.approx(300.0)
    assert ui["stdev"] == pytest.approx(141.4213562)
    assert ui["jain"] == pytest.approx(jain([5.0, 2.5]))
    v = t["video"]
    assert v["metric"] == "TP" and v["average"] == 200.0 and v["jain"] == pytest.approx(0.8)


def test_energy_per_server_and_mean_of_runs():
    samples = {0.0: {"a": {"cpu": 0, "mem": 0, "net": 0}}, 3.0: {"a": {"cpu": 0, "mem": 0,
                                                                      "net": 0}}}
    e = energy_per_server(samples, period_s=3.0)
    assert e["a"]["mean_w"] == pytest.approx(107.2)
    assert e["a"]["energy_wh"] == pytest.approx(2 * 107.2 * 3 / 3600)
    runs = [{"x": 1.0, "y": {"z": 2}, "s": "srv1", "n": None},
            {"x": 3.0, "y": {"z": 4}, "s": "srv2", "n": None}]
    assert mean_of_runs(runs) == {"x": 2.0, "y": {"z": 3.0}, "s": "srv1", "n": None}


def test_report_tables_have_every_row_and_the_papers_beside(tmp_path):
    samples = {float(t): {s: {"cpu": 10.0 * i + t % 5, "mem": 5.0, "net": 1.0 * i}
                          for i, s in enumerate(["srv1", "srv2"])} for t in range(40)}
    classes = ["ui-light", "ui-medium", "backend-medium", "backend-heavy", "video"]
    rows = [{"class": c, "latency_s": "1.0", "throughput_kB_s": "100", "error": ""}
            for c in classes for _ in range(3)]
    res = {p: {"table2": table2(samples), "fig3": fig3(samples), "table3": table3(rows)}
           for p in ("srr", "ln", "malb")}
    t2 = report.table2_markdown(res)
    assert t2.count("| STDEV |") == 1 and "| paper's Range |" in t2
    t3 = report.table3_markdown(res)
    for c in classes:
        assert f"| {c} |" in t3 and f"| paper's {c} |" in t3
    assert "| 3 / 3 / 3 | RT (ms) |" in t3
    paths = report.write_csvs(res, str(tmp_path))
    assert all(open(p).read().count("\n") > 1 for p in paths)
    report.plot_fig3(res, str(tmp_path / "fig3.png"))
    assert (tmp_path / "fig3.png").stat().st_size > 10_000
    assert "<svg" in (tmp_path / "fig3.svg").read_text()[:500]
    # a row per policy: ten policies get a taller figure, not narrower bars
    ten = {f"p{k}": res["malb"] for k in range(10)}
    report.plot_fig3(ten, str(tmp_path / "ten.png"))
    from PIL import Image
    small, tall = Image.open(tmp_path / "fig3.png").size, Image.open(tmp_path / "ten.png").size
    assert small[0] == tall[0] and tall[1] > 2 * small[1]
    # each server's average CPU, per policy; none when no policy recorded it
    assert "| SRR | 2.0 | 12.0 |" in report.per_server_markdown(res, "means")
    assert report.per_server_markdown({"srr": {"fig3": {"cpu": {"average": 1.0}}}},
                                      "means") == ""


def test_table2_leaves_out_timestamps_without_every_expected_server():
    full = {"a": {"cpu": 10, "mem": 5, "net": 0}, "b": {"cpu": 30, "mem": 5, "net": 0},
            "c": {"cpu": 20, "mem": 5, "net": 0}}
    samples = {1.0: full, 2.0: {k: full[k] for k in ("a", "b")}}     # c stale at t=2
    t = table2(samples, servers=["a", "b", "c"])
    assert t["cpu"]["timestamps"] == 1 and t["cpu"]["range"] == 20.0
    assert table2(samples)["cpu"]["timestamps"] == 2                  # without the list


def test_fig3_over_runs_judges_the_averaged_worst_case():
    def run(top, worst):
        return {"cpu": {"average": 50.0, "worst_case": worst, "most_loaded_server": top,
                        "most_loaded_average": 60.0, "most_loaded_worst_case": worst,
                        "above_threshold": worst > 70.0},
                "net": None, "threshold": 70.0}
    merged = mean_fig3([run("srv1", 90.0), run("srv2", 40.0)])     # mean 65: below
    with_servers = [run("srv1", 90.0), run("srv1", 80.0)]
    for f, v in zip(with_servers, (10.0, 30.0)):
        f["cpu"]["per_server_average"] = {"srv1": v, "srv2": 2 * v}
    assert mean_fig3(with_servers)["cpu"]["per_server_average"] == {"srv1": 20.0, "srv2": 40.0}
    assert merged["cpu"]["most_loaded_worst_case"] == 65.0
    assert merged["cpu"]["above_threshold"] is False
    assert merged["cpu"]["most_loaded_server"] is None               # runs disagree
    assert mean_fig3([run("srv1", 90.0)])["cpu"]["most_loaded_server"] == "srv1"


def test_in_periods_averages_each_servers_samples_over_the_metric_period():
    # 1 s samples, read over 3 s periods; srv2 misses the 4th sample, and one figure
    # is missing at the 5th
    samples = {100.0: {"a": {"cpu": 10, "mem": 1, "net": 0}, "b": {"cpu": 40, "mem": 1, "net": 0}},
               101.0: {"a": {"cpu": 20, "mem": 1, "net": 0}, "b": {"cpu": 40, "mem": 1, "net": 0}},
               102.0: {"a": {"cpu": 30, "mem": 4, "net": 3}, "b": {"cpu": 40, "mem": 1, "net": 0}},
               103.0: {"a": {"cpu": 50, "mem": 2, "net": 0}},
               104.0: {"a": {"cpu": 70, "mem": 2, "net": None},
                       "b": {"cpu": 0, "mem": 1, "net": 0}}}
    got = in_periods(samples, 1.0, 3.0)
    assert sorted(got) == [102.0, 104.0]          # keyed by each period's last sample
    assert got[102.0]["a"] == {"cpu": 20, "mem": 2, "net": 1}
    assert got[102.0]["b"] == {"cpu": 40, "mem": 1, "net": 0}
    assert got[104.0]["a"] == {"cpu": 60, "mem": 2, "net": None}   # not a mean of part
    assert got[104.0]["b"] == {"cpu": 0, "mem": 1, "net": 0}
    # the paper's period: samples 3 s apart come back as they are
    assert in_periods(samples, 3.0, 3.0) is samples
    assert in_periods({}, 1.0, 3.0) == {}


def test_table3_gives_every_class_its_median_and_p99_response_time():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5              # numpy's linear
    assert percentile(list(map(float, range(101))), 99) == 99.0
    rows = [{"class": "a", "latency_s": str(k / 1000), "throughput_kB_s": "", "error": ""}
            for k in range(1, 101)]
    rows += [{"class": "a", "latency_s": "9", "error": "timeout"},
             {"class": "video", "latency_s": "20", "throughput_kB_s": "1500", "error": ""}]
    t = table3(rows)
    assert t["a"]["rt_p50"] == pytest.approx(50.5) and t["a"]["rt_p99"] == pytest.approx(99.01)
    assert t["a"]["failed"] == 1 and t["a"]["requests"] == 101     # the failure is not timed
    assert t["video"]["rt_p50"] == 20000.0 and t["video"]["metric"] == "TP"


def test_the_papers_malb_figures_stand_beside_its_rule_and_ours_is_named_so():
    samples = {float(t): {s: {"cpu": 10.0 + t, "mem": 5.0, "net": 1.0} for s in ("a", "b")}
               for t in range(5)}
    rows = [{"class": "ui-light", "latency_s": "0.5", "error": ""}]
    res = {p: {"table2": table2(samples), "fig3": fig3(samples), "table3": table3(rows)}
           for p in ("srr", "malb-paper", "malb")}
    t2 = report.table2_markdown(res)
    assert "MALB (paper's rule) CPU" in t2 and "MALB (ours) CPU" in t2
    paper = next(line for line in t2.splitlines() if line.startswith("| paper's STDEV"))
    cells = [c.strip() for c in paper.split("|")[2:-1]]
    assert cells[:4] == ["17.3", "2.1", "9.3", "27.1"]                   # SRR
    assert cells[4:8] == ["11.2", "1.9", "10.1", "18.3"]                 # the paper's rule
    assert cells[8:] == ["–"] * 4                                        # ours: none
    t3 = report.table3_markdown(res)
    line = next(x for x in t3.splitlines() if x.startswith("| paper's ui-light"))
    assert line.split("|")[4:7] == [" 448 ", " 429 ", " – "]
    assert "MALB (ours) RT p99" in t3 and "| 500 |" in t3
    assert "| paper's" not in report.table2_markdown(res, with_paper=False)
    assert "| paper's" not in report.table3_markdown(res, with_paper=False)
