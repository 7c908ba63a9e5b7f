"""Controller benchmark: MALB against Ryu's simple_switch_13, same topology, same run; then
MALB's modes on one topology (benchmarks/modes.py).

    sudo .venv/bin/python -m benchmarks.controller [--rates 200,1000] [--seconds 5]
                                                   [--parts latency,modes]

Part `latency`, for each app, on the paper testbed (4 servers, userspace OVS):
1. packet-in to flow-mod latency (p50, p99) measured on the wire (benchmarks/ofcapture.py)
   while a client sends frames that each start a new flow at the controller, at each
   offered rate: TCP SYNs to the VIP from fresh source ports (MALB decides and installs a
   NAT rule pair), or frames from fresh source MACs (simple_switch_13 learns the MAC and
   installs a flow);
2. new-flow set-up rate (measured first, on a fresh controller): closed-loop TCP
   connection set-ups from the client for a few seconds, to the VIP (MALB) or straight to
   the four ui instances in turn (simple_switch_13, whose rules already cover the host
   pairs: what the data path gives without per-flow control).
Between offered rates the earlier flows' rules are left to expire (idle timeout + 5 s).
Part `modes`: per-flow round robin, per-flow least load with agents, the profiler and 1,000
held long flows, the data-plane select group, the direct path with rules pre-installed,
connections that break when an instance drains, a SYN flood, and the decision's cost
(benchmarks/modes.py says how).
Results: results/bench/controller.json and .md (also printed).
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time

from benchmarks import modes
from benchmarks.ofcapture import capture_latency, ms
from common import lab
from common.cli import ArgumentParser, bounded, choice_list, number_list, require_testbed
from common.config import load_config
from common.markdown import table
from common.paths import WORK
from common.procs import ROOT, Service, controller_argv, controller_service, framework_app, \
    git_commit
from topologies.clean import clean_testbed
from topologies.testbed import Testbed, TestbedOptions

APPS = ("malb", "simple_switch_13")
PARTS = ("latency", "modes")


def run_app(app: str, rates: list[float], seconds: float, connect_s: float, workers: int,
            out_dir: str, keep_pcap: bool = False) -> dict:
    cfg = load_config(overrides={"testbed": {"clients": 1}})
    log = os.path.join(out_dir, f"{app}.log")
    if app == "malb":
        ctl = controller_service(cfg.source, "malb", log)
    else:
        ctl = Service("bench-simple-switch",
                      controller_argv(apps=[framework_app("app.simple_switch_13")]), None, log)
    ctl.start()
    time.sleep(2)
    result = {"app": app, "rates": []}
    try:
        with Testbed(cfg, TestbedOptions(wait_controller_s=30)) as tb:
            result.update(backend=tb.backend, datapath=tb.datapath)
            missing = tb.wait_services()
            assert not missing, missing
            cli = tb.node("cli1")
            target = next(i for i in cfg.instances if i.name == "srv1-ui")
            vip = cfg.microservice("ui")
            c = cfg.testbed.clients[0]
            # warm up: ARP everywhere, MAC learning for the learning switch
            for inst in cfg.instances_of("ui"):
                cli.cmd(f"ping -c 1 -W 1 {inst.ip}")
                tb.node(inst.name).cmd(f"ping -c 1 -W 1 {c.ip}")
            cli.cmd(f"ping -c 1 -W 1 {vip.vip}")
            # the learning switch gets the same spread over the ui instances that MALB's
            # round robin gives, so both compare the network path, not one busy instance
            dest = f"{vip.vip}:{vip.port}" if app == "malb" else ",".join(
                f"{i.ip}:{vip.port}" for i in cfg.instances_of("ui"))
            out = cli.cmd(f"{sys.executable} {ROOT}/benchmarks/connect.py --target {dest} "
                          f"--workers {workers} --seconds {connect_s}")
            conn = json.loads(out.strip().splitlines()[-1])
            result["connect"] = {"target": dest, "per_s": round(conn["per_s"], 1),
                                 "p50_ms": ms(conn["p50_s"]), "p99_ms": ms(conn["p99_s"]),
                                 "failures": conn["failures"], "workers": workers}
            settle = cfg.controller.idle_timeout_s + 5
            first_key = 0       # every frame of the run starts a flow never seen before
            for rate in rates:
                # start every rate from the same state: earlier flows' rules have expired
                time.sleep(settle)
                if app == "malb":
                    gen = (f"syn --dst-mac {cfg.controller.vip_mac} --dst-ip {vip.vip} "
                           f"--dport {vip.port}")
                else:
                    gen = f"mac --dst-mac {target.mac} --dst-ip {target.ip}"
                gen += f" --first-key {first_key}"
                first_key += int(rate * seconds)
                pcap = os.path.join(out_dir, f"{app}-{int(rate)}.pcap")
                result["rates"].append(capture_latency(
                    cli, c, gen, rate, seconds, pcap, "syn" if app == "malb" else "mac",
                    keep_pcap))
    finally:
        ctl.stop()
        clean_testbed(quiet=True)
    return result


def markdown(results: list[dict], command: str) -> str:
    lines = ["# Controller benchmark", "",
             f"Command: `{command}`  ", f"Machine: {os.cpu_count()} CPUs, "
             f"{platform.platform()}, Python {platform.python_version()}; testbed: "
             + "; ".join(sorted({f"{r.get('backend')}, {r.get('datapath')} datapath"
                                 for r in results})), "",
             "## Packet-in to flow-mod latency (measured on the OpenFlow connection)", "",
             table(["app", "offered /s", "packet-ins", "answered", "answered /s", "p50 ms",
                    "p99 ms", "max ms"],
                   [[r["app"], f"{x['offered_per_s']:.0f}", x["packet_ins"], x["answered"],
                     f"{x['answered_per_s'] or 0:.0f}", x["p50_ms"], x["p99_ms"], x["max_ms"]]
                    for r in results for x in r["rates"]], "lrrrrrrr"),
             "## New-flow set-up rate (TCP connect from a client, closed loop)", ""]
    connect = []
    for r in results:
        c = r["connect"]
        target = c["target"] if "," not in c["target"] else \
            f"{len(c['target'].split(','))} ui instances in turn"
        connect.append([r["app"], target, c["per_s"], c["p50_ms"], c["p99_ms"], c["failures"]])
    return "\n".join(lines) + "\n" + table(
        ["app", "target", "connections /s", "p50 ms", "p99 ms", "failures"], connect, "llrrrr")


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m benchmarks.controller",
                       description=__doc__.split("\n")[0])
    p.add_argument("--rates", type=number_list(float, 0, 100000, lo_open=True),
                   default=[200.0, 1000.0], help="offered new flows per second")
    p.add_argument("--seconds", type=bounded(float, 0, 3600, lo_open=True), default=5.0)
    p.add_argument("--connect-seconds", type=bounded(float, 0, 3600, lo_open=True),
                   default=5.0)
    p.add_argument("--workers", type=bounded(int, 1, 256), default=8)
    p.add_argument("--out", default=os.path.join(WORK, "results", "bench"))
    p.add_argument("--apps", type=choice_list(APPS), default=list(APPS))
    p.add_argument("--keep-pcap", action="store_true", help="keep the captures in --out")
    p.add_argument("--parts", type=choice_list(PARTS), default=list(PARTS))
    p.add_argument("--long-flows", type=bounded(int, 0, 5000), default=1000,
                   help="modes: long flows held open during the least-load step")
    p.add_argument("--flood-seconds", type=bounded(float, 3, 600), default=10.0)
    args = p.parse_args(argv)
    require_testbed("the controller benchmark")
    rates, apps = args.rates, args.apps
    os.makedirs(args.out, exist_ok=True)
    clean_testbed(quiet=True)
    results, modes_result = [], None
    for app in apps if "latency" in args.parts else ():
        print(f"[bench] {app}: rates {rates}, {args.seconds} s each", flush=True)
        results.append(run_app(app, rates, args.seconds, args.connect_seconds, args.workers,
                               args.out, args.keep_pcap))
    if "modes" in args.parts:
        print("[bench] modes on one topology", flush=True)
        modes_result = modes.run(args.out, args.connect_seconds, args.workers, args.long_flows,
                                 100, 1000.0, 10.0, args.flood_seconds)
    flags = argv or sys.argv[1:]
    # as it always was: a space after the module even with no flags (the JSON keeps it)
    command = lab.invocation("benchmarks.controller", flags) + ("" if flags else " ")
    md = (markdown(results, command.strip()) if results else
          f"# Controller benchmark\n\nCommand: `{command.strip()}`\n")
    if modes_result:
        md += "\n" + modes.markdown(modes_result)
    lab.write_results(args.out, "controller", {"command": command, "commit": git_commit(),
                                               "results": results, "modes": modes_result},
                      md, default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
