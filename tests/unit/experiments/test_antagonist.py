"""experiments/antagonist.py: when antagonists start and stop, and one busy process started,
verified and stopped (its cgroup faked: the real ones need root and a testbed; the
integration test runs those)."""
import os
import time

import pytest

from common.state import process_cpu_seconds, process_start_ticks
from experiments import antagonist

ENTRIES = [{"name": "a", "start_s": 10.0, "stop_s": 20.0},
           {"name": "b", "start_s": 15.0, "stop_s": 25.0}]


def test_each_antagonist_starts_in_its_window_and_stops_at_its_end_once():
    state = {}
    assert antagonist.due(ENTRIES, state, 9.9) == []
    assert antagonist.due(ENTRIES, state, 10.0) == [("start", "a")]
    state["a"] = "running"
    assert antagonist.due(ENTRIES, state, 16.0) == [("start", "b")]
    state["b"] = "running"
    assert antagonist.due(ENTRIES, state, 20.0) == [("stop", "a")]
    state["a"] = "stopped"
    assert antagonist.due(ENTRIES, state, 30.0) == [("stop", "b")]
    state["b"] = "stopped"
    assert antagonist.due(ENTRIES, state, 40.0) == []
    # a window the clock jumped over is not started after its end
    assert antagonist.due(ENTRIES, {}, 26.0) == []


def test_the_cgroup_path_as_proc_shows_it():
    assert antagonist.rel_of("/sys/fs/cgroup/cpu/malb/srv3/malb-antagonist") == \
        "/malb/srv3/malb-antagonist"
    assert antagonist.rel_of("/sys/fs/cgroup/malb/srv3/malb-antagonist") == \
        "/malb/srv3/malb-antagonist"
    assert antagonist.rel_of("/sys/fs/cgroup/cpuacct/malb.slice/malb-srv3.slice/x") == \
        "/malb.slice/malb-srv3.slice/x"


def test_proc_readers_read_this_process():
    me = os.getpid()
    assert antagonist.cmdline(me) and antagonist.cgroups_of(me)
    assert process_cpu_seconds(me) > 0
    assert antagonist.cmdline(2 ** 22 + 7) is None


def test_a_busy_process_beside_is_started_verified_stopped_and_gone(tmp_path, monkeypatch):
    group = tmp_path / "cpu" / "malb" / "srv3"
    group.mkdir(parents=True)
    procs = group / "malb-antagonist" / "cgroup.procs"
    entry = {"name": "t", "server": "srv3", "where": "beside", "start_s": 0.0,
             "stop_s": 2.0, "cores": 0.5}
    real = antagonist.cgroups_of
    # the process writes its PID into the (fake) cgroup.procs; /proc would show the group
    monkeypatch.setattr(antagonist, "CGROUP_ROOT", str(tmp_path))
    monkeypatch.setattr(antagonist, "cgroups_of", lambda pid: (
        ["/malb/srv3/malb-antagonist"] if procs.exists() and
        procs.read_text().strip() == str(pid) else real(pid)))
    monkeypatch.setattr(antagonist, "PID_DIR", str(tmp_path))
    monkeypatch.setattr(antagonist, "write_pid_file",
                        lambda name, pid: (tmp_path / f"{name}.pid").write_text(str(pid)))
    a = antagonist.Antagonist(entry, time.time(), str(tmp_path), {"cpu": str(group)})
    a.start()
    pid, ticks = a.pid, a.ticks
    assert a.verified() and process_start_ticks(pid) == ticks
    assert a.record["started_s"] >= 0 and a.record["cgroup"] == "/malb/srv3/malb-antagonist"
    assert (tmp_path / "antagonist-t.pid").exists()
    time.sleep(0.5)
    procs.unlink()          # a real cgroup empties when its process ends; a file does not
    monkeypatch.setattr(antagonist, "cgroups_of", lambda pid: ["/malb/srv3/malb-antagonist"])
    a.stop()
    assert process_start_ticks(pid) != ticks                     # gone
    assert a.record["gone"] and a.record["cpu_s"] > 0 and not a.record["ended_before_stop"]
    assert not (group / "malb-antagonist").exists()              # its group removed
    assert not (tmp_path / "antagonist-t.pid").exists()
    a.stop()                                                     # idempotent


def test_a_process_that_is_no_longer_ours_is_not_signalled(tmp_path, monkeypatch):
    a = antagonist.Antagonist({"name": "x", "server": "srv1", "where": "beside",
                               "start_s": 0.0, "stop_s": 1.0, "cores": 1.0}, time.time(),
                              str(tmp_path), {"cpu": str(tmp_path)})
    a.pid, a.ticks, a.where = os.getpid(), process_start_ticks(os.getpid()), "/x"
    monkeypatch.setattr(antagonist.os, "kill", lambda *a: pytest.fail("signalled"))
    a.stop()             # this process has no token in its command line: left alone
    assert a.record["ended_before_stop"] and a.record["cpu_s"] is None


def test_a_process_that_never_reaches_its_cgroup_is_stopped_and_reported(tmp_path,
                                                                         monkeypatch):
    group = tmp_path / "cpu" / "malb" / "srv1"
    group.mkdir(parents=True)
    entry = {"name": "lost", "server": "srv1", "where": "beside", "start_s": 0.0,
             "stop_s": 1.0, "cores": 0.1}
    monkeypatch.setattr(antagonist, "CGROUP_ROOT", str(tmp_path))
    monkeypatch.setattr(antagonist, "cgroups_of", lambda pid: ["/elsewhere"])
    monkeypatch.setattr(antagonist, "START_TIMEOUT_S", 1.0)
    a = antagonist.Antagonist(entry, time.time(), str(tmp_path), {"cpu": str(group)})
    with pytest.raises(RuntimeError, match="did not appear in /malb/srv1/malb-antagonist"):
        a.start()
    assert a.proc.poll() is not None
