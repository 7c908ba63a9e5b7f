"""The policy core (ryu_apps/policy_core.py): pools, health, loads, weights, pending flows and the
status, as every policy reads them. Each policy's own tests: tests/unit/ryu_apps/policies/."""
import json
from collections import Counter

import pytest

from ryu_apps import policies
from ryu_apps.policies import NoBackend
from ryu_apps.microservice_profiles import normalise_weights
from tests.lib.policy_core import SERVERS, loads, make_core



def test_no_healthy_instance_raises():
    core = make_core()
    for s in SERVERS:
        core.set_health(f"{s}-video", False)
    with pytest.raises(NoBackend):
        core.choose("video")


@pytest.mark.parametrize("policy", policies.names())
def test_an_instance_calling_its_own_vip_is_never_given_itself(policy):
    core = make_core(policy=policy)
    loads(core)
    me = core.pools["ui"][1]
    picks = Counter(core.choose("ui", now=100.0 + k / 10, caller=me.ip,
                                flow_key=("tcp", me.ip, 40000 + k, "10.0.0.100", 80)).instance
                    for k in range(12))
    assert me.name not in picks and sum(picks.values()) == 12
    if policy == "srr":
        assert set(picks) == {b.name for b in core.pools["ui"]} - {me.name}
    for b in core.pools["ui"]:
        if b is not me:
            core.set_health(b.name, False)
    with pytest.raises(NoBackend, match="but the caller itself"):
        core.choose("ui", caller=me.ip)
    assert core.choose("ui").instance == me.name          # anyone else may have it


def test_a_burst_of_long_flows_is_spread_by_pending_correction():
    core = make_core(pending_flow_cost=5.0)
    loads(core)  # all equal
    picks = [core.choose("video").server for _ in range(8)]
    assert Counter(picks) == {s: 2 for s in SERVERS}
    # without correction, the idlest-looking server would take them all
    flat = make_core(pending_flow_cost=0.0)
    loads(flat, srv3=(5, 5, 5))
    assert {flat.choose("video").server for _ in range(8)} == {"srv3"}
    # a 5-point lead is worth one pending flow at cost 5
    core = make_core(pending_flow_cost=5.0)
    loads(core, srv3=(5, 5, 5))
    assert [core.choose("video").server for _ in range(3)] == ["srv3", "srv1", "srv2"]


def test_pending_flows_count_only_since_the_sample():
    core = make_core(pending_flow_cost=5.0)
    clock = [100.0]
    core.clock = lambda: clock[0]
    loads(core, t=99.0)
    core.choose("video")            # srv1 at t=100
    assert core.pending("srv1", 99.0) == 1
    core.update_server_load("srv1", 10, 10, 10, 100.5)   # sample taken after the assignment
    assert core.pending("srv1", 100.5) == 0
    # srv1's new sample already holds its flow: back to a tie, broken by instance order
    assert core.choose("video").server == "srv1"


def test_stale_server_is_left_out_of_least_load_but_kept_in_round_robin():
    core = make_core(server_stale_after_s=9.0)
    loads(core, t=99.0, srv1=(0, 0, 0))          # srv1 looks idlest...
    core.update_server_load("srv1", 0, 0, 0, 99.0)
    for s in ("srv2", "srv3", "srv4"):
        core.update_server_load(s, 30, 30, 30, 99.0)
    core.loads["srv1"].sample_time = 80.0        # ...but its data is 20 s old
    d = core.choose("video")
    assert d.server != "srv1" and "left out" in d.reason
    assert "srv1" in {core.choose("ui").server for _ in range(4)}   # short flows: RR


def test_without_any_fresh_data_least_load_falls_back_to_round_robin():
    core = make_core()
    picks = [core.choose("video") for _ in range(4)]
    assert [d.server for d in picks] == SERVERS
    assert all("no fresh load data" in d.reason for d in picks)


def test_weights_sources_manual_profiler_stale_equal():
    core = make_core(weights_stale_after_s=30.0, period_s=3.0)
    assert core.profiles.weights("video", 100.0)[1].startswith("equal (no profile")
    core.profiles.update({"video": (0.51, 19.26, 22.87)}, {}, updated=99.0)
    w, src = core.profiles.weights("video", 100.0)
    assert src == "profiler" and round(w[2], 3) == 0.536
    w, src = core.profiles.weights("video", 115.0)
    assert "stale" in src and round(w[2], 3) == 0.536       # kept while the profiler is silent
    w, src = core.profiles.weights("video", 140.0)
    assert w == pytest.approx((1 / 3,) * 3) and src.startswith("equal (profile")
    core.profiles.set_manual_weights("video", (0, 0, 2))
    assert core.profiles.weights("video", 140.0) == ((0.0, 0.0, 1.0), "manual")
    core.profiles.set_manual_weights("video", None)
    assert core.profiles.weights("video", 140.0)[1].startswith("equal")


def test_auto_flow_class_comes_from_the_profiler_and_defaults_to_long():
    core = make_core(classes={"video": "auto", "ui": "auto", "backend": "long"})
    assert core.profiles.flow_class("ui") == ("long", "default (not profiled yet)")
    core.profiles.update({}, {"ui": "short", "video": None}, updated=99.0)
    assert core.profiles.flow_class("ui") == ("short", "profiler")
    assert core.choose("ui").algorithm == "round-robin"


def test_ties_break_on_instance_order_deterministically():
    a, b = make_core(pending_flow_cost=0), make_core(pending_flow_cost=0)
    for core in (a, b):
        loads(core)
    # equal loads, no pending cost: fewer pending flows first, then instance order
    assert [a.choose("video").server for _ in range(5)] == \
        [b.choose("video").server for _ in range(5)] == SERVERS + ["srv1"]


def test_policy_switch_and_bad_values():
    core = make_core()
    core.set_policy("srr")
    assert core.status()["policy"] == "srr"
    with pytest.raises(ValueError, match="policy"):
        core.set_policy("random")
    with pytest.raises(ValueError, match="gamma"):
        normalise_weights((1, 1, -1), "video")
    with pytest.raises(ValueError, match="three numbers"):
        normalise_weights("abc", "video")
    assert normalise_weights((0, 0, 0)) == pytest.approx((1 / 3,) * 3)
    with pytest.raises(KeyError):
        core.set_health("nope", False)


def test_status_is_json_ready_and_counts_assignments():
    core = make_core()
    loads(core)
    for _ in range(4):
        core.choose("ui")
    st = json.loads(json.dumps(core.status()))
    assert st["servers"]["srv1"]["flows_assigned"] == {"ui": 1}
    assert st["microservices"]["ui"]["flow_class"] == "short"
    assert st["servers"]["srv2"]["instances"]["srv2-ui"]["healthy"] is True


def test_pending_flows_fade_over_the_prediction_lag_at_their_per_flow_cost():
    core = make_core()
    core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, 90.0,
                         per_flow={"backend": (20.0, 1.0, 0.0)}, prediction_lag_s=30.0)
    core.note_assignment("srv1", "backend", 100.0)
    w = (1.0, 0.0, 0.0)
    assert core.pending_load("srv1", 99.0, 30.0, w) == pytest.approx(20.0)      # after data
    assert core.pending_load("srv1", 103.0, 30.0, w) == pytest.approx(18.0)     # 3 s of 30
    assert core.pending_load("srv1", 131.0, 30.0, w) == 0.0
    assert core.pending_load("srv1", 103.0, 0.0, w) == 0.0       # switch counters: at once
    core.note_assignment("srv2", "video", 100.0)                 # no per-flow figure yet
    assert core.pending_load("srv2", 99.0, 30.0, w) == core.pending_flow_cost


def test_a_lagging_prediction_does_not_make_long_flows_pile_up():
    """Samples every 3 s whose (smoothed) load does not move yet: with the lag known, flows
    keep counting after the next sample and spread; without it they herd."""
    def run(lag):
        core = make_core()
        clock = [100.0]
        core.clock = lambda: clock[0]
        core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, 99.0,
                             per_flow={"backend": (25.0, 0.0, 0.0)}, prediction_lag_s=lag)
        picks = []
        for step in range(4):
            t = 100.0 + 3 * step
            for srv in SERVERS:
                core.update_server_load(srv, 10.0 if srv != "srv4" else 30.0, 10, 10, t)
            for k in range(2):
                clock[0] = t + 0.5 + k
                picks.append(core.choose("backend").server)
        return picks
    spread = run(30.0)
    assert Counter(spread).most_common(1)[0][1] <= 3 and "srv4" not in spread[:3]
    herded = run(0.0)
    assert Counter(herded).most_common(1)[0][1] >= 4


def test_status_shows_per_flow_use_and_lag():
    core = make_core()
    core.profiles.update({}, {}, 99.0, per_flow={"video": (1.0, 0.0, 3.0)},
                         prediction_lag_s=30.0)
    st = core.status()
    assert st["prediction_lag_s"] == 30.0
    assert st["microservices"]["video"]["per_flow"] == {"cpu": 1.0, "mem": 0.0, "net": 3.0}
    assert st["microservices"]["ui"]["per_flow"] is None




def test_weights_are_normalised_without_overflow():
    assert normalise_weights((1e308, 1e308, 0), "video") == (0.5, 0.5, 0.0)
    assert normalise_weights((1e308, 1e308, 1e308)) == pytest.approx((1 / 3,) * 3)
    assert normalise_weights((5e-324, 0, 0)) == (1.0, 0.0, 0.0)
    assert normalise_weights((1, 1, 2)) == (0.25, 0.25, 0.5)
    with pytest.raises(ValueError, match="too large"):
        normalise_weights((10 ** 400, 1, 0), "video")
    with pytest.raises(ValueError, match="alpha"):
        normalise_weights((float("inf"), 1, 0), "video")


def test_a_core_from_a_configuration_knows_each_servers_switch_and_each_callers():
    from common.config import load_config
    from common.paths import shipped
    from ryu_apps.policy_core import core_from_config
    cfg = load_config(shipped("configs", "hotelreservation.yaml"))
    core = core_from_config(cfg, "malb-near")
    assert core.sites == {s.name: s.switch for s in cfg.servers}
    assert len(set(core.sites.values())) > 1
    inst = cfg.instances[0]
    assert core.view.site_of_address(inst.ip) == cfg.server(inst.server).switch
    view = core.view
    assert view.site_of_address("192.0.2.1") is None and view.site_of_address(None) is None
