"""common/testbed_lock.py: one testbed per machine. While another process holds the lock, a
second testbed and a cleanup are refused, naming it, and touch nothing; the lock goes with
its holder however it ends."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from common import testbed_lock
from tests.conftest import ROOT

HOLD = textwrap.dedent("""
    import sys, time
    from common import testbed_lock
    testbed_lock.LOCK_PATH = sys.argv[1]
    testbed_lock.acquire()
    print("held", flush=True)
    time.sleep(60)
""")


@pytest.fixture
def other_holder(tmp_path, monkeypatch):
    """Another process holding the lock (at a path of the test's own)."""
    path = str(tmp_path / "testbed.lock")
    monkeypatch.setattr(testbed_lock, "LOCK_PATH", path)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, path, "--an-experiment"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_a_second_testbed_is_refused_naming_the_one_that_runs(other_holder):
    assert f"pid {other_holder.pid} (" in testbed_lock.holder()
    assert "\n" not in testbed_lock.holder() and "python -c" in testbed_lock.holder()
    with pytest.raises(testbed_lock.TestbedBusy, match=f"pid {other_holder.pid} .*one at a "
                                                       "time"):
        testbed_lock.acquire()
    assert not testbed_lock.held_here()


def test_a_cleanup_is_refused_and_touches_nothing(other_holder, monkeypatch):
    from topologies import clean
    touched = []
    monkeypatch.setattr(clean, "stop_recorded_processes", lambda: touched.append(1))
    monkeypatch.setattr(clean, "remove_containers", lambda errors: touched.append(2))
    with pytest.raises(testbed_lock.TestbedBusy, match="not cleaning what it uses"):
        clean.clean_testbed(quiet=True)
    assert touched == []


def test_an_experiment_stops_before_it_starts_anything(other_holder, capsys, monkeypatch):
    from common import cli
    monkeypatch.setattr(cli, "_answers", lambda command: True)     # the daemons are up
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)
    with pytest.raises(SystemExit) as exit_:
        cli.require_testbed("the comparison")
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "the comparison brings a testbed up, and a testbed is running on this machine " \
           f"(pid {other_holder.pid} " in err
    assert len(err.strip().splitlines()) == 1


def test_the_lock_goes_with_its_holder_and_is_taken_again(other_holder):
    other_holder.kill()
    other_holder.wait()
    assert testbed_lock.holder() is None
    testbed_lock.acquire()
    try:
        assert testbed_lock.held_here() and testbed_lock.holder() is None   # ours
    finally:
        testbed_lock.release()
    assert not testbed_lock.held_here()


def test_an_experiment_holds_it_across_its_testbeds_and_a_testbed_nests_inside(tmp_path,
                                                                                monkeypatch):
    """require_testbed's hold lasts; a stack's or testbed's acquire and release nest in it,
    so the lock is still held between one run's testbed and the next."""
    monkeypatch.setattr(testbed_lock, "LOCK_PATH", str(tmp_path / "testbed.lock"))
    testbed_lock.acquire()                  # the experiment's
    try:
        testbed_lock.acquire()              # a run's testbed
        testbed_lock.release()
        assert testbed_lock.held_here()
        probe = subprocess.run([sys.executable, "-c", HOLD, testbed_lock.LOCK_PATH], cwd=ROOT,
                               capture_output=True, text=True, timeout=30)
        assert probe.returncode != 0 and "TestbedBusy" in probe.stderr   # nothing slips in
    finally:
        testbed_lock.release()
    assert not testbed_lock.held_here()


def test_a_forked_child_does_not_hold_its_parents_lock(tmp_path, monkeypatch):
    import os
    monkeypatch.setattr(testbed_lock, "LOCK_PATH", str(tmp_path / "testbed.lock"))
    testbed_lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:                         # the child: not the holder, whatever it inherited
            os._exit(0 if not testbed_lock.held_here() else 1)
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        testbed_lock.release()
