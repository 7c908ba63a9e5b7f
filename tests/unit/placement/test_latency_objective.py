"""The latency objective: traffic x distance plus a price on each server's queue (issue 68),
against hand-computed values, brute force and the traffic-only objective."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from common.config import load_config
from experiments.placement_model import model_time
from placement import milp, partitioner
from placement.model import Host, PlacementError, Problem, Unit
from placement.partitioner import plan, random_placement, refine, replan, spread
from placement.problem import build_problem
from placement.queueing import RHO_KNEE, queue_length, queue_slope


def test_queue_length_is_the_processor_sharing_mean_then_its_tangent():
    assert queue_length(0.0) == 0.0
    assert queue_length(0.5) == pytest.approx(1.0)
    assert queue_length(0.8) == pytest.approx(4.0)
    knee = queue_length(RHO_KNEE)
    assert queue_length(RHO_KNEE + 0.01) == pytest.approx(knee + 0.01 * queue_slope(RHO_KNEE))
    assert math.isfinite(queue_length(3.0))
    for rho in (0.1, 0.5, 0.9):        # the slope is the derivative
        h = 1e-6
        assert queue_slope(rho) == pytest.approx(
            (queue_length(rho + h) - queue_length(rho - h)) / (2 * h), rel=1e-4)


def two_units(price, share=1.0, cap=1.0):
    return Problem([Unit("a", "a", 0.3), Unit("b", "b", 0.3)],
                   [Host(f"srv{k}", cap, 100.0, "s1", share=share) for k in (1, 2)],
                   edges={("a", "b"): 1.0}, queue_price=price)


def test_the_cost_adds_the_priced_queue_of_each_server_on_its_whole_share():
    p = two_units(10.0, share=1.0, cap=0.8)
    together = {"a": "srv1", "b": "srv1"}
    apart = {"a": "srv1", "b": "srv2"}
    assert p.traffic_cost(together) == 0.0 and p.traffic_cost(apart) == 1.0
    assert p.queueing(together) == pytest.approx(0.6 / 0.4)       # rho 0.6 of the share
    assert p.queueing(apart) == pytest.approx(2 * 0.3 / 0.7)
    assert p.cost(together) == pytest.approx(10 * 1.5)
    assert p.cost(apart) == pytest.approx(1.0 + 10 * 2 * 0.3 / 0.7)
    assert two_units(0.0).cost(together) == 0.0                   # no price: traffic alone


def test_a_price_on_queueing_splits_what_traffic_alone_keeps_together():
    assert len(set(plan(two_units(0.0), exact_time_limit_s=0).assignment.values())) == 1
    cheap = plan(two_units(0.1), exact_time_limit_s=0)       # queueing barely priced
    dear = plan(two_units(10.0), exact_time_limit_s=0)
    assert len(set(cheap.assignment.values())) == 1
    assert len(set(dear.assignment.values())) == 2
    assert dear.traffic_cost == 1.0 and dear.queueing == pytest.approx(2 * 0.3 / 0.7)


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_bad_price_is_refused_by_name(bad):
    with pytest.raises(PlacementError, match="queue_price"):
        two_units(bad)


def random_problem(seed, n_units=5, n_hosts=3, price=2.0):
    rng = random.Random(seed)
    us = [Unit(f"u{k}", f"u{k}", rng.uniform(0.05, 0.35)) for k in range(n_units)]
    hs = [Host(f"h{k}", 0.6, 100.0, "s1" if k < 2 else "s2", share=1.0) for k in range(n_hosts)]
    edges = {(f"u{i}", f"u{j}"): rng.choice([0, 0, 0.5, 1, 3])
             for i, j in itertools.combinations(range(n_units), 2)}
    return Problem(us, hs, edges=edges, anchors={("u0", "s1"): 2.0},
                   switch_position={"s1": 0, "s2": 1}, queue_price=price)


def brute(problem):
    names = [u.name for u in problem.units]
    best = math.inf
    for combo in itertools.product([h.name for h in problem.hosts], repeat=len(names)):
        a = dict(zip(names, combo))
        if not problem.violations(a):
            best = min(best, problem.cost(a))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_program_bounds_and_nearly_reaches_the_priced_optimum(seed):
    p = random_problem(seed)
    optimum = brute(p)
    sol = milp.solve(p, 10.0)
    assert sol.bound <= optimum + 1e-6            # tangents below the curve: still a bound
    assert sol.assignment is not None
    assert p.cost(sol.assignment) <= optimum * 1.02 + 1e-9
    result = plan(p, exact_time_limit_s=5.0)
    assert result.cost <= optimum * 1.02 + 1e-9
    assert result.bound <= optimum + 1e-6
    if result.optimal:                            # "optimal" only when the real cost says so
        assert result.cost <= optimum * (1 + milp.RELATIVE_GAP) + 1e-9


def assert_no_single_move_helps(p, a):
    cost = p.cost(a)
    for name in a:
        for h in p.host:
            b = dict(a, **{name: h})
            if not p.violations(b):
                assert p.cost(b) >= cost - 1e-9, (name, h)


@pytest.mark.parametrize("seed", range(6))
def test_refinement_leaves_no_single_move_that_lowers_the_priced_cost(seed):
    p = random_problem(seed, n_units=8, n_hosts=4, price=1.5)
    a = refine(p, spread(p).assignment)
    assert_no_single_move_helps(p, a)


def test_a_re_plan_under_the_price_keeps_its_move_budget():
    p = random_problem(3, n_units=10, n_hosts=4, price=1.0)
    current = spread(p).assignment
    result = replan(p, current, max_moved_share=0.2, exact_time_limit_s=0)
    assert sum(current[n] != h for n, h in result.assignment.items()) <= 2
    assert result.cost <= p.cost(current) + 1e-9


def test_the_configuration_s_problem_carries_the_price_and_the_whole_share():
    cfg = load_config("configs/hotelreservation.yaml")
    graph = {"vertices": {m.name: {"cpu_cores": 0.05, "memory_mb": 20.0}
                          for m in cfg.microservices}, "edges": []}
    layout = {m.name: sorted({i.server for i in cfg.instances_of(m.name)})
              for m in cfg.microservices}
    p = build_problem(cfg, graph, layout, max_utilization=0.6, queue_price=5e5)
    assert p.queue_price == 5e5
    assert all(h.cpu == pytest.approx(0.3) and h.speed == pytest.approx(0.5) for h in p.hosts)


def test_the_model_times_a_chain_by_hand():
    """The queueing model (experiments/placement_model.py): hotel reservation's units on
    one server, at a rate that uses half its share; what it adds up is checked by hand."""
    cfg = load_config("configs/hotelreservation.yaml")
    one = {u: "srv1" for u in (m.name for m in cfg.microservices)}
    light = model_time(cfg, {"hrlogin": 1.0}, one)
    # hrlogin calls user once: both on srv1 (0.5 cores) at a tiny load
    by = {m.name: m for m in cfg.microservices}
    service_ms = (by["hrlogin"].cpu_ms + by["user"].cpu_ms) / 0.5
    assert light["server_ms"] == pytest.approx(service_ms, rel=0.01)
    assert light["busiest_trunk"] == 0.0               # srv1 is on the clients' switch
    spread_out = model_time(cfg, {"hrsearch": 1000.0}, one)
    assert spread_out["mean_ms"] == math.inf          # over the server's share: unstable


def test_a_server_with_no_share_cannot_offer_cores():
    with pytest.raises(PlacementError, match="a share of 0 cannot offer"):
        Problem([Unit("a", "a", 0.1)], [Host("srv1", 1.0, 100.0, "s1", share=0.0)])


@pytest.mark.parametrize("seed, n_units, n_hosts",
                         [(84, 6, 3), (108, 6, 3), (114, 8, 4), (121, 8, 4), (181, 6, 3)])
def test_the_exact_program_never_answers_worse_than_its_start(seed, n_units, n_hosts):
    # the program weighs the queue's tangents, below the real cost: on these draws its own
    # answer costs more in reality than the start it was given (found by trying 400
    # draws); the start then stands
    p = random_problem(seed, n_units=n_units, n_hosts=n_hosts, price=3.0)
    start = refine(p, random_placement(p, seed=seed).assignment)
    sol = milp.solve(p, 5.0, start=start)
    assert sol.assignment is not None and p.cost(sol.assignment) <= p.cost(start) + 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_refinement_without_swaps_on_many_servers_per_switch_leaves_no_better_move(seed):
    """The moves weigh one server per switch besides the peers' (the least used with room,
    kept in order of load as units move): no single move to any server lowers the cost."""
    rng = random.Random(seed)
    us = [Unit(f"u{k}", f"u{k // 2}", rng.uniform(0.02, 0.2)) for k in range(40)]
    hs = [Host(f"h{k}", 0.9, 100.0, f"s{1 + k % 3}", share=1.0) for k in range(12)]
    edges = {(f"u{i}", f"u{j}"): rng.choice([0.5, 1, 3])
             for i, j in itertools.combinations(range(40), 2) if rng.random() < 0.08}
    p = Problem(us, hs, edges=edges, anchors={("u0", "s1"): 5.0},
                switch_position={"s1": 0, "s2": 1, "s3": 2}, queue_price=2.0)
    a = refine(p, random_placement(p, seed=seed).assignment, max_passes=200, swaps=False)
    assert_no_single_move_helps(p, a)


@pytest.mark.parametrize("seed", range(4))
def test_the_servers_kept_in_order_of_load_give_the_moves_a_scan_would(seed, monkeypatch):
    """refine (swaps on) and replan with the servers kept in order of load, against the
    same with every switch's servers scanned at each move: the same assignments."""
    rng = random.Random(seed)
    us = [Unit(f"u{k}", f"u{k // 2}", rng.uniform(0.02, 0.2)) for k in range(30)]
    hs = [Host(f"h{k}", 0.9, 100.0, f"s{1 + k % 3}", share=1.0) for k in range(12)]
    edges = {(f"u{i}", f"u{j}"): rng.choice([1e5, 1e6, 3e6])
             for i, j in itertools.combinations(range(30), 2) if rng.random() < 0.1}
    p = Problem(us, hs, edges=edges, anchors={("u0", "s1"): 5e6},
                switch_position={"s1": 0, "s2": 1, "s3": 2}, queue_price=3e5)
    start = random_placement(p, seed=seed).assignment

    def results():
        return (refine(p, start, swaps=True),
                replan(p, start, max_moved_share=0.3, exact_time_limit_s=0).assignment)
    ordered = results()
    scan = partitioner._move_targets
    monkeypatch.setattr(partitioner, "_move_targets",
                        lambda problem, n, origin, a, used, by_load=None:
                        scan(problem, n, origin, a, used))
    assert results() == ordered
