"""The SLO loop's decisions on hand-made sequences: every branch, the paper's literal band
beside the safe one, time passed in."""
from __future__ import annotations

import pytest

from slo.frequency_controller import LoopSettings, LoopState, baseline, decide, \
    floor_mhz, initial_state, predicted_sli, quantise, schedutil

S = LoopSettings(target_ms=100.0, min_samples=10)


def run(settings, sequence, start=None):
    """Feed (sli, samples) once a second; the frequencies and actions chosen."""
    state = start or initial_state(settings)
    out = []
    for t, (sli, n) in enumerate(sequence):
        d = decide(settings, state, sli, n, float(t))
        state = d.state
        out.append((d.action, state.freq_mhz))
    return out


def test_starts_at_the_maximum_and_steps_down_one_step_per_dwell_while_under_the_band():
    out = run(S, [(50.0, 50)] * 8)
    # the first down-step at once (nothing changed yet), then one per 3 s dwell
    assert out == [("down", 2000), ("dwell", 2000), ("dwell", 2000), ("down", 1900),
                   ("dwell", 1900), ("dwell", 1900), ("down", 1800), ("dwell", 1800)]


def test_inside_the_band_holds():
    start = LoopState(freq_mhz=1500)
    assert run(S, [(95.0, 50), (90.0, 50), (96.0, 50)], start) == [("hold", 1500)] * 3


def test_the_top_of_the_band_steps_up_once_per_dwell_before_the_slo_breaks():
    # band [90, 100], guard 0.4 of it: above 96 ms one step up, then wait for a fresh SLI
    start = LoopState(freq_mhz=1500)
    assert run(S, [(97.0, 50), (98.0, 50), (99.0, 50), (100.0, 50)], start) == [
        ("guard", 1600), ("dwell", 1600), ("dwell", 1600), ("guard", 1700)]
    assert run(S, [(99.0, 50)], LoopState(freq_mhz=2100)) == [("hold", 2100)]
    off = LoopSettings(target_ms=100.0, min_samples=10, guard=0.0)
    assert run(off, [(99.0, 50)], start) == [("hold", 1500)]
    paper = LoopSettings(target_ms=100.0, min_samples=10, band_mode="paper")
    assert run(paper, [(99.0, 50)], start) == [("hold", 1500)]   # the literal rule has none


def test_under_the_band_at_the_minimum_holds():
    assert run(S, [(20.0, 50)], LoopState(freq_mhz=1000)) == [("hold", 1000)]


def test_over_the_slo_goes_up_in_proportion_fast():
    start = LoopState(freq_mhz=1500)
    assert run(S, [(101.0, 50)], start) == [("up", 1600)]         # just over: one step
    assert run(S, [(112.0, 50)], start) == [("up", 1800)]         # 12 % over: three
    assert run(S, [(140.0, 50)], start) == [("up", 1900)]         # capped at four steps
    assert run(S, [(140.0, 50)], LoopState(freq_mhz=2000)) == [("up", 2100)]  # clamped


def test_far_over_jumps_to_the_maximum_and_cools_down_before_stepping_down():
    start = LoopState(freq_mhz=1200)
    out = run(S, [(151.0, 50)] + [(50.0, 50)] * 12, start)
    assert out[0] == ("emergency", 2100)
    assert [a for a, _ in out[1:10]] == ["cooldown"] * 9           # t = 1..9 < 10 s
    assert out[10] == ("down", 2000)                               # t = 10


def test_too_few_samples_hold_and_no_signal_goes_to_the_maximum():
    start = LoopState(freq_mhz=1400)
    assert run(S, [(500.0, 9), (20.0, 3)], start) == [("insufficient", 1400)] * 2
    assert run(S, [(None, 0)], start) == [("no-signal", 2100)]
    assert run(S, [(float("nan"), 50)], start) == [("no-signal", 2100)]


def test_the_papers_literal_band_holds_a_violation_of_up_to_eleven_percent():
    paper = LoopSettings(target_ms=100.0, min_samples=10, band_mode="paper")
    start = LoopState(freq_mhz=1500)
    # 110 ms violates the SLO: the safe band goes up, the paper's band (10 % of 110 = 11)
    # holds
    assert run(S, [(110.0, 50)], start) == [("up", 1700)]
    assert run(paper, [(110.0, 50)], start) == [("hold", 1500)]
    assert run(paper, [(112.0, 50)], start)[0][0] == "up"
    # and it steps down only below 100 / 1.1 = 90.9 ms
    assert run(paper, [(91.5, 50)], start) == [("hold", 1500)]
    assert run(paper, [(90.0, 50)], start) == [("down", 1400)]


def test_a_step_change_in_load_settles_inside_the_band():
    # a toy service: latency inversely proportional to frequency, doubling load at t = 20
    state, freqs = initial_state(S), []
    for t in range(80):
        base = 110_000.0 if t < 20 else 170_000.0          # ms x MHz
        sli = base / state.freq_mhz
        d = decide(S, state, sli, 50, float(t))
        state = d.state
        freqs.append(state.freq_mhz)
    settled = [170_000.0 / f for f in freqs[-10:]]
    # inside the SLO, and no lower step would stay under the band (170000 / 1700 = 100)
    assert all(x <= 100.0 for x in settled) and len(set(freqs[-10:])) == 1, settled
    assert min(freqs[:20]) < freqs[-1]                     # more load, higher frequency


def test_a_step_down_that_would_land_in_the_band_is_not_taken():
    start = LoopState(freq_mhz=1000 + 500)
    # 85 ms at 1500 MHz: one step down (1400) would give about 91 ms, inside the band: hold
    assert run(S, [(85.0, 50)], start) == [("hold", 1500)]
    assert run(S, [(80.0, 50)], start) == [("down", 1400)]      # 85.7 ms: still under it
    paper = LoopSettings(target_ms=100.0, min_samples=10, band_mode="paper")
    assert run(paper, [(85.0, 50)], start) == [("down", 1400)]   # the literal rule steps


def test_quantise_clamps_and_rounds_to_steps():
    assert quantise(S, 999) == 1000 and quantise(S, 5000) == 2100
    assert quantise(S, 1449) == 1400 and quantise(S, 1451) == 1500


@pytest.mark.parametrize("bad, message", [
    ({"target_ms": -1}, "target_ms"), ({"target_ms": 10, "percentile": 42}, "percentile"),
    ({"target_ms": 10, "f_min_mhz": 2200}, "frequency range"),
    ({"target_ms": 10, "margin": 1.5}, "margin"),
    ({"target_ms": 10, "band_mode": "wide"}, "band_mode"),
    ({"target_ms": 10, "guard": 1.0}, "guard")])
def test_bad_settings_are_refused_naming_the_field(bad, message):
    with pytest.raises(ValueError, match=message):
        LoopSettings(**bad)


def test_a_busy_core_stays_up_where_queueing_would_push_the_next_step_into_the_band():
    start = LoopState(freq_mhz=1300)
    # 80 ms at 1300 MHz: 1/f alone predicts 86.7 ms at 1200, under the band (90)...
    assert run(S, [(80.0, 50)], start) == [("down", 1200)]
    # ...but with the cores 70 % busy, queueing adds about 30 %: hold
    d = decide(S, start, 80.0, 50, 0.0, load=0.7)
    assert d.action == "hold" and 100 < predicted_sli(80.0, 1300, 1200, 0.7) < 120
    assert predicted_sli(80.0, 1300, 1200, 0.9) == float("inf")      # would saturate
    assert decide(S, start, 80.0, 50, 0.0, load=0.1).action == "down"


def test_the_guard_undoes_a_down_step_at_once_but_waits_after_an_up_step():
    after_down = LoopState(freq_mhz=1400, last_change=0.0, last_step=-1)
    assert decide(S, after_down, 97.0, 50, 1.0).action == "guard"
    after_up = LoopState(freq_mhz=1400, last_change=0.0, last_step=1)
    assert decide(S, after_up, 97.0, 50, 1.0).action == "dwell"
    assert decide(S, after_down, 80.0, 50, 1.0).state.last_step == -1   # unchanged: kept


def test_the_floor_is_the_lowest_step_that_carries_the_periods_work():
    s = LoopSettings(target_ms=40.0, f_min_mhz=1000, f_max_mhz=2000, step_mhz=100)
    # half busy at 2000 MHz is 1000 MHz of work: the lowest step, with nothing to spare
    assert floor_mhz(s, 0.5, 2000) == 1000
    assert floor_mhz(s, 0.9, 1500) == 1400            # 1350 MHz of work -> 1400
    assert floor_mhz(s, 0.0, 1500) == 1000 and floor_mhz(s, 1.0, 2000) == 2000
    # never above what schedutil asks for the same work (it adds a quarter)
    assert all(floor_mhz(s, u / 10, 2000) <= schedutil(s, u / 10, 2000) for u in range(11))


def test_schedutil_asks_for_a_quarter_more_than_the_frequency_invariant_use():
    s = LoopSettings(target_ms=40.0, f_min_mhz=1000, f_max_mhz=2000, step_mhz=100)
    # half busy at 2000 MHz: util 0.5 of the maximum -> 1.25 x 0.5 x 2000 = 1250 -> 1300
    assert schedutil(s, 0.5, 2000) == 1300
    # the same work at 1300 MHz keeps the cores 0.5 x 2000 / 1300 busy: it stays there
    assert schedutil(s, 0.5 * 2000 / 1300, 1300) == 1300
    assert schedutil(s, 0.0, 1500) == 1000 and schedutil(s, 1.0, 2000) == 2000
    assert schedutil(s, 0.4, 2000) == 1000           # 1.25 x 0.4 x 2000 = 1000 exactly
    state = initial_state(s)
    held = baseline(s, state, "schedutil", None, 0.0)
    assert held.state.freq_mhz == state.freq_mhz                # no load known: holds
    d = baseline(s, state, "schedutil", 0.3, 1.0)
    assert d.state.freq_mhz == schedutil(s, 0.3, state.freq_mhz) and d.action == "schedutil"
