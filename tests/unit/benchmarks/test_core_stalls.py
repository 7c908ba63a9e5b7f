import argparse

from benchmarks.core_stalls import added_nat_cookies, child, short_ends, summarise
from ryu_apps import ofwire
from ryu_apps.flows import DIR_FORWARD, FIN_TAG, fin_cookie, make_cookie


def test_only_the_nat_rules_added_are_taken_from_a_run_of_messages():
    nat = make_cookie(DIR_FORWARD, 2, 7, 41)
    messages = (ofwire.flow_mod(1, nat, 200, {"eth_type": 0x0800}, b"", idle_timeout=10)
                + ofwire.flow_delete(2, nat, 0xFFFFFFFFFFFFFFFF)
                + ofwire.flow_mod(3, fin_cookie(nat), 300, {"eth_type": 0x0800}, b"")
                + ofwire.flow_mod(4, 0, 0, {}, b""))
    assert added_nat_cookies(messages) == [nat]
    assert added_nat_cookies(messages, FIN_TAG) == [fin_cookie(nat)]


def test_figures_are_medians_over_rounds_with_ratios_to_the_base_of_the_same_round():
    def run(full, longest):
        return {"gen2": {"count": full, "max_ms": longest, "sum_ms": full * longest},
                "gen1": {"max_ms": 1.0}, "packet_in_p99_ms": 0.2, "tracked_objects": 10,
                "records": 5, "attribute_ms": 3.0, "costs_ms": 1.0,
                "short_packet_in_p50_ms": 0.1, "short_packet_in_p99_ms": 0.3,
                "short_removed_p50_ms": 0.1, "short_removed_p99_ms": 0.4,
                "short_removed_sum_ms": 100.0}
    rounds = [{"this": run(2, 50.0), "base": run(4, 100.0)},
              {"this": run(3, 40.0), "base": run(3, 100.0)},
              {"this": run(2, 60.0), "base": run(4, 80.0)}]
    s = summarise(rounds, ["this", "base"])
    assert s["this"]["gen2_max_ms"]["median"] == 50.0
    assert s["this"]["gen2_max_ms"]["vs_base"] == {"median": 0.5, "min": 0.4, "max": 0.75}
    assert "vs_base" not in s["base"]["gen2_count"]


def test_the_short_flow_part_drives_the_real_core_to_every_flows_end():
    r = short_ends(argparse.Namespace(short_flows=600, short_rate=200.0, idle=1))
    assert set(r) == {"short_packet_in_p50_ms", "short_packet_in_p99_ms",
                      "short_removed_p50_ms", "short_removed_p99_ms", "short_removed_sum_ms",
                      "short_still_open"}
    assert r["short_still_open"] <= 201             # the last second's flows, no older
    assert 0 < r["short_removed_p50_ms"] <= r["short_removed_p99_ms"]
    assert r["short_removed_sum_ms"] > 0


def test_the_least_load_part_as_on_the_testbed_ends_its_flows_and_lets_their_records_go():
    def run(profiler=False, fins=None):
        return child(argparse.Namespace(held=10, flows=12000, rate=1000.0, idle=2,
                                        profiler=profiler, fins=fins))
    away = run()
    assert away["new_flows"] == 12000 and away["watched"] == away["records"] == 12010
    shaped = run(profiler=True, fins=1.0)
    # open: the held flows and the last second's; records: the active ones, those ended
    # since the last exchange (a 3 s period) and the newest 5,000 reported (GET
    # /malb/flows shows them), not every flow
    assert shaped["new_flows"] == 12000 and shaped["watched"] <= 10 + 1001
    assert shaped["active"] <= 10 + 2001
    assert shaped["records"] <= shaped["active"] + 3 * 1000 + 5000 < 12010
