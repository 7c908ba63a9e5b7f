"""The fault suite's figures from plain data (experiments/faults/): failed requests in a
window, late flows to a dead instance, history rows lost, recovery time, and the parsing
that proves which dockerd and which OVS controllers are ours."""
import argparse
import sqlite3
import subprocess
import sys

import pytest

from common.config import config_path, parse_config_file_data
from common.procs import Service
from common.state import write_pid_file
from experiments import faults
from experiments.faults import FaultError, analyse, docker_socket_path, error_kind, \
    late_flows, markdown_table, merge_decisions, parse_ovs_list, parse_ovs_value, \
    recovery_seconds, requests_in_window, rows_lost, targets_met, unix_listener_inodes
from experiments.loadgen import schedule, validate_spec
from profiler.store import HistoryStore


def req(intended, error="", cls="ui-object", ended=None):
    return {"intended": str(intended), "ended": str(intended + 0.5 if ended is None else ended),
            "error": error, "class": cls}


# ------------------------------------------------------------------ failed requests
def test_requests_are_counted_by_intended_start_within_the_window():
    rows = [req(99.9, "timeout after 10 s without data"),       # before: not counted
            req(100.0), req(100.5, "ConnectionResetError: [Errno 104] reset"),
            req(104.9, "timeout after 10 s without data", "backend-job"),
            req(105.0, "HTTP 503")]                              # at t1: outside [t0, t1)
    got = requests_in_window(rows, 100.0, 105.0)
    assert got["requests"] == 3 and got["failed"] == 2
    assert got["failed_by_class"] == {"backend-job": 1, "ui-object": 1}
    assert got["errors"] == {"ConnectionResetError": 1, "timeout": 1}


def test_a_request_started_before_the_window_and_failing_after_its_start_is_in_flight():
    rows = [req(90.0, "timeout after 10 s without data", "video-stream", ended=112.0),
            req(91.0, "HTTP 500", ended=95.0),           # failed before the fault: not it
            req(92.0, "", ended=120.0)]                  # went through: not a failure
    got = requests_in_window(rows, 100.0, 110.0)
    assert got == {"requests": 0, "failed": 0, "in_flight_failed": 1,
                   "failed_by_class": {}, "errors": {}}


def test_rows_without_an_intended_time_are_skipped():
    assert requests_in_window([{"intended": "", "error": "x"}, {"error": "y"}], 0, 1e12) \
        ["requests"] == 0


def test_error_kinds():
    assert error_kind("timeout after 10 s without data") == "timeout"
    assert error_kind("ConnectionRefusedError: [Errno 111] Connect call failed") == \
        "ConnectionRefusedError"
    assert error_kind("HTTP 502") == "HTTP 502"


# ------------------------------------------------------------------ late flows
def decision(t, instance, client="10.0.200.1:40000"):
    return {"time": t, "instance": instance, "client": client, "switch": 1}


def test_late_flows_are_new_flows_to_a_dead_instance_after_the_grace_time():
    dead = {"srv2-ui": 100.0}
    ds = [decision(99.0, "srv2-ui"),           # before it died
          decision(103.9, "srv2-ui"),          # within 2 x 2 s: the probes need that long
          decision(104.0, "srv2-ui"),          # exactly at the grace limit: not late
          decision(104.1, "srv2-ui"),          # late
          decision(110.0, "srv1-ui"),          # another instance
          decision(120.0, "srv2-ui")]          # late
    late = late_flows(ds, dead, grace_s=4.0)
    assert [d["time"] for d in late] == [104.1, 120.0]
    assert [d["time"] for d in late_flows(ds, dead, 4.0, since=105, until=130)] == [120.0]
    assert late_flows(ds, {}, 4.0) == []


# ------------------------------------------------------------------ rows lost
def test_rows_lost_compares_counts_up_to_the_cut_off_and_flows_by_id():
    before = {"counts": {"server_samples": 40, "container_samples": 480},
              "flow_ids": {"a", "b", "c"}}
    same = {"counts": {"server_samples": 40, "container_samples": 480},
            "flow_ids": {"a", "b", "c", "d"}}
    assert rows_lost(before, same) == {"tables": {"server_samples": 0, "container_samples": 0,
                                                  "flows": 0}, "total": 0}
    worse = {"counts": {"server_samples": 36}, "flow_ids": {"a"}}
    got = rows_lost(before, worse)
    assert got["tables"] == {"server_samples": 4, "container_samples": 480, "flows": 2}
    assert got["total"] == 486


def test_history_snapshot_of_a_real_store_survives_a_killed_writer(tmp_path):
    """The snapshot reads what HistoryStore committed; rows after the cut-off and a flow
    recorded again later (its t moves on) do not count as lost."""
    path = str(tmp_path / "h.sqlite")
    store = HistoryStore(path, retention_s=3600)
    for t in (1.0, 2.0, 3.0):
        store.add_server_samples(t, [{"server": "srv1", "cpu": 1.0, "mem": 2.0, "net": 0.1,
                                      "stale": False, "age_s": 0.2}])
    store.add_flows(2.5, [{"flow_id": "f1", "microservice": "ui", "duration_s": 0.3,
                           "active": False}])
    before = faults.history_snapshot(path, until=2.5)
    assert before["counts"]["server_samples"] == 2 and before["flow_ids"] == {"f1"}
    store.add_flows(9.0, [{"flow_id": "f1", "microservice": "ui", "duration_s": 0.4,
                           "active": False}])
    store.add_server_samples(9.0, [{"server": "srv1", "cpu": 1.0, "mem": 2.0, "net": 0.1,
                                    "stale": False, "age_s": 0.2}])
    after = faults.history_snapshot(path, until=2.5)
    assert rows_lost(before, after)["total"] == 0
    store._db.execute("DELETE FROM server_samples WHERE t = 1.0")     # a lost row
    assert rows_lost(before, faults.history_snapshot(path, 2.5))["tables"]["server_samples"] == 1
    store.close()


def test_history_snapshot_of_a_file_without_tables_counts_nothing(tmp_path):
    path = str(tmp_path / "empty.sqlite")
    sqlite3.connect(path).close()
    assert faults.history_snapshot(path, 10.0)["counts"] == {}


# ------------------------------------------------------------------ recovery
def test_recovery_is_the_first_working_observation_after_the_fault_ends():
    obs = [(99.0, True), (101.0, False), (102.5, False), (103.0, True), (104.0, False),
           (105.0, True)]
    assert recovery_seconds(obs, since=100.0) == 3.0
    assert recovery_seconds(obs, since=103.5) == 1.5
    assert recovery_seconds([(101.0, False)], since=100.0) is None
    assert recovery_seconds([], since=0.0) is None


def test_await_checks_runs_the_checks_in_order_until_all_pass(monkeypatch):
    monkeypatch.setattr(faults.probing, "POLL_S", 0.0)
    calls = {"a": 0, "b": 0}

    def a():
        calls["a"] += 1
        return None if calls["a"] >= 2 else "down"

    def b():
        calls["b"] += 1
        if calls["b"] == 1:
            raise OSError("connection refused")
        return None
    got = faults.await_checks([("a", a), ("b", b)], since=0.0, timeout_s=30)
    assert got["recovered_at"] is not None and got["polls"] == 3
    assert calls == {"a": 3, "b": 2}                 # b only once a passed
    assert list(got["milestones"]) == ["a", "b"] and got["last_failure"] is None
    never = faults.await_checks([("x", lambda: "no")], since=0.0, timeout_s=0)
    assert never["recovered_at"] is None and never["last_failure"] == "x: no"


# ------------------------------------------------------------------ decisions
def test_decisions_polled_again_are_kept_once():
    known = {}
    assert merge_decisions(known, [decision(1, "a"), decision(2, "b")]) == (2, False)
    assert merge_decisions(known, [decision(2, "b"), decision(3, "a")]) == (1, True)
    # a restarted controller starts a new list: nothing in common, still all kept
    assert merge_decisions(known, [decision(4, "a")]) == (1, False)
    assert len(known) == 4


# ------------------------------------------------------------------ the whole analysis
def record(fault, seg, start, end, recovered, dead=None, lost=0, **extra):
    return {"fault": fault, "what": f"{fault} fault", "segment_start": seg, "start": start,
            "end": end, "recovered_at": recovered, "window_end": end + 60,
            "dead": dead or {}, "rows_lost": {"tables": {}, "total": lost}, "error": None,
            **extra}


def test_analyse_per_fault_windows_segments_and_targets():
    records = [record("agent", 0.0, 10.0, 15.0, 18.0),
               record("container", 100.0, 110.0, 110.1, 115.0, dead={"srv2-ui": 110.0}),
               record("switch", 200.0, 210.0, 215.0, None, dead={"srv2-ui": 110.0}, lost=2)]
    requests = [req(5.0, "HTTP 500"), req(12.0, "timeout after 10 s"), req(17.0),
                req(112.0, "timeout after 10 s"), req(150.0), req(212.0, "HTTP 503")]
    decisions = [decision(113.0, "srv2-ui"),      # within the grace (4 s)
                 decision(114.5, "srv2-ui"),      # late, container segment
                 decision(220.0, "srv2-ui"),      # late, switch segment
                 decision(221.0, "srv1-ui")]
    res = analyse(records, requests, decisions, grace_s=4.0, target_s=15.0)
    agent, container, switch = res
    assert agent["requests"]["requests"] == 2 and agent["requests"]["failed"] == 1
    assert agent["failed_before_fault"] == 1 and agent["late_flows"] is None
    assert agent["outage_s"] == 5.0 and agent["recovery_s"] == 3.0 and agent["met"]
    assert container["late_flows"] == 1 and container["late_flow_examples"][0]["after_death_s"] \
        == 4.5
    assert container["targets"] == {"late_flows": False, "rows_lost": True, "recovery": True}
    assert not container["met"]
    # not recovered: the window runs to the end of the timeout; lost rows miss a target
    assert switch["recovery_s"] is None and switch["window_s"] == 65.0
    assert switch["late_flows"] == 1 and switch["rows_lost_total"] == 2
    assert switch["targets"] == {"late_flows": False, "rows_lost": False, "recovery": False}
    table = markdown_table(res)
    assert table.splitlines()[0].startswith("| fault | what was done |")
    assert "| agent | agent fault | 5.0 | 2 | 1 | 0 | – | 0 | 3.0 | met |" in table
    assert "not recovered" in table and "MISSED: late flows, rows lost, recovery" in table


def test_a_fault_that_could_not_be_injected_misses_every_target():
    res = analyse([{"fault": "docker", "what": "d", "segment_start": 0.0, "start": None,
                    "error": "FaultError: 2 dockerd processes hold the socket"}], [], [],
                  4.0, 15.0)
    assert res[0]["met"] is False
    assert "NOT INJECTED: FaultError: 2 dockerd" in markdown_table(res)


def test_targets():
    ok = {"late_flows": 0, "rows_lost_total": 0, "recovery_s": 14.9}
    assert all(targets_met(ok, 15.0).values())
    assert targets_met({**ok, "late_flows": None}, 15.0)["late_flows"]      # none was dead
    assert not targets_met({**ok, "rows_lost_total": None}, 15.0)["rows_lost"]  # unmeasured
    assert not targets_met({**ok, "recovery_s": 15.1}, 15.0)["recovery"]


# ------------------------------------------------------------------ which daemon, which OVS
PROC_NET_UNIX = """\
Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 21345 /var/run/docker.sock
0000000000000000: 00000003 00000000 00000000 0001 03 21399 /var/run/docker.sock
0000000000000000: 00000002 00000000 00010000 0001 01 18000 /run/containerd/containerd.sock
0000000000000000: 00000002 00000000 00010000 0001 01 18001 @/containerd-shim/abc.sock
0000000000000000: 00000002 00000000 00010000 0001 01 18002
"""


def test_the_listening_socket_of_the_docker_path_is_found_through_symbolic_links():
    real = {"/var/run/docker.sock": "/run/docker.sock", "/run/docker.sock": "/run/docker.sock"}
    resolve = lambda p: real.get(p, p)
    assert unix_listener_inodes(PROC_NET_UNIX, "/run/docker.sock", resolve) == {21345}
    assert unix_listener_inodes(PROC_NET_UNIX, "/var/run/docker.sock", resolve) == {21345}
    assert unix_listener_inodes(PROC_NET_UNIX, "/tmp/other.sock", resolve) == set()


def test_docker_socket_path_from_the_environment():
    assert docker_socket_path({}) == "/var/run/docker.sock"
    assert docker_socket_path({"DOCKER_HOST": "unix:///tmp/d.sock"}) == "/tmp/d.sock"
    with pytest.raises(FaultError, match="not a Unix socket"):
        docker_socket_path({"DOCKER_HOST": "tcp://10.0.0.1:2375"})


def test_ovs_values():
    assert parse_ovs_list("[]") == []
    assert parse_ovs_list("[1b2c, 3d4e]\n") == ["1b2c", "3d4e"]
    assert parse_ovs_list("1b2c") == ["1b2c"]
    assert parse_ovs_value('"tcp:127.0.0.1:6653"\n') == "tcp:127.0.0.1:6653"
    assert parse_ovs_value("1000") == "1000"
    assert parse_ovs_value("[]") is None


def test_a_service_is_signalled_only_when_its_pid_file_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr("common.procs.PID_DIR", str(tmp_path))
    svc = Service("svc-test", [sys.executable, "-c", "import time; time.sleep(30)"], None,
                  str(tmp_path / "svc.log"))
    svc.proc = subprocess.Popen(svc.argv)
    try:
        with pytest.raises(FaultError, match="no usable PID file"):
            faults.verified_pid(svc)
        write_pid_file("svc-test", svc.proc.pid, str(tmp_path))
        assert faults.verified_pid(svc) == svc.proc.pid
        write_pid_file("svc-test", 1, str(tmp_path))      # another process
        with pytest.raises(FaultError, match="not the process the stack started"):
            faults.verified_pid(svc)
    finally:
        svc.proc.kill()
        svc.proc.wait()
    with pytest.raises(FaultError, match="not running"):
        faults.verified_pid(svc)


def report_doc(results: list, **overrides) -> dict:
    """A faults.json as the suite writes it, around these faults' results."""
    return {"command": "sudo .venv/bin/python -m experiments.faults", "commit": "abc1234",
            "when": "2026-01-01T00:00:00", "testbed": {"backend": "mininet", "datapath": "user"},
            "health": {"method": "tcp", "interval_s": 2, "timeout_s": 1, "unhealthy_after": 2},
            "period_s": 3, "grace_s": 4.0, "recovery_target_s": 15.0,
            "options": {"policy": "malb", "rate": 4.0, "seconds": 45.0},
            "requests": {"planned": 0, "recorded": 0, "failed": 0},
            "decisions": {"recorded": 0, "possible_gaps": 0}, "faults": results, **overrides}


def test_the_report_names_every_fault_its_checks_and_its_evidence():
    records = [record("profiler", 0.0, 10.0, 15.0, 19.0, milestones={"profiler answers": 1.2},
                      details={"killed_while_writing": True}, history_rows_checked=120),
               record("container", 100.0, 110.0, 110.1, 115.0, dead={"srv2-ui": 110.0},
                      milestones={"controller takes it out of its pool": 4.6}),
               record("docker", 200.0, 210.0, 220.0, 223.0, dead={"srv2-ui": 110.0},
                      details={"dockerd": {"pid": 812, "socket": "/var/run/docker.sock",
                                           "cmdline": "dockerd --bridge=none",
                                           "pidfile": "/var/run/docker.pid",
                                           "state_when_paused": "T"}}),
               {"fault": "switch", "what": "s", "segment_start": 300.0, "start": None,
                "error": "FaultError: bridge s1 is not tagged"}]
    results = analyse(records, [req(112.0, "timeout after 10 s")],
                      [decision(116.0, "srv2-ui")], grace_s=4.0, target_s=15.0)
    text = faults.summary_markdown(report_doc(
        results, requests={"planned": 10, "recorded": 10, "failed": 1},
        decisions={"recorded": 1, "possible_gaps": 0}))
    assert text.startswith("# Fault suite\n")
    assert "| profiler | profiler fault | 5.0 |" in text and "not tagged" in text
    assert "profiler answers at 1.2 s" in text and "rows checked: 120" in text
    assert "Late flow: 10.0.200.1:40000 -> srv2-ui, 6 s after the kill." in text
    assert "dockerd pid 812 (dockerd --bridge=none), proven to serve /var/run/docker.sock " \
        "and named in /var/run/docker.pid; state while paused: T." in text
    assert "Errors in the window: timeout 1; by class: ui-object 1." in text


def test_data_plane_mode_and_the_hung_fault_are_options_of_the_suite():
    args = faults.parser().parse_args(["--dataplane", "--faults", "hung,container"])
    cfg = parse_config_file_data(faults.config_data(args), config_path(None))
    assert cfg.controller.dataplane.short_flows == "switch"
    assert [f for f in faults.FAULTS if f in args.faults] == ["container", "hung"]
    args = faults.parser().parse_args([])
    cfg = parse_config_file_data(faults.config_data(args), config_path(None))
    assert cfg.controller.dataplane.short_flows == "controller" and "hung" in args.faults
    # the starved instance runs only when asked for, in its place after the frozen one
    assert "starved" not in args.faults
    args = faults.parser().parse_args(["--faults", "switch,starved,hung"])
    assert [f for f in faults.FAULTS if f in args.faults] == ["hung", "starved", "switch"]
    # tracker mode; the restart of Open vSwitch and the standby's takeover when asked for
    args = faults.parser().parse_args(["--tracker", "--standby", "--faults", "ovs,takeover"])
    cfg = parse_config_file_data(faults.config_data(args), config_path(None))
    assert cfg.controller.dataplane.short_flows == "tracker" and args.standby
    assert [f for f in faults.FAULTS if f in args.faults] == ["takeover", "ovs"]
    assert not {"ovs", "takeover"} & set(faults.parser().parse_args([]).faults)


def test_the_report_says_when_the_standby_claimed_and_how_open_vswitch_came_back():
    records = [record("takeover", 0.0, 10.0, 10.0, 12.0, milestones={"the standby is master": 1.3},
                      details={"takeover_s": 1.21, "restart_error": None}),
               record("ovs", 100.0, 110.0, 113.0, 116.0,
                      details={"pid_before": 40, "pid_after": 41, "restart_s": 3.1})]
    results = analyse(records, [], [], grace_s=4.0, target_s=15.0)
    text = faults.summary_markdown(report_doc(results))
    assert "The standby claimed the master role 1.21 s after the kill; the old master back " \
        "as standby: yes." in text
    assert "ovs-vswitchd pid 40 -> 41, restarted in 3.1 s." in text


def test_the_workload_of_a_segment_is_a_valid_load_generator_spec():
    opts = argparse.Namespace(config=None, period=3.0, seconds=45.0, rate=4.0, dataplane=False,
                              tracker=False)
    cfg = parse_config_file_data(faults.config_data(opts), config_path(None))
    assert cfg.controller.monitoring_period_s == cfg.profiler.period_s == 3.0
    spec = faults.workload_spec(cfg, opts, seed=3, phase="agent")
    validate_spec(spec)
    assert {c["name"] for c in spec["classes"]} == {"ui-object", "backend-job", "video-stream"}
    plan = schedule(spec, 0, 1)
    assert 100 < len(plan) < 260                        # about 4/s for 45 s
    assert sum(1 for r in plan if r["class"]["name"] == "video-stream") < 0.15 * len(plan)
