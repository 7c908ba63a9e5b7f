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
    (["agents", "--server", "srv1", "--port", "70000"], "at most 65535"),
    (["agents", "--server", "srv1", "--log-level", "chatty"], "one of DEBUG"),
    (["profiler", "--port", "0"], "must be at least 1"),
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


def test_server_flags_keep_what_an_explicit_server_list_says():
    import argparse

    from common.cli import overrides_from_args
    from common.config import ConfigError, parse_config
    base = parse_config({"testbed": {"switches": 2},
                         "servers": [{"name": "big", "cpu": 1.0, "switch": "s2"},
                                     {"name": "small", "cpu": 0.2}]})
    args = argparse.Namespace(servers=None, server_cpu=None, server_memory="512m")
    out = overrides_from_args(args, base)
    cfg = parse_config({"testbed": {"switches": 2}, **out})
    assert [(s.name, s.cpu, s.memory_mb, s.switch) for s in cfg.servers] == \
        [("big", 1.0, 512, "s2"), ("small", 0.2, 512, "s2")]
    with pytest.raises(ConfigError, match="--servers 3: the configuration lists 2 servers"):
        overrides_from_args(argparse.Namespace(servers=3, server_cpu=None,
                                               server_memory=None), base)
    remote = parse_config({"servers": [{"switch": "s1", "agent_url": "http://10.1.1.1:9101"},
                                       {"switch": "s1"}], "testbed": {"switches": 2}})
    out = overrides_from_args(argparse.Namespace(servers=None, server_cpu=0.8,
                                                 server_memory=None), remote)
    cfg = parse_config({"testbed": {"switches": 2}, **out})
    assert [(s.switch, s.cpu) for s in cfg.servers] == [("s1", 0.8), ("s1", 0.8)]
    assert cfg.servers[0].agent_url == "http://10.1.1.1:9101"
    uniform = parse_config({"servers": {"count": 2, "cpu": 0.5}})
    out = overrides_from_args(argparse.Namespace(servers=5, server_cpu=None,
                                                 server_memory=None), uniform)
    assert out["servers"]["count"] == 5 and out["servers"]["cpu"] == 0.5
