"""The SLO experiment's pure parts (experiments/slo_energy.py): the clients' latencies
relayed to the agent as they are written, and compliance judged at the client."""
import csv
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
import re

import pytest

from common.config import load_config_data, parse_config
from experiments import loadgen, slo_energy


def write_rows(path, rows, header=True):
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=loadgen.FIELDS)
        if header:
            w.writeheader()
        for r in rows:
            w.writerow({f: r.get(f, "") for f in loadgen.FIELDS})


def test_a_failed_request_counts_as_the_clients_timeout():
    assert slo_energy.request_latency_ms({"error": "", "latency_s": "0.0125"}) == 12.5
    assert slo_energy.request_latency_ms({"error": "timeout", "latency_s": "1.0"}) == \
        slo_energy.FAILED_MS


def test_the_relay_reports_each_finished_request_once_and_waits_for_whole_lines(tmp_path):
    got, token = [], []

    class Agent(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            got.append(body)
            token.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        path = tmp_path / "requests-step-slo-1.csv"
        write_rows(path, [{"ended": "100.5", "latency_s": "0.02"},
                          {"ended": "101.0", "latency_s": "0.5", "error": "timeout"}])
        with open(path, "a") as fh:
            fh.write("3,1,request,high,1,1,1,1,102.0,0.03")   # a line still being written
        relay = slo_energy.ClientRelay(str(tmp_path / "requests-step-slo-*.csv"),
                                       f"http://127.0.0.1:{server.server_port}", "ui", "t0k")
        relay.poll()
        assert got == [{"service": "ui", "observations": [[100.5, 20.0],
                                                         [101.0, slo_energy.FAILED_MS]]}]
        assert token == ["Bearer t0k"] and relay.sent == 2
        with open(path, "a") as fh:
            fh.write(",0,200,srv1-ui,,\n")                    # now it is whole
        relay.poll()
        assert got[-1]["observations"] == [[102.0, 30.0]] and relay.sent == 3
        relay.poll()
        assert len(got) == 2                                  # nothing new: nothing sent
    finally:
        server.shutdown()


def test_compliance_is_judged_at_the_service_and_at_the_client():
    phases = [{"name": "low", "seconds": 60, "from": 30, "to": 30}]
    t0 = 1000.0
    # the service says 30 ms throughout; the clients saw 60 ms in the second half
    rows = [{"t": float(t), "sli_ms": 30.0, "samples": 100, "freq_mhz": 2000,
             "energy_j": float(t)} for t in range(0, 61)]
    requests = [{"ended": str(t0 + k / 10), "latency_s": "0.030" if k < 300 else "0.060",
                 "error": ""} for k in range(1, 600)]
    r = slo_energy.analyse(rows, requests, 40.0, phases, ramp=False, t0=t0, window_s=5.0)
    assert r["stable_within_slo_share"] == 1.0 and r["over_slo_share"] == 0.0
    # t = 1..30 judged on 30 ms requests, 31-34 on a window that holds both, then 60 ms
    assert 0.4 < r["client_over_slo_share"] < 0.55
    assert r["client_stable_within_slo_share"] < 0.6
    assert rows[10]["client_sli_ms"] == pytest.approx(30.0)
    assert rows[50]["client_sli_ms"] == pytest.approx(60.0)
    assert rows[0]["client_sli_ms"] is None                  # nothing had ended yet
    assert r["client_stable_max_ms"] == pytest.approx(60.0)     # the worst stable window
    assert r["connect_p95_ms"] is None                # no handshake recorded (older files)


def test_the_handshake_is_told_apart_from_the_rest_of_the_clients_latency():
    phases = [{"name": "low", "seconds": 10, "from": 30, "to": 30}]
    rows = [{"t": float(t), "sli_ms": 30.0, "samples": 100, "freq_mhz": 2000,
             "energy_j": float(t)} for t in range(0, 11)]
    # 1 ms handshakes, and one in ten 50 ms (new flows behind a pause of the controller)
    requests = [{"started": str(1000.0 + k / 10), "ended": str(1000.0 + k / 10 + 0.08),
                 "connected": str(1000.0 + k / 10 + (0.05 if k % 10 == 0 else 0.001)),
                 "latency_s": "0.080", "error": ""} for k in range(100)]
    requests.append({"started": "1009.9", "connected": "", "ended": "1010.9",
                     "latency_s": "1.0", "error": "timeout"})     # never connected
    r = slo_energy.analyse(rows, requests, 40.0, phases, ramp=False, t0=1000.0)
    assert r["connect_p95_ms"] == pytest.approx(50.0, abs=0.01)


def test_the_time_at_the_server_and_the_services_own_are_told_apart():
    # 2 ms handshakes; the answer's first byte 40 ms after the connection (30 ms of it the
    # service's own, the rest its listen queue and threads)
    requests = [{"started": str(1000.0 + k / 10), "connected": str(1000.002 + k / 10),
                 "first_byte": str(1000.042 + k / 10), "ended": str(1000.043 + k / 10),
                 "latency_s": "0.043", "error": ""} for k in range(100)]
    requests.append({"started": "1011", "connected": "1011.002", "first_byte": "",
                     "ended": "1021", "latency_s": "10", "error": "timeout"})
    own = [{"p50_ms": 20.0 + k, "p99_ms": 30.0 + k} for k in range(5)] + [
        {"p50_ms": None, "p99_ms": None}]
    got = slo_energy.time_split(requests, own)
    assert got["connect_p95_ms"] == pytest.approx(2.0, abs=0.01)
    assert got["server_p95_ms"] == pytest.approx(40.0, abs=0.01)   # the timeout left out
    assert (got["service_p50_ms"], got["service_p99_ms"]) == (22.0, 32.0)
    assert slo_energy.time_split([], [])["server_p95_ms"] is None


def test_the_predictive_loop_reads_the_clients_latency_and_short_flows_reach_the_config():
    cfg = parse_config(load_config_data(slo_energy.DEFAULT_CONFIG))
    (_agent, body), = slo_energy.policy_bodies(cfg, "slo-predictive")
    assert (body["policy"], body["sli"], body["band_mode"]) == ("predictive", "client", "safe")
    (_agent, body), = slo_energy.policy_bodies(cfg, "slo")
    assert (body["policy"], body["sli"]) == ("slo", "service")
    assert "target_ms" not in body                     # the configuration's, as the agent has it
    (_agent, body), = slo_energy.policy_bodies(cfg, "ondemand", 85.0)
    assert body["target_ms"] == 85.0                   # a run's own (--calibrate-each-run)
    opts = slo_energy.parser().parse_args(["--short-flows", "switch"])
    assert opts.short_flows == "switch"
    # not given: the configuration's, which the flag overrides only when given
    assert slo_energy.parser().parse_args([]).short_flows is None
    from common.cli import with_short_flows
    data = {"controller": {"dataplane": {"short_flows": "tracker", "table_size": 64}}}
    assert with_short_flows(data, None) is data
    assert with_short_flows(data, "switch") == {
        "controller": {"dataplane": {"short_flows": "switch", "table_size": 64}}}
    assert data["controller"]["dataplane"]["short_flows"] == "tracker"    # not changed


def fake_result(energy, within):
    return {"energy_j": energy, "energy_per_request_mj": energy / 10, "over_slo_share": 0.0,
            "stable_within_slo_share": 1.0, "client_over_slo_share": 1 - within,
            "client_stable_within_slo_share": within, "p50_ms": 10.0, "p95_ms": 30.0,
            "p99_ms": 50.0, "mean_freq_mhz": 1500, "freq_changes_per_min": 2.0,
            "settling_s": None, "failed": 0}


def test_repeated_runs_give_intervals_and_the_loop_paired_against_each_governor(tmp_path):
    runs = {"max": [100.0, 102.0, 98.0], "ondemand": [80.0, 83.0, 79.0],
            "slo": [60.0, 64.0, 61.0]}
    rows = [{"t": float(t), "sli_ms": 30.0, "client_sli_ms": 35.0, "freq_mhz": 1500}
            for t in range(5)]
    doc = {"profiles": {"step": {p: [{"result": fake_result(e, 0.99), "rows": rows}
                                     for e in es] for p, es in runs.items()}},
           "loop": {"actuator": "emulated", "energy_source": "modelled"},
           "command": "c", "commit": "abc", "when": "now",
           "testbed": {"backend": "mininet", "datapath": "netdev"}, "service": "api",
           "slo": {"percentile": 95.0, "target_ms": 40.0, "margin": 0.1}}
    opts = slo_energy.parser().parse_args(["--runs", "3"])
    md = slo_energy.summary_markdown(doc, opts)
    assert "## Profile: step (3 runs, mean ± 95 % interval)" in md
    assert "| slo | 61.7 ± " in md                         # energy J over the runs
    # each run's energy against the maximum's in that run: -40.0, -37.3, -37.8 %
    assert re.search(r"\| slo \| 61\.7 ± [\d.]+ \| -38\.3 ± [\d.]+ % \|", md)
    assert "| max | 100.0 ± 5.0 | 0.0 ± 0.0 % |" in md
    assert "| slo | energy_j | max | -38.333 | -38.3 % |" in md
    assert "| slo | energy_j | ondemand |" in md and "schedutil" not in md.split("Paired")[1]
    slo_energy.plot(doc, str(tmp_path))
    assert (tmp_path / "slo-step.png").exists()


# ------------------------------------------------------------ on a call graph
def callgraph_config():
    from common.config import load_config
    from tests.conftest import ROOT
    return load_config(f"{ROOT}/configs/slo-callgraph.yaml")


def test_on_a_call_graph_the_governors_act_on_every_loop_and_the_loops_two_ways():
    cfg = callgraph_config()
    assert slo_energy.slo_service(cfg).name == "front"
    assert [n for n, _a in slo_energy.loops_of(cfg)] == ["front", "auth", "data", "store"]
    assert slo_energy.default_policies(cfg) == [*slo_energy.GOVERNORS, "slo-split",
                                                "slo-priced", "predictive-priced",
                                                "slo-whole"]
    ondemand = slo_energy.policy_bodies(cfg, "ondemand")
    assert [b["policy"] for _a, b in ondemand] == ["ondemand"] * 4
    whole = {b["service"]: b for _a, b in slo_energy.policy_bodies(cfg, "slo-whole")}
    split = {b["service"]: b for _a, b in slo_energy.policy_bodies(cfg, "slo-split")}
    target = cfg.microservice("front").slo.target_ms
    assert all(b["target_ms"] == target and b["policy"] == "slo" for b in whole.values())
    # under the split only the entry's target is the experiment's; the profiler sets the rest
    assert split["front"]["target_ms"] == target and "target_ms" not in split["store"]
    assert split["front"]["sli"] == "client" and split["store"]["sli"] == "service"
    priced = {b["service"]: b for _a, b in slo_energy.policy_bodies(cfg, "slo-priced")}
    assert priced == split                 # the loops alike; the profiler splits otherwise
    ahead = {b["service"]: b for _a, b in slo_energy.policy_bodies(cfg, "predictive-priced")}
    assert {b["policy"] for b in ahead.values()} == {"predictive"}
    assert ahead["front"]["sli"] == "client" and ahead["store"]["sli"] == "service"
    # a run's own target replaces the configuration's wherever that went
    whole = {b["service"]: b for _a, b in slo_energy.policy_bodies(cfg, "slo-whole", 135.0)}
    assert {b["target_ms"] for b in whole.values()} == {135.0}
    split = {b["service"]: b for _a, b in slo_energy.policy_bodies(cfg, "slo-split", 135.0)}
    assert split["front"]["target_ms"] == 135.0 and "target_ms" not in split["store"]


def test_the_split_policies_tell_the_profiler_how_to_split():
    sent = []

    class Capture(BaseHTTPRequestHandler):
        def do_PUT(self):
            sent.append((self.path, json.loads(self.rfile.read(
                int(self.headers["Content-Length"])))))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a):
            pass
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Capture) for _k in range(5)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        urls = [f"http://127.0.0.1:{server.server_port}" for server in servers]
        data = load_config_data(f"{slo_energy.ROOT}/configs/slo-callgraph.yaml")
        shape = {k: v for k, v in data["servers"].items() if k != "count"}
        data["servers"] = [{"name": f"srv{k + 1}", **shape, "agent_url": urls[k]}
                           for k in range(data["servers"]["count"])]
        data.setdefault("profiler", {})["url"] = urls[4]
        stack = type("St", (), {"cfg": parse_config(data)})()
        for policy, want in (("slo-split", {"active": True, "split": "uniform"}),
                             ("slo-priced", {"active": True, "split": "priced"}),
                             ("predictive-priced", {"active": True, "split": "priced"}),
                             ("slo-whole", {"active": False})):
            sent.clear()
            slo_energy.apply_policy(stack, policy)
            assert sent[0] == ("/budgets", {"entry": "front", **want})
            assert [path for path, _b in sent[1:]] == ["/slo"] * 4
        # a run's own target (--calibrate-each-run): the objective's and the entry's loop's
        sent.clear()
        slo_energy.apply_policy(stack, "slo-split", 135.0)
        assert sent[0][1]["target_ms"] == 135.0
        front = next(b for path, b in sent[1:] if b["service"] == "front")
        assert front["target_ms"] == 135.0
    finally:
        for server in servers:
            server.shutdown()


@pytest.mark.parametrize("policies, message", [
    (["slo-client"], "slo-client runs on one loop; this configuration has an end-to-end"),
])
def test_a_policy_the_configuration_cannot_run_is_refused(policies, message):
    from common.config import ConfigError
    with pytest.raises(ConfigError, match=message):
        slo_energy.check_policies(callgraph_config(), policies)


def test_a_one_loop_configuration_refuses_the_call_graph_policies_at_the_command_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        slo_energy.main(["--policies", "max,slo-split"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "slo-split runs on a call graph with an end-to-end objective" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_energy_is_every_loops_at_each_of_the_judged_loops_times():
    own = [{"time": t, "energy_j": 10.0 * t} for t in (1.0, 2.0, 3.0)]
    others = [[{"time": 0.5, "energy_j": 1.0}, {"time": 2.5, "energy_j": 3.0}],
              [{"time": 1.5, "energy_j": 100.0}]]
    got = [r["energy_j"] for r in slo_energy.with_total_energy(own, others)]
    # the floor adds up the same way; an agent that reports none makes the sum unknown
    floors = slo_energy.with_total_energy(
        [{**r, "floor_j": r["energy_j"] / 2} for r in own],
        [[{**o, "floor_j": o["energy_j"] / 2} for o in other] for other in others])
    assert [r["floor_j"] for r in floors] == [r / 2 for r in got]
    assert slo_energy.with_total_energy(own, others)[0]["floor_j"] is None
    assert got == [11.0, 121.0, 133.0]      # 10 + 1 + 0, 20 + 1 + 100, 30 + 3 + 100
    rows = [{"time": float(t), "energy_j": 2.0 * t, "freq_mhz": 1000 + 100 * t,
             "target_ms": 20.0} for t in range(6)]
    assert slo_energy.loop_figures(rows, 1.0, 4.0) == {
        "energy_j": 6.0, "mean_freq_mhz": 1250, "mean_target_ms": 20.0}


def test_the_call_graph_summary_shows_each_loops_budget_and_the_split_against_the_whole():
    loops = {"front@a": {"energy_j": 5.0, "mean_freq_mhz": 1500, "mean_target_ms": 80.0},
             "store@b": {"energy_j": 7.0, "mean_freq_mhz": 1800, "mean_target_ms": 21.5}}
    runs = {"max": [100.0, 101.0, 99.0], "slo-whole": [50.0, 52.0, 51.0],
            "slo-split": [60.0, 61.0, 62.0]}
    rows = [{"t": float(t), "sli_ms": 30.0, "client_sli_ms": 35.0, "freq_mhz": 1500}
            for t in range(5)]
    doc = {"profiles": {"step": {p: [{"result": {**fake_result(e, 0.99), "loops": loops},
                                      "rows": rows} for e in es] for p, es in runs.items()}},
           "loop": {"actuator": "emulated", "energy_source": "modelled"},
           "command": "c", "commit": "abc", "when": "now", "loops": ["front", "store"],
           "testbed": {"backend": "mininet", "datapath": "netdev"}, "service": "front",
           "slo": {"percentile": 95.0, "target_ms": 80.0, "margin": 0.25,
                   "scope": "end-to-end", "sli": "client"}}
    opts = slo_energy.parser().parse_args(["--runs", "3", "--config",
                                           "configs/slo-callgraph.yaml"])
    md = slo_energy.summary_markdown(doc, opts)
    assert "end to end at client side, over the loops of front, store" in md
    assert "| slo-split | store | 21.5 ± 0.0 | 1,800 ± 0 | 7.0 ± 0.0 |" in md
    assert "| max | store | – | 1,800 ± 0 | 7.0 ± 0.0 |" in md
    assert "| slo-split | energy_j | slo-whole | 10.000 |" in md


def test_the_calibration_takes_the_worst_stable_tail_of_the_maximum_over_every_load():
    res = {"max": [{"result": {"client_stable_max_ms": v}} for v in (61.0, 74.2, None)],
           "ondemand": [{"result": {"client_stable_max_ms": 500.0}}]}
    assert slo_energy.calibrated_target(res) == (74.2, 90.0)     # 89.04 up to 90
    assert slo_energy.calibrated_target({"max": [{"result": {"client_stable_max_ms":
                                                             75.0}}]}) == (75.0, 90.0)
    assert slo_energy.calibrated_target({"ondemand": res["ondemand"]}) is None


def test_several_loads_are_each_a_profile_and_the_calibration_takes_the_worst_of_all():
    opts = slo_energy.parser().parse_args(["--loads", "20-50, 30-70", "--policies", "max"])
    assert slo_energy.loads_of(opts) == [(20.0, 50.0), (30.0, 70.0)]
    assert slo_energy.loads_of(slo_energy.parser().parse_args(["--high", "90"])) == \
        [(slo_energy.DEFAULT_LOW, 90.0)]
    for bad in ("20", "20-x", "0-50", "20-50,", "-5-10"):
        with pytest.raises(SystemExit):
            slo_energy.parser().parse_args(["--loads", bad])
    rows = [{"t": float(t), "sli_ms": 30.0, "client_sli_ms": 35.0, "freq_mhz": 1500}
            for t in range(5)]

    def at(worst):
        return {"max": [{"result": {**fake_result(100.0, 1.0), "client_stable_max_ms": worst},
                         "rows": rows}]}
    doc = {"profiles": {"step 20-50": at(31.0), "step 30-70": at(52.0)},
           "loop": {"actuator": "emulated", "energy_source": "modelled"},
           "command": "c", "commit": "abc", "when": "now",
           "testbed": {"backend": "mininet", "datapath": "netdev"}, "service": "api",
           "slo": {"percentile": 95.0, "target_ms": 40.0, "margin": 0.1}}
    md = slo_energy.summary_markdown(doc, opts)
    assert "load 20 -> 50, 30 -> 70 requests/s" in md
    assert "## Profile: step 20-50" in md and "## Profile: step 30-70" in md
    assert "over its 1 run(s) was 31 ms; the rule (1.2 x that, rounded up to 5 ms) gives a " \
        "target of 40 ms." in md
    assert "Over every profile and load: Calibration: the fixed maximum's worst stable p95 " \
        "at the client over its 2 run(s) was 52 ms; the rule (1.2 x that, rounded up to 5 " \
        "ms) gives a target of 65 ms." in md


def test_a_profile_at_one_of_several_loads_is_plotted_under_a_name_without_spaces(tmp_path):
    rows = [{"t": float(t), "sli_ms": 30.0, "client_sli_ms": 35.0, "freq_mhz": 1500}
            for t in range(5)]
    doc = {"profiles": {"step 20-50": {"max": [{"result": fake_result(100.0, 1.0),
                                                 "rows": rows}]}},
           "loop": {"actuator": "emulated", "energy_source": "modelled"},
           "slo": {"percentile": 95.0, "target_ms": 40.0, "margin": 0.1}}
    slo_energy.plot(doc, str(tmp_path))
    assert (tmp_path / "slo-step-20-50.png").exists()


def test_a_finished_play_is_kept_whole_and_a_resumed_stack_gets_a_directory_of_its_own(
        tmp_path):
    plays = str(tmp_path / "plays")
    tag = slo_energy.play_tag("step-20-50", "slo", 2, runs=5)
    # "slo" is a prefix of "slo-client": the tags of both stay apart
    assert tag == "step-20-50-slo-r3" != slo_energy.play_tag("step-20-50", "slo-client", 2, 5)
    assert slo_energy.played(plays, tag) is None
    slo_energy.keep_play(plays, tag, {"result": {"energy_j": 1.5}, "rows": [{"t": 0.0}]})
    assert slo_energy.played(plays, tag) == {"result": {"energy_j": 1.5}, "rows": [{"t": 0.0}]}
    assert not list((tmp_path / "plays").glob("*.part"))
    # the first stack writes to run/, each resumption to a new one: no file of a play cut
    # off there (its clients' records, their summaries) is read as one of today's
    assert slo_energy.stack_dir(str(tmp_path)) == str(tmp_path / "run")
    (tmp_path / "run").mkdir()
    (tmp_path / "run-2").mkdir()
    assert slo_energy.stack_dir(str(tmp_path)) == str(tmp_path / "run-3")


def test_the_summary_says_how_far_below_ondemand_any_rule_could_go():
    res = {"ondemand": [{"result": {"floor_per_request_mj": 40.0, "energy_per_request_mj": 50.0}},
                        {"result": {"floor_per_request_mj": 45.0, "energy_per_request_mj": 50.0}}],
           "slo": [{"result": {"floor_per_request_mj": 30.0, "energy_per_request_mj": 35.0}}]}
    (line, _blank) = slo_energy._floor_lines(res)
    assert line.startswith("The floor of ondemand's work (latency ignored) is 15.0 ± ")
    # no ondemand, or a run from before the floor was measured: nothing said
    assert slo_energy._floor_lines({"slo": res["slo"]}) == []
    assert slo_energy._floor_lines({"ondemand": [{"result": {"energy_per_request_mj": 5.0}}]}) \
        == []


def test_each_run_can_calibrate_its_own_target_on_a_schedule_of_its_own(tmp_path, monkeypatch):
    """--calibrate-each-run: the fixed maximum on every profile and load, on seed + k +
    CALIBRATION_SEED_SHIFT, its plays kept for --resume; the run's target by the rule."""
    calls = []

    def fake_play(st, svc, policy, profile, phases, opts, log, run=0, label=None,
                  target_ms=None, seed_shift=0):
        calls.append((policy, label, run, seed_shift, target_ms))
        worst = {"calibration-step-4-10": 51.0, "calibration-step-8-20": 70.4}[label]
        return {"result": {**fake_result(100.0, 1.0), "client_stable_max_ms": worst,
                           "failed": 1}, "rows": []}
    monkeypatch.setattr(slo_energy, "play", fake_play)
    opts = slo_energy.parser().parse_args(["--loads", "4-10,8-20", "--profiles", "step",
                                           "--runs", "2", "--seed", "120",
                                           "--calibrate-each-run"])
    svc = type("Svc", (), {"slo": type("Slo", (), {"percentile": 95.0})()})()
    plays = str(tmp_path / "plays")
    got = slo_energy.calibrate(None, svc, opts, plays, 1, lambda _m: None)
    # 1.2 x 70.4 = 84.48, up to 85; run 2 (index 1) on 120 + 1 + the shift
    assert got == {"run": 2, "seed": 121 + slo_energy.CALIBRATION_SEED_SHIFT,
                   "worst_ms": 70.4, "target_ms": 85.0, "failed": 2}
    assert calls == [("max", "calibration-step-4-10", 1, slo_energy.CALIBRATION_SEED_SHIFT,
                      None), ("max", "calibration-step-8-20", 1,
                              slo_energy.CALIBRATION_SEED_SHIFT, None)]
    assert sorted(p.name for p in (tmp_path / "plays").iterdir()) == [
        "calibration-step-4-10-max-r2.json", "calibration-step-8-20-max-r2.json"]
    # resumed: read back, not played again
    calls.clear()
    opts.resume = True
    assert slo_energy.calibrate(None, svc, opts, plays, 1, lambda _m: None) == got
    assert calls == []
    # no stable interval at the client: no target, said so
    monkeypatch.setattr(slo_energy, "play", lambda *a, **k: {
        "result": {**fake_result(100.0, 1.0), "client_stable_max_ms": None}, "rows": []})
    with pytest.raises(RuntimeError, match="run 1's calibration: the fixed maximum had no "
                                           "stable interval"):
        slo_energy.calibrate(None, svc, opts, str(tmp_path / "other"), 0, lambda _m: None)


def test_the_summary_gives_each_runs_calibrated_target():
    rows = [{"t": float(t), "sli_ms": 30.0, "client_sli_ms": 35.0, "freq_mhz": 1500}
            for t in range(5)]
    doc = {"profiles": {"step": {"max": [{"result": fake_result(100.0, 1.0), "rows": rows}]}},
           "loop": {"actuator": "emulated", "energy_source": "modelled"},
           "command": "c", "commit": "abc", "when": "now",
           "testbed": {"backend": "mininet", "datapath": "netdev"}, "service": "api",
           "slo": {"percentile": 95.0, "target_ms": 40.0, "margin": 0.1},
           "run_targets": [{"run": 1, "seed": 620, "worst_ms": 70.44, "target_ms": 85.0,
                            "failed": 0}]}
    md = slo_energy.summary_markdown(doc, slo_energy.parser().parse_args([]))
    assert "SLO p95 <= each run's calibrated target (below)" in md
    assert "| 1 | 620 | 70.4 | 85 | 0 |" in md
    assert "(the configuration's 40 ms unused)" in md
