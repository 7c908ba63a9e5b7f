import dataclasses
import gc

import pytest

from ryu_apps.flows import DIR_FORWARD, DIR_REVERSE, FlowRecord, FlowTable, flow_id_of, \
    make_cookie, parse_cookie
from ryu_apps.health import InstanceHealth


def record(table, now=100.0, client_port=40000, instance="srv2-ui", **kw):
    fid = make_cookie(0, 2, 7, table.next_seq())
    rec = FlowRecord(flow_id=fid, dpid=1, protocol="tcp", client_ip="10.0.200.1",
                     client_port=client_port, client_in_port=13, vip="10.0.0.100", vport=8002,
                     microservice="ui", instance=instance, server="srv2", created=now,
                     last_active=now, backend_ip="10.0.2.2", backend_port=8002, **kw)
    table.add(rec)
    return rec


def test_cookie_round_trip_and_direction():
    c = make_cookie(DIR_REVERSE, 3, 11, 12345)
    assert parse_cookie(c) == (DIR_REVERSE, 3, 11, 12345)
    assert flow_id_of(c) == make_cookie(0, 3, 11, 12345)
    assert parse_cookie(0x1234) is None


def test_idle_timeout_flow_duration_excludes_the_idle_tail():
    t = FlowTable(idle_timeout=10)
    rec = record(t)
    fwd, rev = rec.flow_id | (DIR_FORWARD << 44), rec.flow_id | (DIR_REVERSE << 44)
    t.on_stats(fwd, 1.0, 500, 5, now=101.0)
    t.on_stats(rev, 1.0, 90_000, 60, now=101.0)
    assert t.lookup(rec.key) is rec
    assert rec.duration_s(10) == pytest.approx(1.0)        # first packet to last traffic
    t.on_stats(fwd, 6.0, 500, 5, now=106.0)                 # idle: no new bytes
    assert rec.duration_s(10) == pytest.approx(1.0)
    t.on_removed(fwd, 12.5, 500, 5, "idle_timeout", now=112.5)
    assert t.lookup(rec.key) is None                        # a new flow with that tuple is new
    assert rec.duration_s(10) == pytest.approx(2.5)
    # reported once both rules are gone, with both byte counts
    assert [r for r in t.take_report(113.0) if r.ended is not None] == []
    t.on_removed(rev, 12.6, 95_000, 61, "idle_timeout", now=112.6)
    done = [r.as_record(10) for r in t.take_report(113.0) if r.ended is not None]
    # the flow lasted until its last packet in either direction
    assert len(done) == 1 and done[0]["bytes"] == 95_500 and done[0]["duration_s"] == 2.6
    assert t.take_report(114.0) == []


def test_active_flows_are_reported_when_new_long_or_due_and_again_after_a_failed_report():
    t = FlowTable(idle_timeout=5, threshold_s=3.0, refresh_s=60.0)
    rec = record(t)
    fwd = rec.flow_id | (DIR_FORWARD << 44)
    assert t.take_report(100.5) == [rec]          # new
    assert t.take_report(101.0) == []             # told already
    t.on_stats(fwd, 1.0, 100, 1, now=101.0)
    assert t.take_report(101.5) == []             # traffic alone is no news to the profiler
    t.on_stats(fwd, 4.0, 200, 2, now=104.0)
    report = t.take_report(104.5)                 # now past the 3 s threshold: long
    assert report == [rec] and report[0].as_record(5)["duration_s"] == 4.0
    t.report_failed(report)                       # profiler away: keep it for next time
    assert t.take_report(105.0) == [rec]
    t.on_stats(fwd, 9.0, 300, 3, now=109.0)
    assert t.take_report(110.0) == []             # still long: nothing new
    assert t.take_report(165.0) == [rec]          # the keep-alive, a minute after
    assert t.take_report(166.0) == []


def test_a_half_removed_flow_is_reported_after_the_grace_period():
    t = FlowTable(idle_timeout=5)
    rec = record(t)
    t.on_removed(rec.flow_id | (DIR_FORWARD << 44), 7.0, 10, 1, "idle_timeout", now=107.0)
    assert t.take_report(108.0) == []
    assert len(t.take_report(113.0)) == 1


def test_stats_for_unknown_cookies_are_ignored():
    t = FlowTable(idle_timeout=5)
    assert t.on_stats(make_cookie(DIR_FORWARD, 1, 1, 99), 1.0, 1, 1, 1.0) is None


def test_health_goes_down_after_n_failures_and_up_after_m_answers():
    h = InstanceHealth(["a", "b"], unhealthy_after=2, healthy_after=1, timeout_s=1.0)
    h.sent(1, "a", 0.0)
    assert h.answered(1, False, 0.1) is None                # one refusal: still up
    h.sent(2, "a", 1.0)
    assert h.answered(2, False, 1.1) == ("a", False)
    h.sent(3, "a", 2.0)
    assert h.answered(3, True, 2.1) == ("a", True)
    h.sent(4, "b", 3.0)
    h.sent(5, "b", 4.0)
    assert h.expire(4.5) == []                              # probe 5 not yet timed out
    assert h.expire(5.5) == [("b", False)]                  # two timeouts in a row
    assert h.status()["b"]["last_result"].startswith("no answer")
    assert h.answered(99, True, 6.0) is None                # unknown probe


def test_a_flow_that_went_quiet_past_the_idle_timeout_can_be_resumed():
    t = FlowTable(idle_timeout=10)
    rec = record(t)
    t.on_removed(rec.flow_id | (DIR_FORWARD << 44), 10.5, 100, 2, "idle_timeout", now=110.5)
    assert t.lookup(rec.key) is None
    # the instance answers 20 s later: found by the instance side of the connection
    assert t.lookup_reverse(("tcp", "10.0.2.2", 8002, "10.0.200.1", 40000)) is None
    again = t.resume(reverse_key=("tcp", "10.0.2.2", 8002, "10.0.200.1", 40000))
    assert again is rec and rec.ended is None and t.lookup(rec.key) is rec
    # the instance's next packet, racing the new rules, finds the flow active
    assert t.lookup_reverse(("tcp", "10.0.2.2", 8002, "10.0.200.1", 40000)) is rec
    assert t.resume(key=rec.key) is None                  # already active
    t.on_removed(rec.flow_id | (DIR_FORWARD << 44), 10.0, 900, 5, "idle_timeout", now=140.0)
    assert t.resume(key=rec.key) is rec                   # or by the client side
    assert t.resume(reverse_key=("tcp", "10.0.9.9", 1, "10.0.200.1", 40000)) is None


def test_byte_counts_add_up_over_reinstalled_rules():
    t = FlowTable(idle_timeout=10)
    rec = record(t)
    fwd = rec.flow_id | (DIR_FORWARD << 44)
    rev = rec.flow_id | (DIR_REVERSE << 44)
    t.on_stats(fwd, 1.0, 1000, 10, now=101.0)
    t.on_stats(rev, 1.0, 20000, 20, now=101.0)
    t.on_removed(fwd, 12.0, 1500, 12, "idle_timeout", now=112.0)
    t.resume(key=rec.key)                         # new rules: the switch counts from zero
    t.on_stats(fwd, 1.0, 2000, 3, now=120.0)      # even when it passes the old count
    assert (rec.bytes_fwd, rec.packets) == (3500, 15)
    # the reverse rule was never removed: replaced, it kept its counters
    t.on_stats(rev, 20.0, 20500, 21, now=120.0)
    assert rec.bytes_rev == 20500
    # a restarted switch (rules reinstalled on reconnection) also counts from zero
    t.on_stats(fwd, 0.5, 100, 1, now=130.0)
    assert (rec.bytes_fwd, rec.packets) == (3600, 16)
    assert rec.last_active == 130.0


def test_a_flow_record_holds_nothing_the_garbage_collector_follows():
    # a busy controller keeps tens of thousands of records; each full collection walks
    # every object they hold, with the event loop stopped (malb_gc_pause_seconds)
    t = FlowTable(idle_timeout=10)
    rec = record(t)
    fwd, rev = rec.flow_id | (DIR_FORWARD << 44), rec.flow_id | (DIR_REVERSE << 44)
    t.on_stats(fwd, 1.0, 1000, 10, now=101.0)
    t.on_removed(fwd, 10.5, 1200, 12, "idle_timeout", now=110.5)
    t.on_removed(rev, 10.5, 500, 5, "idle_timeout", now=110.6)
    t.resume(key=rec.key)
    t.on_removed(fwd, 10.0, 900, 5, "idle_timeout", now=140.0)
    gc.collect()                 # what holds only numbers and strings is untracked by now
    assert not hasattr(rec, "__dict__")
    assert [type(x).__name__ for x in gc.get_referents(rec)
            if gc.is_tracked(x) and x is not FlowRecord] == []


def test_flow_ids_stay_unique_after_adopting_rules_and_wrapping():
    t = FlowTable(idle_timeout=10)
    adopted = FlowRecord(flow_id=make_cookie(0, 2, 7, 500), dpid=1, protocol="tcp",
                         client_ip="10.0.200.1", client_port=1, client_in_port=1,
                         vip="10.0.0.100", vport=8002, microservice="ui", instance="srv2-ui",
                         server="srv2", created=0.0, last_active=0.0)
    t.add(adopted)                                # left by an earlier controller
    assert parse_cookie(t.new_flow_id(2, 7))[3] == 501
    t._seq = (1 << 24) - 1                        # the sequence wraps ...
    t.add(dataclasses.replace(adopted, flow_id=make_cookie(0, 2, 7, 1)))
    assert parse_cookie(t.new_flow_id(2, 7))[3] == 2   # ... past ids still in use
    # ids reported to the profiler carry the controller's epoch
    assert adopted.as_record(10, t.epoch)["flow_id"].startswith(t.epoch)


def test_ended_flows_are_trimmed_oldest_first_reported_or_not():
    t = FlowTable(idle_timeout=1, keep_ended=3)
    recs = []
    for k in range(40):
        rec = record(t, now=float(k), client_port=1000 + k)
        t.on_removed(rec.flow_id | (DIR_FORWARD << 44), 1.0, 1, 1, "idle_timeout", now=k + 1.0)
        recs.append(rec)
    # unreported: kept up to ten times keep_ended, so the profiler misses none
    assert len(t.flows) == 30 and recs[9].flow_id not in t.flows
    assert t.resume(key=recs[9].key) is None and t.resume(key=recs[10].key) is recs[10]
    assert t.active_count() == len(t.active()) == 1
    t.take_report(1000.0)                         # all reported now: the newest 3 stay
    assert sorted(r.client_port for r in t.flows.values() if r.ended) == [1037, 1038, 1039]
    assert recs[10].flow_id in t.flows            # the resumed (active) one is not trimmed
    assert t.active_count() == len(t.active()) == 1


def test_a_probe_sent_while_the_last_is_unanswered_counts_that_one_as_failed():
    h = InstanceHealth(["a"], unhealthy_after=2, healthy_after=1, timeout_s=5.0)
    assert h.sent(("arp", "10.0.1.1"), "a", 0.0) is None
    assert h.sent(("arp", "10.0.1.1"), "a", 2.0) is None          # one miss
    assert h.sent(("arp", "10.0.1.1"), "a", 4.0) == ("a", False)  # two in a row
    assert h.answered(("arp", "10.0.1.1"), True, 4.1) == ("a", True)
def test_a_port_down_makes_an_instance_unhealthy_at_once_and_probes_bring_it_back():
    h = InstanceHealth(["a", "b"], unhealthy_after=2, healthy_after=2, timeout_s=1.0)
    assert h.link_down("a", 10.0) == ("a", False)
    assert h.status()["a"]["last_result"] == "switch port down"
    assert h.link_down("a", 11.0) is None          # already down: no second change
    assert h.link_down("gone", 11.0) is None       # not an instance we probe
    h.sent("t1", "a", 12.0)
    assert h.answered("t1", True, 12.1) is None    # one answer is not enough
    h.sent("t2", "a", 14.0)
    assert h.answered("t2", True, 14.1) == ("a", True)
    assert h.status()["b"]["healthy"] is True


def starved_readings(h, instance, start, seconds, every=0.5):
    """A process starved of CPU as the fault suite starves one (1 ms a second): its kernel
    answers every SYN, its service answers two readings in three in time. The state
    changes, in order."""
    changes, t, k = [], start, 0
    while t < start + seconds:
        h.sent(("tcp", instance), instance, t)
        for change in (h.answered(("tcp", instance), True, t + 0.01, "TCP SYN-ACK"),
                       h.service_result(instance, k % 3 != 2, t + 0.2,
                                        "answered" if k % 3 != 2 else "no answer within 1 s")):
            if change:
                changes.append(change)
        t, k = t + every, k + 1
    return changes


def test_a_starved_service_taken_out_by_its_readings_stays_out_though_some_answer():
    h = InstanceHealth(["a"], unhealthy_after=2, healthy_after=1, timeout_s=1.0, readmit_s=10)
    for t in (0.0, 0.5):
        h.service_result("a", False, t, "no answer within 1 s")
    assert not h.state["a"].healthy
    assert starved_readings(h, "a", 1.0, 60) == []       # never back while starved
    assert h.status()["a"]["service"]["readmit_after_s"] == 10
    # fed again: back once its readings have all been good for 10 s, not before
    changes = [(t, h.service_result("a", True, t, "answered"))
               for t in [61 + 0.5 * k for k in range(21)]]
    assert [(t, c) for t, c in changes if c] == [(71.0, ("a", True))]
    assert h.status()["a"]["service"]["last_result"] == "answered for 10.0 s in a row"


def test_a_service_taken_out_again_soon_after_it_came_back_is_held_twice_as_long():
    h = InstanceHealth(["a"], unhealthy_after=1, healthy_after=1, timeout_s=1.0, readmit_s=10)
    back = []
    t = 0.0
    for _ in range(3):                 # out, then answering until it is back, then out again
        assert h.service_result("a", False, t, "no answer within 1 s") == ("a", False)
        start = t = t + 0.5
        while not h.state["a"].healthy:
            h.service_result("a", True, t, "answered")
            t += 0.5
        back.append(t - 0.5 - start)
    assert back == [10.0, 20.0, 40.0]
    # back long enough (16 holds of the last): a fresh fault is held for the base time again
    h.service_result("a", False, t + 16 * 40, "no answer within 1 s")
    assert h.status()["a"]["service"]["readmit_after_s"] == 10


def test_without_a_hold_one_good_reading_puts_the_instance_back():
    h = InstanceHealth(["a"], unhealthy_after=1, healthy_after=1, timeout_s=1.0)
    assert h.service_result("a", False, 0.0, "no answer within 1 s") == ("a", False)
    assert h.service_result("a", True, 0.5, "answered") == ("a", True)


def test_a_watched_flow_runs_for_the_profiler_from_its_first_packet_to_its_fin():
    t = FlowTable(idle_timeout=10, threshold_s=3.0, dormant_max_s=600.0)
    rec = record(t, fin_watch=True)
    fwd, rev = rec.flow_id | (DIR_FORWARD << 44), rec.flow_id | (DIR_REVERSE << 44)
    assert [r.as_record(10, now=100.5)["active"] for r in t.take_report(100.5)] == [True]
    t.on_removed(fwd, 10.0, 100, 2, "idle_timeout", now=110.0)
    t.on_removed(rev, 10.0, 60, 1, "idle_timeout", now=110.0)
    t.go_dormant(rec)                         # the controller: a long flow, no FIN yet
    assert rec.running and t.lookup(rec.key) is None    # its rules are gone all the same
    (told,) = t.take_report(111.0)            # long now: it ran 11 s so far
    assert told.as_record(10, now=111.0)["active"] and told.duration_s(10, 111.0) == 11.0
    assert t.take_report(171.0) == [rec]      # kept alive like any running flow
    assert t.resume(key=rec.key) is rec and rec.running and not rec.dormant
    assert t.fin(rec.key, 130.0) is rec and not rec.running
    (done,) = t.take_report(130.5)
    t.report_failed([done])                   # the profiler was away: told again
    (done,) = t.take_report(131.0)
    told = done.as_record(10, now=131.0)
    assert (told["active"], told["duration_s"], told["end_reason"]) == (False, 30.0, "fin")
    t.on_removed(fwd, 10.0, 900, 5, "idle_timeout", now=140.5)
    t.on_removed(rev, 10.0, 9000, 9, "idle_timeout", now=140.5)
    assert t.take_report(146.0) == []         # its end went once
    assert t.resume(key=rec.key) is rec       # a late segment after its FIN: not a new run
    assert t.take_report(147.0) == []


def test_a_dormant_flow_that_never_shows_its_fin_ends_after_dormant_max_s():
    t = FlowTable(idle_timeout=10, dormant_max_s=600.0)
    rec = record(t, fin_watch=True)
    t.take_report(100.5)
    t.on_removed(rec.flow_id | (DIR_FORWARD << 44), 10.0, 100, 2, "idle_timeout", now=110.0)
    t.go_dormant(rec)
    assert t.take_report(650.0) == [rec] and rec.running     # kept alive, still running
    (done,) = t.take_report(701.0)
    assert not done.running and done.as_record(10, now=701.0)["duration_s"] == 0.0
    assert t.fin(rec.key, 702.0) is None      # no active flow with that tuple


def test_active_flows_per_instance_are_kept_without_a_scan_through_ends_resumes_and_trims():
    import random
    rng = random.Random(5)
    t = FlowTable(idle_timeout=10, keep_ended=3)
    recs = []
    for k in range(300):
        op = rng.random()
        if op < 0.5 or not recs:
            rec = record(t, client_port=40000 + k, instance=rng.choice(["a", "b", "c"]))
            recs.append(rec)
        elif op < 0.8:
            rec = rng.choice(recs)
            t.on_removed(rec.flow_id | (rng.choice([DIR_FORWARD, DIR_REVERSE]) << 44), 1.0,
                         10, 1, "idle_timeout", now=100.0 + k)
        else:
            rec = rng.choice(recs)
            t.resume(key=rec.key)
        scan = {}
        for r in t.flows.values():
            if r.ended is None:
                scan[r.instance] = scan.get(r.instance, 0) + 1
        assert t.active_per_instance() == scan, k


def test_the_report_scan_pauses_and_what_changes_meanwhile_waits_or_is_skipped():
    t = FlowTable(idle_timeout=10, keep_ended=0)
    recs = [record(t, client_port=40000 + k) for k in range(5)]
    scan = t.report_scan(100.5, pause_every=2)
    got = [next(scan), next(scan)]
    assert got == recs[:2] and next(scan) is None        # a pause after two looked at
    # meanwhile: a new flow starts, and one ends and is trimmed away
    late = record(t, client_port=41000)
    t.on_removed(recs[2].flow_id | (DIR_FORWARD << 44), 1.0, 10, 1, "idle_timeout", 100.6)
    assert recs[2].flow_id not in t.flows                 # keep_ended=0: trimmed at once
    rest = list(scan)
    assert rest == [recs[3], None, recs[4]]               # trimmed: skipped
    assert t.take_report(100.7) == [late]                 # new: in the next report
