"""Bad flags and missing privileges end with one clear line, never a traceback."""
import argparse
import os

import pytest

from common.cli import overrides_from_args
from common.config import ConfigError, parse_config
from tests.conftest import run_module

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")


BAD_SPEC = '{"phases": [{"name": "a", "seconds": -1, "from": 1, "to": 1}], "classes": []}'

# Every command, with bad input: (arguments, what the error must say). {tmp} is a fresh
# directory; {out} a path inside it that must not exist afterwards (nothing started).
BAD_INVOCATIONS = [
    (["topologies", "up", "--servers", "abc"], "expected a whole number"),
    (["topologies", "up", "--servers", "0"], "must be at least 1"),
    (["topologies", "up", "--datapath", "turbo"], "invalid choice: 'turbo'"),
    (["topologies", "frobnicate"], "invalid choice: 'frobnicate'"),
    (["topologies", "up", "--trunk-bw", "-3"], "must be positive"),
    (["topologies", "check", "--server-cpu", "nan"], "expected a finite number"),
    (["agents", "--server", "srv1", "--port", "70000"], "at most 65535"),
    (["agents", "--server", "srv1", "--log-level", "chatty"], "one of DEBUG"),
    (["agents", "--server", "srv1", "--name-regex", "("], "not a regular expression"),
    (["agents", "--server", "nosuch"], "--server nosuch: not in"),
    (["profiler", "--port", "0"], "must be at least 1"),
    (["profiler", "--period", "nan"], "expected a finite number"),
    (["profiler", "--window", "0"], "must be at least 1"),
    (["profiler", "export", "--history", "{tmp}/none.sqlite"], "export: --out DIRECTORY"),
    (["profiler", "export", "--history", "{tmp}/none.sqlite", "--out", "{out}"],
     "no such history file"),
    (["experiments.lb_comparison", "--servers", "120", "--out", "{out}"],
     "--servers: servers: at most 99 servers, got 120"),
    (["experiments.lb_comparison", "--period", "0.05", "--out", "{out}"],
     "--period: controller.monitoring_period_s: must be >= 0.1"),
    (["experiments.lb_comparison", "--server-memory", "3", "--out", "{out}"],
     "--server-memory: servers[0].memory: must be at least 6 MB"),
    (["experiments.lb_comparison", "--host-bw", "0.01", "--out", "{out}"],
     "--host-bw: servers[0].network_mbit: must be >= 0.1"),
    (["experiments.lb_comparison", "--server-cpu", "0.6,0.3", "--out", "{out}"],
     "--server-cpu: one value, or one per server (4), got 2"),
    (["experiments.lb_comparison", "--server-cpu", "0.6,x", "--out", "{out}"],
     "--server-cpu"),
    (["experiments.lb_comparison", "--policies", "srr,best", "--out", "{out}"],
     "--policies: choose from srr, ln, "),
    (["experiments.lb_comparison", "--scenario", "bursty", "--out", "{out}"],
     "argument --scenario: invalid choice: 'bursty'"),
    (["experiments.lb_comparison", "--scenario", "callgraph", "--video-rate", "200", "--out",
      "{out}"], "--video-rate does not fit --scenario callgraph: the call-graph application "
                "has no video streams or back-end jobs"),
    (["experiments.lb_comparison", "--scenario", "callgraph", "--config",
      "configs/paper.yaml", "--out", "{out}"],
     "--config does not fit --scenario callgraph: its application is "
     "configs/callgraph-lb.yaml"),
    (["experiments.lb_comparison", "--scenario", "antagonist", "--server-cpu", "0.6,0.3",
      "--out", "{out}"], "--server-cpu does not fit --scenario antagonist"),
    (["experiments.lb_comparison", "--scenario", "unequal", "--servers", "3", "--out",
      "{out}"], "--server-cpu: one value, or one per server (3), got 4"),
    (["experiments.lb_comparison", "--scenario", "antagonist", "--config",
      "configs/slo.yaml", "--out", "{out}"],
     "--scenario antagonist: its workload does not fit the configuration"),
    (["experiments.lb_comparison", "--low-fraction", "2", "--out", "{out}"], "at most 1"),
    (["experiments.lb_comparison", "--config", "{tmp}/none.yaml", "--out", "{out}"],
     "configuration file not found"),
    (["experiments.lb_comparison", "--resummarise", "{tmp}"],
     "not a comparison's results"),
    (["experiments.lb_comparison", "--resummarise", "{tmp}", "{tmp}/b"],
     "give --out DIRECTORY for the pooled summary"),
    (["experiments.lb_comparison", "--resummarise", "{tmp}", "--as-recorded"],
     "--as-recorded is for pooling"),
    (["experiments.lb_comparison", "--first-run", "0", "--out", "{out}"],
     "must be at least 1"),
    (["experiments.profiling_accuracy", "live", "--out", "{out}", "--period", "0.01"],
     "must be at least 0.1"),
    (["experiments.profiling_accuracy", "live", "--out", "{out}", "--microservices", "db"],
     "choose from video, ui, backend, got 'db'"),
    (["experiments.profiling_accuracy", "live", "--out", "{out}", "--phase-seconds", "-1"],
     "must be positive"),
    (["experiments.profiling_accuracy", "analyse", "--history", "h", "--phases", "p",
      "--out", "{out}", "--rm-windows", "2,0"], "'0': must be at least 1"),
    (["experiments.loadgen", "--spec", "{tmp}/none.json", "--out", "{out}"],
     "No such file or directory"),
    (["experiments.loadgen", "--spec", "{tmp}/bad.json", "--out", "{out}"],
     "phases[0].seconds: expected a finite number > 0"),
    (["experiments.loadgen", "--spec", "{tmp}/bad.json", "--out", "{out}", "--client", "2",
      "--clients", "2"], "--client must be in [0, --clients)"),
    (["experiments.loadgen", "--spec", "{tmp}/bad.json", "--out", "{out}", "--timeout",
      "0"], "--timeout: expected a finite number > 0"),
    (["benchmarks.controller", "--rates", "abc", "--out", "{out}"], "expected a number"),
    (["benchmarks.controller", "--rates", "200,0", "--out", "{out}"], "must be positive"),
    (["benchmarks.controller", "--apps", "nginx", "--out", "{out}"],
     "choose from malb, simple_switch_13"),
    (["benchmarks.controller", "--workers", "0", "--out", "{out}"], "must be at least 1"),
    (["benchmarks.controller", "--parts", "modes,speed", "--out", "{out}"],
     "choose from latency, modes"),
    (["benchmarks.modes", "--hold", "2", "--out", "{out}"], "must be at least 4"),
    (["benchmarks.modes", "--long-flows", "x", "--out", "{out}"], "expected"),
    (["benchmarks.profiler_period", "--sizes", "0", "--out", "{out}"], "must be at least 1"),
    (["benchmarks.profiler_period", "--predictors", "fast", "--out", "{out}"], "choose from"),
    (["benchmarks", "--quick"], "unrecognized arguments: --quick"),
    (["experiments.slo_energy", "--policies", "max,turbo", "--out", "{out}"],
     "choose from max, min, ondemand, schedutil, slo, slo-client, slo-paper, "
     "slo-predictive, slo-split, slo-priced, predictive-priced, slo-whole, got 'turbo'"),
    (["experiments.slo_energy", "--policies", "max,slo-split", "--out", "{out}"],
     "--policies: slo-split runs on a call graph with an end-to-end objective"),
    (["experiments.slo_energy", "--config", "configs/slo-callgraph.yaml", "--policies", "slo",
      "--out", "{out}"], "--policies: slo runs on one loop; this configuration has an "
                         "end-to-end objective"),
    (["experiments.slo_energy", "--seconds", "5", "--out", "{out}"], "must be at least 30"),
    (["experiments.slo_energy", "--resume"], "--resume continues the experiment in --out"),
    (["experiments.slo_energy", "--resume", "--out", "{tmp}"],
     "holds no experiment to resume (no started.json)"),
    (["experiments.placement_comparison", "--resume", "--out", "{tmp}"],
     "holds no experiment to resume (no started.json)"),
    (["experiments.slo_energy", "--loads", "20-50,70", "--out", "{out}"],
     "expected low-high pairs of requests per second above 0, separated by commas "
     "(20-50,30-70), got '70'"),
    (["experiments.slo_energy", "--loads", "20-50", "--low", "10", "--out", "{out}"],
     "--loads replaces --low and --high"),
    (["experiments.slo_energy", "--config", "configs/paper.yaml", "--out", "{out}"],
     "configuration: microservices: no microservice has an slo"),
    (["experiments.placement_comparison", "--max-utilization", "1.5", "--out", "{out}"],
     "must be at most 1"),
    (["placement", "plan", "--max-utilization", "0", "--graph", "g", "--layout", "l"],
     "must be at least 0.05"),
    (["agents", "--server", "srv1", "--slo-actuator", "magic"], "invalid choice: 'magic'"),
    (["experiments.faults", "--faults", "agent,meteor", "--out", "{out}"],
     "choose from agent, profiler, controller, takeover, container, hung, starved, switch, "
     "ovs, docker, got 'meteor'"),
    (["experiments.faults", "--standby", "--faults", "controller", "--out", "{out}"],
     "--faults: controller with --standby would hand the switches over; name takeover"),
    (["experiments.faults", "--faults", "takeover", "--out", "{out}"],
     "--faults: takeover needs a standby controller (--standby)"),
    (["experiments.faults", "--tracker", "--dataplane", "--out", "{out}"],
     "argument --dataplane: not allowed with argument --tracker"),
    (["experiments.scenarios"], "one of the arguments --callgraph-config --dsb-config is "
                                "required"),
    (["experiments.scenarios", "--dsb-config", "nope"], "invalid choice: 'nope'"),
    (["experiments.faults", "--seconds", "5", "--out", "{out}"], "must be at least 20"),
    (["experiments.faults", "--seconds", "20", "--docker-pause", "30", "--out", "{out}"],
     "--seconds: too short for the fault's hold and pause"),
    (["experiments.faults", "--policy", "best", "--out", "{out}"], "invalid choice: 'best'"),
    (["experiments.faults", "--config", "configs/slo.yaml", "--out", "{out}"],
     "the workload needs the microservice 'ui'"),
]


@pytest.mark.parametrize("args, expected", BAD_INVOCATIONS,
                         ids=[" ".join(a)[:60] for a, _ in BAD_INVOCATIONS])
def test_bad_invocations_exit_2_with_one_line_and_start_nothing(tmp_path, args, expected):
    (tmp_path / "bad.json").write_text(BAD_SPEC)
    out = tmp_path / "out"
    argv = [a.format(tmp=tmp_path, out=out) for a in args]
    res = run_module(*argv)
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr[-2000:])
    assert expected in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    if not argv[0].startswith("experiments.loadgen"):   # stdlib argparse: usage, then error
        assert len(lines) == 1, res.stderr
    assert "error" in lines[-1]
    assert not out.exists(), "a command that refused its input still made its output"


@pytest.mark.integration       # root: run with the integration tier
@root_only
def test_bad_configuration_names_the_field(config_file):
    path = config_file({"servers": {"count": 2, "cpu": "lots"}})
    res = run_module("topologies", "info", "--config", path)
    assert res.returncode == 2
    assert "servers[0].cpu: expected a number" in res.stderr
    assert "Traceback" not in res.stderr
    res = run_module("topologies", "info", "--config", "/nonexistent.yaml")
    assert res.returncode == 2 and "configuration file not found" in res.stderr


@pytest.mark.integration       # root: run with the integration tier
@root_only
def test_not_root_is_told_so():
    res = run_module("topologies", "up", user=65534)
    assert res.returncode == 1
    assert "needs root" in res.stderr and "Traceback" not in res.stderr


def test_server_flags_keep_what_an_explicit_server_list_says():
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
