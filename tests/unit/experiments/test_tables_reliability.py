"""docs/reliability.md's generated tables (experiments/tables/reliability.py): each figure
from the fault suite's and the soak's summaries it is given, none typed in."""
from experiments.tables import reliability


def _fault(name, requests, failed, recovery, outage=5.0, late=None, lost=0, met=True):
    return {"fault": name, "outage_s": outage, "recovery_s": recovery, "late_flows": late,
            "rows_lost_total": lost, "requests": {"requests": requests, "failed": failed},
            "targets": {"late_flows": not late, "rows_lost": lost == 0, "recovery": met},
            "met": met}


def _run(faults, dataplane=False, commit="abc1234", planned=100, pause=7.0, tracker=False):
    return {"faults": faults, "commit": commit, "when": "2026-11-20T10:00:00",
            "grace_s": 4.0, "recovery_target_s": 15.0,
            "requests": {"planned": planned, "recorded": planned,
                         "failed": sum(f["requests"]["failed"] for f in faults)},
            "options": {"dataplane": dataplane, "tracker": tracker, "docker_pause": pause}}


def _rows(md):
    return {line.split(" | ")[0].strip("| "): [c.strip() for c in line.strip("|").split("|")]
            for line in md.splitlines() if line.startswith("| ")}


def test_the_fault_table_is_each_fault_of_the_run_as_measured():
    md = reliability.fault_table(_run([
        _fault("agent", 41, 0, 3.331),
        _fault("container", 23, 2, 4.601, outage=0.062, late=0),
        _fault("docker", 59, 0, 5.11, outage=10.001, late=0)]))
    rows = _rows(md)
    assert rows["agent (SIGKILL, restart)"][1:] == ["5.0", "41", "0", "–", "0", "3.3"]
    assert rows["container (docker kill, stays dead)"][1:] == ["0.1", "23", "2", "0", "0", "4.6"]
    assert "docker (dockerd stopped 7 s)" in rows          # the pause from the run's options
    assert "2 failed in all" in md and "every one met" in md
    assert "code at abc1234 (2026-11-20)" in md


def test_the_fault_table_names_a_missed_target_and_a_fault_not_recovered():
    md = reliability.fault_table(_run([_fault("hung", 13, 2, None, outage=0.0, late=2,
                                              met=False)]))
    assert _rows(md)["hung (docker pause: port up, nothing answers)"][3:] == \
        ["2", "2", "0", "not recovered"]
    assert "missed: hung: late flows; hung: recovery" in md


def test_the_modes_table_gives_every_run_of_each_mode_in_its_column():
    runs = [_run([_fault("agent", 43, 0, 3.84), _fault("hung", 13, 2, 2.56, late=0)],
                 commit="aaa1111"),
            _run([_fault("agent", 46, 0, 4.06), _fault("hung", 10, 3, 1.53, late=0)],
                 dataplane=True, commit="ccc3333"),
            _run([_fault("agent", 48, 1, 4.34), _fault("hung", 13, 1, 2.54, late=0)],
                 commit="bbb2222")]
    md = reliability.modes_table(*runs)
    assert md.splitlines()[0] == "| fault | per-flow | data-plane |"
    rows = _rows(md)
    assert rows["agent (SIGKILL, restart)"][1:] == ["0 of 43 / 3.8; 1 of 48 / 4.3",
                                                    "0 of 46 / 4.1"]
    assert rows["hung (docker pause: port up, nothing answers)"][2] == "3 of 10 / 1.5"
    assert "per-flow aaa1111, bbb2222; data-plane ccc3333" in md
    assert "300 of 300 recorded" in md


def test_tracker_runs_have_their_own_column_between_the_others():
    runs = [_run([_fault("agent", 40, 0, 3.0)], dataplane=True, commit="ccc3333"),
            _run([_fault("agent", 41, 0, 3.1)], tracker=True, commit="ddd4444"),
            _run([_fault("agent", 42, 0, 3.2)], commit="aaa1111")]
    md = reliability.modes_table(*runs)
    assert md.splitlines()[0] == "| fault | per-flow | tracker | data-plane |"
    assert _rows(md)["agent (SIGKILL, restart)"][1:] == ["0 of 42 / 3.2", "0 of 41 / 3.1",
                                                         "0 of 40 / 3.0"]
    assert "per-flow aaa1111; tracker ddd4444; data-plane ccc3333" in md


def test_the_takeover_table_is_a_row_per_run_with_the_claim_and_the_window():
    fault = _fault("takeover", 37, 0, 7.909)
    fault["details"] = {"takeover_s": 1.046}
    slow = _fault("takeover", 40, 2, None, met=False)
    slow["details"] = {"takeover_s": None}
    md = reliability.takeover_table(_run([fault]), _run([slow], commit="def5678"))
    rows = _rows(md)
    assert rows["1"][1:] == ["abc1234", "1.05", "7.9", "37", "0", "met"]
    assert rows["2"][1:] == ["def5678", "–", "–", "40", "2", "missed"]
    assert "2 of 77 requests in the takeover windows failed over 2 runs" in md
    assert "against the 1 % aimed at: not met" in md


def test_the_takeover_aim_is_judged_by_the_bound_on_the_share_that_fails():
    # none failed in n: the bound is 1 - 0.05 ** (1 / n), under 1 % from n = 299 on
    assert abs(reliability.failing_share_bound(0, 117) - (1 - 0.05 ** (1 / 117))) < 1e-12
    assert reliability.failing_share_bound(0, 298) > 0.01 > \
        reliability.failing_share_bound(0, 299)
    assert reliability.failing_share_bound(3, 300) > reliability.failing_share_bound(0, 300)
    assert reliability.failing_share_bound(0, 0) == 1.0
    run = _run([dict(_fault("takeover", 300, 0, 4.0), details={"takeover_s": 0.9})])
    assert "below 0.99 % (95 %, one-sided Clopper-Pearson), against the 1 % aimed at: met" \
        in reliability.takeover_table(run)


def _figure(name, first, last, mean, growth, verdict="levels off"):
    return {"figure": name, "kind": name.rsplit(".", 1)[1], "first": first, "last": last,
            "mean_second_half": mean, "growth_per_hour": growth, "verdict": verdict}


def _soak(*figures):
    return {"minutes": 60.0, "rate": 20.0, "policy": "malb", "level_share": 0.05,
            "figures": list(figures)}


def test_the_soak_table_gathers_the_agents_and_signs_the_growth():
    md = reliability.soak_table(_soak(
        _figure("controller.rss_mb", 74.0546875, 95.10, 95.09, 0.0895),
        _figure("agent-srv1.rss_mb", 36.46, 37.49, 37.48, 0.075),
        _figure("agent-srv2.rss_mb", 36.29, 37.43, 37.41, 0.037),
        _figure("controller.fds", 10, 10, 10.01, -0.051),
        _figure("profiler.fds", 10, 10, 10.0, 0.0),
        _figure("agent-srv1.fds", 17, 17, 17.0, 0.0),
        _figure("controller.flow_records", 0, 5043, 5211.2, -22.94),
        _figure("s1.rules", 78, 207, 711.6, -68.99),
        _figure("s2.rules", 10, 12, 11.0, 0.2)), "Commit 1234abc, 2026-11-27 05:25")
    rows = _rows(md)
    assert rows["controller resident memory (MB)"][1:] == ["74.1", "95.1", "95.1", "+0.1"]
    assert rows["each agent's resident memory (MB)"][1:] == \
        ["36.3-36.5", "37.4-37.5", "37.4-37.5", "0.0 to +0.1"]
    assert rows["descriptors: controller, profiler, each agent"][4] == "-0.1, 0.0, 0.0"
    assert rows["controller's flow records"][1:] == ["0", "5,043", "5,211", "-22.9"]
    assert rows["rules on s2"][3] == "11"                  # a row per switch
    assert "threads: controller, profiler, each agent" not in rows    # not in the summary
    assert "every figure levels off" in md and "code at 1234abc (2026-11-27)" in md


def test_the_soak_caption_names_what_grows_and_prefers_the_summarys_stamp():
    md = reliability.soak_table(
        {**_soak(_figure("profiler.history_mb", 0.1, 40.0, 30.0, 20.0, "grows")),
         "commit": "fff9999", "when": "2026-12-01T08:00:00"}, "Commit 1234abc, 2026-11-27")
    assert "not levelling off: profiler.history_mb" in md
    assert "code at fff9999 (2026-12-01)" in md and "1234abc" not in md


def test_a_soak_figure_with_too_few_samples_is_not_called_growing():
    from experiments.tables.reliability import soak_table
    figures = [{"figure": "controller.rss_mb", "kind": "rss_mb", "verdict": "grows", "first": 1,
                "last": 2,
                "mean_second_half": 1.5, "growth_per_hour": 1.0},
               {"figure": "profiler.rss_mb", "kind": "rss_mb", "verdict": "too few samples",
                "first": 1,
                "last": 1, "mean_second_half": 1.0, "growth_per_hour": None}]
    md = soak_table({"figures": figures, "minutes": 3, "rate": 20, "policy": "malb",
                     "level_share": 0.05, "commit": "abc1234", "when": "2026-12-01T00:00"},
                    "")
    assert "not levelling off: controller.rss_mb; too few samples: profiler.rss_mb" in md
