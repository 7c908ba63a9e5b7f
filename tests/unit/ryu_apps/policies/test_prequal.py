"""Probe-based balancing (prequal): ryu_apps/policies/prequal.py."""
import pytest

from tests.lib.policy_core import SERVERS, make_core


def probed(core, t=99.5, **per_server):
    """per_server: srvN=(in flight, p50 latency in s or None) of its back-end instance."""
    for srv in SERVERS:
        rif, lat = per_server.get(srv, (1.0, 0.5))
        core.update_probe(f"{srv}-backend", rif, lat, None, t)


def test_prequal_sends_to_the_cold_instance_with_the_lowest_latency():
    core = make_core("prequal")
    assert core.strategy.uses_probes
    # srv1 answers fastest but holds the most in flight (hot); srv3 is the fastest cold one
    probed(core, srv1=(5.0, 0.1), srv2=(1.0, 0.9), srv3=(1.0, 0.3), srv4=(0.0, 0.6))
    d = core.choose("backend", 100.0)
    assert (d.server, d.algorithm) == ("srv3", "hot-cold-lexicographic")
    assert d.scores == {"srv1": 5.0, "srv2": 1.0, "srv3": 1.0, "srv4": 0.0}


def test_prequal_counts_what_it_sent_since_the_probe_and_goes_hot_by_rif_alone():
    core = make_core("prequal", options={"q_rif": 0.0})   # every instance above the minimum is hot
    probed(core, srv1=(0.0, 0.2), srv2=(0.0, 0.2), srv3=(0.0, 0.2), srv4=(0.0, 0.2))
    picks = [core.choose("backend", 100.0).server for _ in range(4)]
    assert sorted(picks) == SERVERS          # each flow raises its instance's count by one
    probed(core, t=99.8, srv1=(3.0, 0.1), srv2=(2.0, 0.1), srv3=(2.0, 0.1), srv4=(1.0, 0.9))
    assert core.choose("backend", 100.0).server == "srv4"   # a new probe replaces the counts


def test_prequal_leaves_out_stale_probes_and_without_any_falls_back_to_round_robin():
    core = make_core("prequal", options={"max_age_s": 2.0})
    d = core.choose("backend", 100.0)
    assert d.algorithm == "round-robin" and "no fresh probe" in d.reason
    probed(core, t=90.0)                                      # ten seconds old
    core.update_probe("srv2-backend", 4.0, None, None, 99.0)  # fresh, no recent latency
    d = core.choose("backend", 100.0)
    assert d.server == "srv2" and "3 without a fresh probe" in d.reason


def test_prequal_keeps_an_instances_latest_known_latency_when_no_request_ended_lately():
    core = make_core("prequal")
    probed(core, t=99.0, srv1=(1.0, 2.0), srv2=(1.0, 0.5), srv3=(1.0, 0.6), srv4=(1.0, 0.7))
    core.choose("backend", 99.2)                                 # remembers the latencies
    # srv1 slow, then no request of it ends in the next probe's window: still slow
    probed(core, t=99.5, srv1=(0.0, None), srv2=(1.0, 0.5), srv3=(1.0, 0.6), srv4=(1.0, 0.7))
    assert core.choose("backend", 100.0).server == "srv2"


def test_prequal_does_not_shun_an_instance_for_a_latency_it_showed_long_ago():
    core = make_core("prequal", options={"latency_memory_s": 5.0})
    probed(core, t=99.0, srv1=(1.0, 9.0), srv2=(1.0, 0.5), srv3=(1.0, 0.6), srv4=(1.0, 0.7))
    core.choose("backend", 99.2)
    # srv1 has finished nothing since (nobody sent it anything): ten seconds on, its 9 s
    # is forgotten and it counts as fast as the fastest, with the fewest in flight
    probed(core, t=109.0, srv1=(0.0, None), srv2=(2.0, 0.5), srv3=(2.0, 0.6),
           srv4=(2.0, 0.7))
    d = core.choose("backend", 109.5)
    assert d.server == "srv1" and d.algorithm == "hot-cold-lexicographic"


def test_prequal_finds_every_instance_hot_when_a_burst_lifts_them_all_above_recent_probes():
    core = make_core("prequal", options={"q_rif": 0.5, "rif_history": 8})
    probed(core, t=99.0, **{s: (1.0, 0.5) for s in SERVERS})
    core.choose("backend", 99.2)                              # the calm: four probes at 1
    probed(core, t=99.5, srv1=(8.0, 0.9), srv2=(9.0, 0.5), srv3=(10.0, 0.3),
           srv4=(11.0, 0.1))
    # the median of the last eight probes is 4.5: all four are hot, the fastest too; the
    # one with the fewest in flight takes the flow
    d = core.choose("backend", 100.0)
    assert d.server == "srv1" and "all hot" in d.reason


def test_prequal_rejects_a_history_that_is_not_a_count_of_probes():
    for bad in (0, 2.5, True, "8"):
        with pytest.raises(ValueError, match="rif_history"):
            make_core("prequal", options={"rif_history": bad})


def test_prequal_forgets_probes_older_than_max_age_in_its_rif_distribution():
    core = make_core("prequal", options={"q_rif": 0.5, "rif_history": 8, "max_age_s": 2.0})
    probed(core, t=90.0, **{s: (1.0, 0.5) for s in SERVERS})
    core.choose("backend", 90.2)                             # an old calm
    probed(core, t=99.5, srv1=(8.0, 0.9), srv2=(9.0, 0.5), srv3=(10.0, 0.3),
           srv4=(11.0, 0.1))
    # the calm of ten seconds ago is gone: the median is 9.5, so srv1 and srv2 are cold
    # (with the calm counted, all four would be hot), and srv2 the faster of them
    d = core.choose("backend", 100.0)
    assert d.server == "srv2" and "2 cold" in d.reason
