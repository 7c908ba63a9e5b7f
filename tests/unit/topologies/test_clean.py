"""Cleanup signals only processes it can prove are the ones it recorded, and says what it
could not find out instead of reading it as "nothing left"."""
from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from common.config import parse_config
from common.state import process_start_ticks, read_pid_file, same_process, write_pid_file
from topologies import clean


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_pid_files_record_the_start_time_and_read_back(tmp_path, sleeper):
    path = write_pid_file("agent-srv1", sleeper.pid, str(tmp_path))
    pid, name, start = read_pid_file(path)
    assert (pid, name) == (sleeper.pid, "agent-srv1")
    assert start == process_start_ticks(sleeper.pid) and same_process(pid, start)
    assert not same_process(pid, start + 1) and not same_process(pid, None)
    (tmp_path / "junk.pid").write_text("hello\n")
    with pytest.raises(ValueError):
        read_pid_file(str(tmp_path / "junk.pid"))


def test_a_recorded_pid_now_held_by_another_process_is_not_signalled(tmp_path, sleeper):
    # as if our service had ended and the PID been reused: its start time differs
    (tmp_path / "controller.pid").write_text(
        f"{sleeper.pid} controller {process_start_ticks(sleeper.pid) - 100}\n")
    # and a file from before start times were recorded
    (tmp_path / "profiler.pid").write_text(f"{sleeper.pid} profiler\n")
    outcome = clean.stop_recorded_processes(str(tmp_path))
    time.sleep(0.2)
    assert sleeper.poll() is None, "an unverified process was signalled"
    assert "another process" in outcome["controller.pid"]
    assert "not signalled" in outcome["profiler.pid"]
    assert not os.listdir(tmp_path)     # the stale records are gone


def test_a_verified_process_is_stopped_and_one_already_gone_is_said_so(tmp_path, sleeper):
    write_pid_file("agent-srv2", sleeper.pid, str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "agent-srv3.pid").write_text(f"{gone.pid} agent-srv3 12345\n")
    outcome = clean.stop_recorded_processes(str(tmp_path))
    assert sleeper.wait(timeout=5) is not None
    assert outcome["agent-srv2.pid"].endswith("stopped")
    assert outcome["agent-srv3.pid"].endswith("already gone")
    assert not os.listdir(tmp_path)


def test_leftovers_raise_when_docker_cannot_be_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(clean.CleanupError, match="Docker engine does not answer"):
        clean.leftovers()
    errors: list[str] = []
    assert clean.remove_containers(errors) == [] and "does not answer" in errors[0]


def test_every_node_name_the_configuration_makes_is_known_to_cleanup():
    cfg = parse_config({"testbed": {"clients": 2, "switches": 2, "proxy": True}})
    names = [i.name for i in cfg.slots] + [c.name for c in cfg.testbed.clients] + \
        [cfg.testbed.proxy.name] + [s.name for s in cfg.testbed.switches]
    assert all(re.fullmatch(clean.NODE_NAME_RE, n) for n in names)
    # without a state file, all but the switches (a user's Mininet names them alike)
    assert [n for n in names if not clean.FALLBACK_NAME_RE.fullmatch(n)] == ["s1", "s2"]
