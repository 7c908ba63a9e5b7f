"""experiments/lb_comparison.py: a run's figures from its raw data, over the load phases and
with the drain, and a finished comparison evaluated again from its raw data."""
import json
import sqlite3

import pytest
import yaml

from experiments import lb_comparison
from experiments.lb_comparison import long_flows_to

SERVERS = ("srv1", "srv2", "srv3", "srv4")


def write_run(run, t0=100, load_end=106, t_end=112, excess=0.0):
    """A run directory as lb_comparison leaves it (the paper testbed, two clients, a 1 s
    monitoring period): the four servers equally busy through the load phases (srv1 `excess`
    points busier than the others), srv1 alone busy in the drain after them."""
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
            if t <= load_end:
                cpu = 50.0 + (excess if s == "srv1" else 0.0)
            else:
                cpu = 100.0 if s == "srv1" else 0.0
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


def write_comparison(out, flags, excess):
    """A finished comparison as lb_comparison leaves it, its runs numbered as `flags` say;
    `excess` = {policy: srv1's extra CPU points in each run}."""
    opts = lb_comparison.parser().parse_args(["--phase-seconds", "2", "--period", "1"] + flags)
    runs = {}
    for policy, per_run in excess.items():
        for k, x in enumerate(per_run, start=opts.first_run):
            write_run(out / policy / f"run{k}", excess=x)
            runs.setdefault(policy, []).append(
                {"policy": policy, "run": k, "seed": opts.seed + k, "t0": 100, "t_end": 112,
                 "backend": "mininet", "datapath": "user", "requests_planned": 2})
    (out / "summary.json").write_text(json.dumps({
        "command": f"sudo python -m experiments.lb_comparison {' '.join(flags)}",
        "commit": "abc1234", "options": vars(opts), "runs": runs}))


def test_comparisons_on_different_schedules_are_pooled_and_paired_by_schedule(tmp_path):
    first, more, pooled = tmp_path / "first", tmp_path / "more", tmp_path / "pooled"
    write_comparison(first, ["--runs", "2"], {"srr": [8, 12], "malb": [4, 4]})
    write_comparison(more, ["--runs", "1", "--first-run", "3"], {"malb": [8], "srr": [16]})
    assert lb_comparison.main(["--resummarise", str(more), str(first),
                               "--out", str(pooled)]) == 0
    summary = json.loads((pooled / "summary.json").read_text())
    # srv1 x points above three servers at 50: a population STDEV of x * sqrt(3) / 4
    unit = 3 ** 0.5 / 4
    assert summary["results"]["srr"]["table2"]["cpu"]["stdev"] == pytest.approx(12 * unit)
    assert summary["results"]["malb"]["table2"]["cpu"]["stdev"] == pytest.approx(16 / 3 * unit)
    # run k of each policy is one schedule, whichever source came first on the command line
    assert [r["seed"] for r in summary["runs"]["malb"]] == [2, 3, 4]
    assert [r["table2"]["cpu"]["stdev"] for r in summary["runs"]["srr"]] == \
        pytest.approx([8 * unit, 12 * unit, 16 * unit])
    cpu = summary["statistics"]["cpu_stdev"]["vs"]["srr"]
    assert cpu["ratio"] == pytest.approx((16 / 3 - 12) / 12)
    assert [s["schedules"] for s in summary["sources"]] == ["4", "2-3"]
    md = (pooled / "summary.md").read_text()
    assert "Pooled from 2 comparisons" in md and "schedule seeds 2-4" in md
    assert "3 interleaved runs per policy" in md
    # the sources are read, never written
    assert not (first / "summary.md").exists() and not (first / "srr/run1/result.json").exists()
    # a pooled comparison evaluated again is pooled again from its sources
    (pooled / "summary.md").unlink()
    assert lb_comparison.main(["--resummarise", str(pooled)]) == 0
    assert "Pooled from 2 comparisons" in (pooled / "summary.md").read_text()


@pytest.mark.parametrize("more_flags, more_excess, message", [
    (["--runs", "1"], {"srr": [1], "malb": [1]}, "seeds 2 are in an earlier source too"),
    (["--runs", "1", "--first-run", "3", "--server-cpu", "0.6"], {"srr": [1], "malb": [1]},
     "different experiments (they differ in --server-cpu)"),
    (["--runs", "1", "--first-run", "3"], {"srr": [1], "ln": [1]}, "ran srr, ln"),
])
def test_comparisons_that_cannot_pool_are_refused_naming_why(tmp_path, capsys, more_flags,
                                                             more_excess, message):
    first, more, pooled = tmp_path / "first", tmp_path / "more", tmp_path / "pooled"
    write_comparison(first, ["--runs", "2"], {"srr": [8, 12], "malb": [4, 4]})
    write_comparison(more, more_flags, more_excess)
    with pytest.raises(SystemExit) as exc:
        lb_comparison.main(["--resummarise", str(first), str(more), "--out", str(pooled)])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not pooled.exists()


def test_a_comparison_without_its_raw_data_pools_as_recorded_only_when_asked(tmp_path,
                                                                              capsys):
    first, more, pooled = tmp_path / "first", tmp_path / "more", tmp_path / "pooled"
    write_comparison(first, ["--runs", "2"], {"srr": [8, 12], "malb": [4, 4]})
    assert lb_comparison.main(["--resummarise", str(first)]) == 0    # figures recorded
    for history in first.glob("*/run*/history.sqlite"):
        history.unlink()                   # as a committed data/ summary: no raw data
    write_comparison(more, ["--runs", "1", "--first-run", "3"], {"srr": [16], "malb": [8]})
    with pytest.raises(SystemExit) as exc:
        lb_comparison.main(["--resummarise", str(first), str(more), "--out", str(pooled)])
    assert exc.value.code == 2 and "--as-recorded pools" in capsys.readouterr().err
    assert not pooled.exists()
    assert lb_comparison.main(["--resummarise", str(first), str(more), "--out", str(pooled),
                               "--as-recorded"]) == 0
    summary = json.loads((pooled / "summary.json").read_text())
    unit = 3 ** 0.5 / 4
    assert summary["results"]["srr"]["table2"]["cpu"]["stdev"] == pytest.approx(12 * unit)
    assert [s["as_recorded"] for s in summary["sources"]] == [True, False]
    md = (pooled / "summary.md").read_text()
    assert "figures as recorded" in md
    # the header must not claim the pool was re-evaluated from raw data it does not have
    assert "re-evaluated from the raw data" not in md and "Pooled at " in md
    assert (pooled / "cpu_timeline.png").exists()
    # evaluated again, it is pooled again the same way
    assert lb_comparison.main(["--resummarise", str(pooled)]) == 0


def test_a_summary_states_its_scenario_its_seed_range_and_its_antagonists(tmp_path):
    out = tmp_path / "cmp"
    write_comparison(out, ["--scenario", "antagonist", "--runs", "2", "--seed", "1000",
                           "--policies", "srr,malb-paper,malb"],
                     {"srr": [8, 12], "malb-paper": [6, 6], "malb": [4, 4]})
    summary = json.loads((out / "summary.json").read_text())
    for runs in summary["runs"].values():
        for r in runs:
            r["antagonists"] = [{"name": "srv1-ui-inside", "server": "srv1",
                                 "where": "container", "planned_start_s": 2.0,
                                 "planned_stop_s": 4.0, "started_s": 2.3, "stopped_s": 4.1,
                                 "cpu_s": 0.55}]
    (out / "summary.json").write_text(json.dumps(summary))
    assert lb_comparison.main(["--resummarise", str(out)]) == 0
    md = (out / "summary.md").read_text()
    assert md.startswith("# Scenario antagonist: SRR, MALB (paper's rule), MALB (ours)")
    assert "Scenario: **antagonist**" in md
    assert "schedule seeds 1001-1002 (evaluation range)" in md
    assert "| SRR | 2 | srv1-ui-inside | container srv1 | 2-4 | 2.3 | 4.1 | 0.6 |" in md
    assert "| paper's" not in md and "no paper's rows" in md
    # MALB (ours) against every other policy, the paper's rule included
    stats = json.loads((out / "summary.json").read_text())["statistics"]
    assert set(stats["cpu_stdev"]["vs"]) == {"srr", "malb-paper"}
    assert "MALB (ours) against every other policy" in md
    result = json.loads((out / "malb" / "run1" / "result.json").read_text())
    assert result["antagonists"][0]["started_s"] == 2.3       # kept when evaluated again


def test_long_flows_started_during_an_antagonist_are_counted_by_where_they_went():
    a = {"server": "srv1", "started_at": 100.0, "stopped_at": 130.0}
    reqs = [{"class": "backend-heavy", "intended": "105", "served_by": "srv1-be"},
            {"class": "backend-medium", "intended": "110", "served_by": "srv2-be"},
            {"class": "backend-medium", "intended": "140", "served_by": "srv1-be"},
            {"class": "ui-light", "intended": "120", "served_by": "srv1-ui"},
            {"class": "video", "intended": "129.9", "served_by": "srv11-vid"}]
    assert long_flows_to(reqs, a, {"backend-heavy", "backend-medium", "video"}) == (3, 1)
    assert long_flows_to(reqs, {"server": "srv1"}, {"video"}) == (0, 0)   # never started


def resume_args(out, flags=()):
    return lb_comparison.parser().parse_args(
        ["--policies", "srr,malb", "--runs", "2", "--seed", "1005", "--phase-seconds", "2",
         "--period", "1", "--out", str(out), "--resume", *flags])


def test_a_resumed_comparison_reads_back_finished_runs_and_clears_a_run_cut_off(tmp_path):
    out = tmp_path / "cmp"
    args = resume_args(out)
    write_run(out / "srr" / "run1", excess=6.0)
    (out / "srr" / "run1" / "result.json").write_text(json.dumps(
        {"policy": "srr", "run": 1, "seed": 1006, "t0": 100, "load_end": 106, "t_end": 112,
         "balancer_cores": {"controller": 0.01}}))
    write_run(out / "malb" / "run1")             # cut off: no result.json
    done = lb_comparison.finished_run(str(out), "srr", 1, args)
    assert done["result"]["table2"]["cpu"]["stdev"] > 0          # evaluated from raw data
    assert done["result"]["balancer_cores"] == {"controller": 0.01}   # kept as recorded
    assert lb_comparison.finished_run(str(out), "malb", 1, args) is None
    # the run cut off is kept aside, with its logs, for the record of why
    assert not (out / "malb" / "run1").exists()
    assert (out / "malb" / "run1.interrupted" / "history.sqlite").exists()
    write_run(out / "malb" / "run1")
    assert lb_comparison.finished_run(str(out), "malb", 1, args) is None
    assert (out / "malb" / "run1.interrupted-2").is_dir()
    assert lb_comparison.finished_run(str(out), "srr", 2, args) is None


def test_a_run_of_another_schedule_is_not_taken_for_a_finished_one(tmp_path, capsys):
    out = tmp_path / "cmp"
    write_run(out / "srr" / "run1")
    (out / "srr" / "run1" / "result.json").write_text(json.dumps(
        {"policy": "srr", "run": 1, "seed": 7, "t0": 100, "t_end": 112}))
    with pytest.raises(SystemExit) as exc:
        lb_comparison.finished_run(str(out), "srr", 1, resume_args(out))
    assert exc.value.code == 2
    assert "schedule seed 7, not srr on 1006" in capsys.readouterr().err
    assert (out / "srr" / "run1" / "result.json").exists()


def test_a_comparison_resumes_only_with_the_options_it_started_with(tmp_path, capsys):
    out = tmp_path / "cmp"
    out.mkdir()
    first = lb_comparison.start_record(str(out), resume_args(out), "abc1234")
    assert first["commit"] == "abc1234"
    # the same options (another progress period) resume; the record keeps the first commit
    again = lb_comparison.start_record(str(out), resume_args(out, ["--progress", "5"]),
                                       "def5678")
    assert again["commit"] == "abc1234"
    with pytest.raises(SystemExit) as exc:
        lb_comparison.start_record(str(out), resume_args(out, ["--server-cpu", "0.5"]),
                                   "def5678")
    assert exc.value.code == 2
    assert "other options (server_cpu)" in capsys.readouterr().err
    assert json.loads((out / "comparison.json").read_text())["commit"] == "abc1234"


def test_the_record_names_the_containers_images_and_a_resume_on_others_says_so(
        tmp_path, capsys, monkeypatch):
    from common import lab
    out = tmp_path / "cmp"
    out.mkdir()
    monkeypatch.setattr(lab, "images", lambda: {"malb/service:latest": "aaa"})
    assert lb_comparison.start_record(str(out), resume_args(out), "abc1234")["images"] == \
        {"malb/service:latest": "aaa"}
    lb_comparison.start_record(str(out), resume_args(out), "abc1234")
    assert "warning" not in capsys.readouterr().err
    monkeypatch.setattr(lab, "images", lambda: {"malb/service:latest": "bbb"})
    lb_comparison.start_record(str(out), resume_args(out), "abc1234")
    assert "the containers' images are {'malb/service:latest': 'bbb'}, the comparison " \
           "started with {'malb/service:latest': 'aaa'}" in capsys.readouterr().err


def test_an_option_newer_than_a_record_counts_as_its_default(tmp_path):
    args = resume_args(tmp_path)
    recorded = lb_comparison.experiment_options(args)
    del recorded["metric_period"]                       # as if it came after the record
    assert lb_comparison.options_differ(args, recorded) == []
    other = resume_args(tmp_path, ["--metric-period", "6"])
    assert lb_comparison.options_differ(other, recorded) == ["metric_period"]


def test_a_result_is_written_whole(tmp_path):
    path = tmp_path / "result.json"
    lb_comparison.write_result(str(path), {"run": 1})
    assert json.loads(path.read_text()) == {"run": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_resume_needs_the_directory_it_continues(capsys):
    with pytest.raises(SystemExit) as exc:
        lb_comparison.main(["--resume"])
    assert exc.value.code == 2
    assert "--resume continues the comparison in --out" in capsys.readouterr().err


def test_what_balancing_costs_per_part_and_per_1000_requests(tmp_path):
    opts = resume_args(tmp_path / "cmp")              # 3 phases of 2 s: 6 s of load
    def run(cores, planned=600):
        return {"result": {"balancer_cores": cores, "requests_planned": planned}}
    per_policy = {
        "malb": [run({"controller": 0.2, "profiler": 0.05, "switch": 0.5}),
                 run({"controller": 0.4, "profiler": 0.05, "switch": 0.5})],
        "haproxy-leastconn": [run({"controller": 0.01, "profiler": 0.05, "switch": 1.0,
                                   "haproxy": 0.3})],
        "nginx-leastconn": [run({"controller": 0.01, "profiler": 0.05, "switch": 1.0,
                                 "nginx": 0.2}, planned=0)],
        "srr": [run({"controller": 0.1})]}           # the switch not metered
    # malb: (0.2 + 0.05 + 0.5) x 6 s / 600 requests x 1000 = 7.5, then 9.5
    assert lb_comparison.balancing_cpu_per_1000(per_policy["malb"][0]["result"], 6) == \
        pytest.approx(7.5)
    assert lb_comparison.balancing_cpu_per_1000(
        per_policy["haproxy-leastconn"][0]["result"], 6) == pytest.approx(13.6)
    assert lb_comparison.balancing_cpu_per_1000(
        per_policy["nginx-leastconn"][0]["result"], 6) is None        # nothing planned
    assert lb_comparison.balancing_cpu_per_1000(per_policy["srr"][0]["result"], 6) is None
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in lb_comparison.balancing_cost_markdown(per_policy, opts).splitlines()
            if line.startswith("| ") and "policy" not in line}
    name = {p: lb_comparison.report.POLICY_NAMES.get(p, p) for p in per_policy}
    assert rows[name["malb"]][:4] == ["0.300", "0.050", "\u2013", "0.500"]   # no proxy
    assert rows[name["malb"]][-1] == "8.50"
    assert rows[name["haproxy-leastconn"]][2] == "0.300"           # the proxy column
    assert rows[name["nginx-leastconn"]][2] == "0.200"
    assert rows[name["nginx-leastconn"]][-1] == "\u2013" == rows[name["srr"]][-1]
