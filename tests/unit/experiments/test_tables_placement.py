"""docs/placement.md's generated tables (experiments/tables/placement.py): each figure from
the small hand-made runs and benchmarks given here, each verdict by the target's rule."""
from experiments.tables import placement


def _rows(md: str) -> dict[str, str]:
    """A table's lines by their first cell."""
    return {line.split(" | ")[0].strip("| "): line for line in md.splitlines()
            if line.startswith("| ")}


def _result(servers, trunk, p50, p95, p99, failed=0, moved_failed=0, moved_sent=100):
    return {"plan": {"servers_used": servers}, "trunk_mbit_s": trunk,
            "end_to_end": {"p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "failed": failed},
            "failed_during_moves": moved_failed, "requests_during_moves": moved_sent}


def _comparison(runs):
    """A comparison's summary.json: runs of spread, greedy and ours."""
    return {"runs": [{"results": r} for r in runs], "commit": "abc1234",
            "when": "2026-11-27T22:50:00", "config": "configs/hotelreservation.yaml",
            "options": {"methods": ["spread", "greedy", "ours", "exact"], "phase": 60.0,
                        "exact_time_limit": 30.0}}


HOTEL_RUNS = [
    {"spread": _result(8, 9.0, 300, 800, 1200, moved_sent=1000),
     "greedy": _result(8, 1.0, 280, 700, 900),
     "ours": _result(3, 0.0, 310, 600, 950, moved_failed=2)},
    {"spread": _result(8, 10.0, 340, 1000, 1400, failed=3, moved_sent=2000),
     "greedy": _result(7, 1.2, 290, 720, 910),
     "ours": _result(3, 0.0, 330, 700, 990)},
]


def test_the_comparison_is_each_method_over_the_runs():
    rows = _rows(placement.hotel_table(_comparison(HOTEL_RUNS)))
    spread = rows["spread (the default layout)"]
    # trunk 9.5 Mbit/s, p95 900 ms, p99 1,300 ms on average; failed summed over the runs
    assert "| 9.5 ± " in spread and "| 900 ± " in spread and "| 1,300 ± " in spread
    assert spread.endswith("| 3 (0 of 3,000) |")
    assert rows["greedy network-aware"].startswith("| greedy network-aware | 7-8 | – |")
    # the busiest server's CPU, where the agents measured it
    runs = [{m: {**r, "cpu_per_server": {"srv1": 40.0 + k, "srv2": 10.0, "srv3": None}}
             for m, r in run.items()} for k, run in enumerate(HOTEL_RUNS)]
    assert "| ours | 3 | 40 ± " in placement.hotel_table(_comparison(runs))
    assert rows["ours"].endswith("| 0 (2 of 200) |")
    assert "exact" not in " ".join(rows)       # a method that did not run has no row
    # the calls' path is named: the per-flow one unless the runs said otherwise
    assert "; short flows on the per-flow path; code at" in placement.hotel_table(
        _comparison(HOTEL_RUNS))
    tracked = _comparison(HOTEL_RUNS)
    tracked["options"] = {**tracked["options"], "short_flows": "tracker"}
    assert "; short flows in tracker mode; code at" in placement.hotel_table(tracked)


def test_one_run_gives_each_figure_alone():
    summary = {"results": HOTEL_RUNS[0], "commit": "e07f90d", "when": "2026-11-23T03:34:05",
               "trunk_bw_mbit": 10.0, "options": {"methods": ["spread", "ours"],
                                                  "phase": 60.0}}
    md = placement.bookinfo_table(summary)
    assert "| ours | 3 | 0.00 | 310 | 600 | 950 | 0 | 2 of 100 |" in md
    assert md.splitlines()[-1].startswith("One run:") and "code at e07f90d" in md


def test_the_end_to_end_targets_are_ours_paired_with_spread_and_greedy_by_run():
    hotel = _comparison(HOTEL_RUNS)
    rows = _rows(placement.traffic_targets_table(
        _apps([_app_case(100.0, 100.0, True)]), _generated([0.1]), _scale(3.5, 4.0),
        _drift([0.05, 0.1]), hotel))
    trunk = rows["end to end: trunk traffic >= 50 % below spread, significant"]
    assert "| -100.0 % (-9.5 ± " in trunk and "hotel reservation, 2 runs" in trunk
    # p95: ours 650 against spread's 900, -27.8 %: short of 30 % whatever the test says
    p95 = rows["end to end: p95 >= 30 % below spread, significant"]
    assert "| -27.8 % (-250 ± " in p95 and p95.endswith("| not met |")
    assert rows["end to end: the difference to greedy tested"].startswith(
        "| end to end: the difference to greedy tested | p95 -8.5 % (p = ")


def _app_case(cost, exact_cost, optimal, cap=0.6, config="configs/bookinfo.yaml"):
    return {"config": config, "cap": cap, "cost": cost, "exact_cost": exact_cost,
            "exact_optimal": optimal, "gap_to_bound": 1 - exact_cost / cost if optimal
            else 0.01, "error": None}


def _apps(cases):
    return {"apps": cases, "command": "bench apps", "commit": "c0ffee1",
            "exact_time_limit_s": 60.0}


def _generated(gaps, optimal=False):
    return {"scale": [{"services": 100, "servers": 4 * 4 ** k, "cost": 1000.0 * (k + 1),
                       "bound": None if g is None else 1000.0 * (k + 1) * (1 - g), "gap": g,
                       "plan_s": 10.0,
                       "optimal": optimal} for k, g in enumerate(gaps)],
            "command": "bench gen", "commit": "c0ffee2"}


def _scale(median, slowest):
    return {"scale": [{"services": 20000, "servers": 256, "plan_s": median,
                       "plan_s_max": slowest, "bound": None, "gap": None}],
            "command": "bench scale", "commit": "c0ffee3"}


def _drift(shares, budget=0.1):
    return {"rows": [{"moved_share": s, "over_fresh": s / 2, "capped": s >= budget}
                     for s in shares], "args": {"max_moved": budget},
            "command": "bench drift", "commit": "c0ffee4"}


def _benchmark_targets(apps, generated, scale, drift) -> dict[str, str]:
    return _rows(placement.traffic_targets_table(apps, generated, scale, drift,
                                                 _comparison(HOTEL_RUNS)))


def test_the_benchmark_targets_follow_the_data():
    rows = _benchmark_targets(
        _apps([_app_case(100.0, 100.0, True), _app_case(101.0, 100.0, True, cap=1.0),
               {"config": "configs/bookinfo.yaml", "cap": 0.5, "error": "nothing fits"}]),
        _generated([0.14, 0.59]), _scale(3.5, 12.0), _drift([0.05, 0.1]))
    optimum = rows["within 2 % of the proven optimum on every real-application graph, "
                   "caps 0.5-1.0"]
    assert "the proven optimum in 1 of the 2 cases that fit" in optimum
    assert "1 without a placement" in optimum and "at most 1.0 % above it" in optimum
    assert optimum.endswith("| met |")
    generated = rows["the same on generated graphs of up to 200 services"]
    assert "14.0-59.0 % of the plan's cost" in generated and generated.endswith(
        "| not shown |")
    # the slowest of the repeats is over 10 s: the target is not met
    assert rows["20,000 units in under 10 s"].endswith("| not met |")
    assert "7.5 % per re-plan on average (at most 10.0 %: replan()'s budget, 10 % of the " \
        "units, held 1 of the 2 re-plans to it)" in rows[
            "re-planning moves at most 10 % of instances"]


def test_a_proven_optimum_far_from_the_plan_is_not_met_and_an_unproven_one_not_shown():
    far = _benchmark_targets(_apps([_app_case(110.0, 100.0, True)]),
                             _generated([0.1], optimal=True), _scale(3.5, 4.0),
                             _drift([0.2]))
    assert far["within 2 % of the proven optimum on every real-application graph, "
               "caps 0.5-1.0"].endswith("| not met |")
    assert far["the same on generated graphs of up to 200 services"].endswith("| not met |")
    assert far["re-planning moves at most 10 % of instances"].endswith("| not met |")
    unproven = _benchmark_targets(_apps([_app_case(100.0, 100.0, False)]), _generated([0.01]),
                                  _scale(3.5, 4.0), _drift([0.1]))
    # every case at the optimum, but only at cap 0.6: the caps asked for are not all there
    narrow = _benchmark_targets(_apps([_app_case(100.0, 100.0, True)]), _generated([0.01]),
                                _scale(3.5, 4.0), _drift([0.1]))
    assert narrow["within 2 % of the proven optimum on every real-application graph, "
                  "caps 0.5-1.0"].endswith("| not shown |")
    row = unproven["within 2 % of the proven optimum on every real-application graph, "
                   "caps 0.5-1.0"]
    assert "the optimum not proven in 1" in row and row.endswith("| not shown |")
    assert unproven["the same on generated graphs of up to 200 services"].endswith("| met |")


def _planted(price, sizes):
    """A planted benchmark: (units, gap, planted gap, seconds) per instance."""
    return {"queue_price": price, "command": f"bench planted {price}", "commit": "f1a23a7",
            "planted": [{"units": u, "servers": 256, "gap": g, "planted_gap": pg,
                         "plan_s": s} for u, g, pg, s in sizes]}


def test_the_latency_targets_read_both_objectives_planted_instances():
    traffic = _planted(0, [(200, 0.0, 0.0, 1.2), (1000, 0.0233, 0.0233, 0.11),
                           (20000, 0.0038, 0.0032, 2.82)])
    latency = _planted(3e5, [(1000, 0.0001, 0.0001, 0.17), (20000, 0.0004, 0.0002, 12.5)])
    apps = _apps([_app_case(100.0, 100.0, False, cap=1.0),
                  _app_case(99.0, 100.0, False, cap=1.0, config="configs/socialnetwork.yaml")])
    rows = _rows(placement.latency_targets_table(traffic, latency, apps,
                                                 _latency_comparison(LATENCY_RUNS),
                                                 _latency_comparison(LATENCY_RUNS, "tracker")))
    planted = rows["generated graphs of 1,000 units: the plan within 5 % of a proven bound "
                   "(or a planted optimum) in under 60 s"]
    assert "Traffic objective: 2.33 % from the proven bound in 0.11 s at 1,000 units" in planted
    assert "0 % from the proven bound (the proven optimum) in 1.2 s at 200 units" in planted
    assert "Latency objective (queue price 300,000): 0.01 %" in planted
    assert planted.endswith("| on planted instances: met, both objectives |")
    # 12.5 s under the latency objective at 20,000 units: met for the traffic one only
    scale = rows["20,000 units still under 10 s"]
    assert "traffic objective 2.8 s (0.38 % from the bound, the planted placement 0.32 %)" \
        in scale and scale.endswith("| met for the traffic objective only |")
    quality = rows["(the latency objective's own quality)"]
    assert "in 1, below it in 1 (social network at 1.0: 1.00 %)" in quality


def _latency_comparison(runs, short_flows=None, config="configs/hotelreservation.yaml"):
    """A comparison of the latency objective: spread, greedy, ours and latency, the latter
    the candidate; its short flows on the per-flow path unless named."""
    return {**_comparison(runs), "config": config,
            "options": {"methods": ["spread", "greedy", "ours", "latency"], "phase": 60.0,
                        "candidate": "latency", "short_flows": short_flows}}


# latency: p95 600-640 against spread's 1,000-1,060 (about -40 %, every run alike) and
# greedy's 700-760; trunk 0.1 against 9-10 Mbit/s
LATENCY_RUNS = [
    {"spread": _result(8, 9.0, 300, 1000 + 20 * k, 1400), "greedy": _result(8, 1.0, 280,
                                                                          700 + 20 * k, 900),
     "ours": _result(3, 0.0, 310, 650, 950), "latency": _result(6, 0.1, 250, 600 + 10 * k, 800)}
    for k in range(5)]


def test_issue_68s_end_to_end_aims_are_latency_paired_by_run_with_bonferroni():
    traffic = _planted(0, [(1000, 0.0233, 0.0233, 0.11), (20000, 0.0038, 0.0032, 2.82)])
    latency = _planted(3e5, [(1000, 0.0001, 0.0001, 0.17), (20000, 0.0004, 0.0002, 4.5)])
    apps = _apps([_app_case(100.0, 100.0, False, cap=1.0)])
    target = ("end to end, both DeathStarBench applications: p95 >= 30 % below spread's, "
              "significantly below greedy's; trunk traffic >= 50 % below spread's")
    # p95 only 10 % below spread's on the per-flow path: reported, not the verdict
    short = [{**r, "latency": _result(6, 0.1, 250, 0.9 * r["spread"]["end_to_end"]["p95_ms"]
                                      - k, 800)} for k, r in enumerate(LATENCY_RUNS)]
    md = placement.latency_targets_table(traffic, latency, apps, _latency_comparison(short),
                                         _latency_comparison(LATENCY_RUNS, "tracker"))
    row = _rows(md)[target]
    assert "hotel reservation, 5 runs: p95 against spread -40.4 % (-420 ± " in row
    assert "short flows in tracker mode, as the amended protocol runs it" in md
    assert "social network: not run yet" in row and "p < 0.0083, Bonferroni" in row
    # every aim met on hotel reservation; social network's runs still to come
    assert row.endswith("| – |")
    # p95 only 10 % below spread's on the tracker: not met, whatever social network shows
    row = _rows(placement.latency_targets_table(
        traffic, latency, apps, _latency_comparison(LATENCY_RUNS),
        _latency_comparison(short, "tracker")))[target]
    assert row.endswith("| not met (so far) |")
    # the candidate against every other method, figure by figure
    md = placement.versus_table(_latency_comparison(LATENCY_RUNS))
    rows = _rows(md)
    assert rows["ours"].startswith("| ours | -19.4 % (-60 ± ")
    assert "trunk" in md.splitlines()[0] and "latency" not in rows
    assert "ours, latency objective (`latency`) against each method" in md


def test_the_generated_graphs_table_is_each_graph_plan_and_bound():
    md = placement.generated_table(_generated([0.289]))
    assert "| 100 x 4 | 1,000 | 711 | 28.9 % | 10.0 |" in md and "code at c0ffee2" in md


def test_a_graph_without_a_bound_keeps_the_generated_target_unshown():
    generated = _generated([0.01, None])
    rows = _benchmark_targets(_apps([_app_case(100.0, 100.0, True)]), generated,
                              _scale(3.5, 4.0), _drift([0.1]))
    row = rows["the same on generated graphs of up to 200 services"]
    assert "no bound on 1" in row and row.endswith("| not shown |")


def test_one_run_end_to_end_is_not_tested_and_a_skipped_method_says_so():
    one = _comparison(HOTEL_RUNS[:1])
    rows = _rows(placement.traffic_targets_table(
        _apps([_app_case(100.0, 100.0, True)]), _generated([0.1]), _scale(3.5, 4.0),
        _drift([0.1]), one))
    assert rows["end to end: trunk traffic >= 50 % below spread, significant"].endswith(
        "| not tested (one run) |")
    assert rows["end to end: p95 >= 30 % below spread, significant"].endswith(
        "| not tested (one run) |")
    runs = [dict(HOTEL_RUNS[0]), dict(HOTEL_RUNS[1])]
    runs[0]["exact"] = _result(5, 0.0, 250, 580, 780)     # exact played in run 1 only
    runs[1]["ours"] = _result(3, 0.0, 330, None, 990)      # ours' p95 not measured once
    md = placement.hotel_table(_comparison(runs))
    rows = _rows(md)
    assert rows["exact (HiGHS alone, 30 s) (1 of 2 runs)"].startswith(
        "| exact (HiGHS alone, 30 s) (1 of 2 runs) | 5 | – | 0.0 | 250 | 580 | 780 |")
    assert "| 600 |" in rows["ours"]              # the one p95 measured, alone


def test_issue_68s_end_to_end_row_reads_its_runs_once_they_are_in_data():
    """The row says "not run yet" from no data: once a comparison with the latency
    objective on evaluation seeds is committed under data/placement/, the block must read
    it (this fails until it does), so the row cannot go on saying so."""
    import glob
    import json
    import os

    from experiments import protocol
    from tests.conftest import ROOT
    ran = []
    for path in glob.glob(os.path.join(ROOT, "data", "placement", "*", "summary.json")):
        options = json.load(open(path, encoding="utf-8")).get("options", {})
        if "latency" in options.get("methods", []) and \
                protocol.range_of(options.get("seed", 0)) == "evaluation":
            ran.append(os.path.relpath(path, os.path.join(ROOT, "data")))
    block = next(b for b in placement.BLOCKS if b.name == "issue 68, targets")
    assert set(ran) <= set(block.sources), (
        f"{ran}: issue 68's end-to-end runs are in data/; render the row from them")


def test_a_calls_cost_is_measured_where_the_callers_histograms_were_kept_else_estimated():
    def run_of(rate_p50, calls=None):
        r = _result(8, 1.0, 200, 400, 600)
        # hrlogin calls user, but hrlogin is not in this mix: too few calls to show
        r["services"] = {"rate": {"p50_ms": rate_p50}, "memcachedrate": {"p50_ms": 2.0},
                         "geo": {"p50_ms": None}, "hrlogin": {"p50_ms": 90.0},
                         "user": {"p50_ms": 1.0}}
        if calls is not None:
            r["calls"] = calls
        return {"spread": r}
    summary = {**_comparison([run_of(52.0), run_of(56.0)]),
               "entry_shares": {"hrsearch": 0.6, "hrrecommend": 0.4},
               "options": {"methods": ["spread"], "phase": 60.0, "rate": 20.0}}
    md = placement.call_cost_table(summary)
    # rate's p50 less its 2 ms of work, less memcachedrate's p50: 48 and 52, 50 on average
    assert "| spread (the default layout) | 1 | 50 | 50 to 50 | 200 |" in md
    assert "estimated for each service with one callee" in md
    # hrsearch opens 10 connections, hrrecommend 4 (its own and one per call)
    assert "opens 7.6 connections on average" in md and "152 a second" in md
    summary["runs"] = [{"results": run_of(52.0, {"rate>memcachedrate": {"p50_ms": 30.0},
                                                 "search>geo": {"p50_ms": 5.0}})}]
    md = placement.call_cost_table(summary)
    assert "| spread (the default layout) | 1 | 28 | 28 to 28 | 200 |" in md
    assert "measured: what each caller waited" in md
    summary["runs"].append({"results": run_of(52.0)})         # a run from before
    assert "in 1 of the runs; in the others estimated" in placement.call_cost_table(summary)
