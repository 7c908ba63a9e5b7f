"""The expected communication graph of a call-graph configuration (placement/apps.py
expected_graph) and the placement benchmark's applications (benchmarks/placement.py)."""
import pytest

from benchmarks import placement as bench
from common.config import load_config
from placement.apps import entry_mix, expected_graph


def test_the_expected_graph_follows_the_calls_down_the_dag():
    cfg = load_config("configs/bookinfo.yaml")
    g = expected_graph(cfg, {"productpage": 10.0})
    edges = {(e["caller"], e["callee"]): e["bytes_per_s"] for e in g["edges"]}
    # productpage calls details (200 B out, 30 kB back) and reviews, reviews calls ratings
    assert edges == {("productpage", "details"): 10 * 30200,
                     ("productpage", "reviews"): 10 * 40200,
                     ("reviews", "ratings"): 10 * 20200,
                     ("clients@s1", "productpage"): 10 * 20000}
    cores = {n: v["cpu_cores"] for n, v in g["vertices"].items()}
    assert cores == pytest.approx({"productpage": 0.04, "details": 0.02, "reviews": 0.03,
                                   "ratings": 0.02})


def test_a_fan_out_and_a_service_called_twice_add_up():
    cfg = load_config("configs/callgraph30.yaml")
    g = expected_graph(cfg, {"svc01": 1.0})
    rate = {n: v["cpu_cores"] / (m.cpu_ms / 1000.0)
            for m in cfg.microservices for n, v in g["vertices"].items() if n == m.name}
    # every service is reached once per request through its tree, and once more per extra
    # (cross) call into it: its rate is the number of calls into it
    into = {}
    for m in cfg.microservices:
        for c in m.calls or ():
            into[c.service] = into.get(c.service, 0) + c.count
    for name, r in rate.items():
        assert r == pytest.approx(1.0 if name == "svc01" else into[name]), name


def test_rates_for_a_service_that_is_not_an_entry_are_refused():
    cfg = load_config("configs/bookinfo.yaml")
    with pytest.raises(ValueError, match="'reviews' is not an entry service"):
        expected_graph(cfg, {"reviews": 1.0})
    with pytest.raises(ValueError, match="'nope' is not an entry service"):
        expected_graph(cfg, {"nope": 1.0})


def test_the_benchmark_loads_an_application_to_its_demand_share(tmp_path):
    problem, near, rate = bench.app_problem("configs/bookinfo.yaml", 0.6)
    cfg = load_config("configs/bookinfo.yaml")
    demand = sum(u.cpu for u in problem.units)
    assert demand == pytest.approx(bench.APP_DEMAND_SHARE * sum(s.cpu for s in cfg.servers))
    assert near == "s1" and rate == pytest.approx(demand / 0.011)   # 11 ms of CPU a request
    assert all(h.cpu == pytest.approx(0.6 * 0.5) for h in problem.hosts)


def test_a_benchmark_mix_weighs_the_entries_and_names_a_wrong_one(tmp_path):
    text = open("configs/bookinfo.yaml").read()
    good = tmp_path / "mix.yaml"
    good.write_text("# benchmark-mix: productpage=3\n" + text)
    assert entry_mix(str(good), ["productpage"]) == {"productpage": 3.0}
    bad = tmp_path / "bad.yaml"
    bad.write_text("# benchmark-mix: reviews=1\n" + text)
    with pytest.raises(ValueError, match="'reviews', not an entry service"):
        entry_mix(str(bad), ["productpage"])


def test_a_cap_no_placement_fits_is_a_row_that_says_so():
    # at 0.45 the servers offer 0.9 cores in all, and productpage alone needs 0.29 of a
    # server's 0.225
    (row,) = bench.apps_run(["configs/bookinfo.yaml"], [0.45], 1.0)
    assert row["error"].startswith("capacity: productpage") and row["cap"] == 0.45
    assert "none fits: capacity: productpage" in bench.markdown(
        {"command": "c", "commit": "x", "scale": [], "small": [], "apps": [row],
         "exact_time_limit_s": 1.0})
