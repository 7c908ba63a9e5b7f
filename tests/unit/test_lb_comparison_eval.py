"""experiments/lb_comparison.py: a run's figures from its raw data, over the load phases and
with the drain, and a finished comparison evaluated again from its raw data."""
import json
import sqlite3

import pytest
import yaml

from experiments import lb_comparison

SERVERS = ("srv1", "srv2", "srv3", "srv4")


def write_run(run, t0=100, load_end=106, t_end=112):
    """A run directory as lb_comparison leaves it (the paper testbed, two clients, a 1 s
    monitoring period): the four servers equally busy through the load phases, srv1 alone
    busy in the drain after them."""
    run.mkdir(parents=True)
    cfg = yaml.safe_load(open("configs/paper.yaml"))
    cfg["profiler"]["period_s"] = cfg["controller"]["monitoring_period_s"] = 1
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    for k in range(2):
        (run / f"requests-{k}.csv").write_text(
            "seq,class,latency_s,throughput_kB_s,error\n"
            f"{k},ui-light,0.{k + 4},,\n")
    db = sqlite3.connect(run / "history.sqlite")
    db.execute("CREATE TABLE server_samples (t REAL, server TEXT, cpu REAL, mem REAL, "
               "net REAL, stale INTEGER, age_s REAL)")
    for t in range(t0, t_end + 1):
        for s in SERVERS:
            cpu = 50.0 if t <= load_end else (100.0 if s == "srv1" else 0.0)
            db.execute("INSERT INTO server_samples VALUES (?, ?, ?, 10, 5, 0, 0.5)",
                       (t, s, cpu))
    db.commit()
    db.close()


def test_a_runs_balance_is_read_over_its_load_phases_and_with_the_drain(tmp_path):
    run = tmp_path / "run1"
    write_run(run)
    got = lb_comparison.evaluate_run(str(run), str(run / "history.sqlite"), (100, 106, 112),
                                     1.0, 3.0, list(SERVERS), 2, "[t]")
    fig = got["figures"]
    assert fig["table2"]["cpu"]["stdev"] == 0.0
    # 3 s periods from 100: [106, 108] holds one second of all four busy and two of srv1
    # alone (srv1 at 83.3, the others at 16.7: 28.87), [109, 111] and [112] srv1 alone
    # (43.30), after two periods of balance
    assert fig["table2_with_drain"]["cpu"]["stdev"] == pytest.approx(
        (0 + 0 + 28.868 + 43.301 + 43.301) / 5, abs=1e-3)
    assert fig["server_samples"] == 3 and fig["requests_recorded"] == 2
    assert fig["table3"]["ui-light"]["average"] == pytest.approx(450.0)
    assert max(t for t, _ in got["timeline"]["srv1"]) > 6      # the plot shows the drain


def test_a_finished_comparison_is_evaluated_again_from_its_raw_data(tmp_path):
    out = tmp_path / "cmp"
    opts = lb_comparison.parser().parse_args(["--policies", "srr,malb", "--runs", "1",
                                              "--phase-seconds", "2", "--period", "1"])
    runs = {}
    for policy in ("srr", "malb"):
        write_run(out / policy / "run1")
        # as a comparison before the load phases were told apart: no load_end, and the
        # table over the whole run
        runs[policy] = [{"policy": policy, "run": 1, "t0": 100, "t_end": 112,
                         "backend": "mininet", "datapath": "user", "wall_s": 1.0,
                         "requests_planned": 2, "requests_recorded": 2,
                         "table2": {"cpu": {"stdev": 99.0}}}]
    options = vars(opts)
    del options["metric_period"]        # an option that came after the comparison ran
    (out / "summary.json").write_text(json.dumps({
        "command": "sudo python -m experiments.lb_comparison --runs 1", "commit": "abc1234",
        "options": options, "runs": runs}))
    assert lb_comparison.main(["--resummarise", str(out)]) == 0
    result = json.loads((out / "malb" / "run1" / "result.json").read_text())
    assert result["load_end"] == 106 and result["table2"]["cpu"]["stdev"] == 0.0
    assert result["table2_with_drain"]["cpu"]["stdev"] > 20
    summary = json.loads((out / "summary.json").read_text())
    assert summary["commit"] == "abc1234" and summary["evaluated_at"] != "abc1234"
    assert "with the drain" in (out / "summary.md").read_text()
    assert "re-evaluated from the raw data" in (out / "summary.md").read_text()


def test_a_comparison_with_a_run_missing_its_history_is_refused_and_left_as_it_was(tmp_path,
                                                                                  capsys):
    out = tmp_path / "cmp"
    opts = lb_comparison.parser().parse_args(["--policies", "srr,malb", "--runs", "1",
                                              "--phase-seconds", "2"])
    runs = {}
    for policy in ("srr", "malb"):
        write_run(out / policy / "run1")
        runs[policy] = [{"policy": policy, "run": 1, "t0": 100, "t_end": 112}]
        (out / policy / "run1" / "result.json").write_text("{}")
    (out / "malb" / "run1" / "history.sqlite").unlink()
    (out / "summary.json").write_text(json.dumps({
        "command": "c", "commit": "abc1234", "options": vars(opts), "runs": runs}))
    with pytest.raises(SystemExit) as exc:
        lb_comparison.main(["--resummarise", str(out)])
    assert exc.value.code == 2
    assert "no such history file" in capsys.readouterr().err
    assert (out / "srr" / "run1" / "result.json").read_text() == "{}"
    assert not (out / "summary.md").exists()
