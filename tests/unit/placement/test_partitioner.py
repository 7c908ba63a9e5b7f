"""The placement partitioner on hand-checked graphs, against brute force and the baselines."""
from __future__ import annotations

import itertools
import random

import pytest

from placement import milp
from placement.model import Host, PlacementError, Problem, Unit
from placement.partitioner import EXACT_MAX_UNITS, _sub_problem, choose_hosts, exact, \
    greedy_network_aware, moved, plan, random_placement, refine, replace_groups, replan, \
    should_replace, spread


def hosts(n, cpu=1.0, mem=1000.0, switches=None):
    switches = switches or ["s1"] * n
    return [Host(f"srv{k + 1}", cpu, mem, switches[k]) for k in range(n)]


def units(names, cpu=0.2, mem=10.0):
    return [Unit(n, n.split("#")[0], cpu, mem) for n in names]


def brute_force(problem: Problem) -> float:
    """The optimum by trying every assignment."""
    best = float("inf")
    names = [u.name for u in problem.units]
    for combo in itertools.product([h.name for h in problem.hosts], repeat=len(names)):
        a = dict(zip(names, combo))
        if not problem.violations(a):
            best = min(best, problem.cost(a))
    return best


def test_distances_and_cost_by_hand():
    p = Problem(units(["a", "b", "c"]), hosts(3, switches=["s1", "s1", "s2"]),
                edges={("a", "b"): 10, ("b", "a"): 5, ("b", "c"): 2},
                anchors={("a", "s2"): 4},
                switch_position={"s1": 0, "s2": 1})
    assert p.edges == {("a", "b"): 15.0, ("b", "c"): 2.0}       # both directions added
    assert (p.distance("srv1", "srv1"), p.distance("srv1", "srv2"),
            p.distance("srv1", "srv3")) == (0, 1, 2)
    a = {"a": "srv1", "b": "srv2", "c": "srv3"}
    # a-b same switch: 15 x 1; b-c one trunk hop: 2 x 2; a to the s2 anchor: 4 x 2
    assert p.cost(a) == 15 + 4 + 8
    assert p.trunk_traffic(a) == 2 + 4


def test_two_cliques_joined_by_a_light_edge_split_at_that_edge():
    left, right = ["a", "b", "c", "d"], ["e", "f", "g", "h"]
    edges = {(x, y): 10 for group in (left, right) for x, y in itertools.combinations(group, 2)}
    edges[("d", "e")] = 1
    # each server holds one clique only (4 x 0.2 = 0.8 of 1 core)
    p = Problem(units(left + right), hosts(2), edges=edges)
    result = plan(p)
    groups = {result.assignment[n] for n in left}, {result.assignment[n] for n in right}
    assert all(len(g) == 1 for g in groups) and groups[0] != groups[1]
    assert result.cost == 1 and result.optimal


def test_target_part_weights_follow_capacities():
    # a 3:1 capacity split: the big server takes about three quarters of the load
    names = [f"u{k}" for k in range(16)]
    edges = {(names[k], names[k + 1]): 5 for k in range(15)}      # a chain
    p = Problem(units(names, cpu=0.1), [Host("big", 1.5, 1000, "s1"),
                                        Host("small", 0.5, 1000, "s1")], edges=edges)
    result = plan(p, headroom=0.0)
    load = p.load(result.assignment)
    assert not p.violations(result.assignment)
    assert load["big"][0] == pytest.approx(1.2) and load["small"][0] == pytest.approx(0.4)
    assert result.cost == 5        # a chain cut once


def test_clients_pull_the_entry_service_to_their_switch():
    p = Problem(units(["front", "back"], cpu=0.6),
                hosts(2, switches=["s1", "s2"]),
                edges={("front", "back"): 3}, anchors={("front", "s1"): 100},
                switch_position={"s1": 0, "s2": 1})
    result = plan(p, near="s1")
    assert result.assignment["front"] == "srv1"
    assert result.cost == 100 * 1 + 3 * 2


def test_consolidation_uses_the_fewest_servers_with_headroom():
    p = Problem(units(["a", "b", "c"], cpu=0.25), hosts(4), edges={("a", "b"): 1})
    assert choose_hosts(p) == ["srv1"]                  # 0.75 x 1.2 = 0.9 <= 1 core
    heavy = Problem(units(["a", "b", "c"], cpu=0.3), hosts(4))
    assert len(choose_hosts(heavy)) == 2                # 0.9 x 1.2 > 1
    assert plan(p).cost == 0


def test_replicas_of_a_service_never_share_a_server():
    p = Problem(units(["web#1", "web#2", "db"], cpu=0.1), hosts(3),
                edges={("web#1", "db"): 10, ("web#2", "db"): 10})
    result = plan(p)
    assert result.assignment["web#1"] != result.assignment["web#2"]
    assert result.cost == 10       # db next to one replica
    assert not p.violations(result.assignment)


def test_pinned_units_stay_and_others_follow():
    p = Problem(units(["a", "b"]), hosts(3), edges={("a", "b"): 7}, pinned={"a": "srv3"})
    result = plan(p)
    assert result.assignment == {"a": "srv3", "b": "srv3"}


def test_what_cannot_fit_is_refused_with_the_reason():
    with pytest.raises(PlacementError, match="need 2.4 cores, the servers have 2"):
        plan(Problem(units(list("abcdef"), cpu=0.4), hosts(2)))
    with pytest.raises(PlacementError, match="fits on no server"):
        plan(Problem([Unit("huge", "huge", 1.5)], hosts(2)))
    with pytest.raises(PlacementError, match="3 replicas for 2 servers"):
        plan(Problem(units(["w#1", "w#2", "w#3"], cpu=0.1), hosts(2)))
    with pytest.raises(PlacementError, match="unknown unit 'nope'"):
        Problem(units(["a"]), hosts(1), edges={("a", "nope"): 1})
    with pytest.raises(PlacementError, match="unknown switch 's9'"):
        Problem(units(["a"]), hosts(1), anchors={("a", "s9"): 1})


@pytest.mark.parametrize("seed", range(8))
def test_plan_is_the_optimum_on_small_random_graphs(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 8)
    names = [f"u{k}" for k in range(n)]
    edges = {(a, b): rng.choice([1, 5, 20]) for a, b in itertools.combinations(names, 2)
             if rng.random() < 0.4}
    p = Problem([Unit(x, x, rng.choice([0.1, 0.2, 0.3]), 10) for x in names],
                hosts(4, cpu=0.6, switches=["s1", "s1", "s2", "s3"]), edges=edges,
                anchors={(names[0], "s1"): 10}, switch_position={"s1": 0, "s2": 1, "s3": 2})
    result = plan(p, near="s1")
    assert result.optimal and not p.violations(result.assignment)
    assert result.cost == pytest.approx(brute_force(p))


def test_ours_beats_the_baselines_on_a_layered_graph():
    rng = random.Random(3)
    names = [f"m{k}" for k in range(40)]
    edges = {}
    for k in range(1, 40):
        parent = names[rng.randrange(max(0, k - 4), k)]
        edges[(parent, names[k])] = rng.choice([1, 1, 2, 50])
    p = Problem([Unit(x, x, 0.05, 10) for x in names],
                hosts(8, cpu=0.5, switches=["s1", "s1", "s2", "s2", "s3", "s3", "s4", "s4"]),
                edges=edges, anchors={(names[0], "s1"): 100},
                switch_position={"s1": 0, "s2": 1, "s3": 2, "s4": 3})
    ours = plan(p, near="s1")
    assert not p.violations(ours.assignment)
    for baseline in (spread(p), random_placement(p, 1), greedy_network_aware(p)):
        assert not p.violations(baseline.assignment)
        assert ours.cost <= baseline.cost
    assert ours.trunk_traffic <= 0.5 * spread(p).trunk_traffic


def test_refinement_moves_a_unit_next_to_the_peer_it_talks_to_most():
    p = Problem(units(["a", "b", "c"]), hosts(2), edges={("a", "b"): 9, ("b", "c"): 1})
    start = {"a": "srv1", "b": "srv2", "c": "srv2"}
    better = refine(p, start)
    assert better["a"] == better["b"] and p.cost(better) < p.cost(start)


def layered(n: int, seed: int, servers: int = 8) -> Problem:
    """A seeded call tree of n units with some heavy edges, on servers over 4 switches."""
    rng = random.Random(seed)
    names = [f"m{k}" for k in range(n)]
    edges = {(names[rng.randrange(max(0, k - 4), k)], names[k]): rng.choice([1, 1, 2, 50])
             for k in range(1, n)}
    switches = [f"s{1 + k * 4 // servers}" for k in range(servers)]
    return Problem([Unit(x, x, 0.05, 10) for x in names],
                   hosts(servers, cpu=0.05 * n / (0.5 * servers), switches=switches),  # half full
                   edges=edges, anchors={(names[0], "s1"): 100},
                   switch_position={"s1": 0, "s2": 1, "s3": 2, "s4": 3})


def test_the_exact_program_matches_brute_force_and_bounds_every_placement():
    for seed in range(4):
        rng = random.Random(seed)
        names = [f"u{k}" for k in range(6)]
        p = Problem([Unit(x, x, rng.choice([0.1, 0.2, 0.3]), 10) for x in names],
                    hosts(3, cpu=0.6, switches=["s1", "s2", "s3"]),
                    edges={(a, b): rng.choice([1, 5, 20])
                           for a, b in itertools.combinations(names, 2) if rng.random() < 0.5},
                    anchors={(names[0], "s3"): 7})
        sol = milp.solve(p, time_limit_s=10)
        assert sol.optimal and not p.violations(sol.assignment)
        assert p.cost(sol.assignment) == pytest.approx(brute_force(p))
        assert sol.bound <= p.cost(sol.assignment) + 1e-6
        assert milp.lower_bound(p) <= sol.bound + 1e-6


def test_the_program_keeps_replicas_apart_and_pins_in_place():
    p = Problem(units(["w#1", "w#2", "x"], cpu=0.1), hosts(2),
                edges={("w#1", "w#2"): 50, ("w#1", "x"): 1}, pinned={"x": "srv2"})
    sol = milp.solve(p)
    assert sol.optimal and sol.assignment["x"] == "srv2"
    assert sol.assignment["w#1"] != sol.assignment["w#2"]


def test_a_plan_reports_every_attempt_its_bound_and_its_gap():
    p = layered(30, seed=1)
    result = plan(p, near="s1")
    methods = [a["method"] for a in result.attempts]
    assert any(m.startswith("metis k-way") for m in methods)
    assert "greedy + refinement" in methods and methods[-1].startswith("exact program")
    assert all((a["cost"] is None) != (a["error"] is None) for a in result.attempts)
    assert result.bound is not None and result.bound <= result.cost + 1e-6
    assert result.gap == pytest.approx(max(0.0, 1 - result.bound / result.cost))
    assert result.cost == min(a["cost"] for a in result.attempts if a["cost"] is not None)
    doc = result.as_dict()
    assert doc["gap"] == result.gap and doc["attempts"] == result.attempts
    heuristic = plan(p, near="s1", exact_time_limit_s=0)     # no program: no bound
    assert heuristic.bound is None and heuristic.gap is None and not heuristic.optimal
    assert result.cost <= heuristic.cost


def test_an_exact_program_stopped_by_its_limit_claims_no_optimum():
    p = layered(120, seed=2, servers=12)
    sol = milp.solve(p, time_limit_s=0.2)
    assert not sol.optimal and sol.status == "stopped at its limit"
    if sol.assignment is not None:
        assert sol.bound <= p.cost(sol.assignment) + 1e-6


def test_the_exact_method_alone_proves_the_optimum_or_says_why_it_has_none():
    p = layered(30, seed=1)
    alone = exact(p, time_limit_s=30)
    assert alone.optimal and alone.method == "exact program"
    assert alone.cost <= plan(p, near="s1", exact_time_limit_s=0).cost + 1e-6
    assert alone.bound <= alone.cost + 1e-6 and alone.gap == pytest.approx(0.0, abs=1e-3)
    big = Problem(units([f"u{k}" for k in range(EXACT_MAX_UNITS + 1)], cpu=0.001, mem=1.0),
                  hosts(4))
    with pytest.raises(PlacementError, match="more than the program takes"):
        exact(big)


def test_baselines_spread_random_and_greedy():
    p = Problem(units(["a", "b", "c", "d"]), hosts(2), edges={("a", "b"): 5, ("c", "d"): 5})
    assert spread(p).assignment == {"a": "srv1", "b": "srv2", "c": "srv1", "d": "srv2"}
    assert random_placement(p, 7).assignment == random_placement(p, 7).assignment
    g = greedy_network_aware(p).assignment
    assert g["a"] == g["b"] and g["c"] == g["d"]


def test_hysteresis_needs_a_gain_and_a_dwell():
    assert should_replace(100, 95, None) == (False, "a gain of 5.0 %, under 10 %")
    assert should_replace(100, 80, None)[0]
    assert not should_replace(100, 50, since_last_change_s=120)[0]
    assert should_replace(100, 50, since_last_change_s=900)[0]


def test_a_replan_moves_at_most_its_budget_and_gains_what_it_can():
    p = layered(40, seed=4)
    start = spread(p).assignment                 # far from any good plan
    fresh = plan(p, near="s1", exact_time_limit_s=0)
    assert moved(start, fresh.assignment) > 4
    capped = replan(p, start, max_moved_share=0.1, near="s1", exact_time_limit_s=0)
    assert moved(start, capped.assignment) <= 4 and not p.violations(capped.assignment)
    assert fresh.cost <= capped.cost < p.cost(start)
    assert capped.attempts[-1]["method"] == "fresh plan"
    # a budget the fresh plan fits in: the fresh plan itself
    assert replan(p, start, max_moved_share=1.0, near="s1",
                  exact_time_limit_s=0).assignment == fresh.assignment
    # nothing to gain: nothing moves
    assert moved(fresh.assignment, replan(p, fresh.assignment, 0.1, near="s1",
                                          exact_time_limit_s=0).assignment) == 0


def test_tree_inequalities_hold_for_every_placement_and_keep_the_optimum():
    for seed in range(3):
        rng = random.Random(seed)
        names = [f"u{k}" for k in range(6)]
        p = Problem([Unit(x, x, rng.choice([0.2, 0.3]), 10) for x in names],
                    hosts(4, cpu=0.6, switches=["s1", "s1", "s2", "s2"]),
                    edges={(a, b): rng.choice([1, 5, 20])
                           for a, b in itertools.combinations(names, 2) if rng.random() < 0.6},
                    anchors={(names[0], "s1"): 7})
        edges = list(p.edges)
        cuts = milp._tree_cuts(p, lambda e, w, name: (-w, name))
        assert any(trunk for *_, trunk in cuts) and any(not trunk for *_, trunk in cuts)
        for combo in itertools.product([h.name for h in p.hosts], repeat=len(names)):
            a = dict(zip(names, combo))
            if p.violations(a):
                continue
            for tree, need, trunk in cuts:
                apart = [p.switch_distance(p.host[a[u]].switch, p.host[a[v]].switch) if trunk
                         else int(a[u] != a[v]) for u, v in (edges[e] for e in tree)]
                assert sum(apart) >= need
        optimum = brute_force(p)
        for trees in (True, False):
            sol = milp.solve(p, trees=trees)
            assert sol.optimal and p.cost(sol.assignment) == pytest.approx(optimum)
            assert sol.bound <= optimum + 1e-6


def test_the_program_started_from_a_placement_answers_no_worse_than_it():
    p = layered(60, seed=3)
    start = greedy_network_aware(p).assignment
    sol = milp.solve(p, time_limit_s=0.5, start=start)
    assert sol.assignment is not None and not p.violations(sol.assignment)
    assert p.cost(sol.assignment) <= p.cost(start) + 1e-6
    assert sol.bound <= p.cost(sol.assignment) + 1e-6


def test_refinement_exchanges_two_servers_contents_where_no_single_move_helps():
    # each pair fills a server; only moving a pair whole brings the anchored one home
    p = Problem(units(["a", "b", "c", "d"], cpu=0.5), hosts(2, switches=["s1", "s2"]),
                edges={("a", "b"): 50, ("c", "d"): 50}, anchors={("a", "s1"): 10},
                switch_position={"s1": 0, "s2": 1})
    start = {"a": "srv2", "b": "srv2", "c": "srv1", "d": "srv1"}
    assert refine(p, start, swaps=False) == start
    assert refine(p, start, swaps=True) == {"a": "srv1", "b": "srv1", "c": "srv2", "d": "srv2"}


def test_servers_placed_again_a_few_at_a_time_never_cost_more_and_stay_feasible():
    p = layered(30, seed=4)
    start = refine(p, greedy_network_aware(p).assignment)
    better = replace_groups(p, start, time_limit_s=30)
    assert not p.violations(better) and p.cost(better) <= p.cost(start) + 1e-6
    # a group's program sees the rest of the cost as anchors: the same change in cost
    name = "m0"
    group = (start[name], next(h.name for h in p.hosts if h.name != start[name]))
    sub = _sub_problem(p, start, group)
    moved_one = dict(start)
    moved_one[name] = group[1]
    assert sub.cost({n: moved_one[n] for n in sub.unit}) - sub.cost(
        {n: start[n] for n in sub.unit}) == pytest.approx(p.cost(moved_one) - p.cost(start))


def test_a_plan_lists_the_re_placement_by_groups_among_its_attempts():
    p = layered(30, seed=1)
    result = plan(p, near="s1")
    methods = [a["method"] for a in result.attempts]
    assert any(m.startswith("cheapest so far + servers re-placed") for m in methods)
    assert methods[-1].startswith("exact program")


@pytest.mark.parametrize("seed", range(4))
def test_a_unit_s_costs_weighed_at_once_equal_its_cost_on_each_server(seed):
    """unit_costs (peers and anchors summed by switch) against unit_cost, server by server,
    with peers unplaced, on the unit's own server and on other switches."""
    rng = random.Random(seed)
    switches = [f"s{1 + k % 3}" for k in range(9)]
    names = [f"u{k}" for k in range(12)]
    edges = {(a, b): rng.choice([0.0, 1.0, 2.5, 40.0])
             for a, b in itertools.combinations(names, 2) if rng.random() < 0.4}
    anchors = {(n, rng.choice(["s1", "s2", "s3"])): rng.uniform(0, 9) for n in names[:5]}
    p = Problem(units(names), hosts(9, switches=switches), edges=edges, anchors=anchors,
                switch_position={"s1": 0, "s2": 1, "s3": 2})
    a = {n: rng.choice(list(p.host)) for n in names[2:]}      # two peers not placed
    for n in names:
        weighed = p.unit_costs(n, a)
        for h in p.host:
            assert weighed(h) == pytest.approx(p.unit_cost(n, h, a), rel=1e-12, abs=1e-12)
