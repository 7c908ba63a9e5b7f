"""The placement benchmark's planted instances (benchmarks/placement.py): their bound holds
(brute force on a small one) and the planted placement is feasible and near it."""
from __future__ import annotations

import itertools

import pytest

from benchmarks.placement import planted, planted_bound, planted_run


def test_the_planted_bound_is_below_every_placement_of_a_small_instance():
    problem, at = planted(8, seed=3)
    bound = planted_bound(problem)
    names = [u.name for u in problem.units]
    best = min(problem.cost(dict(zip(names, combo)))
               for combo in itertools.product([h.name for h in problem.hosts],
                                              repeat=len(names))
               if not problem.violations(dict(zip(names, combo))))
    assert not problem.violations(at)
    assert 0 < bound <= best + 1e-6 <= problem.cost(at) + 1e-6


@pytest.mark.parametrize("units", [200, 1000])
def test_planted_instances_are_what_they_say(units):
    problem, at = planted(units)
    assert len(problem.units) == units and len(problem.hosts) == units // 10
    assert not problem.violations(at)
    # the light edges between clusters keep the planted placement within a few % of the bound
    assert planted_bound(problem) <= problem.cost(at) <= 1.05 * planted_bound(problem)
    # one cluster per server at 90 % of its CPU
    used = problem.load(at)
    assert all(cpu == pytest.approx(0.9) for cpu, _mem in used.values())


def test_the_planted_run_reports_the_gap_to_the_bound():
    row, = planted_run([200], exact_time_limit_s=0)
    assert 0 <= row["gap"] <= 1 and row["cost"] >= row["bound"]
    assert row["gap"] <= row["greedy_gap"] + 1e-9   # plan() refines greedy's answer too


def test_under_a_queue_price_the_bound_holds_and_the_planted_placement_meets_its_queue_part():
    problem, at = planted(8, seed=5, queue_price=50.0)
    bound = planted_bound(problem)
    names = [u.name for u in problem.units]
    best = min(problem.cost(dict(zip(names, combo)))
               for combo in itertools.product([h.name for h in problem.hosts],
                                              repeat=len(names))
               if not problem.violations(dict(zip(names, combo))))
    assert bound <= best + 1e-6
    # every server of the planted placement is at 90 %: its queueing is the bound's
    assert problem.queue_price * problem.queueing(at) == pytest.approx(
        bound - planted_bound(planted(8, seed=5)[0]))
