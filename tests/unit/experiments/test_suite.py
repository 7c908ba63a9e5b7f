"""The evaluation suite (experiments/suite.py): its scenarios' policies, the comparison it
runs for each, and the Holm correction of its tables."""
import argparse
import json
import signal
import subprocess
import sys
import threading

import pytest

from experiments import lb_comparison, scenarios, significance, suite, workload


def test_every_scenario_runs_known_policies_with_malb_and_its_papers_rule():
    assert set(suite.SUITE) == set(scenarios.SCENARIOS) | set(suite.VARIANTS)
    assert all(s in scenarios.SCENARIOS for s, _flags in suite.VARIANTS.values())
    for name, policies in suite.SUITE.items():
        if name in suite.VARIANTS:
            continue
        assert set(policies) <= set(workload.policy_choices()), name
        assert {"srr", "malb-paper", "malb", "lc", "p2c", "prequal", "haproxy-leastconn",
                "nginx-leastconn"} <= set(policies), name
    assert {"wrr", "wlc"} <= set(suite.SUITE["unequal"])
    assert {"ln", "haproxy-roundrobin"} <= set(suite.SUITE["paper"])


def test_the_data_plane_cell_is_the_callgraph_scenario_with_the_switch_balancing():
    opts = argparse.Namespace(runs=5, seed=1000, phase_seconds=30.0, out="/tmp/x",
                              unequal_shares=[0.5, 0.4, 0.3, 0.2])
    args = lb_comparison.parser().parse_args(
        suite.comparison_args("callgraph-dataplane", opts))
    assert args.scenario == "callgraph" and args.dataplane
    assert args.out == "/tmp/x/callgraph-dataplane"
    assert {"malb", "malb-paper", "haproxy-leastconn"} <= set(args.policies)
    assert not lb_comparison.parser().parse_args(
        suite.comparison_args("callgraph", opts)).dataplane


@pytest.mark.parametrize("scenario", ["hotel", "social"])
def test_the_deathstarbench_cells_run_malb_in_the_switch_and_in_the_tracker(scenario):
    opts = argparse.Namespace(runs=5, seed=1015, phase_seconds=None, out="/tmp/x",
                              unequal_shares=[0.5, 0.4, 0.3, 0.2])
    dp = lb_comparison.parser().parse_args(
        suite.comparison_args(f"{scenario}-dataplane", opts))
    assert dp.scenario == scenario and dp.dataplane and not dp.tracker
    assert dp.phase_seconds == scenarios.DSB_PHASE_S
    # every proxy beside malb: the baselines that decide outside the controller
    assert set(dp.policies) == {*suite.PROXIES, "malb-paper", "malb"}
    tr = lb_comparison.parser().parse_args(suite.comparison_args(f"{scenario}-tracker", opts))
    assert tr.tracker and not tr.dataplane
    assert {*suite.PRACTICAL, "srr", "malb-paper", "malb"} <= set(tr.policies)


def test_each_scenario_gets_its_own_phase_length_unless_the_suite_is_given_one():
    opts = argparse.Namespace(runs=5, seed=1000, phase_seconds=None, out="/tmp/x",
                              unequal_shares=[0.5, 0.4, 0.3, 0.2])

    def phase(cell):
        return lb_comparison.parser().parse_args(
            suite.comparison_args(cell, opts)).phase_seconds
    assert phase("hotel") == phase("social") == scenarios.DSB_PHASE_S
    assert phase("paper") == phase("callgraph-dataplane") == workload.DEFAULT_PHASE_S
    opts.phase_seconds = 20.0
    assert phase("hotel") == phase("paper") == 20.0


def test_the_unequal_scenario_runs_on_the_held_out_shares():
    opts = argparse.Namespace(runs=5, seed=1000, phase_seconds=30.0, out="/tmp/x",
                              unequal_shares=[0.5, 0.4, 0.3, 0.2])
    args = suite.comparison_args("unequal", opts)
    assert args[args.index("--server-cpu") + 1] == "0.5,0.4,0.3,0.2"
    assert "--server-cpu" not in suite.comparison_args("paper", opts)
    assert lb_comparison.parser().parse_args(args).server_cpu == [0.5, 0.4, 0.3, 0.2]
    # an interrupted suite goes on at the run it was in
    assert lb_comparison.parser().parse_args(args).resume


def test_holm_adjusts_step_down_and_keeps_the_order():
    adjusted = suite.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    assert adjusted == pytest.approx({"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5})


def _summary(cpu: dict[str, list[float]], p99: dict[str, list[float]]) -> dict:
    """A comparison's summary.json as lb_comparison writes it, from per-run figures."""
    runs = {p: [{"run": k + 1, "seed": 1001 + k,
                 "table2": {"cpu": {"stdev": v}},
                 "table3": {"ui-light": {"requests": 10, "failed": 0, "average": p99[p][k],
                                         "stdev": 1.0, "rt_p50": p99[p][k] / 2,
                                         "rt_p99": p99[p][k]}}}
                for k, v in enumerate(vals)] for p, vals in cpu.items()}
    return {"command": "x", "commit": "abc", "accounted": True, "runs": runs,
            "statistics": significance.compare(runs)}


def test_tabulate_names_the_best_practical_baseline_and_corrects_for_many_tests(tmp_path):
    cpu = {"srr": [12, 13, 11, 12, 14], "lc": [9, 10, 9.5, 10, 9], "p2c": [11, 12, 10, 12, 13],
           "malb": [7, 8, 7.5, 8, 7]}
    p99 = {"srr": [500] * 5, "lc": [400, 410, 390, 405, 395], "p2c": [450] * 5,
           "malb": [420, 430, 410, 425, 415]}
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "summary.json").write_text(json.dumps(_summary(cpu, p99)))
    assert suite.tabulate(str(tmp_path)) == 0
    out = json.loads((tmp_path / "suite.json").read_text())["scenarios"]["paper"]
    assert out["best_practical"] == "lc"
    assert out["vs"]["lc"]["p_holm"] >= out["vs"]["lc"]["p"]
    md = (tmp_path / "suite.md").read_text()
    assert "| paper | 12.4 ± " in md
    # malb's ui-light p99 is above lc's, the best baseline there, in every run
    assert "p99 RT significantly worse than the best baseline's for: ui-light RT p99 " \
           "(ms) (best: least connections)" in md


def test_a_finished_scenario_is_kept_only_if_it_ran_with_the_suites_options(tmp_path, capsys):
    opts = argparse.Namespace(runs=5, seed=1005, phase_seconds=30.0, out=str(tmp_path),
                              unequal_shares=[0.5, 0.4, 0.3, 0.2])
    assert not suite.check_finished("unequal", opts)
    out = tmp_path / "unequal"
    out.mkdir()
    ran = lb_comparison.parser().parse_args(suite.comparison_args("unequal", opts))
    (out / "summary.json").write_text(json.dumps({"options": vars(ran)}))
    assert suite.check_finished("unequal", opts)
    opts.unequal_shares = [0.6, 0.3, 0.3, 0.2]
    with pytest.raises(SystemExit) as exc:
        suite.check_finished("unequal", opts)
    assert exc.value.code == 2
    assert "unequal: that comparison ran with other options (server_cpu)" in capsys.readouterr().err


def test_the_suite_waits_for_its_comparison_to_come_down(tmp_path, monkeypatch):
    """A SIGTERM to the suite reaches the comparison, and the suite returns its exit code
    once it has ended (here a comparison that takes a second to come down, and says by
    files when it listens for the signal and when it is down)."""
    script, ready, down = tmp_path / "comparison.py", tmp_path / "ready", tmp_path / "down"
    script.write_text(
        "import signal, sys, time\n"
        "def down(*_):\n"
        "    time.sleep(1)\n"
        f"    open({str(down)!r}, 'w').close()\n"
        "    sys.exit(130)\n"
        "signal.signal(signal.SIGTERM, down)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(60)\n")
    started, real_popen = [], subprocess.Popen

    def spawn(argv, cwd):       # the comparison's stand-in, in place of lb_comparison
        started.append(real_popen([sys.executable, str(script)]))
        return started[-1]
    monkeypatch.setattr(suite.subprocess, "Popen", spawn)
    # a SIGTERM that came when run_comparison's handler is not in place must not end pytest
    original = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    placeholder = signal.getsignal(signal.SIGTERM)
    main = threading.main_thread().ident     # where the suite waits: the signal goes there
    stop = threading.Event()

    def terminate_when_both_listen():
        # the comparison has its handler (however slowly Python starts on a busy machine)
        # and so has the suite (it sets its own once the comparison is started)
        while not stop.wait(0.05):
            if ready.exists() and signal.getsignal(signal.SIGTERM) is not placeholder:
                signal.pthread_kill(main, signal.SIGTERM)
                return
    sender = threading.Thread(target=terminate_when_both_listen, daemon=True)
    sender.start()
    try:
        code = suite.run_comparison(["--runs", "1"])
        came_down = down.exists()        # read at once: the suite returned after that
        restored = signal.getsignal(signal.SIGTERM)
    finally:
        stop.set()
        sender.join(5)
        signal.signal(signal.SIGTERM, original)
        for child in started:
            if child.poll() is None:
                child.kill()
    assert code == 130 and came_down
    assert restored is placeholder           # the suite put back the handler it found


def test_a_summary_that_is_not_a_comparisons_is_named_not_a_traceback(tmp_path, capsys):
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "summary.json").write_text(json.dumps({"runs": {}}))
    with pytest.raises(SystemExit) as exc:
        suite.tabulate(str(tmp_path))
    assert exc.value.code == 2
    assert "paper/summary.json is not a comparison's summary" in capsys.readouterr().err


def test_a_comparison_that_ended_without_its_summary_stops_the_suite(tmp_path, monkeypatch,
                                                                      capsys):
    """The comparison's exit code 1 means a request went unaccounted for when it wrote a
    summary, and that it did not run when it wrote none (the testbed refused it): the
    suite stops there and tabulates nothing."""
    ran = []
    monkeypatch.setattr(suite, "run_comparison", lambda args: ran.append(args) or 1)
    opts = argparse.Namespace(seed=1010, runs=5, phase_seconds=30.0, out=str(tmp_path),
                              scenarios=["paper", "unequal"],
                              unequal_shares=suite.HELD_OUT_SHARES)
    assert suite.run(opts) == 1
    assert len(ran) == 1
    assert "[suite] paper: the comparison ended with 1 and no summary; stopping" in \
        capsys.readouterr().err
    assert not (tmp_path / "suite.md").exists()
