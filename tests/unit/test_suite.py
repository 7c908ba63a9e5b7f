"""The evaluation suite (experiments/suite.py): its scenarios' policies, the comparison it
runs for each, and the Holm correction of its tables."""
import argparse

import pytest

from experiments import lb_comparison, scenarios, suite


def test_every_scenario_runs_known_policies_with_malb_and_its_papers_rule():
    assert set(suite.SUITE) == set(scenarios.SCENARIOS)
    for name, policies in suite.SUITE.items():
        assert set(policies) <= set(lb_comparison.policy_choices()), name
        assert {"srr", "malb-paper", "malb", "lc", "p2c", "prequal", "haproxy-leastconn"} \
            <= set(policies), name
    assert {"wrr", "wlc"} <= set(suite.SUITE["unequal"])
    assert {"ln", "haproxy-roundrobin"} <= set(suite.SUITE["paper"])


def test_the_unequal_scenario_runs_on_the_held_out_shares():
    opts = argparse.Namespace(runs=5, seed=1000, phase_seconds=30.0, out="/tmp/x",
                              unequal_shares=[0.5, 0.4, 0.3, 0.2])
    args = suite.comparison_args("unequal", opts)
    assert args[args.index("--server-cpu") + 1] == "0.5,0.4,0.3,0.2"
    assert "--server-cpu" not in suite.comparison_args("paper", opts)
    assert lb_comparison.parser().parse_args(args).server_cpu == [0.5, 0.4, 0.3, 0.2]


def test_holm_adjusts_step_down_and_keeps_the_order():
    adjusted = suite.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    assert adjusted == pytest.approx({"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5})
