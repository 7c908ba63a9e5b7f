"""The controller's modes on one topology in one run: part of
`python -m benchmarks.controller` (its `modes` part), or alone:

    sudo .venv/bin/python -m benchmarks.modes [--seconds 5] [--long-flows 1000]

One testbed (the paper's 4 servers, 2 clients, userspace OVS) with host agents and the
profiler running; the controller runs twice on it, first in per-flow mode, then restarted in
data-plane mode (controller.dataplane.short_flows: switch). Measured, in this order:

1. per-flow mode
   - direct path: TCP connect straight to the 4 ui instances in turn, over rules installed
     beforehand for the client and those addresses (above the controller's rules, which
     would take the instances' answers to the controller as orphans): the limit;
   - per-flow round robin: connect through the ui VIP (a short-flow service: a packet-in,
     a decision and a rule pair per connection);
   - per-flow weighted least load with at least --long-flows active long flows: that many
     connections held open to the video VIP (one request every few seconds each keeps
     their rules), then connect through the backend VIP (a long-flow service: the
     least-load decision); then SYNs to the backend VIP at --syn-rate per second for
     --syn-seconds
     (about 10,000 active flows by the end): packet-in to flow-mod latency on the wire, and
     the controller's own histograms of packet-in to rules sent and of choose() alone;
   - established connections when an instance drains: --hold connections to the ui VIP,
     srv3-ui drained in the middle: how many break, and on which instance.
2. data-plane mode (controller restarted with the select group)
   - direct path again, and connect through the ui VIP (the select group): packet-ins
     counted over the step;
   - the same drain: connections that break, slots moved;
   - a SYN flood at 10x the per-flow connection rate measured in step 1, to the backend VIP
     (per-flow decisions, through the packet-in meter), while a video stream runs through
     the VIP, connections open through the ui VIP and REST is asked every 0.1 s.
3. the least-load decision's cost on the pure core at 10, 1,000 and 10,000 pending flows
   per server (benchmarks.decision_cost, in process).

Results: modes.json and modes.md in --out (also printed).
"""
from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter

import yaml

from benchmarks import decision_cost
from experiments.cpu_meters import CpuMeters, used
from benchmarks.ofcapture import capture_latency, ms
from common import lab
from common.cli import ArgumentParser, bounded, require_testbed
from common.config import DEFAULT_MICROSERVICES
from common.markdown import table
from common.paths import WORK
from common.procs import ROOT, controller_service, git_commit
from experiments.stack import Stack, transitions_for
from topologies.clean import clean_testbed

VIP_UI, VIP_VIDEO, VIP_BACKEND = 8002, 8001, 8003
DRAINED = "srv3-ui"
DIRECT_COOKIE = 0xBE0C


def base_config() -> dict:
    return {"testbed": {"clients": 2},
            "microservices": copy.deepcopy(DEFAULT_MICROSERVICES),
            "controller": {"health": {"method": "tcp", "interval_s": 2, "timeout_s": 1}}}


def connect(cli, target: str, workers: int, seconds: float) -> dict:
    out = cli.cmd(f"{sys.executable} {ROOT}/benchmarks/connect.py --target {target} "
                  f"--workers {workers} --seconds {seconds}")
    r = json.loads(out.strip().splitlines()[-1])
    return {"target": target, "per_s": round(r["per_s"], 1), "connections": r["connections"],
            "p50_ms": ms(r["p50_s"]), "p99_ms": ms(r["p99_s"]), "failures": r["failures"]}


def metrics_text(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def packet_ins(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in
            re.findall(r'^malb_packet_in_total\{kind="([^"]+)"\} (\S+)$', text, re.M)}


def slots_moved(text: str) -> dict[str, float]:
    """Data-plane mode: per microservice, select-group slots given to another instance so
    far (each one's connections pass through the controller while it is in transition)."""
    return {k: float(v) for k, v in re.findall(
        r'^malb_dataplane_slots_moved_total\{microservice="([^"]+)"\} (\S+)$', text, re.M)}


def histogram(text: str, name: str, labels: str = "") -> dict[float, float]:
    """One series of a Prometheus histogram in the controller's /metrics: upper bound ->
    cumulative count. `labels`: the series' labels before le, e.g. 'algorithm="x",'."""
    pattern = r'^%s_bucket\{%sle="([^"]+)"\} (\S+)$' % (re.escape(name), re.escape(labels))
    return {float("inf") if le == "+Inf" else float(le): float(v)
            for le, v in re.findall(pattern, text, re.M)}


def handler_quantiles(before: str, after: str) -> dict:
    """From two /metrics texts of MALB: per event kind, how many were handled in between and
    the bucket bounds of their p50 and p99 (ms); the garbage collector's pauses per
    generation (gc_0, gc_1, gc_2) and the event loop's lag likewise."""
    out = {}
    kinds = sorted(set(re.findall(r'^malb_handler_seconds_count\{event="([^"]+)"\}', after,
                                  re.M)))
    series = [(k, "malb_handler_seconds", f'event="{k}",') for k in kinds]
    series += [(f"gc_{g}", "malb_gc_pause_seconds", f'generation="{g}",') for g in sorted(
        set(re.findall(r'^malb_gc_pause_seconds_count\{generation="([^"]+)"\}', after, re.M)))]
    for key, name, labels in series + [("event_loop_lag", "malb_event_loop_lag_seconds", "")]:
        h0, h1 = histogram(before, name, labels), histogram(after, name, labels)
        if not h1:
            continue
        n = h1[float("inf")] - h0.get(float("inf"), 0)
        p50, p99 = histogram_quantile(h0, h1, 0.5), histogram_quantile(h0, h1, 0.99)
        out[key] = {"count": int(n),
                    "p50_ms_at_most": None if p50 is None else round(1e3 * p50, 3),
                    "p99_ms_at_most": None if p99 is None else round(1e3 * p99, 3)}
    return out


def latency_hist(text: str) -> dict[float, float]:
    """Packet-in to rules sent, in the controller."""
    return histogram(text, "malb_decision_latency_seconds")


def choose_hist(text: str) -> dict[float, float]:
    """The policy core's choose() alone, on the weighted-least-load path."""
    return histogram(text, "malb_choose_seconds", 'algorithm="weighted-least-load",')


def direct_rules(switch: str, client, instances, ports: dict, add: bool) -> None:
    """The direct path with its rules pre-installed: client <-> each instance by address,
    above every rule of the controller (which would send the instances' answers, orphans
    to it, through the controller)."""
    if not add:
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", switch,
                        f"cookie={DIRECT_COOKIE:#x}/-1"], check=True, timeout=10)
        return
    flows = []
    for inst in instances:
        flows.append(f"cookie={DIRECT_COOKIE:#x},priority=300,ip,nw_src={client.ip},"
                     f"nw_dst={inst.ip},actions=output:{ports[inst.name]}")
        flows.append(f"cookie={DIRECT_COOKIE:#x},priority=300,ip,nw_src={inst.ip},"
                     f"nw_dst={client.ip},actions=output:{ports[client.name]}")
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", switch, "-"],
                   input="\n".join(flows) + "\n", text=True, check=True, timeout=10)


def upcalls() -> dict[str, int]:
    """Open vSwitch's userspace datapath counters, summed over its threads: packets received
    and datapath misses handed to ovs-vswitchd (upcalls). Read-only; {} when unreadable."""
    try:
        text = subprocess.run(["ovs-appctl", "dpif-netdev/pmd-stats-show"], capture_output=True,
                              text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_upcalls(text)


def parse_upcalls(text: str) -> dict[str, int]:
    """`ovs-appctl dpif-netdev/pmd-stats-show`'s packets received and upcalls (successful
    or failed), summed over the threads listed; {} when it lists none."""
    if "packets received:" not in text:
        return {}
    out: dict[str, int] = {}
    for key, pattern in (("packets", r"packets received: (\d+)"),
                         ("upcalls", r"miss with (?:success|failed) upcall: (\d+)")):
        out[key] = sum(int(v) for v in re.findall(pattern, text))
    return out


# ovs-vswitchd's coverage counters read around a step: translations of OpenFlow actions
# (each upcall's, and each datapath flow's again whenever revalidation re-checks it) and
# revalidations of every datapath flow set off by a change of the OpenFlow tables
COVERAGE = ("xlate_actions", "rev_flow_table")
COVERAGE_FOLD_S = 1.1      # threads fold their counts into the totals about once a second


def coverage() -> dict[str, int]:
    """ovs-vswitchd's COVERAGE counters (totals since it started); {} when unreadable."""
    out = {}
    for name in COVERAGE:
        try:
            text = subprocess.run(["ovs-appctl", "coverage/read-counter", name],
                                  capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return {}
        if not text.isdigit():
            return {}
        out[name] = int(text)
    return out


def counted(step, connections_of=lambda r: r["connections"]):
    """Run a connect step; add the datapath's upcalls and packets per connection, and
    ovs-vswitchd's translations and table-change revalidations per connection."""
    time.sleep(COVERAGE_FOLD_S)
    before, cov0 = upcalls(), coverage()
    r = step()
    time.sleep(COVERAGE_FOLD_S)
    after, cov1 = upcalls(), coverage()
    n = connections_of(r)
    if before and after and n:
        r["upcalls_per_connection"] = round((after["upcalls"] - before["upcalls"]) / n, 3)
        r["datapath_packets_per_connection"] = round(
            (after["packets"] - before["packets"]) / n, 2)
    if cov0 and cov1 and n:
        for name in COVERAGE:
            r[f"{name}_per_connection"] = round((cov1[name] - cov0[name]) / n, 2)
    return r


def direct_connect(cli, switch: str, client, instances, ports, port: int, workers: int,
                   seconds: float) -> dict:
    direct_rules(switch, client, instances, ports, add=True)
    try:
        return connect(cli, ",".join(f"{i.ip}:{port}" for i in instances), workers, seconds)
    finally:
        direct_rules(switch, client, instances, ports, add=False)


def histogram_quantile(before: dict, after: dict, q: float) -> float | None:
    """The upper bound of the bucket holding quantile q of the observations in between."""
    bounds = sorted(after)
    total = after[bounds[-1]] - before.get(bounds[-1], 0)
    if total <= 0:
        return None
    for b in bounds:
        if after[b] - before.get(b, 0) >= q * total:
            return b
    return bounds[-1]


def start_hold(cli, target: str, n: int, seconds: float, interval: float, out: str,
               ramp: float = 0.0) -> None:
    cli.cmd(f"rm -f {out}; cd {ROOT} && {sys.executable} -m benchmarks.holdconns "
            f"--target {target} --connections {n} --seconds {seconds} --interval {interval} "
            f"--ramp {ramp} > {out} 2>&1 &")


def wait_lines(path: str, lines: int, timeout_s: float) -> list[str]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with open(path) as fh:
                got = [ln for ln in fh.read().splitlines() if ln.startswith("{")]
        except FileNotFoundError:
            got = []
        if len(got) >= lines:
            return got
        time.sleep(0.3)
    raise TimeoutError(f"{path}: fewer than {lines} result lines after {timeout_s} s")


def drain_run(stack, cli, n: int, port: int) -> dict:
    """n held connections to the ui VIP; srv3-ui drained 2 s in; who broke."""
    out = f"/tmp/malb-bench-hold-{port}.out"
    start_hold(cli, f"10.0.0.100:{VIP_UI}", n, 8, 0.2, out)
    wait_lines(out, 1, 60)
    time.sleep(2)
    code, _ = stack.controller_put("/malb/instances/" + DRAINED, {"draining": True})
    assert code == 200, code
    dp = stack.controller_get("/malb/status").get("dataplane", {})
    change = (dp.get("microservices", {}).get("ui") or {}).get("last_change")
    conns = json.loads(wait_lines(out, 2, 60)[-1])["connections"]
    stack.controller_put("/malb/instances/" + DRAINED, {"draining": False})
    by = Counter(c["instance"] for c in conns)
    broken = [c for c in conns if c["error"]]
    return {"connections": len(conns), "per_instance": dict(by),
            "broken": len(broken),
            "broken_on_drained": sum(c["instance"] == DRAINED for c in broken),
            "broken_on_others": sum(c["instance"] != DRAINED for c in broken),
            "errors": dict(Counter(c["error"] for c in broken)),
            "share_of_slots_moved": change["share_moved"] if change else None}


def syn_flood(stack, cli1, cli2, client, rate: float, seconds: float, rest: int,
              switch: str, workers: int) -> dict:
    """SYNs to the backend VIP at `rate` from cli1 for `seconds` (each a new flow for the
    controller), while cli2 streams through the video VIP (a running transfer on its own NAT
    rules), cli1 opens connections through the ui VIP, and this process asks the REST API
    for /malb/status every 0.1 s."""
    stream_s = seconds + 10
    cli2.cmd(f"curl -s -o /dev/null --max-time {stream_s + 30} -w '%{{http_code}} "
             f"%{{size_download}}' 'http://10.0.0.100:{VIP_VIDEO}/stream?rate=200&seconds="
             f"{stream_s}' > /tmp/malb-bench-stream.out 2>&1 &")
    time.sleep(3)
    before = packet_ins(metrics_text(rest))
    rest_times: list[float] = []
    rest_failures = [0]
    lags: list[float] = []          # the health loop's echo round trips (channel lag)
    taken_out: set[str] = set()     # instances seen unhealthy at any moment
    stop = threading.Event()

    def ask_rest():
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                status = stack.controller_get("/malb/status")
                rest_times.append(time.perf_counter() - t0)
                lags.extend(status.get("channel_lag_s", {}).values())
                taken_out.update(n for n, v in stack.controller_get("/malb/instances")
                                 ["instances"].items() if v.get("healthy") is False)
            except Exception:   # noqa: BLE001 -- a failure is what is counted here
                rest_failures[0] += 1
            time.sleep(0.1)

    asker = threading.Thread(target=ask_rest, daemon=True)
    asker.start()
    flood_out = "/tmp/malb-bench-flood.out"
    cli1.cmd(f"{sys.executable} {ROOT}/benchmarks/pktgen.py syn --intf {client.name}-eth0 "
             f"--src-mac {client.mac} --src-ip {client.ip} --dst-mac "
             f"{stack.cfg.controller.vip_mac} --dst-ip 10.0.0.100 --dport {VIP_BACKEND} "
             f"--rate {rate} --seconds {seconds} --first-key 7 > {flood_out} 2>&1 &")
    time.sleep(min(3.0, seconds / 3))
    during = connect(cli1, f"10.0.0.100:{VIP_UI}", workers, min(3.0, seconds / 3))
    deadline = time.time() + seconds + 60
    sent = None
    while time.time() < deadline and sent is None:
        time.sleep(0.5)
        try:
            with open(flood_out) as fh:
                lines = [ln for ln in fh.read().splitlines() if ln.startswith("{")]
            sent = json.loads(lines[-1]) if lines else None
        except FileNotFoundError:
            pass
    stop.set()
    asker.join(5)
    after = packet_ins(metrics_text(rest))
    healthy = stack.controller_get("/malb/instances")
    meter = ""
    try:
        meter = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "meter-stats", switch],
                               capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        pass
    stream = ""
    deadline = time.time() + stream_s + 40
    while time.time() < deadline and not re.fullmatch(r"\d{3} \d+", stream):
        time.sleep(0.5)
        try:
            with open("/tmp/malb-bench-stream.out") as fh:
                stream = fh.read().strip()
        except FileNotFoundError:
            pass
    code, size = (int(x) for x in stream.split()) if stream else (0, 0)
    rest_times.sort()
    return {
        "offered_per_s": rate, "seconds": seconds,
        "sent": sent["sent"] if sent else None,
        "sent_per_s": round(sent["sent"] / sent["seconds"], 1) if sent else None,
        "packet_ins": {k: after.get(k, 0) - before.get(k, 0)
                       for k in after if after.get(k, 0) != before.get(k, 0)},
        "rest_requests": len(rest_times), "rest_failures": rest_failures[0],
        "rest_p50_ms": ms(rest_times[len(rest_times) // 2]) if rest_times else None,
        "rest_max_ms": ms(rest_times[-1]) if rest_times else None,
        "transfer": {"http_code": code, "bytes": size, "expected_bytes": 200_000 * stream_s},
        "ui_vip_connect_during_flood": during,
        "instances_down_after": sorted(n for n, v in healthy["instances"].items()
                                       if v.get("healthy") is False),
        "instances_taken_out_during": sorted(taken_out),
        "channel_lag_max_s": round(max(lags), 3) if lags else None,
        "meter_stats": meter.strip().splitlines()[1:] if meter else [],
    }


def run(out_dir: str, seconds: float, workers: int, long_flows: int, hold: int,
        syn_rate: float, syn_seconds: float, flood_seconds: float, say=print) -> dict:
    data = base_config()
    result: dict = {"long_flows_target": long_flows}
    clean_testbed(quiet=True)
    stack = Stack(data, os.path.join(out_dir, "modes-run"), policy="malb")
    with stack:
        rest = stack.cfg.controller.rest_port
        stack.wait_for(lambda: stack.controller_get("/malb/status")["profiler"]["reachable"],
                       60, "the controller reaches the profiler")
        cfg = stack.cfg
        result["packet_in_limit_per_s"] = cfg.controller.packet_in_limit_per_s
        cli1, cli2 = stack.testbed.node("cli1"), stack.testbed.node("cli2")
        client = cfg.testbed.clients[0]
        switch = cfg.testbed.switches[0].name
        ports = {h.name: h.switch_port for h in (*cfg.instances, *cfg.testbed.clients)}
        uis = cfg.instances_of("ui")
        for inst in cfg.instances:
            cli1.cmd(f"ping -c 1 -W 1 {inst.ip}")
        cli1.cmd("ping -c 1 -W 1 10.0.0.100")
        cli2.cmd("ping -c 1 -W 1 10.0.0.100")

        say("[modes] per-flow: direct path, then round robin through the ui VIP")
        pf: dict = {"direct": counted(lambda: direct_connect(cli1, switch, client, uis, ports,
                                                             VIP_UI, workers, seconds))}
        before = packet_ins(metrics_text(rest))
        pf["round_robin"] = counted(lambda: connect(cli1, f"10.0.0.100:{VIP_UI}", workers,
                                                    seconds))
        pf["round_robin"]["packet_ins_new_flow"] = \
            packet_ins(metrics_text(rest)).get("new_flow", 0) - before.get("new_flow", 0)

        say(f"[modes] per-flow: {long_flows} long flows held to the video VIP")
        hold_s = 3 * seconds + 60
        long_out = "/tmp/malb-bench-long.out"
        start_hold(cli2, f"10.0.0.100:{VIP_VIDEO}", long_flows, hold_s, 4.0, long_out,
                   ramp=long_flows / 300)
        ready = json.loads(wait_lines(long_out, 1, 120)[0])
        time.sleep(3)
        active = stack.controller_get("/malb/status")["active_flows"]
        say(f"[modes]   {ready['connected']} connected, {active} active flows at the "
            f"controller; least load through the backend VIP")
        ll = connect(cli1, f"10.0.0.100:{VIP_BACKEND}", workers, seconds)
        decisions = stack.controller_get("/malb/decisions?limit=50&microservice=backend")
        ll.update(active_flows=active, held_connections=ready["connected"],
                  algorithms=dict(Counter(d["algorithm"] for d in decisions["decisions"])))
        pf["least_load"] = ll
        say(f"[modes]   SYNs to the backend VIP at {syn_rate:.0f}/s, captured on the wire")
        text0 = text = metrics_text(rest)
        lat0, ch0 = latency_hist(text), choose_hist(text)
        active_seen: list[int] = []
        done = threading.Event()

        def poll_active():
            while not done.wait(1.0):
                active_seen.append(stack.controller_get("/malb/status")["active_flows"])

        poller = threading.Thread(target=poll_active, daemon=True)
        poller.start()
        meters = CpuMeters(stack)
        cpu0, t0 = meters.read(), time.monotonic()
        syn = capture_latency(
            cli1, client, f"syn --dst-mac {cfg.controller.vip_mac} --dst-ip 10.0.0.100 "
            f"--dport {VIP_BACKEND} --first-key 0", syn_rate, syn_seconds,
            os.path.join(out_dir, "modes-syn.pcap"), "syn")
        cpu = used(cpu0, meters.read(), time.monotonic() - t0)
        done.set()
        poller.join(10)
        text = metrics_text(rest)
        lat1, ch1 = latency_hist(text), choose_hist(text)
        syn.update(cpu=cpu, active_flows_max=max(active_seen, default=None),
                   # what the event loop did besides the decisions, over the same seconds
                   controller=handler_quantiles(text0, text),
                   controller_p50_ms=ms(histogram_quantile(lat0, lat1, 0.5)),
                   controller_p99_ms=ms(histogram_quantile(lat0, lat1, 0.99)),
                   choose_decisions=(ch1.get(float("inf"), 0) - ch0.get(float("inf"), 0)),
                   choose_p50_us=_us(histogram_quantile(ch0, ch1, 0.5)),
                   choose_p99_us=_us(histogram_quantile(ch0, ch1, 0.99)))
        pf["least_load_syn_latency"] = syn
        held = json.loads(wait_lines(long_out, 2, hold_s + 60)[-1])["connections"]
        pf["least_load"]["held_broken"] = sum(bool(c["error"]) for c in held)

        say("[modes] per-flow: established connections while srv3-ui drains")
        pf["drain"] = drain_run(stack, cli2, hold, 1)
        result["per_flow"] = pf

        say("[modes] restarting the controller in data-plane mode")
        stack.controller.stop()
        dp_data = copy.deepcopy(stack.data)
        dp_data["controller"]["dataplane"] = {
            "short_flows": "switch", "transitions": transitions_for(stack.testbed.datapath)}
        dp_config = os.path.join(stack.run_dir, "config-dataplane.yaml")
        with open(dp_config, "w") as fh:
            yaml.safe_dump(dp_data, fh, sort_keys=False)
        stack.controller = controller_service(
            dp_config, "malb", os.path.join(stack.run_dir, "controller-dataplane.log"),
            rest).start()
        stack.wait_for(lambda: stack.controller_get("/malb/status")["dataplane"]
                       ["microservices"]["ui"]["switches"], 60, "the ui select group")
        time.sleep(cfg.controller.idle_timeout_s + 2)   # per-flow rules of before expire
        dpm: dict = {"direct": counted(lambda: direct_connect(cli1, switch, client, uis, ports,
                                                              VIP_UI, workers, seconds))}
        before = packet_ins(metrics_text(rest))
        dpm["select_group"] = counted(lambda: connect(cli1, f"10.0.0.100:{VIP_UI}", workers,
                                                      seconds))
        after = packet_ins(metrics_text(rest))
        dpm["select_group"]["packet_ins_new_flow"] = \
            after.get("new_flow", 0) - before.get("new_flow", 0)
        dpm["select_group"]["packet_ins_all"] = sum(after.values()) - sum(before.values())
        say("[modes] data-plane: established connections while srv3-ui drains")
        dpm["drain"] = drain_run(stack, cli2, hold, 2)
        result["dataplane"] = dpm
        capacity = pf["round_robin"]["per_s"]
        say(f"[modes] SYN flood at 10x the per-flow capacity ({10 * capacity:.0f}/s) to the "
            f"backend VIP for {flood_seconds:.0f} s")
        result["syn_flood"] = syn_flood(stack, cli1, cli2, client, round(10 * capacity),
                                        flood_seconds, rest, switch, workers)
        result["syn_flood"]["capacity_per_s"] = capacity
    clean_testbed(quiet=True)

    say("[modes] least-load decision cost on the pure core (benchmarks.decision_cost)")
    rows = decision_cost.run(decision_cost.parser().parse_args(["--decisions", "2000"]))
    for row in rows:
        row["p99_vs_first"] = round(row["decision"]["p99_us"] / rows[0]["decision"]["p99_us"], 2)
        row["p50_vs_first"] = round(row["decision"]["p50_us"] / rows[0]["decision"]["p50_us"], 2)
    result["decision_cost"] = rows
    return result


def cpu_line(cpu: dict | None) -> str:
    """'controller 0.52, ovs 0.31, ...' from cpu_meters.used(), the parts that were read."""
    if not cpu:
        return "not measured"
    parts = [(k[:-len("_cores")], v) for k, v in cpu.items() if k.endswith("_cores")]
    return ", ".join(f"{k} {v:.2f}" for k, v in parts if v is not None) or "not measured"


def _us(v):
    return None if v is None else round(v * 1e6, 1)


def stalls_line(controller: dict | None) -> str:
    """The event loop's lag and its longest kinds of work over a step, from
    handler_quantiles: what new flows waited behind (histogram bucket bounds)."""
    if not controller:
        return "not measured"
    parts = [f"{key.replace('_', ' ')} {v['count']} x, p99 <= {v['p99_ms_at_most']} ms"
             for key, v in sorted(controller.items()) if key != "event_loop_lag"
             and v["count"] and v["p99_ms_at_most"] is not None
             and v["p99_ms_at_most"] >= 1.0]
    lag = controller.get("event_loop_lag")
    head = f"lag p99 <= {lag['p99_ms_at_most']} ms" if lag else "lag not measured"
    return head + ("; work of 1 ms or more at the p99: " + ", ".join(parts) if parts else "")


def markdown(r: dict) -> str:
    pf, dp = r["per_flow"], r["dataplane"]
    ll, syn = pf["least_load"], pf["least_load_syn_latency"]
    lines = [
        "## Modes on one topology (per-flow and data-plane)", "",
        "TCP connect from a client, closed loop:", ""]
    connect = []

    def row(mode, c, direct, extra="—"):
        ratio = round(c["p50_ms"] / direct["p50_ms"], 2) \
            if c["p50_ms"] and direct["p50_ms"] else None
        target = c["target"].split(",")[0] + (" ..." if "," in c["target"] else "")
        connect.append([mode, target, c["per_s"], c["p50_ms"], c["p99_ms"], c["failures"],
                        extra, c.get("upcalls_per_connection", "—"), ratio])

    # each mode against the direct path measured in the same phase, just before it
    row("direct path, rules pre-installed (the limit), per-flow controller", pf["direct"],
        pf["direct"])
    row("per-flow round robin (ui VIP)", pf["round_robin"], pf["direct"],
        f"{pf['round_robin']['packet_ins_new_flow']:.0f}")
    row(f"per-flow least load, {ll['active_flows']} active flows (backend VIP)", ll,
        pf["direct"])
    row("direct path, rules pre-installed (the limit), data-plane controller", dp["direct"],
        dp["direct"])
    row("data-plane select group (ui VIP)", dp["select_group"], dp["direct"],
        f"{dp['select_group']['packet_ins_new_flow']:.0f}")
    lines += [table(["mode", "target", "connections /s", "p50 ms", "p99 ms", "failures",
                     "packet-ins (new flow)", "OVS upcalls per connection",
                     "p50 vs direct (same phase)"], connect, "llrrrrrrr"),
              f"Least-load path, SYNs to the backend VIP at {syn['offered_per_s']:.0f}/s for "
              f"{syn['send_seconds']:.0f} s (up to {syn['active_flows_max']} active flows): "
              f"packet-in to flow-mod on the wire p50 {syn['p50_ms']} ms, p99 {syn['p99_ms']} "
              f"ms, max {syn['max_ms']} ms ({syn['answered']} of {syn['packet_ins']} answered); "
              f"in the controller (histogram bucket bounds), packet-in to rules sent p50 <= "
              f"{syn['controller_p50_ms']} ms, p99 <= {syn['controller_p99_ms']} ms, and the "
              f"decision alone (choose(), {syn['choose_decisions']:.0f} weighted-least-load "
              f"decisions) p50 <= {syn['choose_p50_us']} us, p99 <= {syn['choose_p99_us']} us. "
              f"Held long flows broken meanwhile: {ll['held_broken']} of "
              f"{ll['held_connections']}. CPU over the step, in cores: "
              f"{cpu_line(syn.get('cpu'))}. The controller's event loop over the step: "
              f"{stalls_line(syn.get('controller'))}.", "",
              "Established connections to the ui VIP while srv3-ui drains:", "",
              table(["mode", "connections", "on srv3-ui", "broken", "broken on srv3-ui",
                     "broken elsewhere", "slots moved"],
                    [[mode, d["connections"], d["per_instance"].get(DRAINED, 0), d["broken"],
                      d["broken_on_drained"], d["broken_on_others"],
                      "—" if d["share_of_slots_moved"] is None else d["share_of_slots_moved"]]
                     for mode, d in (("per-flow", pf["drain"]), ("data-plane", dp["drain"]))],
                    "lrrrrrr"),
              "Least-load decision on the pure core (benchmarks.decision_cost):", "",
              table(["pending flows per server", "p50 us", "p99 us", "p50 / p99 vs 10"],
                    [[f"{c['pending_per_server']:,}", c["decision"]["p50_us"],
                      c["decision"]["p99_us"], f"{c['p50_vs_first']} / {c['p99_vs_first']}"]
                     for c in r["decision_cost"]], "rrrr").rstrip("\n")]
    f = r.get("syn_flood")
    if f:
        t = f["transfer"]
        lines += ["", f"SYN flood (data-plane controller, packet-ins limited to "
                  f"{r.get('packet_in_limit_per_s')}/s per switch): {f['sent_per_s']} SYNs/s "
                  f"sent for {f['seconds']:.0f} s to the backend VIP (offered "
                  f"{f['offered_per_s']}/s, 10x the per-flow capacity of "
                  f"{f['capacity_per_s']}/s). Packet-ins that reached the controller: "
                  f"{f['packet_ins']}. REST /malb/status: {f['rest_requests']} answers, "
                  f"{f['rest_failures']} failures, p50 {f['rest_p50_ms']} ms, max "
                  f"{f['rest_max_ms']} ms. Running video stream: HTTP {t['http_code']}, "
                  f"{t['bytes']:,} of {t['expected_bytes']:,} bytes. Connections through the "
                  f"ui VIP meanwhile: {f['ui_vip_connect_during_flood']['per_s']}/s, p50 "
                  f"{f['ui_vip_connect_during_flood']['p50_ms']} ms, failures "
                  f"{f['ui_vip_connect_during_flood']['failures']}. Instances taken out "
                  f"during the flood: {f.get('instances_taken_out_during') or 'none'}; down "
                  f"after: {f['instances_down_after'] or 'none'}. Largest control-channel "
                  f"lag (health echo round trip): {f.get('channel_lag_max_s')} s.", "",
                  "Meter statistics:", "",
                  "```", *f["meter_stats"], "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m benchmarks.modes", description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=bounded(float, 0, 600, lo_open=True), default=5.0)
    p.add_argument("--workers", type=bounded(int, 1, 256), default=8)
    p.add_argument("--long-flows", type=bounded(int, 0, 5000), default=1000)
    p.add_argument("--hold", type=bounded(int, 4, 1000), default=100,
                   help="connections held through the ui VIP while an instance drains")
    p.add_argument("--syn-rate", type=bounded(float, 1, 20000), default=1000.0)
    p.add_argument("--syn-seconds", type=bounded(float, 1, 600), default=10.0,
                   help="SYNs to the backend VIP at --syn-rate for this long: with the held "
                        "long flows, about 10,000 active flows by the end")
    p.add_argument("--flood-seconds", type=bounded(float, 3, 600), default=10.0)
    p.add_argument("--out", default=os.path.join(WORK, "results", "bench"))
    args = p.parse_args(argv)
    require_testbed("the modes benchmark")
    os.makedirs(args.out, exist_ok=True)
    r = run(args.out, args.seconds, args.workers, args.long_flows, args.hold, args.syn_rate,
            args.syn_seconds, args.flood_seconds)
    command = lab.invocation("benchmarks.modes", argv or sys.argv[1:]).strip()
    md = f"# Controller modes\n\nCommand: `{command}`  \nCommit: {git_commit()}\n\n" + \
        markdown(r)
    lab.write_results(args.out, "modes", {"command": command, "commit": git_commit(), **r}, md,
                      default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
