"""experiments/protocol.py: the design and evaluation ranges of schedule seeds."""
from experiments import protocol


def test_every_summary_says_which_range_its_seeds_are_in():
    assert protocol.describe_seeds([1001, 1002, 1003, 1004, 1005]) == \
        "schedule seeds 1001-1005 (evaluation range)"
    assert protocol.describe_seeds([2]) == "schedule seed 2 (design range)"
    assert protocol.describe_seeds([2, 3, 7]) == "schedule seeds 2-3, 7 (design range)"
    assert "mixes the design and evaluation ranges" in protocol.describe_seeds([999, 1000])
    assert "outside both ranges" in protocol.describe_seeds([0, 5])
    assert "outside both ranges" in protocol.describe_seeds([10000])
    assert protocol.describe_seeds([]) == "no schedule seeds"


def test_the_ranges_meet_without_overlap():
    assert protocol.DESIGN.stop == protocol.EVALUATION.start == 1000
    assert (protocol.range_of(1), protocol.range_of(999)) == ("design", "design")
    assert (protocol.range_of(1000), protocol.range_of(9999)) == ("evaluation", "evaluation")
    assert protocol.range_of(0) is None and protocol.range_of(10000) is None


def test_each_run_rotates_the_contestants_by_one_place():
    policies = ["srr", "lc", "malb"]
    assert [protocol.run_order(policies, k) for k in (1, 2, 3, 4)] == [
        ["srr", "lc", "malb"], ["lc", "malb", "srr"], ["malb", "srr", "lc"],
        ["srr", "lc", "malb"]]
    methods = ("spread", "random", "greedy", "ours", "exact")
    assert all(sorted(protocol.run_order(methods, k)) == sorted(methods) for k in range(1, 8))


def test_the_time_left_is_the_runs_so_far_times_what_remains():
    text = protocol.eta_text([120.0, 180.0], 10, 999.0)
    assert text.startswith("about 25 min left by 2 run(s) so far, ending about ")
    assert protocol.eta_text([], 3, 600.0).startswith("about 30 min left by the estimate")
    assert protocol.eta_text([60.0], 0, 1.0).startswith("about 0 min left")
