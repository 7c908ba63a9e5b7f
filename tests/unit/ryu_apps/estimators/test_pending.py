"""Pending flows in time buckets (ryu_apps/estimators/pending_assignments.py) against the
per-flow walk it replaced."""
import math
import random

import pytest

from ryu_apps.estimators.pending_assignments import PendingFlows
from ryu_apps.policy_core import PENDING_KEEP_LAG_S, PENDING_MAX_LAG_S
from tests.lib.policy_core import SERVERS, loads, make_core

Q = 0.1


def share(t, d, lag):
    """The per-flow share the policy documents (the walk the buckets replaced)."""
    age = d - t
    return 1.0 if age <= 0 else (0.0 if lag <= 0 else max(0.0, 1.0 - age / lag))


def walk(flows, d, lag):
    out = {}
    for t, ms in flows:
        out[ms] = out.get(ms, 0.0) + share(t, d, lag)
    return out


def bucket(t):
    return math.floor(t / Q)       # as pending_assignments.py numbers its buckets


def boundary_bound(flows, d, lag):
    """The documented error bound: n * bucket_s / (4 lag) per bucket holding a kink."""
    kinks = {bucket(d), bucket(d - lag)}
    n = sum(1 for t, _ in flows if bucket(t) in kinks)
    return n * Q / (4 * lag) + 1e-9


def filled(flows):
    p = PendingFlows(Q)
    for t, ms in flows:
        p.add("srv1", ms, t)
    return p


def test_far_from_the_kinks_the_sums_are_exact():
    rng = random.Random(1)
    flows = sorted((1000 + 20 * rng.random(), rng.choice("ab")) for _ in range(5000))
    p = filled(flows)
    for d, lag in [(1010.05, 3.0), (1005.0, 9.0), (1025.0, 30.0), (999.0, 3.0)]:
        # no flow in the buckets of d and d - lag: exact
        clean = [(t, ms) for t, ms in flows if bucket(t) not in {bucket(d), bucket(d - lag)}]
        q = filled(clean)
        got, want = q.shares("srv1", d, lag), walk(clean, d, lag)
        for ms in want:
            assert got.get(ms, 0.0) == pytest.approx(want[ms], rel=1e-9, abs=1e-6)
        assert p.count_after("srv1", 1020.5) == sum(t > 1020.5 for t, _ in flows)


@pytest.mark.parametrize("lag", [0.5, 3.0, 9.0, 30.0])
def test_near_the_kinks_the_error_stays_within_the_documented_bound(lag):
    rng = random.Random(int(lag * 10))
    flows = sorted((1000 + 40 * rng.random(), rng.choice("abc")) for _ in range(20000))
    p = filled(flows)
    for _ in range(50):
        d = 1000 + 40 * rng.random()
        got, want = p.shares("srv1", d, lag), walk(flows, d, lag)
        err = sum(abs(got.get(ms, 0.0) - want.get(ms, 0.0)) for ms in "abc")
        assert err <= boundary_bound(flows, d, lag)


def test_flows_at_one_time_are_exact_even_in_a_kink_bucket():
    p = PendingFlows(Q)
    for _ in range(7):
        p.add("srv1", "a", 100.03)
    assert p.shares("srv1", 100.05, 3.0)["a"] == pytest.approx(7 * (1 - 0.02 / 3.0))
    assert p.shares("srv1", 100.0, 3.0)["a"] == 7.0
    assert p.shares("srv1", 103.03, 3.0) == {}
    assert p.count_after("srv1", 100.0) == 7 and p.count_after("srv1", 100.05) == 0


def test_switch_counters_lag_zero_count_after_the_sample_only():
    flows = [(100.0 + k * 0.25, "a") for k in range(20)]
    p = filled(flows)
    assert p.shares("srv1", 102.5, 0.0)["a"] == 10        # 102.5 .. 104.75: exact here
    assert p.shares("srv1", 200.0, 0.0) == {}


def test_an_assignment_older_than_the_newest_bucket_is_counted_where_it_belongs():
    p = PendingFlows(Q)
    for t in (100.0, 105.0, 103.0, 99.0, 105.0):
        p.add("srv1", "a", t)
    assert p.count_after("srv1", 102.0) == 3
    assert p.shares("srv1", 104.0, 10.0)["a"] == pytest.approx(
        sum(share(t, 104.0, 10.0) for t in (100.0, 105.0, 103.0, 99.0, 105.0)))


def test_pruning_keeps_the_sums_right_over_a_long_run():
    rng = random.Random(3)
    p, kept, t = PendingFlows(Q), [], 1.7e9      # epoch-sized times: precision matters
    for step in range(60000):                    # 100 flows/s for 10 minutes
        t += rng.expovariate(100.0)
        p.add("srv1", "a", t)
        kept.append(t)
        if step % 50 == 0:
            p.prune("srv1", t - 12.0)
    d = t - 1.0
    want = sum(share(x, d, 9.0) for x in kept)
    assert abs(p.shares("srv1", d, 9.0)["a"] - want) <= boundary_bound(
        [(x, "a") for x in kept], d, 9.0)
    assert p.buckets() <= 12.0 / Q + 32 + 2            # the window and one batch


def test_bad_bucket_width():
    with pytest.raises(ValueError, match="bucket_s"):
        PendingFlows(0)


def test_memory_stays_bounded_while_the_profiler_is_away():
    """1000 new long flows/s for 10 minutes and no sample at all: the core keeps only what
    fresh data could still miss (the stale limit plus the lag, at least a minute), not every
    flow."""
    core = make_core(pending_flow_cost=5.0, server_stale_after_s=9.0)
    core.profiles.update({}, {}, 0.0, prediction_lag_s=9.0)
    t = 1000.0
    for k in range(600_000):
        t += 0.001
        core.note_assignment(SERVERS[k % 4], "video", t)
    window = 9.0 + PENDING_KEEP_LAG_S
    assert core.pending_flows.buckets() <= 4 * (window / core.pending_flows.bucket_s + 32 + 2)
    assert all(core.pending(s) <= window * 250 * 1.01 for s in SERVERS)
    # a huge reported lag does not lift the bound
    core.profiles.update({}, {}, 0.0, prediction_lag_s=1e9)
    for k in range(100):
        core.note_assignment("srv1", "video", t + k * 0.01)
    assert core.pending_flows.buckets() <= 4 * ((9.0 + PENDING_MAX_LAG_S) / 0.1 + 32 + 2)


def test_decisions_with_pending_flows_match_the_per_flow_walk():
    """The real least-load path, flows spread over the lag: the scores are the walk's, to
    within the kink buckets' bound."""
    rng = random.Random(5)
    core = make_core(pending_flow_cost=5.0)
    core.profiles.update({"backend": (0.5, 0.2, 0.3)}, {}, 99.0,
                         per_flow={"backend": (2.0, 1.0, 1.0), "video": (1.0, 1.0, 3.0)},
                         prediction_lag_s=9.0)
    flows = {s: sorted((88.0 + 12 * rng.random(), rng.choice(("video", "backend", "ui")))
                       for _ in range(3000)) for s in SERVERS}
    for s, fl in flows.items():
        for t, ms in fl:
            core.note_assignment(s, ms, t)
    loads(core, t=98.5)
    w = core.profiles.weights("backend", 100.0)[0]
    cost = {"backend": sum(a * b for a, b in zip(w, (2.0, 1.0, 1.0))),
            "video": sum(a * b for a, b in zip(w, (1.0, 1.0, 3.0))), "ui": 5.0}
    d = core.choose("backend", 100.0)
    for s in SERVERS:
        want = 10.0 + sum(cost[ms] * v for ms, v in walk(flows[s], 98.5, 9.0).items())
        bound = max(cost.values()) * boundary_bound(flows[s], 98.5, 9.0) + 1e-3
        assert d.scores[s] == pytest.approx(want, abs=bound)


def test_remembered_parts_follow_new_flows_drops_and_new_data():
    """A decision reuses the part up to d's bucket: flows landing after it, in it or before
    it, drops and a new d must all give what a fresh computation gives."""
    rng = random.Random(9)
    p, kept, t = PendingFlows(Q), [], 1000.0
    views = [(1000.0, 3.0), (1000.0, 0.0)]
    for step in range(3000):
        r = rng.random()
        if r < 0.6:
            t += rng.expovariate(50.0)
            x = t
        elif r < 0.75:
            x = views[0][0] + rng.uniform(-0.05, 0.05)        # into or around d's bucket
        else:
            x = t - rng.uniform(0, 5)                         # late
        ms = rng.choice("ab")
        p.add("srv1", ms, x)
        kept.append((x, ms))
        if step % 500 == 499:                                 # new data
            views = [(t - 1.0, 3.0), (t - 1.0, 0.0)]
        if step % 100 == 50:                                  # a drop, same data
            h = views[0][0] - 3.5
            p.prune("srv1", h, batch=1)
            kept = [(x, ms) for x, ms in kept if math.floor(x / Q) > math.floor(h / Q) - 1]
        for d, lag in views:
            got = p.view("srv1", d, lag)
            fresh = filled(sorted(kept)).view("srv1", d, lag)
            assert got[0] == fresh[0]
            for ms in "ab":
                assert got[1].get(ms, 0.0) == pytest.approx(fresh[1].get(ms, 0.0), abs=1e-6)
