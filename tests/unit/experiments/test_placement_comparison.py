"""The placement comparison's pure parts (experiments/placement_comparison.py): where the
clients' requests enter, the plans every method makes from one graph, the runs' order,
and the statistics over runs; the testbed part runs in `make run`-sized experiments."""
import argparse

import pytest

from common.config import load_config
from experiments import placement_comparison as pc
from placement.apps import expected_graph


def test_the_entries_take_the_benchmark_mix_and_an_app_without_one_is_equal(tmp_path):
    shares = pc.entry_shares(load_config("configs/hotelreservation.yaml"),
                             "configs/hotelreservation.yaml")
    assert shares == pytest.approx({"hrsearch": 0.6, "hrrecommend": 0.39, "hrlogin": 0.005,
                                    "hrreserve": 0.005})
    assert pc.entry_shares(load_config("configs/bookinfo.yaml"),
                           "configs/bookinfo.yaml") == {"productpage": 1.0}
    zero = tmp_path / "zero.yaml"
    zero.write_text("# benchmark-mix: productpage=0\n" + open("configs/bookinfo.yaml").read())
    with pytest.raises(ValueError, match="no entry service with a share above 0"):
        pc.entry_shares(load_config("configs/bookinfo.yaml"), str(zero))


def test_every_method_plans_from_one_graph_and_exact_is_not_measured_twice():
    cfg = load_config("configs/bookinfo.yaml")
    graph = expected_graph(cfg, {"productpage": 10.0})
    layout = {m.name: [i.server for i in cfg.instances if i.microservice == m.name]
              for m in cfg.microservices}
    made = pc.plans(cfg, graph, layout, seed=3, exact_time_limit_s=20)
    assert set(made) == set(pc.METHODS) | {"_current"}
    for m in pc.METHODS:
        assert made[m]["layout"] is not None and made[m]["cost"] >= 0
    assert made["exact"]["optimal"]
    # latency-near measures the latency plan under the joint rule's balancing
    assert made["latency-near"] == made["latency"]
    assert pc.BALANCING == {"latency-near": "malb-near"}
    # bookinfo's optimum is what ours finds (HiGHS may pick a layout of the same cost)
    assert made["exact"]["cost"] == pytest.approx(made["ours"]["cost"])
    same = made["exact"]["layout"] == made["ours"]["layout"]
    assert ("the same layout as ours" in made["exact"].get("skipped", "")) == same


def test_an_exact_plan_that_is_ours_or_none_at_all_is_not_measured(monkeypatch):
    cfg = load_config("configs/bookinfo.yaml")
    graph = expected_graph(cfg, {"productpage": 10.0})
    layout = {m.name: [i.server for i in cfg.instances if i.microservice == m.name]
              for m in cfg.microservices}
    monkeypatch.setattr(pc, "exact", lambda problem, _t: pc.plan(problem, near="s1"))
    made = pc.plans(cfg, graph, layout, seed=3, methods=["ours", "exact"])
    assert made["exact"]["skipped"] == "the same layout as ours (measured once, as ours)"
    assert made["exact"]["same_as"] == "ours"

    def nothing(_problem, _t):
        raise pc.PlacementError("exact: no placement found in time")
    monkeypatch.setattr(pc, "exact", nothing)
    made = pc.plans(cfg, graph, layout, seed=3, methods=["ours", "exact"])
    assert made["exact"] == {"layout": None, "skipped": "exact: no placement found in time"}
    assert made["ours"]["layout"] is not None


def result(trunk, p95, failed=0):
    return {"trunk_mbit_s": trunk, "end_to_end": {"p50_ms": p95 / 2, "p95_ms": p95,
                                                  "p99_ms": 2 * p95, "failed": failed}}


def test_ours_is_tested_against_each_method_paired_by_run():
    runs = [{"results": {"spread": result(8.0 + k, 200.0 + 10 * k),
                         "ours": result(1.0 + 0.1 * k, 100.0 + 5 * k),
                         "greedy": result(1.5, 110.0)}} for k in range(5)]
    runs[2]["results"].pop("greedy")                 # not measured in one run
    s = pc.statistics(runs, ["spread", "greedy", "ours", "exact"])
    assert s["trunk_mbit_s"]["methods"]["spread"]["mean"] == pytest.approx(10.0)
    assert s["trunk_mbit_s"]["methods"]["exact"]["mean"] is None
    vs = s["trunk_mbit_s"]["vs"]
    assert vs["spread"]["verdict"] == "significantly better" and vs["spread"]["n"] == 5
    assert vs["greedy"]["n"] == 4 and "exact" not in vs
    assert s["p95_ms"]["vs"]["spread"]["ratio"] == pytest.approx(-0.5)


def test_the_summary_reads_every_figure_and_says_what_was_not_measured():
    runs = [{"results": {"spread": result(8.0, 200.0), "ours": result(1.0, 100.0)},
             "plans": {"exact": {"layout": None, "skipped": "exact: no placement found"}},
             "order": ["spread", "ours", "exact"], "seed": 1 + k} for k in range(2)]
    opts = argparse.Namespace(methods=["spread", "ours", "exact"], rate=20.0, warmup=90.0,
                              phase=60.0, max_utilization=0.6, move_batch=4,
                              short_flows="tracker")
    doc = {"runs": runs, "statistics": pc.statistics(runs, opts.methods),
           "entry_shares": {"productpage": 1.0}, "commit": "abc", "when": "now",
           "testbed": {"backend": "mininet", "datapath": "netdev"},
           "config": "configs/bookinfo.yaml", "trunk_bw_mbit": 10.0}
    md = pc.summary_markdown(doc, opts, "python -m experiments.placement_comparison")
    assert "| trunk Mbit/s | 8.0 ± 0.0 | 1.0 ± 0.0 | – |" in md
    assert "run 2, exact: exact: no placement found" in md
    assert "2 run(s)" in md and "productpage (100.0 %)" in md and "(4 at a time" in md
    assert "netdev datapath, short flows: tracker;" in md


def test_a_run_shows_each_call_as_its_caller_waited_and_the_part_beyond_the_callee():
    def measured(waited, own):
        out = result(1.0, 100.0)
        out["end_to_end"]["requests"] = 100
        return {**out, "plan": {"servers_used": 2, "trunk_traffic": 0},
                "moves": [], "failed_during_moves": 0, "requests_during_moves": 0,
                "services": {"rate": {"p50_ms": waited + 2, "p95_ms": None, "p99_ms": None},
                             "memcachedrate": {"p50_ms": own, "p95_ms": None,
                                               "p99_ms": None}},
                "calls": {"rate>memcachedrate": {"p50_ms": waited, "p95_ms": None,
                                                 "p99_ms": None}},
                "cpu_per_server": {}, "layout": {},
                "cpu": {"controller_cores": 0.2, "ovs_cores": waited / 50}}
    doc = {"results": {"spread": measured(52.0, 2.0), "ours": measured(8.5, 2.25)},
           "seed": 1, "order": ["spread", "ours"]}
    assert pc.beyond_callee(doc["results"]["spread"], "rate>memcachedrate") == 50.0
    assert pc.beyond_callee(doc["results"]["spread"], "rate>geo") is None   # never called
    md = pc.run_markdown(doc, argparse.Namespace())
    assert "| rate > memcachedrate | 52 / 50 | 8 / 6 |" in md
    assert "| spread | 0.20 | 1.04 | – | – | – | – |" in md        # the parts' cores
    # a run from before the calls were scraped has no such table
    for r in doc["results"].values():
        r.pop("calls")
    assert "## Calls" not in pc.run_markdown(doc, argparse.Namespace())


def test_a_resumed_comparison_reads_back_finished_runs_and_sets_a_cut_off_one_aside(tmp_path):
    finished, cut_off = tmp_path / "run1", tmp_path / "run2"
    finished.mkdir()
    (finished / "summary.json").write_text('{"results": {"spread": {"p95_ms": 90.0}}}')
    cut_off.mkdir()
    (cut_off / "controller.log").write_text("cut off")
    assert pc.finished_run(str(finished)) == \
        {"results": {"spread": {"p95_ms": 90.0}}}
    assert pc.finished_run(str(cut_off)) is None
    assert not cut_off.exists() and (tmp_path / "run2.interrupted" / "controller.log").exists()
    assert pc.finished_run(str(tmp_path / "run3")) is None


def test_a_services_metrics_give_its_requests_by_caller_and_its_calls_as_it_waited():
    from common.metrics import render
    from services.callgraph import Metrics
    m = Metrics("rate")
    for seconds in (0.004, 0.006, 0.008):
        m.latency.labels("rate", "srv1-rate", "search").observe(seconds)
        m.calls.labels("rate", "srv1-rate", "memcachedrate").observe(seconds + 0.040)
    m.latency.labels("rate", "srv1-rate", "client").observe(0.5)
    before: dict = {}
    pc.add_histograms(before, "rate", "not prometheus text {")     # unreadable: nothing
    assert before == {}
    after: dict = {}
    pc.add_histograms(after, "rate", render(m.registry))
    assert set(after) == {"rate", "rate<search", "rate<client", "rate>memcachedrate"}
    after = {k: sorted(v.items()) for k, v in after.items()}
    assert pc.percentiles(None, after["rate"])["n"] == 4
    # the callee's side of a call, seen from the caller's scrape (here the same service)
    after["memcachedrate<rate"] = after["rate<search"]
    call = pc.call_figures({}, after)["rate>memcachedrate"]
    assert call["n"] == 3 and 40 < call["p50_ms"] < 60 and call["callee_p50_ms"] < 10
    result = {"services": {"memcachedrate": {"p50_ms": 1.0}}, "calls": {
        "rate>memcachedrate": call}}
    # beyond the callee's handler over this caller's requests, not over all of them
    assert pc.beyond_callee(result, "rate>memcachedrate") == pytest.approx(
        call["p50_ms"] - call["callee_p50_ms"])
