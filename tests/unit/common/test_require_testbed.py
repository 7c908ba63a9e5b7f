"""A testbed command on a machine whose daemons are down says to run `make setup`."""
import os

import pytest

from common import cli


@pytest.fixture
def bare_root(tmp_path, monkeypatch):
    """Root, with none of the daemons' tools on the PATH (as after a reboot or before setup)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 0)


def test_names_the_missing_daemons_and_make_setup(bare_root, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.require_testbed("the comparison")
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "the comparison needs Open vSwitch and Docker running" in err
    assert "run `make setup`" in err
    assert "Traceback" not in err


def test_names_only_the_daemon_that_is_down(bare_root, tmp_path, capsys):
    tool = tmp_path / "ovs-vsctl"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    with pytest.raises(SystemExit):
        cli.require_testbed("the benchmark")
    err = capsys.readouterr().err
    assert "the benchmark needs Docker running, and it is not" in err
    assert "Open vSwitch" not in err


def test_a_command_that_fails_counts_as_down(tmp_path, monkeypatch):
    tool = tmp_path / "ovs-vsctl"
    tool.write_text("#!/bin/sh\necho 'database connection failed' >&2\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not cli._answers(["ovs-vsctl", "--timeout=5", "show"])
