"""Placement with real parts: the call-graph services on the two-switch testbed, the graph
the profiler builds from a real short run, and one live move under traffic."""
from __future__ import annotations

import csv
import glob
import json
import time

import pytest

from common.config import load_config_data
from experiments.stack import Stack
from placement.apply import ControllerClient, InProcessTestbed, apply_moves
from placement.partitioner import plan
from placement.problem import build_problem, layout_of, moves_between
from tests.conftest import ROOT
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration
FAST = {"controller": {"monitoring_period_s": 1, "idle_timeout_s": 5,
                       "health": {"method": "tcp", "interval_s": 1, "timeout_s": 0.5,
                                  "unhealthy_after": 2, "healthy_after": 1}},
        "profiler": {"period_s": 1, "window": 3, "graph_window_s": 5},
        "agents": {"period_s": 1}}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    clean_testbed(quiet=True)
    data = load_config_data(f"{ROOT}/configs/bookinfo.yaml")
    for section, values in FAST.items():
        data[section] = {**data.get(section, {}), **values}
    st = Stack(data, str(tmp_path_factory.mktemp("placement")), policy="malb")
    with st:
        st.wait_monitoring(30)
        yield st
    clean_testbed(quiet=True)


def load(stack, seconds: float, rate: float, tag: str) -> None:
    spec = {"seed": 1, "arrivals": "uniform",
            "phases": [{"name": "stable", "seconds": seconds, "from": rate, "to": rate}],
            "classes": [{"name": "page", "weight": 1, "host": "10.0.0.100", "port": 9001,
                         "path": "/call"}]}
    path = f"{stack.run_dir}/spec-{tag}.json"
    with open(path, "w") as fh:
        json.dump(spec, fh)
    stack.start_loadgen(path, time.time() + 1, tag=tag, timeout_s=20)


def finished(stack, tag: str, timeout_s: float) -> list[dict]:
    stack.wait_for(lambda: len(stack.loadgen_summaries(tag)) == len(stack.cfg.testbed.clients),
                   timeout_s, f"load {tag} finished")
    rows = []
    for f in glob.glob(f"{stack.run_dir}/requests-{tag}-*.csv"):
        with open(f) as fh:
            rows += list(csv.DictReader(fh))
    return rows


def test_the_graph_of_a_short_run_has_exactly_the_calls_made(stack):
    load(stack, 12, 10, "graph")
    rows = finished(stack, "graph", 60)
    assert rows and not [r for r in rows if r["error"]], [r["error"] for r in rows][:5]
    time.sleep(2)                      # the last period's pairs and a scrape of the calls
    graph = stack.profiler_get("/graph")
    edges = {(e["caller"], e["callee"]): e for e in graph["edges"]}
    assert set(edges) == {("clients@s1", "productpage"), ("productpage", "details"),
                          ("productpage", "reviews"), ("reviews", "ratings")}
    # what the services answer each call: details 30 kB, reviews 40 kB, ratings 20 kB
    assert edges[("productpage", "reviews")]["total_bytes"] > \
        edges[("productpage", "details")]["total_bytes"] > \
        edges[("reviews", "ratings")]["total_bytes"] > 0
    assert edges[("productpage", "details")]["rt_ms"] is not None
    assert graph["vertices"]["productpage"]["cpu_cores"] > 0
    # ... and the history keeps it
    history = stack.profiler_get("/history?kind=edge&key=reviews->ratings&column=bytes_per_s")
    assert history["series"]


# the placement comparison's short run (test_experiments.py) moves live under load in
# `make test`; this one, with its own plan near the clients' switch, in `make test-e2e`
@pytest.mark.e2e
def test_a_live_move_under_traffic_loses_no_request(stack):
    graph = stack.profiler_get("/graph")
    controller = ControllerClient(stack.controller_url(""), token=stack.cfg.security.token)
    before = controller.layout()
    assert before == {"productpage": ["srv1"], "details": ["srv2"], "reviews": ["srv3"],
                      "ratings": ["srv4"]}
    problem = build_problem(stack.cfg, graph, before)
    after = layout_of(plan(problem, near="s1").assignment, problem)
    moves = moves_between(before, after)
    # the plan brings details and ratings over to the clients' switch
    assert {m.microservice for m in moves} >= {"details", "ratings"}
    assert all(stack.cfg.server(s).switch == "s1" for ms in after.values() for s in ms)
    load(stack, 25, 8, "move")
    time.sleep(4)
    results = apply_moves(stack.cfg, moves, controller, InProcessTestbed(stack.testbed),
                          drain_timeout_s=15)
    rows = finished(stack, "move", 90)
    assert len(rows) >= 190
    assert not [r for r in rows if r["error"]], [r["error"] for r in rows if r["error"]][:5]
    assert controller.layout() == after
    assert all(not r.forced for r in results)
    running = set(stack.testbed.deployed)
    assert {f"{m.source}-{stack.cfg.microservice(m.microservice).abbrev}" for m in moves} \
        .isdisjoint(running)
