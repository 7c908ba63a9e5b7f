"""Per-flow connection setup on the testbed, every figure against baselines measured in the
same round: the direct path, a minimal round-robin NAT Ryu app (benchmarks/naive_nat.py),
the same with the translation in Open vSwitch's connection tracker (benchmarks/naive_ct.py:
no rule per connection), MALB per flow (round robin and malb; with rule pairs, and in
tracker mode) and MALB in data-plane mode (per select-group size), in interleaved rounds.

    sudo .venv/bin/python -m benchmarks.fastpath [--rounds 3] [--rate 500] [--seconds 10]
        [--workers 8] [--dataplane-table-sizes 257,127] [--out results/bench]

One testbed (the paper's 4 servers, 2 clients, userspace OVS) with host agents and the
profiler running. Per round, each variant in turn (the order rotates from round to round):
the switch's rules, groups and meters are cleared, the variant's controller is started
(nothing else changes), and from a client:

- paced: --rate new connections per second for --seconds through the ui VIP (the direct
  path: to the ui instances in turn, over rules installed beforehand), open loop
  (benchmarks/connect.py --rate): connect latency p50, p90, p99, failures;
- capacity: --workers connecting threads, closed loop, for --seconds: connections per
  second;
- Open vSwitch's upcalls, its translations of OpenFlow actions and its revalidations set
  off by table changes per connection, the CPU of the controller, Open vSwitch, the
  profiler, the agents, the servers and the machine over the paced step, and for MALB the
  packet-ins per connection (and per kind), in data-plane mode the ui select group's slots
  moved to another instance, and its own histograms over that step: handling of a packet-in,
  and the event loop's lag.

Reported: per variant, medians over rounds with min and max, and per round the ratios to
naive_nat (capacity, p50, p99) and to the direct path (p50, p99). Results: fastpath.json and
fastpath.md in --out.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
import time

import yaml

from experiments.cpu_meters import CpuMeters, used
from benchmarks.modes import COVERAGE, VIP_UI, base_config, counted, direct_rules, \
    histogram, histogram_quantile, metrics_text, packet_ins, slots_moved
from common import lab
from common.cli import ArgumentParser, bounded, choice_list, number_list, require_testbed
from common.markdown import table
from common.paths import WORK
from common.procs import ROOT, Service, controller_argv, controller_service, git_commit
from experiments.stack import Stack, transitions_for
from ryu_apps.maglev import is_prime
from topologies.clean import clean_testbed

VARIANTS = ("direct", "naive_nat", "naive_ct", "malb-srr", "malb", "malb-srr-tracker",
            "malb-tracker", "malb-dataplane")


def clear_switches(cfg) -> None:
    """Every rule, group and meter a previous controller left: each variant starts alike."""
    for sw in cfg.testbed.switches:
        for what in ("del-flows", "del-groups", "del-meters"):
            subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", what, sw.name],
                           capture_output=True, timeout=10)


def connected(cfg) -> bool:
    """Whether every switch has a rule sending packets to the controller (the controller
    came and installed its base rules)."""
    for sw in cfg.testbed.switches:
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", sw.name],
                             capture_output=True, text=True, timeout=10).stdout
        if "CONTROLLER" not in out:
            return False
    return True


def controller_for(variant: str, stack: Stack, log: str) -> Service:
    c = stack.cfg.controller
    if variant in ("naive_nat", "naive_ct"):
        env = {"MALB_CONFIG": stack.config_path,
               "PYTHONPATH": os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH"))))}
        return Service(f"bench-{variant.replace('_', '-')}",
                       controller_argv(apps=["--ofp-tcp-listen-port", str(c.ofp_port),
                                             os.path.join(ROOT, "benchmarks", f"{variant}.py")]),
                       None, log, env).start()
    config = stack.config_path
    if variant.startswith("malb-dataplane"):
        size = int(variant.rsplit("-", 1)[1])
        data = copy.deepcopy(stack.data)
        data["controller"]["dataplane"] = {"short_flows": "switch", "table_size": size,
                                           "transitions": transitions_for(stack.testbed.datapath)}
        config = os.path.join(stack.run_dir, f"config-dataplane-{size}.yaml")
        with open(config, "w") as fh:
            yaml.safe_dump(data, fh, sort_keys=False)
    if variant.endswith("-tracker"):
        data = copy.deepcopy(stack.data)
        data["controller"]["dataplane"] = {"short_flows": "tracker"}
        config = os.path.join(stack.run_dir, "config-tracker.yaml")
        with open(config, "w") as fh:
            yaml.safe_dump(data, fh, sort_keys=False)
    policy = "srr" if variant in ("malb-srr", "malb-srr-tracker", "direct") else "malb"
    return controller_service(config, policy, log, c.rest_port).start()


def connect_cmd(cli, target: str, extra: str) -> dict:
    out = cli.cmd(f"{sys.executable} {ROOT}/benchmarks/connect.py --target {target} {extra}")
    r = json.loads(out.strip().splitlines()[-1])
    ms = (lambda v: None if v is None else round(v * 1e3, 3))
    return {"per_s": round(r["per_s"], 1), "connections": r["connections"],
            "failures": r["failures"], "late_starts": r.get("late_starts", 0),
            "p50_ms": ms(r["p50_s"]), "p90_ms": ms(r.get("p90_s")), "p99_ms": ms(r["p99_s"])}


def measure(variant: str, stack: Stack, meters: CpuMeters, args) -> dict:
    cfg = stack.cfg
    cli = stack.testbed.node("cli1")
    client = cfg.testbed.clients[0]
    switch = cfg.testbed.switches[0].name
    uis = cfg.instances_of("ui")
    ports = {h.name: h.switch_port for h in (*cfg.instances, *cfg.testbed.clients)}
    vip = f"{cfg.microservice('ui').vip}:{VIP_UI}"
    target = ",".join(f"{i.ip}:{VIP_UI}" for i in uis) if variant == "direct" else vip
    rest = cfg.controller.rest_port if variant.startswith("malb") or variant == "direct" \
        else None
    if variant == "direct":
        direct_rules(switch, client, uis, ports, add=True)
    cli.cmd(f"ping -c 1 -W 1 {cfg.microservice('ui').vip}")
    for inst in uis:
        cli.cmd(f"ping -c 1 -W 1 {inst.ip}")
    out: dict = {}
    try:
        before = metrics_text(rest) if rest else ""

        def paced() -> dict:
            # CPU over the step alone: counted() waits for the switch's counters around it
            cpu0, t0 = meters.read(), time.monotonic()
            r = connect_cmd(cli, target, f"--rate {args.rate} --seconds {args.seconds}")
            r["cpu"] = used(cpu0, meters.read(), time.monotonic() - t0)
            return r
        out["paced"] = counted(paced)
        after = metrics_text(rest) if rest else ""
        if rest:
            n = out["paced"]["connections"] or 1
            kinds0, kinds1 = packet_ins(before), packet_ins(after)
            pins = kinds1.get("new_flow", 0) - kinds0.get("new_flow", 0)
            out["paced"]["packet_ins_per_connection"] = round(pins / n, 3)
            out["paced"]["packet_ins_by_kind"] = {
                k: v - kinds0.get(k, 0) for k, v in kinds1.items() if v - kinds0.get(k, 0)}
            # in data-plane mode, a moved slot's new connections reach the controller
            out["paced"]["slots_moved"] = (slots_moved(after).get("ui", 0)
                                           - slots_moved(before).get("ui", 0))
            for key, name, labels in (("handler_packet_in", "malb_handler_seconds",
                                       'event="packet_in",'),
                                      ("event_loop_lag", "malb_event_loop_lag_seconds", "")):
                h0, h1 = histogram(before, name, labels), histogram(after, name, labels)
                if h1:
                    out["paced"][f"{key}_p50_ms"] = _ms(histogram_quantile(h0, h1, 0.5))
                    out["paced"][f"{key}_p99_ms"] = _ms(histogram_quantile(h0, h1, 0.99))
        time.sleep(cfg.controller.idle_timeout_s + 2)   # the paced step's rules idle out
        out["capacity"] = counted(lambda: connect_cmd(
            cli, target, f"--workers {args.workers} --seconds {args.seconds}"))
    finally:
        if variant == "direct":
            direct_rules(switch, client, uis, ports, add=False)
    return out


def _ms(v):
    return None if v is None else round(v * 1e3, 3)


def run(args, say=print) -> dict:
    clean_testbed(quiet=True)
    rounds = []
    stack = Stack(base_config(), os.path.join(args.out, "fastpath-run"), policy="srr")
    with stack:
        stack.wait_for(lambda: stack.controller_get("/malb/status")["profiler"]["reachable"],
                       60, "the controller reaches the profiler")
        meters = CpuMeters(stack)
        names = list(args.variants)
        for k in range(args.rounds):
            row = {}
            for variant in lab.rotated(names, k):
                say(f"[fastpath] round {k + 1}/{args.rounds}: {variant}")
                stack.controller.stop()
                clear_switches(stack.cfg)
                stack.controller = controller_for(
                    variant, stack, os.path.join(stack.run_dir, f"{variant}-{k + 1}.log"))
                stack.wait_for(lambda: connected(stack.cfg), 60,
                               f"{variant}'s rules on the switches")
                if variant.startswith("malb-dataplane"):
                    stack.wait_for(lambda: stack.controller_get("/malb/status")["dataplane"]
                                   ["microservices"]["ui"]["switches"], 60,
                                   "the ui select group")
                time.sleep(2.0)      # the rest of its start-up messages
                row[variant] = measure(variant, stack, meters, args)
                p, c = row[variant]["paced"], row[variant]["capacity"]
                say(f"[fastpath]   paced p50 {p['p50_ms']} ms, p99 {p['p99_ms']} ms, "
                    f"{p['failures']} failed; capacity {c['per_s']}/s")
            rounds.append(row)
        # the stack stops its own controller: give it back the kind it started with
        stack.controller.stop()
        clear_switches(stack.cfg)
        stack.controller = controller_for("malb-srr", stack,
                                          os.path.join(stack.run_dir, "controller-end.log"))
    clean_testbed(quiet=True)
    return {"rounds": rounds, "summary": summarise(rounds, names)}


def _spread(values) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def _ratio(a, b):
    return a / b if a is not None and b else None


def summarise(rounds: list[dict], names: list[str]) -> dict:
    out = {}
    for v in names:
        rs = [r[v] for r in rounds if v in r]
        s = {"paced_p50_ms": _spread(r["paced"]["p50_ms"] for r in rs),
             "paced_p99_ms": _spread(r["paced"]["p99_ms"] for r in rs),
             "paced_failures": _spread(r["paced"]["failures"] for r in rs),
             "capacity_per_s": _spread(r["capacity"]["per_s"] for r in rs),
             "upcalls_per_connection": _spread(r["paced"].get("upcalls_per_connection")
                                               for r in rs),
             "packet_ins_per_connection": _spread(r["paced"].get("packet_ins_per_connection")
                                                  for r in rs),
             "slots_moved": _spread(r["paced"].get("slots_moved") for r in rs),
             **{f"{c}_per_connection": _spread(r["paced"].get(f"{c}_per_connection")
                                               for r in rs) for c in COVERAGE},
             "ovs_cores": _spread(r["paced"].get("cpu", {}).get("ovs_cores") for r in rs),
             "controller_cores": _spread(r["paced"].get("cpu", {}).get("controller_cores")
                                         for r in rs)}
        for base in ("naive_nat", "direct"):
            pairs = [(r[v], r[base]) for r in rounds if v in r and base in r]
            s[f"capacity_vs_{base}"] = _spread(_ratio(a["capacity"]["per_s"],
                                                      b["capacity"]["per_s"]) for a, b in pairs)
            for q in ("p50", "p99"):
                s[f"paced_{q}_vs_{base}"] = _spread(_ratio(a["paced"][f"{q}_ms"],
                                                           b["paced"][f"{q}_ms"])
                                                    for a, b in pairs)
        out[v] = s
    return out


def markdown(result: dict, args) -> str:
    def cell(d, digits=2, unit=""):
        if not d:
            return "—"
        return f"{d['median']:.{digits}f}{unit} ({d['min']:.{digits}f}-{d['max']:.{digits}f})"

    rows = [[v, cell(s["paced_p50_ms"]), cell(s["paced_p99_ms"]),
             cell(s["paced_failures"], 0), cell(s["capacity_per_s"], 1),
             cell(s["upcalls_per_connection"]), cell(s["packet_ins_per_connection"]),
             cell(s["slots_moved"], 0),
             cell(s["paced_p50_vs_direct"], 2, "x"), cell(s["paced_p99_vs_direct"], 2, "x"),
             cell(s["capacity_vs_naive_nat"], 2, "x")]
            for v, s in result["summary"].items()]
    ovs_rows = [[v, cell(s.get("ovs_cores")), cell(s.get("controller_cores")),
                 cell(s.get("xlate_actions_per_connection"), 1),
                 cell(s.get("rev_flow_table_per_connection"), 3)]
                for v, s in result["summary"].items()]
    return ("## Per-flow connection setup, interleaved rounds\n\n"
            f"{args.rounds} rounds; paced at {args.rate:g} new connections/s for "
            f"{args.seconds:g} s, capacity with {args.workers} closed-loop workers; medians "
            "over rounds (min-max); ratios to the baseline of the same round.\n\n" +
            table(["variant", "paced p50 ms", "paced p99 ms", "failures", "capacity /s",
                   "OVS upcalls per connection", "packet-ins per connection",
                   "select-group slots moved", "p50 vs direct", "p99 vs direct",
                   "capacity vs naive_nat"], rows, "lrrrrrrrrrr") +
            "\n\n## Open vSwitch and the controller over the paced step\n\n"
            "Cores used (CPU seconds over the step's seconds); ovs-vswitchd's translations "
            "of OpenFlow actions and its revalidations set off by table changes "
            "(coverage counters xlate_actions, rev_flow_table), per connection.\n\n" +
            table(["variant", "ovs-vswitchd cores", "controller cores",
                   "translations per connection", "table-change revalidations per connection"],
                  ovs_rows, "lrrrr"))


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m benchmarks.fastpath", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=bounded(int, 1, 20), default=3)
    p.add_argument("--variants", type=choice_list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--dataplane-table-sizes", type=number_list(int, 61, 509), default=[257],
                   help="malb-dataplane runs once per select-group size (primes; at most "
                        "256: Open vSwitch's dp_hash, above: its default method)")
    p.add_argument("--rate", type=bounded(float, 1, 5000), default=500.0)
    p.add_argument("--seconds", type=bounded(float, 1, 120), default=10.0)
    p.add_argument("--workers", type=bounded(int, 1, 64), default=8)
    p.add_argument("--out", default=os.path.join(WORK, "results", "bench"))
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    bad = [n for n in args.dataplane_table_sizes if not is_prime(n)]
    if bad:
        p.error(f"--dataplane-table-sizes: {bad[0]} is not a prime")
    if "malb-dataplane" in args.variants:
        k = args.variants.index("malb-dataplane")
        args.variants[k:k + 1] = [f"malb-dataplane-{n}" for n in args.dataplane_table_sizes]
    require_testbed("the fast-path benchmark")
    for base in ("naive_nat", "direct"):
        if base not in args.variants:
            args.variants.append(base)
    os.makedirs(args.out, exist_ok=True)
    try:
        result = run(args)
    except KeyboardInterrupt:          # ^C or SIGTERM: the testbed came down on the way
        print("fastpath: interrupted; nothing written", file=sys.stderr)
        return 130
    command = lab.invocation("benchmarks.fastpath", argv or sys.argv[1:]).strip()
    md = f"# Per-flow connection setup\n\nCommand: `{command}`  \nCommit: {git_commit()}\n\n" \
        + markdown(result, args)
    lab.write_results(args.out, "fastpath", {"command": command, "commit": git_commit(),
                                             **result}, md, default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
