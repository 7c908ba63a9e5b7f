"""The comparison's scenarios beyond the paper's, each end to end at a tiny length on the real
testbed (one policy, short phases): the run completes with every request accounted for;
the antagonists ran in their windows and were gone afterwards."""
import csv
import glob
import json
import os

import pytest
import yaml

from experiments import antagonist, scenarios
from experiments.lb_comparison import read_server_samples
from tests.conftest import run_module
from topologies.clean import leftovers

# a minute each: `make test-e2e` (the paper scenario's pipeline runs in `make test`)
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.usefixtures("clean_machine")]



SHORT = ["--policies", "srr", "--phase-seconds", "10", "--progress", "5"]


def smoke(tmp_path, scenario: str, *flags) -> tuple[dict, str]:
    """Run the scenario; check it completed with every request accounted for; its run's
    result and directory."""
    out = tmp_path / scenario
    res = run_module("experiments.lb_comparison", "--scenario", scenario, *SHORT, *flags,
                     "--out", str(out), timeout=420)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] is True and summary["options"]["scenario"] == scenario
    run = summary["runs"]["srr"][0]
    run_dir = str(out / "srr" / "run1")
    rows = [r for f in glob.glob(f"{run_dir}/requests-*.csv") for r in csv.DictReader(open(f))]
    assert run["requests_planned"] == run["requests_recorded"] == len(rows) > 0
    assert sum(c["completed"] + c["failed"] for c in run["table3"].values()) == len(rows)
    assert run["table2"]["cpu"]["timestamps"] >= 4
    md = (out / "summary.md").read_text()
    assert f"Scenario: **{scenario}**" in md and "schedule seed 2 (design range)" in md
    assert leftovers()["containers"] == []
    return run, run_dir


def test_heavy_tail_plays_drawn_job_lengths(tmp_path):
    run, run_dir = smoke(tmp_path, "heavy-tail", "--duration-scale", "0.1")
    spec = json.load(open(f"{run_dir}/workload.json"))
    assert "{seconds}" in spec["classes"][2]["path"] and "draw" in spec["classes"][2]
    jobs = [r for f in glob.glob(f"{run_dir}/requests-*.csv") for r in csv.DictReader(open(f))
            if r["class"].startswith("backend")]
    assert jobs and all(not r["error"] for r in jobs)


def test_unequal_servers_get_their_shares(tmp_path):
    run, run_dir = smoke(tmp_path, "unequal", "--duration-scale", "0.1")
    cfg = yaml.safe_load(open(f"{run_dir}/config.yaml"))
    assert [s["cpu"] for s in cfg["servers"]] == [0.6, 0.3, 0.3, 0.2]


def test_callgraph_requests_enter_at_the_entry_services(tmp_path):
    run, run_dir = smoke(tmp_path, "callgraph", "--peak-rate", "6")
    assert set(run["table3"]) == {"svc01", "svc02", "svc03"}
    assert sum(c["failed"] for c in run["table3"].values()) == 0
    assert all(c["rt_p99"] is not None for c in run["table3"].values())


@pytest.mark.parametrize("app", ["hotel", "social"])
def test_deathstarbench_requests_enter_at_the_mixs_entries_on_four_switches(tmp_path, app):
    run, run_dir = smoke(tmp_path, app, "--peak-rate", "8")
    assert set(run["table3"]) == {c.name for c in scenarios.SCENARIOS[app].classes}
    e2e = run["end_to_end"]
    assert e2e["requests"] == run["requests_recorded"] and e2e["failed"] == 0
    assert None not in (e2e["rt_p50"], e2e["rt_p95"], e2e["rt_p99"])
    cfg = yaml.safe_load(open(f"{run_dir}/config.yaml"))
    assert cfg["testbed"]["switches"] == 4 and len(cfg["servers"]) == 8


def test_the_antagonists_run_in_their_windows_and_are_gone_afterwards(tmp_path):
    run, run_dir = smoke(tmp_path, "antagonist", "--duration-scale", "0.1")
    records = {a["name"]: a for a in run["antagonists"]}
    assert set(records) == {"srv1-ui-inside", "srv3-beside"}
    for a in records.values():
        # started and stopped on time (the run's loop ticks every second)
        assert a["planned_start_s"] <= a["started_s"] < a["planned_start_s"] + 3
        assert a["planned_stop_s"] <= a["stopped_s"] < a["planned_stop_s"] + 3
        # it ran: up to the server's quota (0.3 cores) over its 10 s
        assert 0.5 < a["cpu_s"] <= 0.35 * (a["stopped_s"] - a["started_s"]) + 0.3
        assert a["gone"] and not a["ended_before_stop"]
    assert records["srv1-ui-inside"]["cgroup"].startswith("/malb/srv1/")
    assert records["srv3-beside"]["cgroup"] == "/malb/srv3/malb-antagonist"
    # the agents see the one inside a container as its server's CPU, not the one beside
    samples = read_server_samples(f"{run_dir}/history.sqlite", run["t0"], run["t_end"])

    def mean_cpu(server, a):
        # the profiler's samples trail the agents' by up to two periods
        lo, hi = run["t0"] + a["started_s"] + 2, run["t0"] + a["stopped_s"]
        vals = [s[server]["cpu"] for t, s in samples.items() if lo <= t <= hi and server in s]
        return sum(vals) / len(vals)
    assert mean_cpu("srv1", records["srv1-ui-inside"]) > 70
    assert mean_cpu("srv3", records["srv3-beside"]) < 60
    # nothing left: no busy process, no PID file, no cgroup of its own
    assert [p for p in os.listdir("/proc") if p.isdigit() and any(
        arg.startswith("malb-antagonist-") for arg in antagonist.cmdline(int(p)) or ())] == []
    assert not glob.glob("/run/malb/pids/antagonist-*")
    assert not glob.glob("/sys/fs/cgroup/*/malb/*/malb-antagonist") + \
        glob.glob("/sys/fs/cgroup/malb/*/malb-antagonist")
    md = open(os.path.join(os.path.dirname(run_dir), "..", "summary.md")).read()
    assert "Antagonists, as they ran" in md
