"""experiments/significance.py: means with intervals and paired tests of the comparison."""
import random

import numpy as np
import pytest
from scipy import stats as sps

from experiments import significance as sig


def result(cpu, ui_rt=1000.0, video=1500.0):
    return {"table2": {"cpu": {"stdev": cpu}, "net": {"stdev": 5.0},
                       "energy": {"stdev": 3.0}},
            "table3": {"ui-light": {"average": ui_rt / 4, "stdev": 10.0},
                       "ui-medium": {"average": ui_rt, "stdev": ui_rt / 2},
                       "backend-medium": {"average": 10000.0, "stdev": 5.0},
                       "backend-heavy": {"average": 30000.0, "stdev": 5.0},
                       "video": {"average": video, "stdev": 1.0}}}


def test_mean_ci_is_students_t():
    m = sig.mean_ci([10.0, 12.0, 14.0])
    assert m["mean"] == 12.0
    assert m["ci"] == pytest.approx(sps.t.ppf(0.975, 2) * 2.0 / 3 ** 0.5)
    assert sig.mean_ci([5.0]) == {"n": 1, "mean": 5.0, "ci": None}
    assert sig.mean_ci([])["mean"] is None


def test_paired_test_matches_scipy_and_calls_the_direction():
    malb, srr = [7.0, 8.0, 7.5], [11.0, 12.5, 11.8]
    d = sig.paired(malb, srr, "lower")
    assert d["p"] == pytest.approx(sps.ttest_rel(malb, srr).pvalue)
    assert d["diff"] == pytest.approx(-4.2666, abs=1e-3)
    assert d["ratio"] == pytest.approx(d["diff"] / (35.3 / 3))
    assert d["verdict"] == "significantly better"
    assert sig.paired(srr, malb, "lower")["verdict"] == "significantly worse"
    assert sig.paired(srr, malb, "higher")["verdict"] == "significantly better"
    # noise: not significant
    assert sig.paired([10.0, 12.0, 9.0], [11.0, 10.0, 10.5])["verdict"] == "not significant"
    # one run: nothing tested
    one = sig.paired([7.0], [11.0])
    assert one["p"] is None and one["verdict"] == "not tested (one run)"
    with pytest.raises(ValueError):
        sig.paired([1.0, 2.0], [1.0])


def test_compare_pairs_runs_and_renders_every_headline():
    runs = {"srr": [result(12.0), result(13.0), result(11.0)],
            "ln": [result(14.0), result(15.0), result(13.5)],
            "malb": [result(7.0, video=1600.0), result(8.0, video=1610.0),
                     result(7.2, video=1590.0)]}
    c = sig.compare(runs)
    assert set(c["cpu_stdev"]["vs"]) == {"srr", "ln"}
    assert c["cpu_stdev"]["vs"]["srr"]["verdict"] == "significantly better"
    assert c["video_tp"]["vs"]["ln"]["verdict"] == "significantly better"
    assert c["ui-medium_rt"]["vs"]["srr"]["verdict"] == "not significant"   # identical: p = 1
    md = sig.markdown(c, names={"srr": "SRR", "ln": "LN", "malb": "MALB"})
    assert "| CPU STDEV across servers (%) | 12.0 ± " in md
    assert "| CPU STDEV across servers (%) | SRR |" in md and "significantly better" in md
    # a figure one policy's run lacks is compared over the other runs, every policy alike,
    # and says which run it left out; never filled in
    runs["ln"][0]["table3"].pop("video")
    video = sig.compare(runs)["video_tp"]
    assert video["runs_left_out"] == [1]
    assert video["policies"]["malb"]["mean"] == pytest.approx((1610.0 + 1590.0) / 2)
    assert video["vs"]["ln"]["n"] == 2
    assert "(run 1 left out: not measured in all)" in sig.markdown(sig.compare(runs))
    # with fewer than two runs left it is left out
    runs["srr"][1]["table3"].pop("video")
    assert "video_tp" not in sig.compare(runs)


def test_malb_is_tested_against_every_other_policy_on_every_class_it_had():
    def run(cpu, rt):
        return {"table2": {"cpu": {"stdev": cpu}, "net": {"stdev": 1.0},
                           "energy": {"stdev": 1.0}},
                "table3": {"svc01": {"metric": "RT", "average": rt, "stdev": rt / 2,
                                     "rt_p99": 3 * rt},
                           "clip": {"metric": "TP", "average": 100.0, "stdev": 1.0}}}
    runs = {"srr": [run(10, 100), run(11, 110)], "ln": [run(9, 90), run(9.5, 95)],
            "malb-paper": [run(8, 80), run(8.2, 85)], "malb": [run(6, 70), run(6.1, 72)]}
    c = sig.compare(runs)
    assert set(c["cpu_stdev"]["vs"]) == {"srr", "ln", "malb-paper"}
    assert {"svc01_rt", "svc01_rt_stdev", "svc01_rt_p99", "clip_tp"} <= set(c)
    assert c["svc01_rt_p99"]["better"] == "lower" and c["clip_tp"]["better"] == "higher"
    assert list(c) == ["cpu_stdev", "net_stdev", "energy_stdev", "clip_tp", "svc01_rt",
                       "svc01_rt_stdev", "svc01_rt_p99"]     # no drain figure in these runs
    # the paper's classes keep their keys, in the paper's order
    keys = [k for k, _, _ in sig.HEADLINES]
    assert keys[:4] == ["cpu_stdev", "cpu_stdev_with_drain", "net_stdev", "energy_stdev"]
    assert keys.index("ui-light_rt") < keys.index("backend-heavy_rt") < keys.index("video_tp")


def _runs(scale_by_run, factor=1.0, n=400, seed=0):
    """Runs of exponential response times, each run's mean its own (a schedule's load),
    times factor."""
    rng = random.Random(seed)
    return [[factor * rng.expovariate(1 / s) for _ in range(n)] for s in scale_by_run]


def test_pooled_tails_are_the_percentiles_of_every_request_of_the_runs():
    runs = {"malb": _runs([100, 120, 140]), "lc": _runs([100, 120, 140], seed=1)}
    tails = sig.pooled_tails(runs)
    everything = [x for run in runs["lc"] for x in run]
    assert tails["p99"]["policies"]["lc"]["value"] == pytest.approx(
        float(np.percentile(everything, 99)))
    v = tails["p95"]["policies"]["malb"]
    assert v["low"] <= v["value"] <= v["high"]


def test_pooled_tails_resample_the_same_runs_for_both_policies():
    # runs differ a lot (schedules), ours is 10 % faster in every one: paired, it shows,
    # though each policy's own interval spans the other's value
    scales = [60, 100, 160, 250, 400]
    runs = {"malb": _runs(scales, 0.9, seed=2), "lc": _runs(scales, seed=2)}
    tails = sig.pooled_tails(runs)
    p99 = tails["p99"]
    assert p99["vs"]["lc"]["ratio"] == pytest.approx(-0.1, abs=1e-9)
    assert p99["vs"]["lc"]["verdict"] == "significantly better"
    assert p99["policies"]["lc"]["low"] < p99["policies"]["malb"]["value"]
    # the same requests for both: nothing to tell apart
    same = sig.pooled_tails({"malb": runs["lc"], "lc": runs["lc"]})
    assert same["p95"]["vs"]["lc"]["ratio"] == 0 and \
        same["p95"]["vs"]["lc"]["verdict"] == "not significant"


def test_pooled_tails_give_no_interval_below_three_runs():
    tails = sig.pooled_tails({"malb": _runs([100, 100]), "lc": _runs([100, 100], seed=1)})
    assert tails["p99"]["policies"]["lc"]["low"] is None
    assert tails["p99"]["vs"]["lc"]["verdict"] == "not tested (too few runs)"
    md = sig.pooled_tails_markdown(tails)
    assert "not tested (too few runs)" in md and md.count("\n") == 6


def test_each_runs_balancing_cpu_per_1000_requests_is_a_headline_figure():
    result = {"t0": 100.0, "load_end": 280.0, "requests_planned": 4000,
              "balancer_cores": {"controller": 0.05, "profiler": 0.01, "haproxy": 0.06,
                                 "switch": 0.40}}
    # 0.52 cores over 180 s for 4,000 requests
    assert sig.headline_figures(result)["balancing_cpu"] == pytest.approx(
        1000 * 0.52 * 180 / 4000)
    assert sig.headline_figures({"requests_planned": 4000})["balancing_cpu"] is None
    assert "balancing_cpu" in [k for k, _label, _better in sig.SERVER_HEADLINES]
