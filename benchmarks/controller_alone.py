"""The controller alone, driven by an emulated switch (benchmarks/ofswitch.py), as cbench
drives one: MALB's per-flow path against a minimal round-robin NAT Ryu app
(benchmarks/naive_nat.py) and Ryu's simple_switch_13, in interleaved rounds.

    .venv/bin/python -m benchmarks.controller_alone [--rounds 3] [--rates 500,1000]
        [--seconds 10] [--out results/bench]

No root, no Open vSwitch, no containers: each app runs in its own ryu-manager on private
ports (OpenFlow --ofp-port, REST --rest-port), with health checks off and the profiler
pointed at a closed port (MALB then decides as it does before the profiler's first answer),
or with --profiler a profiler of its own (the real one, on --profiler-port, no agents), so
that the flows' records are reported and let go as on the testbed. With --fins S, each
flow MALB watches ends S seconds after its watch was installed: the emulated switch sends
the instance's FIN as the watch would (S below the idle timeout, 10 s: rules idle out
here, the watch with them).
Per round, each app in turn (the order rotates from round to round):

- paced: SYNs to the ui VIP at each of --rates per second, --warmup seconds (the flow table
  reaches its steady size: rules idle out after the idle timeout) then --seconds measured;
  latency from the packet-in sent to the packet-out carrying the SYN back;
- capacity: --outstanding SYNs in flight at all times for --seconds: answers per second;
- for MALB with policy malb, least load: --long-flows SYNs to the video VIP from the second
  client, whose rules never idle out (held long flows), then SYNs to the backend VIP (a
  long-flow microservice: the weighted least-load decision) at --ll-rate per second.

Each phase also records the app's CPU seconds (its process's user + system time), so the
CPU per new flow compares even when the machine is busy with something else, and for MALB
its own histograms over the phase: each event kind's handling and the event loop's lag. Reported per
app: medians over rounds with min-max, and ratios to naive_nat's of the same round.
Results: controller_alone.json and controller_alone.md in --out.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import statistics
import sys
import tempfile
import time

import yaml

from benchmarks import ofswitch
from benchmarks.modes import handler_quantiles, metrics_text
from common import lab
from common.cli import ArgumentParser, bounded, choice_list, number_list, port_number
from common.config import DEFAULT_MICROSERVICES, parse_config_file_data
from common.markdown import table
from common.paths import WORK
from common.procs import ROOT, Service, ServiceError, controller_argv, framework_app, git_commit, \
    python_service
from common.state import process_cpu_seconds
from ryu_apps import ofwire

VIP_VIDEO, VIP_UI, VIP_BACKEND = 8001, 8002, 8003
# name -> (what ryu-manager loads, MALB policy)
APPS = {
    "malb-srr": ("ryu_apps/malb.py", "srr"),
    "malb": ("ryu_apps/malb.py", "malb"),
    "naive_nat": ("benchmarks/naive_nat.py", None),
    "simple_switch_13": ("app.simple_switch_13", None),     # the framework's own
}
BASELINE = "naive_nat"


def config(rest_port: int, ofp_port: int, profiler_port: int | None = None,
           history: str = "") -> dict:
    return {"testbed": {"clients": 2},
            "microservices": copy.deepcopy(DEFAULT_MICROSERVICES),
            # nothing listens on port 9: the exchange fails at once, every period
            "profiler": {"url": "http://127.0.0.1:9"} if profiler_port is None else
            {"listen_port": profiler_port, "history_path": history},
            "controller": {"health": {"method": "none"}, "rest_port": rest_port,
                           "ofp_port": ofp_port}}


def app_service(name: str, config_path: str, ofp_port: int, rest_port: int,
                log: str, base_tree: str | None = None) -> Service:
    """`name@base`: the app from base_tree (another checkout, e.g. a git worktree of the
    commit before a change), run by the same Python."""
    app, _, at = name.partition("@")
    root = base_tree if at else ROOT
    target, policy = APPS[app]
    argv = ["--ofp-tcp-listen-port", str(ofp_port), "--wsapi-port", str(rest_port)]
    if target.endswith(".py"):
        if "malb" in target:
            argv += ["--user-flags", os.path.join(root, "ryu_apps", "flags.py")]
        target = os.path.join(root, target)
    else:
        target = framework_app(target)
    env = {"MALB_CONFIG": config_path,
           "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    if policy:
        env["MALB_POLICY"] = policy
    ready = f"http://127.0.0.1:{rest_port}/malb/status" if policy else None
    return Service(f"alone-{name}", controller_argv(apps=argv + [target]), ready, log, env)


async def measure_app(name: str, cfg, pid: int, args) -> dict:
    """The app's phases over one emulated switch, closed however they end."""
    c2 = cfg.testbed.clients[1]
    sw = ofswitch.Emulated("127.0.0.1", args.ofp_port,
                           held=(bytes(int(x) for x in c2.ip.split(".")),),
                           fins_after=args.fins,
                           fins_from=(cfg.microservices[0].vip, cfg.controller.vip_mac))
    try:
        await sw.connect()
        return await measure_phases(name, cfg, sw, pid, args)
    finally:
        sw.close()


async def measure_phases(name: str, cfg, sw: ofswitch.Emulated, pid: int, args) -> dict:
    vip, vip_mac = cfg.microservices[0].vip, cfg.controller.vip_mac
    c1, c2 = cfg.testbed.clients[:2]
    await asyncio.sleep(1.0)             # the app's start-up messages
    sw.check()
    app = name.partition("@")[0]
    if app == "simple_switch_13":
        # it learns where the VIP's MAC is, so each SYN costs it a rule and a packet-out
        sw.send_frame(ofwire_frame_from(vip_mac, vip, c1), 99)
        await asyncio.sleep(0.2)
    out: dict = {}

    rest = args.rest_port if APPS[name.partition("@")[0]][1] else None

    async def phase(key: str, run, flows_sent) -> None:
        """One phase, then the wait until its rules idled out: its CPU per flow covers a
        flow's whole life at the controller (packet-in, rules, statistics, removal); for
        MALB, its handler and event-loop histograms over the phase."""
        before = process_cpu_seconds(pid)
        text0 = metrics_text(rest) if rest else ""
        r = await run
        text1 = metrics_text(rest) if rest else ""
        await sw.drained()
        sw.check()                       # a switch lost in the wait has no rules to drain
        used = process_cpu_seconds(pid) - before
        if rest:
            r["controller"] = handler_quantiles(text0, text1)
        n = flows_sent(r)
        r["cpu_s"] = round(used, 3)
        r["cpu_ms_per_flow"] = round(1e3 * used / n, 3) if n else None
        out[key] = r

    ui = (lambda c, p: ofswitch.syn_frame(vip_mac, c, vip, p, VIP_UI))
    ports = ofswitch.Ports([c1])
    sent = (lambda r: r["sent"])
    for rate in args.rates:
        await phase(f"paced_{rate:g}", ofswitch.paced(sw, ports, ui, rate, args.warmup,
                                                      args.seconds), sent)
    await phase("capacity", ofswitch.closed_loop(sw, ports, ui, args.outstanding,
                                                 args.seconds), sent)
    if app == "malb":
        video = (lambda c, p: ofswitch.syn_frame(vip_mac, c, vip, p, VIP_VIDEO))
        backend = (lambda c, p: ofswitch.syn_frame(vip_mac, c, vip, p, VIP_BACKEND))
        await ofswitch.paced(sw, ofswitch.Ports([c2]), video, 300, 0, args.long_flows / 300)
        await phase("least_load", ofswitch.paced(sw, ports, backend, args.ll_rate,
                                                 args.warmup, args.seconds), sent)
    out["switch"] = {"flow_mods": sw.flow_mods, "packet_outs": sw.packet_outs,
                     "flow_removed_sent": sw.removed_sent, "fins_sent": sw.fins_sent,
                     "rules_at_end": len(sw.rules)}
    return out


def ofwire_frame_from(src_mac: str, src_ip: str, to) -> bytes:
    """A frame from the VIP's MAC (so a learning switch knows its port)."""
    return ofwire.tcp_frame(to.mac, src_mac, src_ip, to.ip, 80, 1, 1, flags=ofwire.TCP_ACK)


def run(args, say=print) -> dict:
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="malb-alone-") as scratch:
        return run_in(args, os.path.join(scratch, "profiler.sqlite"), say)


def run_in(args, history: str, say) -> dict:
    """run(), the profiler's history (with --profiler) at `history`."""
    data = config(args.rest_port, args.ofp_port, args.profiler_port if args.profiler else None,
                  history)
    config_path = os.path.join(args.out, "controller_alone-config.yaml")
    with open(config_path, "w") as fh:
        yaml.safe_dump(data, fh, sort_keys=False)
    cfg = parse_config_file_data(data, config_path)
    rounds = []
    names = list(args.apps)
    for k in range(args.rounds):
        row = {}
        for name in lab.rotated(names, k):
            say(f"[alone] round {k + 1}/{args.rounds}: {name}")
            log = os.path.join(args.out, f"controller_alone-{name}-{k + 1}.log")
            svc = app_service(name, config_path, args.ofp_port, args.rest_port, log,
                              args.base_tree)
            with profiler_service(args, config_path, history, k, name), svc:
                try:
                    row[name] = asyncio.run(measure_app(name, cfg, svc.proc.pid, args))
                except ofswitch.SwitchLost as exc:
                    # Ryu closes a switch whose reads stall past its socket timeout (5 s)
                    # and logs it at debug level only: an emulator starved of CPU does that
                    row[name] = {"error": str(exc)}
                    say(f"[alone]   {name} lost: {exc}; its log: {log}")
            time.sleep(1.0)
        rounds.append(row)
        say(f"[alone]   {row_line(row)}")
    return {"rounds": rounds, "lost": lost_runs(rounds), "summary": summarise(rounds, names)}


def profiler_service(args, config_path: str, history: str, k: int, name: str):
    """A fresh profiler for one MALB run (--profiler), or nothing."""
    if not args.profiler or not APPS[name.partition("@")[0]][1]:
        return contextlib.nullcontext()
    for path in (history, history + "-wal", history + "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
    return python_service("alone-profiler", ["profiler", "--config", config_path],
                          f"http://127.0.0.1:{args.profiler_port}/health",
                          os.path.join(args.out, f"controller_alone-profiler-{name}-{k + 1}.log"))


def row_line(row: dict) -> str:
    return "; ".join(f"{n}: lost" if "error" in r else
                     f"{n}: {r['capacity']['answered_per_s']}/s" for n, r in row.items())


def lost_runs(rounds: list[dict]) -> list[str]:
    """'app in round k: why' for every app run that did not finish."""
    return [f"{name} in round {k + 1}: {r['error']}" for k, row in enumerate(rounds)
            for name, r in row.items() if "error" in r]


def _stat(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def summarise(rounds: list[dict], names: list[str]) -> dict:
    """Per app and phase: median, min and max over rounds of each figure, and of its ratio
    to the baseline's figure in the same round."""
    out: dict = {}
    for name in names:
        phases = sorted({p for r in rounds for p in r.get(name, {})
                         if p not in ("switch", "error")})
        for phase in phases:
            for key in ("answered_per_s", "p50_ms", "p99_ms", "cpu_ms_per_flow", "lost"):
                vals = [r[name][phase].get(key) for r in rounds if phase in r.get(name, {})]
                ratios = [r[name][phase][key] / r[BASELINE][phase][key]
                          for r in rounds if phase in r.get(name, {})
                          and phase in r.get(BASELINE, {})
                          and r[name][phase].get(key) is not None
                          and r[BASELINE][phase].get(key)]
                out.setdefault(name, {}).setdefault(phase, {})[key] = {
                    "value": _stat(vals), "vs_baseline": _stat(ratios)}
    return out


def markdown(result: dict, args) -> str:
    s = result["summary"]

    def cell(d, digits=2):
        if not d or not d.get("value"):
            return "—"
        v = d["value"]
        text = f"{v['median']:.{digits}f} ({v['min']:.{digits}f}-{v['max']:.{digits}f})"
        return text

    def ratio(d):
        r = d.get("vs_baseline") if d else None
        return "—" if not r else f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})"

    rows = []
    for name in s:
        for phase, figs in s[name].items():
            rows.append([name, phase, cell(figs["answered_per_s"], 1), cell(figs["p50_ms"]),
                         cell(figs["p99_ms"]), cell(figs["cpu_ms_per_flow"], 3),
                         ratio(figs["answered_per_s"]), ratio(figs["p50_ms"]),
                         ratio(figs["cpu_ms_per_flow"])])
    lost = result.get("lost") or []
    lost_text = ("\n\nNot finished, left out of the medians: " + "; ".join(lost) + "."
                 if lost else "")
    return ("## The controller alone, driven by an emulated switch\n\n"
            f"{args.rounds} interleaved rounds; medians over rounds (min-max); ratios to "
            f"{BASELINE} in the same round.\n\n" +
            table(["app", "phase", "answered /s", "p50 ms", "p99 ms", "CPU ms per flow",
                   "answered vs naive", "p50 vs naive", "CPU vs naive"], rows, "llrrrrrrr")
            + lost_text)


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m benchmarks.controller_alone",
                       description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=bounded(int, 1, 50), default=3)
    p.add_argument("--apps", type=choice_list(APPS), default=list(APPS),
                   help=f"comma-separated, of {', '.join(APPS)}")
    p.add_argument("--rates", type=number_list(float, 1, 20000), default=[500.0, 1000.0])
    p.add_argument("--warmup", type=bounded(float, 0, 600), default=12.0)
    p.add_argument("--seconds", type=bounded(float, 1, 600), default=10.0)
    p.add_argument("--outstanding", type=bounded(int, 1, 1000), default=16)
    p.add_argument("--long-flows", type=bounded(int, 1, 20000), default=1000)
    p.add_argument("--ll-rate", type=bounded(float, 1, 20000), default=1000.0)
    p.add_argument("--base-tree", metavar="DIR",
                   help="another checkout (a git worktree of an earlier commit): each app of "
                        "--apps-at-base runs from it too, as <app>@base, in the same rounds")
    p.add_argument("--apps-at-base", type=choice_list(APPS), default=[],
                   help="apps to run from --base-tree as well")
    p.add_argument("--ofp-port", type=port_number, default=16633)
    p.add_argument("--rest-port", type=port_number, default=18081)
    p.add_argument("--profiler", action="store_true",
                   help="a profiler of its own for each app's run (default: none answers)")
    p.add_argument("--profiler-port", type=port_number, default=19200)
    p.add_argument("--fins", type=bounded(float, 0.1, 9.5), default=None, metavar="S",
                   help="each watched flow ends S s after its FIN watch is installed "
                        "(below the 10 s idle timeout; default: none ends)")
    p.add_argument("--out", default=os.path.join(WORK, "results", "bench"))
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if bool(args.base_tree) != bool(args.apps_at_base):
        p.error("--base-tree and --apps-at-base go together")
    if args.base_tree and not os.path.isfile(os.path.join(args.base_tree, "ryu_apps", "malb.py")):
        p.error(f"--base-tree: {args.base_tree} is not a checkout of this project")
    args.apps += [f"{a}@base" for a in args.apps_at_base]
    if BASELINE not in args.apps:
        args.apps.append(BASELINE)
    try:
        result = run(args)
    except (ServiceError, OSError) as exc:  # an app that never started; a socket or file failed
        print(f"controller_alone: {exc}", file=sys.stderr)
        return 1
    command = lab.invocation("benchmarks.controller_alone", argv or sys.argv[1:],
                             sudo=False).strip()
    md = f"# The controller alone\n\nCommand: `{command}`  \nCommit: {git_commit()}\n\n" + \
        markdown(result, args)
    lab.write_results(args.out, "controller_alone",
                      {"command": command, "commit": git_commit(), **result}, md, default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
