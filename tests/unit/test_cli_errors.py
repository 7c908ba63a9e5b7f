"""Bad flags and missing privileges end with one clear line, never a traceback."""
import os

import pytest

from tests.conftest import run_module

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")


@pytest.mark.parametrize("args, expected", [
    (["topologies", "up", "--servers", "abc"], "expected a whole number"),
    (["topologies", "up", "--servers", "0"], "must be at least 1"),
    (["topologies", "up", "--datapath", "turbo"], "invalid choice: 'turbo'"),
    (["topologies", "frobnicate"], "invalid choice: 'frobnicate'"),
    (["topologies", "up", "--trunk-bw", "-3"], "must be positive"),
])
def test_bad_flags(args, expected):
    res = run_module(*args)
    assert res.returncode == 2
    assert expected in res.stderr
    assert "Traceback" not in res.stderr


@root_only
def test_bad_configuration_names_the_field(config_file):
    path = config_file({"servers": {"count": 2, "cpu": "lots"}})
    res = run_module("topologies", "info", "--config", path)
    assert res.returncode == 2
    assert "servers[0].cpu: expected a number" in res.stderr
    assert "Traceback" not in res.stderr
    res = run_module("topologies", "info", "--config", "/nonexistent.yaml")
    assert res.returncode == 2 and "configuration file not found" in res.stderr


@root_only
def test_not_root_is_told_so():
    res = run_module("topologies", "up", user=65534)
    assert res.returncode == 1
    assert "needs root" in res.stderr and "Traceback" not in res.stderr
