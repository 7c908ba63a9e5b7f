"""benchmarks/controller_alone.py: an app run that lost its switch is reported and left out
of the medians, and the other runs of the round still count."""
from __future__ import annotations

import argparse
import asyncio
import os
import struct

import pytest

from benchmarks import controller_alone as alone, ofswitch
from common.config import parse_config_file_data


def figures(answered: float, cpu: float) -> dict:
    return {"answered_per_s": answered, "p50_ms": 1.0, "p99_ms": 5.0,
            "cpu_ms_per_flow": cpu, "lost": 0}


def rounds() -> list[dict]:
    ok = {"capacity": figures(2000, 0.25), "switch": {"flow_mods": 1}}
    base = {"capacity": figures(1000, 0.5), "switch": {"flow_mods": 1}}
    lost = {"error": "the emulated switch's connection failed: ConnectionResetError"}
    return [{"malb": ok, "naive_nat": base},
            {"malb": lost, "naive_nat": base},
            {"malb": {"capacity": figures(3000, 0.2)}, "naive_nat": base}]


def test_a_lost_run_is_named_with_its_round_and_reason():
    assert alone.lost_runs(rounds()) == [
        "malb in round 2: the emulated switch's connection failed: ConnectionResetError"]
    assert alone.row_line(rounds()[1]) == "malb: lost; naive_nat: 1000/s"


def test_the_medians_and_ratios_leave_a_lost_run_out():
    s = alone.summarise(rounds(), ["malb", "naive_nat"])
    assert set(s["malb"]) == {"capacity"}
    answered = s["malb"]["capacity"]["answered_per_s"]
    assert answered["value"] == {"median": 2500.0, "min": 2000.0, "max": 3000.0, "n": 2}
    assert answered["vs_baseline"]["n"] == 2


def test_the_markdown_says_which_runs_did_not_finish():
    r = rounds()
    result = {"rounds": r, "lost": alone.lost_runs(r),
              "summary": alone.summarise(r, ["malb", "naive_nat"])}
    md = alone.markdown(result, argparse.Namespace(rounds=3))
    assert "Not finished, left out of the medians: malb in round 2" in md
    result["lost"] = []
    assert "Not finished" not in alone.markdown(result, argparse.Namespace(rounds=3))


def test_a_switch_dropped_after_the_handshake_is_a_lost_run():
    """The controller asks for the ports, then resets: measure_app raises SwitchLost (which
    run() records as lost) before any phase, not a phase's figures over a dead switch."""
    async def controller(reader, writer):
        await reader.read(8)
        writer.write(ofswitch.message(ofswitch.MULTIPART_REQUEST, 7,
                                      struct.pack("!HH4x", ofswitch.MP_PORT_DESC, 0)))
        await reader.read(64)
        writer.close()

    async def scenario():
        server = await asyncio.start_server(controller, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        cfg = parse_config_file_data(alone.config(18081, port), "alone.yaml")
        args = argparse.Namespace(ofp_port=port, rest_port=18081, fins=None)
        try:
            with pytest.raises(ofswitch.SwitchLost, match="closed the connection"):
                await alone.measure_app("naive_nat", cfg, os.getpid(), args)
        finally:
            server.close()
    asyncio.run(scenario())
