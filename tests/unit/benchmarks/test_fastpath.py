"""benchmarks/fastpath.py's summary: medians over rounds and ratios within each round."""
from benchmarks import fastpath


def step(p50, p99, per_s, upcalls=None, xlates=None):
    return {"paced": {"p50_ms": p50, "p99_ms": p99, "failures": 0,
                      "upcalls_per_connection": upcalls,
                      "xlate_actions_per_connection": xlates,
                      "cpu": {"ovs_cores": 0.5, "controller_cores": 0.25}},
            "capacity": {"per_s": per_s}}


def test_ratios_are_taken_within_a_round_then_summarised():
    rounds = [{"direct": step(0.5, 5, 1000), "naive_nat": step(10, 50, 400),
               "malb": step(1.0, 10, 800, 1.0, 300)},
              {"direct": step(1.0, 8, 900), "naive_nat": step(20, 80, 500),
               "malb": step(1.5, 16, 1000, 1.0)},
              {"direct": step(0.8, 6, 950), "naive_nat": step(12, 60, 450),
               "malb": step(2.4, 12, 450, 1.0)}]
    s = fastpath.summarise(rounds, ["direct", "naive_nat", "malb"])["malb"]
    assert s["paced_p50_ms"] == {"median": 1.5, "min": 1.0, "max": 2.4, "n": 3}
    # per round 2.0, 1.5 and 3.0 times the direct path: not the ratio of the medians (1.875)
    assert s["paced_p50_vs_direct"]["median"] == 2.0
    assert s["capacity_vs_naive_nat"] == {"median": 2.0, "min": 1.0, "max": 2.0, "n": 3}
    assert s["upcalls_per_connection"]["median"] == 1.0
    text = fastpath.markdown({"summary": fastpath.summarise(rounds, ["malb"])},
                             fastpath.parser().parse_args([]))
    assert "| malb | 1.50 (1.00-2.40) |" in text
    # Open vSwitch's side: a round without the counters is left out, not read as 0
    assert s["xlate_actions_per_connection"] == {"median": 300, "min": 300, "max": 300, "n": 1}
    assert "| malb | 0.50 (0.50-0.50) | 0.25 (0.25-0.25) | 300.0 (300.0-300.0) | — |" in text
