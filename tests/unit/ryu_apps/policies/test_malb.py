"""MALB, the paper's rule (malb-paper) and ours (malb): ryu_apps/policies/malb.py."""
import math
from collections import Counter

import pytest

from ryu_apps.policies.malb import BALANCE_GAIN, HEADROOM_FLOOR, LOOKAHEAD_S, connection_factor
from tests.lib.policy_core import SERVERS, loads, make_core, measured, running_core


def test_malb_sends_long_flows_to_least_weighted_load():
    core = make_core()
    core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, updated=99.0)   # CPU-bound
    loads(core, srv1=(90, 10, 1), srv2=(20, 80, 90), srv3=(50, 5, 5), srv4=(40, 50, 50))
    d = core.choose("backend")
    assert (d.server, d.algorithm) == ("srv2", "weighted-least-load")
    assert d.scores["srv2"] == 20.0 and d.weights == (1.0, 0.0, 0.0)


def test_malb_counts_the_jobs_each_server_runs_now_not_the_lagging_prediction():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    # three jobs went to srv1 at 60 s: by 100 s the 10 s ones are over; a rolling mean
    # still shows srv1 busy (prediction 40 %), the measurement at 99 s shows it idle
    for t in (60.1, 60.2, 60.3):
        core.note_assignment("srv1", "backend", t)
    for srv in SERVERS:
        cpu = 40.0 if srv == "srv1" else 20.0
        core.update_server_load(srv, cpu, 10.0, 10.0, 99.0, measured=(5.0 if srv == "srv1"
                                                                      else 20.0, 10.0, 10.0))
    d = core.choose("backend", now=100.0)
    assert d.server == "srv1" and "running flows" in d.reason
    # malb-paper decides on the prediction: anything but srv1
    paper = running_core("malb-paper", capacities={s: (0.3, 256, 50) for s in SERVERS})
    for srv in SERVERS:
        paper.update_server_load(srv, 40.0 if srv == "srv1" else 20.0, 10.0, 10.0, 99.0,
                                 measured=(5.0 if srv == "srv1" else 20.0, 10.0, 10.0))
    assert paper.choose("backend", now=100.0).server != "srv1"


def test_malb_counts_what_runs_beside_a_servers_containers_and_the_paper_does_not():
    """A process beside srv1's containers starves them: they measure as the least busy,
    and only the agent's reading of the whole server shows the server is full."""
    def decide(policy, **options):
        core = running_core(policy, capacities={s: (0.3, 256, 50) for s in SERVERS},
                            options=options or None)
        for srv in SERVERS:
            cpu = 5.0 if srv == "srv1" else 20.0
            core.update_server_load(srv, cpu, 10.0, 10.0, 99.0, measured=(cpu, 10.0, 10.0),
                                    outside_cpu=80.0 if srv == "srv1" else 0.0)
        return core.choose("backend", now=100.0)
    d = decide("malb")
    assert d.server != "srv1" and d.scores["srv1"] == pytest.approx(85.0)
    assert decide("malb", outside_use=False).server == "srv1"
    assert decide("malb-paper").server == "srv1"       # the paper's agents read containers
    # before the profiler knows what a flow uses: weighted least load, the same count
    core = make_core()
    core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, updated=99.0)
    for srv in SERVERS:
        core.update_server_load(srv, 5.0 if srv == "srv1" else 20.0, 10.0, 10.0, 99.0,
                                outside_cpu=80.0 if srv == "srv1" else 0.0)
    d = core.choose("backend")
    assert d.algorithm == "weighted-least-load" and d.server != "srv1"
    assert d.scores["srv1"] == pytest.approx(85.0)


def test_malb_spreads_a_burst_by_the_jobs_it_sent_since_the_measurement():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    measured(core, 99.0)
    picks = [core.choose("backend", now=100.0 + k * 0.01).server for k in range(8)]
    assert Counter(picks) == {s: 2 for s in SERVERS}


def test_malb_flows_running_at_the_measurement_are_not_counted_twice():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    # srv1 got two jobs at 95 s; the measurement at 99 s already shows them (10 % each)
    core.note_assignment("srv1", "backend", 95.0)
    core.note_assignment("srv1", "backend", 95.0)
    measured(core, 99.0, srv1=30.0, srv2=25.0)
    d = core.choose("backend", now=100.0)
    # srv1: 30 - 2 x 10 + 2 x 10 = 30, srv2: 25: srv2; the others at 10
    assert d.scores["srv1"] == pytest.approx(30.0) and d.scores["srv2"] == pytest.approx(25.0)
    assert d.server == "srv3"


def test_malb_on_servers_of_different_sizes_costs_a_flow_by_each_servers_capacity():
    caps = {"srv1": (0.6, 256, 50), "srv2": (0.3, 256, 50), "srv3": (0.3, 256, 50),
            "srv4": (0.2, 256, 50)}
    core = running_core(capacities=caps)
    measured(core, 99.0, srv1=0.0, srv2=0.0, srv3=0.0, srv4=0.0)
    picks = Counter(core.choose("backend", now=100.0 + k * 0.01).server for k in range(14))
    # 0.03 cores: 5 % of srv1, 10 % of srv2/3, 15 % of srv4: picks in proportion to capacity
    assert picks == {"srv1": 6, "srv2": 3, "srv3": 3, "srv4": 2}
    # short flows: round robin weighted by capacity (in the microservice's weights)
    core.profiles.set_manual_weights("ui", (1.0, 0.0, 0.0))
    ui = Counter(core.choose("ui", now=101.0).server for _ in range(140))
    assert ui == {"srv1": 60, "srv2": 30, "srv3": 30, "srv4": 20}
    # equal servers: plain round robin, as the paper
    eq = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    assert [eq.choose("ui").server for _ in range(4)] == SERVERS


def test_malb_on_unequal_servers_sends_a_job_where_it_raises_the_spread_least():
    caps = {"srv1": (0.6, 256, 50), "srv2": (0.3, 256, 50), "srv3": (0.3, 256, 50),
            "srv4": (0.2, 256, 50)}
    # a job (0.03 cores) is 5 points on srv1, 15 on srv4: srv4, 4 points below the others,
    # is the least loaded but would end 11 above them; srv1 would end 5 above
    core = running_core(capacities=caps)
    measured(core, 99.0, srv1=30.0, srv2=30.0, srv3=30.0, srv4=26.0)
    d = core.choose("backend", now=100.0)
    assert d.server == "srv1" and "raises the spread least" in d.reason
    assert d.scores["srv4"] == pytest.approx(26.0)       # the loads it saw, as before
    # far enough below the others, the small server takes it
    core = running_core(capacities=caps)
    measured(core, 99.0, srv1=30.0, srv2=30.0, srv3=30.0, srv4=10.0)
    assert core.choose("backend", now=100.0).server == "srv4"
    # the paper's rule keeps least load
    paper = running_core("malb-paper", capacities=caps)
    measured(paper, 99.0, srv1=30.0, srv2=30.0, srv3=30.0, srv4=26.0)
    assert paper.choose("backend", now=100.0).server == "srv4"
    # equal servers: least load, as before
    eq = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    measured(eq, 99.0, srv1=30.0, srv2=30.0, srv3=30.0, srv4=26.0)
    d = eq.choose("backend", now=100.0)
    assert d.server == "srv4" and "lowest of 4" in d.reason


def test_malb_without_durations_decides_as_the_paper():
    a, b = make_core("malb"), make_core("malb-paper")
    for core in (a, b):
        loads(core, srv1=(5.0, 5.0, 5.0), srv2=(50.0, 5.0, 5.0))
    assert [a.choose("backend", now=100.0 + k).server for k in range(6)] == \
        [b.choose("backend", now=100.0 + k).server for k in range(6)]


def test_malb_takes_the_network_base_from_the_prediction_less_the_flows_of_its_window():
    core = make_core("malb", capacities={s: (0.3, 256, 50) for s in SERVERS})
    # 20 s streams of 1 MB/s (16 % of a 50 Mbit/s server each)
    core.profiles.update({"video": (0.0, 0.0, 1.0)}, {}, 100.0,
                         per_flow_abs={"video": (0.0, 1e6)},
                         durations={"video": [10.0] * 20}, prediction_lag_s=30.0)
    for _ in range(3):                       # three 10 s streams (16 % each) at 70 s
        core.note_assignment("srv1", "video", 70.0)
    # a rolling mean over 69..99 s holds them 4 periods of 10: 19.2 % above srv1's base of 10
    for srv in SERVERS:
        core.update_server_load(srv, 10.0, 10.0, 29.2 if srv == "srv1" else 10.0, 99.0,
                                measured=(10.0, 10.0, 10.0))
    d = core.choose("video", now=100.0)
    assert d.scores == pytest.approx({s: 10.0 for s in SERVERS}, abs=1e-6)
    assert d.server == "srv1"         # the streams are over; the prediction still shows them


def test_malb_takes_the_cpu_base_from_the_latest_measurement():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, 100.0, prediction_lag_s=30.0)
    # the prediction (a 30 s mean) still shows srv2's old load; its latest sample does not
    for srv in SERVERS:
        core.update_server_load(srv, 60.0 if srv == "srv2" else 20.0, 10.0, 10.0, 99.0,
                                measured=(5.0 if srv == "srv2" else 20.0, 10.0, 10.0))
    assert core.choose("backend", now=100.0).server == "srv2"


def test_malb_takes_short_flows_at_their_level_over_servers_not_their_latest_sample():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, 100.0,
                         per_flow_abs={"ui": (0.01, 1e6)},
                         durations={"ui": [1.0] * 20})

    def sample(parts_of):
        for srv in SERVERS:
            ui_now, ui_mean, be = parts_of[srv]
            core.update_server_load(
                srv, 30.0, 10.0, 10.0, 99.0, measured=(ui_now + be, 10.0, 10.0),
                parts={"ui": {"cpu": ui_now, "net": 0.0, "cpu_mean": ui_mean, "net_mean": 0.0},
                       "backend": {"cpu": be, "net": 0.0, "cpu_mean": be, "net_mean": 0.0}})
    # srv1 carries a 10 MB ui object at the sample (40 % for 4 s) and had the most of the
    # ui's last half minute; its back-end carries one job (10 %), the others' two (20 %)
    sample({"srv1": (40.0, 12.0, 10.0), "srv2": (0.0, 4.0, 20.0),
            "srv3": (0.0, 4.0, 20.0), "srv4": (0.0, 4.0, 20.0)})
    core.note_assignment("srv2", "ui", 99.5)     # short flows sent since are not counted
    d = core.choose("backend", now=100.0)
    # every server: the ui's level over the servers, (12 + 3 x 4) / 4 = 6 %, plus its back-end
    assert d.scores == pytest.approx({"srv1": 16.0, "srv2": 26.0, "srv3": 26.0,
                                      "srv4": 26.0})
    assert d.server == "srv1"
    assert core.status(100.0)["servers"]["srv1"]["by_microservice"]["ui"]["cpu_mean"] == 12.0
    # the same figures without the parts: srv1's latest sample (50 %) keeps it out
    plain = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    for srv, cpu in (("srv1", 50.0), ("srv2", 20.0), ("srv3", 20.0), ("srv4", 20.0)):
        plain.update_server_load(srv, 30.0, 10.0, 10.0, 99.0, measured=(cpu, 10.0, 10.0))
    assert plain.choose("backend", now=100.0).server != "srv1"


def test_malb_counts_each_watched_job_at_what_its_server_measured_it_to_use():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})   # a job: 10 %

    def sample(t, backend):
        for srv in SERVERS:
            be = backend[srv]
            core.update_server_load(
                srv, 30.0, 10.0, 10.0, t, measured=(be, 10.0, 10.0),
                parts={"ui": {"cpu": 0.0, "net": 0.0, "cpu_mean": 0.0, "net_mean": 0.0},
                       "backend": {"cpu": be, "net": 0.0, "cpu_mean": be, "net_mean": 0.0}})
    # srv1: a heavy job (40 %) from 90 s, then a light one (10 %) from 93 s; srv4: two
    # 12 % jobs from 90 s; srv2 and srv3 busy
    core.note_assignment("srv1", "backend", 90.0, watched="heavy")
    for srv in ("srv2", "srv3", "srv4"):
        for k in range(2):
            core.note_assignment(srv, "backend", 90.0, watched=f"{srv}-{k}")
    sample(93.0, {"srv1": 40.0, "srv2": 60.0, "srv3": 60.0, "srv4": 24.0})
    core.note_assignment("srv1", "backend", 93.0, watched="light")
    sample(96.0, {"srv1": 50.0, "srv2": 60.0, "srv3": 60.0, "srv4": 24.0})
    assert core.open_flows.costs("srv1", 96.0) == ({"backend": (0, 2, 50.0, 0.0)})
    assert core.status(96.0)["servers"]["srv1"]["watched_flows_measured"] == {
        "backend": {"flows": 2, "cpu": 50.0, "net": 0.0}}
    core.flow_ended("heavy", 97.0)
    d = core.choose("backend", now=97.5)
    # srv1 runs the light job (10 %), srv4 its two (24 %); by the profile's 10 % a job,
    # srv1 would be 50 - 20 + 10 = 40 and srv4 4 + 20 = 24
    assert d.scores["srv1"] == pytest.approx(10.0) and d.scores["srv4"] == pytest.approx(24.0)
    assert d.server == "srv1"


def test_malb_counts_a_job_about_to_end_for_the_part_of_the_next_seconds_it_runs():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})

    def sample(t, backend):
        for srv in SERVERS:
            be = backend.get(srv, 0.0)
            core.update_server_load(
                srv, 30.0, 10.0, 10.0, t, measured=(be, 10.0, 10.0),
                parts={"ui": {"cpu": 0.0, "net": 0.0, "cpu_mean": 0.0, "net_mean": 0.0},
                       "backend": {"cpu": be, "net": 0.0, "cpu_mean": be, "net_mean": 0.0}})
    # jobs of this size were seen to last 10 s, start to FIN
    for k in range(4):
        core.note_assignment("srv3", "backend", 11.0 * k, watched=("old", k))
        sample(11.0 * k + 3.0, {"srv3": 12.5})
        core.flow_ended(("old", k), 11.0 * k + 10.0)
    # now srv2 runs one 9 s old, srv1 one 4 s old; srv3 and srv4 are busier
    core.note_assignment("srv2", "backend", 91.0, watched="ending")
    sample(94.0, {"srv2": 12.5, "srv3": 25.0, "srv4": 25.0})
    core.note_assignment("srv1", "backend", 96.0, watched="fresh")
    sample(99.0, {"srv1": 12.5, "srv2": 12.5, "srv3": 25.0, "srv4": 25.0})
    assert LOOKAHEAD_S == 5.0
    # on what they use now the two tie, and srv1 would come first
    assert core.running_load("srv1", 100.0)[0] == pytest.approx(12.5)
    assert core.running_load("srv2", 100.0)[0] == pytest.approx(12.5)
    d = core.choose("backend", now=100.0)
    # srv2's job has 1 s of the next 5 left: 12.5 x 1/5; srv1's 6 s: all of it
    assert d.scores["srv1"] == pytest.approx(12.5)
    assert d.scores["srv2"] == pytest.approx(2.5)
    assert d.server == "srv2"


def test_malb_weighs_a_long_flow_by_what_one_flow_uses_not_the_instances_footprint():
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    # the paper's weights: memory (the idle footprint) 97 %; a job uses CPU only
    core.profiles.update({"backend": (0.03, 0.97, 0.0)}, {}, 100.0,
                         per_flow={"backend": (10.0, 0.0, 0.0)})
    for srv in SERVERS:        # srv1: most CPU, least memory (by a percent)
        core.update_server_load(srv, 10.0, 20.0, 5.0, 99.0,
                                measured=(40.0 if srv == "srv1" else 10.0,
                                          19.0 if srv == "srv1" else 20.0, 5.0))
    d = core.choose("backend", now=100.0)
    assert d.weights == (1.0, 0.0, 0.0) and d.server != "srv1"
    ms = core.status(100.0)["microservices"]["backend"]
    assert ms["flow_weights_source"] == "per-flow use" and ms["weights"]["beta"] == 0.97
    paper = running_core("malb-paper", capacities={s: (0.3, 256, 50) for s in SERVERS})
    paper.profiles.update({"backend": (0.03, 0.97, 0.0)}, {}, 100.0)
    for srv in SERVERS:
        paper.update_server_load(srv, 40.0 if srv == "srv1" else 10.0,
                                 19.0 if srv == "srv1" else 20.0, 5.0, 99.0)
    paper_pick = paper.choose("backend", now=100.0)
    assert paper_pick.weights == pytest.approx((0.03, 0.97, 0.0)) and paper_pick.server == "srv1"
    core.profiles.set_manual_weights("backend", (0.0, 1.0, 0.0))        # manual weights still win
    assert core.choose("backend", now=100.5).weights == (0.0, 1.0, 0.0)


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), -1.0, "1"])


def test_malb_ignores_parts_with_a_short_flow_figure_missing_or_not_a_use(bad):
    core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    for srv in SERVERS:
        core.update_server_load(
            srv, 30.0, 10.0, 10.0, 99.0, measured=(50.0 if srv == "srv1" else 20.0, 10.0, 10.0),
            parts={"ui": {"cpu": 40.0, "net": bad, "cpu_mean": 0.0, "net_mean": 0.0}})
    d = core.choose("backend", now=100.0)
    assert d.scores["srv1"] == pytest.approx(50.0) and d.server != "srv1"


def test_malb_sends_a_watched_short_flow_where_the_least_flow_time_is_left():
    core = make_core()
    core.profiles.update({}, {}, 100.0, durations={"ui": [0.4] * 10 + [4.0] * 10})
    # srv1 got an object 0.5 s ago (a long one: the short ones end at 0.4 s); srv2 one
    # just now; srv3 two at 3.9 s old (nearly done); srv4 one just now
    for key, inst, t in (("a", "srv1-ui", 99.5), ("b", "srv2-ui", 100.0),
                         ("c", "srv3-ui", 96.1), ("d", "srv3-ui", 96.1),
                         ("e", "srv4-ui", 100.0)):
        core.connections.add(key, inst, t)
    d = core.choose("ui", watched="f")
    assert (d.server, d.algorithm) == ("srv3", "least-remaining")
    assert d.scores["srv3"] < d.scores["srv2"] == d.scores["srv4"] < d.scores["srv1"]
    assert core.connections.open_count("srv3-ui") == 3
    # its FIN: it no longer counts
    assert core.flow_ended("f", 100.5) and core.connections.open_count("srv3-ui") == 2
    # not watched (the controller will not see its end): round robin, as before
    assert core.choose("ui").algorithm == "round-robin"


def test_malb_short_flows_without_durations_go_to_the_fewest_open_ties_in_turn():
    core = make_core()
    picks = [core.choose("ui", watched=k).server for k in range(4)]
    assert picks == SERVERS                       # all empty: in turn, as round robin
    core.flow_ended(2, 100.0)                     # srv3's ended: the only one with none
    assert core.choose("ui", watched=9).server == "srv3"
    for k in (0, 1, 3, 9):
        core.flow_ended(k, 100.0)
    # empty again: the turn goes on after the last pick
    assert [core.choose("ui", watched=10 + k).server for k in range(4)] == \
        ["srv4", "srv1", "srv2", "srv3"]


def test_malb_short_flows_on_unequal_servers_weigh_by_capacity():
    caps = {"srv1": (0.6, 512, 100), "srv2": (0.3, 512, 100), "srv3": (0.3, 512, 100),
            "srv4": (0.2, 512, 100)}
    core = make_core(capacities=caps)
    core.profiles.update({"ui": (1.0, 0.0, 0.0)}, {}, 100.0, durations={"ui": [1.0] * 20})
    picks = Counter(core.choose("ui", watched=k).server for k in range(14))
    # no flow ends: each server takes flows in proportion to its CPU (0.6 : 0.3 : 0.3 : 0.2)
    assert picks == {"srv1": 6, "srv2": 3, "srv3": 3, "srv4": 2}


def test_malb_paper_keeps_round_robin_for_watched_short_flows():
    core = make_core("malb-paper")
    core.connections.add("x", "srv1-ui", 99.0)
    assert [core.choose("ui", watched=k).server for k in range(4)] == SERVERS
    assert not core.watches("ui") and core.watches("backend")
    assert make_core("malb").watches("ui")


def test_malb_measures_a_job_from_a_sample_whose_window_it_ran_through_as_the_sample_says():
    """A sample covers the seconds the profiler says (sample_window_s), not always a whole
    monitoring period: a job that started 2 s before a 1 s sample ran through all of it."""
    def measured_jobs(window):
        core = running_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
        core.note_assignment("srv1", "backend", 97.0, watched="job")
        for srv in SERVERS:
            be = 40.0 if srv == "srv1" else 0.0
            core.update_server_load(
                srv, 30.0, 10.0, 10.0, 99.0, measured=(be, 10.0, 10.0),
                parts={"backend": {"cpu": be, "net": 0.0, "cpu_mean": be, "net_mean": 0.0}},
                window=window)
        return core.open_flows.costs("srv1", 99.5), core.status(99.5)["servers"]["srv1"]
    costs, status = measured_jobs(1.0)
    assert costs == {"backend": (0, 1, 40.0, 0.0)} and status["sample_window_s"] == 1.0
    costs, status = measured_jobs(None)      # unsaid: the 3 s period, from 96 s: not whole
    assert costs == {"backend": (1, 0, 0.0, 0.0)} and status["sample_window_s"] is None
    costs, _ = measured_jobs(float("nan"))   # not a window: the period's
    assert costs == {"backend": (1, 0, 0.0, 0.0)}


def test_malb_keeps_what_a_short_flow_instance_uses_beyond_what_our_flows_explain():
    """A noisy neighbour in srv1's ui container (60 % of the server) is not the ui's flows:
    malb must not average it away with them and send the jobs there (malb-paper, on the
    predictions, keeps away from srv1 too)."""
    def core_with(policy, busy_srv1=False, ui_cores=0.01):
        core = running_core(policy, capacities={s: (0.3, 256, 50) for s in SERVERS})
        core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, 100.0,
                             per_flow_abs={"ui": (ui_cores, 1e6)}, durations={"ui": [1.0] * 20})
        for k, srv in enumerate(SERVERS):          # one ui object each, watched
            core.note_assignment(srv, "ui", 90.0, watched=("ui", k), instance=f"{srv}-ui")
            if not (busy_srv1 and srv == "srv1"):
                core.flow_ended(("ui", k), 91.0)
        for t in (96.0, 97.0, 98.0, 99.0):
            for srv in SERVERS:
                ui = 60.0 if srv == "srv1" else 0.5
                be = 10.0 if srv == "srv1" else 20.0
                core.update_server_load(
                    srv, ui + be, 10.0, 10.0, t, measured=(ui + be, 10.0, 10.0),
                    parts={"ui": {"cpu": ui, "net": 0.0, "cpu_mean": ui, "net_mean": 0.0},
                           "backend": {"cpu": be, "net": 0.0, "cpu_mean": be,
                                       "net_mean": 0.0}})
        return core
    for policy in ("malb", "malb-paper"):
        assert core_with(policy).choose("backend", now=100.0).server != "srv1", policy
    d = core_with("malb").choose("backend", now=100.0)
    assert d.scores["srv1"] > 60.0 > max(v for s, v in d.scores.items() if s != "srv1")
    # a ui object of ours open there all along that costs what srv1's ui used (0.18 of its
    # 0.3 cores): the flows' part, levelled as before
    assert core_with("malb", busy_srv1=True, ui_cores=0.18).choose(
        "backend", now=100.0).server == "srv1"
    # ... and one that costs far less explains little of it
    assert core_with("malb", busy_srv1=True).choose("backend", now=100.0).server != "srv1"
    # short flows the controller does not follow (the switch balances them, or malb's
    # short-flow rule is round robin): no flow-seconds, so none of the use is taken as
    # unexplained; the ui's part counts at its level, as the flows' would
    switched = core_with("malb")
    switched.set_switch_balanced({"ui"})
    assert switched.running_estimate.own_load("srv1", "ui", 99.0) == (0.0, 0.0)
    assert switched.choose("backend", now=100.0).server == "srv1"
    unwatched = core_with("malb")
    unwatched.set_policy("malb", short_flows="round-robin")
    assert unwatched.running_estimate.own_load("srv1", "ui", 99.0) == (0.0, 0.0)
    assert core_with("malb").running_estimate.own_load("srv1", "ui", 99.0)[0] > 50.0


# ---------------------------------------------------------------- data-plane shares
def test_malb_data_plane_shares_move_away_from_the_busier_servers_at_each_sample():
    core = make_core()
    core.profiles.set_manual_weights("ui", (0.0, 0.0, 1.0))          # network-bound objects
    # no data: equal (equal servers), as before
    assert core.short_flow_shares("ui", now=100.0) == {f"{s}-ui": 1.0 for s in SERVERS}
    loads(core, srv1=(10, 10, 80), srv2=(10, 10, 20), srv3=(10, 10, 20), srv4=(10, 10, 20))
    first = core.short_flow_shares("ui", now=100.0)
    # srv1 45 points above the mean (35), the others 15 below
    raw = {"srv1-ui": math.exp(-BALANCE_GAIN * 0.45),
           **{f"srv{k}-ui": math.exp(BALANCE_GAIN * 0.15) for k in (2, 3, 4)}}
    assert first == pytest.approx({n: v / sum(raw.values()) for n, v in raw.items()})
    # asked again without a new sample: the same shares
    assert core.short_flow_shares("ui", now=101.0) == first
    # the same loads at the next sample: the shares move on (they integrate the imbalance)
    loads(core, t=102.0, srv1=(10, 10, 80), srv2=(10, 10, 20), srv3=(10, 10, 20),
          srv4=(10, 10, 20))
    second = core.short_flow_shares("ui", now=103.0)
    assert second["srv1-ui"] < first["srv1-ui"]
    # the servers loaded alike: the shares stand where they are
    loads(core, t=104.0, **{s: (10, 10, 20) for s in SERVERS})
    assert core.short_flow_shares("ui", now=105.0) == pytest.approx(second)
    assert sum(second.values()) == pytest.approx(1.0)


def test_malb_data_plane_shares_of_those_that_stay_keep_their_proportions_when_one_leaves():
    from ryu_apps.dataplane import SlotTable
    core = make_core()
    core.profiles.set_manual_weights("ui", (0.0, 0.0, 1.0))
    loads(core, srv1=(10, 10, 60), srv2=(10, 10, 20), srv3=(10, 10, 5), srv4=(10, 10, 40))
    core.short_flow_shares("ui", now=100.0)
    loads(core, t=102.0, srv1=(10, 10, 20), srv2=(10, 10, 50), srv3=(10, 10, 5),
          srv4=(10, 10, 30))
    before = core.short_flow_shares("ui", now=103.0)
    table = SlotTable(257)
    table.update(before)
    old = table.table
    core.set_draining("srv3-ui")           # the largest share leaves, no new sample
    after = core.short_flow_shares("ui", now=104.0)
    stay = {n: v for n, v in before.items() if n != "srv3-ui"}
    assert after == pytest.approx({n: v / sum(stay.values()) for n, v in stay.items()})
    moved = table.update(after)
    assert {old[k] for k in moved} == {"srv3-ui"}          # Maglev's minimal disruption
    # the next sample moves the shares on from where they stood
    loads(core, t=105.0, srv1=(10, 10, 40), srv2=(10, 10, 20), srv3=(10, 10, 20),
          srv4=(10, 10, 30))
    nxt = core.short_flow_shares("ui", now=106.0)
    raw = {n: after[n] * math.exp(-BALANCE_GAIN * (x - 30) / 100)
           for n, x in (("srv1-ui", 40), ("srv2-ui", 20), ("srv4-ui", 30))}
    assert nxt == pytest.approx({n: v / sum(raw.values()) for n, v in raw.items()})


def test_malb_data_plane_shares_keep_a_floor_and_weigh_capacity_on_unequal_servers():
    caps = {"srv1": (0.6, 256, 50), "srv2": (0.3, 256, 50), "srv3": (0.3, 256, 50),
            "srv4": (0.2, 256, 50)}
    core = make_core(capacities=caps)
    core.profiles.set_manual_weights("ui", (1.0, 0.0, 0.0))
    loads(core, srv1=(100, 10, 10), srv2=(50, 10, 10), srv3=(50, 10, 10), srv4=(0, 10, 10))
    shares = core.short_flow_shares("ui", now=100.0)
    # from the capacity shares, srv1 50 points above the mean, srv4 50 below
    raw = {"srv1-ui": 0.6 * math.exp(-BALANCE_GAIN * 0.5), "srv2-ui": 0.3, "srv3-ui": 0.3,
           "srv4-ui": 0.2 * math.exp(BALANCE_GAIN * 0.5)}
    assert shares == pytest.approx({n: v / sum(raw.values()) for n, v in raw.items()})
    # srv1 stays full: its share falls to its floor, a tenth of its capacity share, no lower
    for k in range(1, 30):
        loads(core, t=100.0 + 2 * k, srv1=(100, 10, 10), srv2=(50, 10, 10),
              srv3=(50, 10, 10), srv4=(0, 10, 10))
        shares = core.short_flow_shares("ui", now=101.0 + 2 * k)
    assert shares["srv1-ui"] == pytest.approx(HEADROOM_FLOOR * 0.6 / 1.4)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_malb_paper_data_plane_shares_stay_equal_whatever_the_loads():
    core = make_core("malb-paper")
    loads(core, srv1=(90, 90, 90))
    assert core.short_flow_shares("ui", now=100.0) == {f"{s}-ui": 1.0 for s in SERVERS}


def test_connection_factor_leaves_equal_counts_alone_and_divides_by_one_plus_the_excess():
    equal = {"a": 0.5, "b": 0.5}
    assert connection_factor(equal, {"a": 3, "b": 3}) == pytest.approx({"a": 0.5, "b": 0.5})
    assert connection_factor(equal, {}) == pytest.approx(equal)
    # 2 open on a part of 1 against none: a third of the other's share
    assert connection_factor(equal, {"a": 2, "b": 0}) == pytest.approx({"a": 0.25, "b": 0.75})
    # counts over each instance's part of the shares: twice the share holding twice the
    # connections keeps its proportion
    got = connection_factor({"big": 2.0, "small": 1.0}, {"big": 4, "small": 2})
    assert got == pytest.approx({"big": 2 / 3, "small": 1 / 3})
    # an instance without a share keeps none, and no shares at all stay as they are
    assert connection_factor({"a": 1.0, "b": 0.0}, {"a": 5, "b": 0}) == {"a": 1.0, "b": 0.0}
    assert connection_factor({"a": 0.0}, {"a": 1}) == {"a": 0.0}


# --------------------------------------------------------------- malb-near: the caller's switch
NEAR_SITES = {"srv1": "s1", "srv2": "s1", "srv3": "s2", "srv4": "s2"}


def near_core(policy="malb-near", sites=NEAR_SITES, **kw):
    """The test core with srv1-2 on switch s1, srv3-4 on s2, and a caller instance (front,
    10.0.1.9) on srv1."""
    from ryu_apps.policies import Backend
    core = make_core(policy, sites=sites, **kw)
    core.instances.add(Backend("srv1-front", "front", "srv1", "10.0.1.9", "02:00:00:01:01:09",
                               80, 99))
    return core


def level(core, **per_server):
    """Every server at one figure for CPU, memory and network (whatever the weights)."""
    loads(core, **{s: (v, v, v) for s, v in per_server.items()})


def test_malb_near_keeps_a_callers_short_flows_on_its_switch_in_turn():
    core = near_core()
    level(core, srv1=30, srv2=30, srv3=30, srv4=30)
    picks = [core.choose("ui", caller="10.0.1.9").server for _ in range(6)]
    assert picks == ["srv1", "srv2"] * 3
    d = core.choose("ui", caller="10.0.1.9")
    assert d.reason.startswith("on the caller's switch s1")
    # ours without the rule, and a caller that is no instance (a client host): all four
    for plain in (near_core("malb"), near_core()):
        level(plain, srv1=30, srv2=30, srv3=30, srv4=30)
        caller = "10.0.1.9" if plain.policy == "malb" else "10.0.200.1"
        assert {plain.choose("ui", caller=caller).server for _ in range(8)} == set(SERVERS)


def test_malb_near_spills_to_every_switch_when_the_callers_is_loaded_beyond_the_slack():
    from ryu_apps.policies.malb import NEAR_SLACK
    core = near_core()
    level(core, srv1=40 + NEAR_SLACK, srv2=40 + NEAR_SLACK, srv3=40, srv4=40)
    assert {core.choose("ui", caller="10.0.1.9").server for _ in range(4)} == {"srv1", "srv2"}
    level(core, srv1=41 + NEAR_SLACK, srv2=41 + NEAR_SLACK, srv3=40, srv4=40)
    d = core.choose("ui", caller="10.0.1.9")
    assert "too loaded" in d.reason and "every switch" in d.reason
    assert {core.choose("ui", caller="10.0.1.9").server for _ in range(8)} == set(SERVERS)
    # the mean of the near servers counts: one busy and one idle server on s1 keep it
    level(core, srv1=90, srv2=10, srv3=40, srv4=40)
    assert core.choose("ui", caller="10.0.1.9").server in ("srv1", "srv2")


def test_malb_near_runs_the_long_flow_rule_among_the_near_instances():
    core = near_core(capacities={s: (0.3, 256, 50) for s in SERVERS})
    core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, updated=99.0)   # CPU-bound
    loads(core, srv1=(30, 0, 0), srv2=(25, 0, 0), srv3=(22, 0, 0), srv4=(18, 0, 0))
    d = core.choose("backend", caller="10.0.1.9")
    assert d.server == "srv2" and d.algorithm == "weighted-least-load"
    assert "on the caller's switch s1" in d.reason
    # without the rule, the least loaded anywhere
    plain = near_core("malb", capacities={s: (0.3, 256, 50) for s in SERVERS})
    plain.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, updated=99.0)
    loads(plain, srv1=(30, 0, 0), srv2=(25, 0, 0), srv3=(22, 0, 0), srv4=(18, 0, 0))
    assert plain.choose("backend", caller="10.0.1.9").server == "srv4"


def test_malb_near_without_fresh_loads_prefers_the_near_and_without_sites_is_malb():
    core = near_core()                      # no load ever reported
    assert {core.choose("ui", caller="10.0.1.9").server for _ in range(4)} == {"srv1", "srv2"}
    assert "no fresh load data" in core.choose("ui", caller="10.0.1.9").reason
    # no switch known for the servers: nothing is near, the decisions are malb's
    a, b = near_core(sites={}), near_core("malb", sites={})
    level(a, srv1=30, srv2=30, srv3=30, srv4=30)
    level(b, srv1=30, srv2=30, srv3=30, srv4=30)
    assert [a.choose("ui", caller="10.0.1.9").server for _ in range(8)] == \
        [b.choose("ui", caller="10.0.1.9").server for _ in range(8)]
    # every candidate on the caller's switch: the rule says nothing
    core = near_core(sites={s: "s1" for s in SERVERS})
    level(core, srv1=30, srv2=30, srv3=30, srv4=30)
    assert "caller's switch" not in core.choose("ui", caller="10.0.1.9").reason


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan, True, "10"])
def test_malb_near_slack_must_be_load_points(bad):
    from ryu_apps import policies
    with pytest.raises(ValueError, match="near_slack"):
        policies.make("malb-near", near_slack=bad)
