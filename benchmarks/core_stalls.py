"""Benchmark: the controller core's long stretches at a least-load flow rate, each a stall of
the controller's event loop, against another checkout of it (the commit before a change) in
interleaved rounds. No root, no switch; every figure is CPU time (time.thread_time), so
another job on the machine slows it without changing it.

    .venv/bin/python -m benchmarks.core_stalls [--rounds 3] [--flows 70000] [--rate 1000]
        [--idle 10] [--held 1000] [--job-s 10] [--short-flows 30000] [--short-rate 500]
        [--profiler] [--fins S] [--base-tree DIR] [--out results/bench]

Each run is a fresh process (`--child`, its imports from the tree it measures) with three
parts:

- the garbage collector: the real ControllerCore, policy malb, on controller_alone's
  configuration, driven as benchmarks.controller_alone's least-load
  phase drives the controller: a switch connects, --held video flows start (long flows that
  stay), the heap is collected and frozen as the controller does after start-up, then
  --flows SYNs to the backend VIP (a long-flow microservice: the weighted least-load
  decision) at --rate per second of simulated time, each flow's two rules idling out
  --idle s after it started (a flow-removed for each, with the traffic a short exchange
  would have counted), the flow-statistics slices the core asks for answered from the
  rules it installed, as the emulated switch answers them; every collection timed. A
  SYN that starts no flow (the flow cap, a client port still in use) stops the run. With
  --profiler, a profiler that answers at once (no HTTP) every monitoring period: the
  records reported are let go, as on the testbed; without it they are kept for a
  profiler that is away, as in controller_alone. With --fins S, each back-end flow's FIN
  watch copies its FIN S s after it started, as the testbed's jobs end; without it no
  flow ends before its dormant limit, as with controller_alone's emulated switch;
- a server's sample: the open-flows estimator (estimators/open_flows.py) after 130 s of
  back-end jobs at --rate per second over four servers, each ending --job-s after it
  started (so 120 s of ended jobs are kept, as the estimator keeps them), then one
  sample's attribution per server (OpenFlows.attribute, what the profiler's answer does
  each period) and one count at a time 5 s back per server (OpenFlows.costs, what the
  first decision on a server's new data does), each repeated and timed;
- short flows' ends: a fresh ControllerCore, policy malb, --short-flows SYNs to the ui VIP
  (a short-flow microservice, whose flows malb follows to their ends) at --short-rate per
  second, driven as in the first part; each flow's rules idle out --idle s after it
  started, so its end is dated back to its last traffic (a client that resets its
  connections never shows a FIN); every packet-in and every flow-removed timed.

Reported per tree: per generation the collections, their p50 and max and the sum (ms); the
packet-in p50/p99; the objects the collector tracks and the flow records kept at the end;
a sample's attribution and a past count, per server (ms); a short flow's packet-in and
flow-removed p50/p99 (ms); medians over rounds (min-max), and ratios to --base-tree's in
the same round. In the controller the event loop stands
still for every collection (malb_gc_pause_seconds) and every profiler answer.
Results: core_stalls.json and core_stalls.md in --out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys

if __name__ == "__main__" and "--child" in sys.argv:
    # the child measures the tree on PYTHONPATH: nothing of this checkout comes first
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(
        os.path.abspath(__file__))]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def added_nat_cookies(messages: bytes, tag: int | None = None) -> list[int]:
    """The cookies of the NAT rules (or of the rules under `tag`: FIN_TAG, the FIN
    watches) added in a run of concatenated OpenFlow messages."""
    from ryu_apps.flows import COOKIE_TAG
    from ryu_apps.ofwire import OFPFC_ADD, OFPT_FLOW_MOD
    tag = COOKIE_TAG if tag is None else tag
    out, off = [], 0
    while off + 8 <= len(messages):
        msg_type, length = messages[off + 1], struct.unpack_from("!H", messages, off + 2)[0]
        if msg_type == OFPT_FLOW_MOD and messages[off + 25] == OFPFC_ADD:
            cookie = struct.unpack_from("!Q", messages, off + 8)[0]
            if cookie >> 48 == tag:
                out.append(cookie)
        off += max(length, 8)
    return out


SLICE_BITS = 1023       # the low bits of a NAT rule's cookie a statistics slice can select


def exchanged(age: float) -> tuple[int, int]:
    """A rule's (bytes, packets) after `age` seconds of a short exchange."""
    return 100 + int(150 * age), 1 + int(age)


def flow_stats_requests(messages: bytes) -> list[tuple[int, int]]:
    """(cookie, cookie mask) of each flow-statistics request in concatenated messages."""
    from ryu_apps.ofwire import OFPMP_FLOW, OFPT_MULTIPART_REQUEST
    out, off = [], 0
    while off + 8 <= len(messages):
        msg_type, length = messages[off + 1], struct.unpack_from("!H", messages, off + 2)[0]
        if msg_type == OFPT_MULTIPART_REQUEST and \
                struct.unpack_from("!H", messages, off + 8)[0] == OFPMP_FLOW:
            out.append(struct.unpack_from("!QQ", messages, off + 32))
        off += max(length, 8)
    return out


def drive(ctl, frame, in_port: int, flows: int, rate: float, idle: float,
          now: float, exchange_s: float | None = None, ends=None
          ) -> tuple[list[float], list[float], int, int]:
    """`flows` SYNs (frame(k)) at `rate` per second of simulated time from `now`, each
    flow's rules idling out `idle` s after it started (a flow-removed for each, with the
    traffic a short exchange would have counted), the statistics slices the core asks for
    answered from the rules it installed, as the emulated switch answers them; every
    `exchange_s`, if given, an exchange with a profiler that answers (profiler_exchange);
    with `ends` (seconds, fin_frame), each flow's FIN watch copies its instance's FIN
    (fin_frame(k)) that long after it started, before its rules idle out.
    Returns the CPU seconds of each packet-in and each flow-removed, the flows started and
    the statistics entries answered."""
    import collections
    import time

    from ryu_apps.core import FlowStat
    from ryu_apps.flows import FIN_TAG
    alive: collections.deque = collections.deque()        # (start, its rules' cookies)
    ending: collections.deque = collections.deque()       # (its FIN's time, watch cookie, k)
    # the rules on the switch by the low bits of their cookies (a statistics slice's), as
    # {cookie: installed}: what a slice's request is answered from
    rules: dict[int, dict[int, float]] = {}
    packet_in, removed, new_flows, next_poll, answered = [], [], 0, now, 0
    next_exchange = now + (exchange_s or 0.0)
    for k in range(flows):
        t0 = time.thread_time()
        result = ctl.packet_in(1, in_port, frame(k), now)
        packet_in.append(time.thread_time() - t0)
        new_flows += result.kinds.count("new_flow")
        # tuples of numbers: the collector stops following the driver's own records
        cookies = tuple(c for _, m in result.sends for c in added_nat_cookies(m))
        alive.append((now, cookies))
        if ends:
            ending.extend((now + ends[0], c, k) for _, m in result.sends
                          for c in added_nat_cookies(m, FIN_TAG))
        while ending and ending[0][0] <= now:
            _, cookie, ended = ending.popleft()
            ctl.packet_in(1, in_port, ends[1](ended), now, cookie)
        for cookie in cookies:
            rules.setdefault(cookie & SLICE_BITS, {})[cookie] = now
        while alive and alive[0][0] <= now - idle:
            _, cookies = alive.popleft()
            for cookie in cookies:      # idled out after a short exchange
                del rules[cookie & SLICE_BITS][cookie]
                t0 = time.thread_time()
                ctl.flow_removed(1, cookie, idle, *exchanged(idle), 0, now)
                removed.append(time.thread_time() - t0)
        if now >= next_poll:            # when the core's statistics loop asks
            polled = ctl.poll_stats(now)
            next_poll = now + polled.next_in_s
            for cookie, mask in flow_stats_requests(b"".join(m for _, m in polled.sends)):
                entries = [FlowStat(c, now - t, *exchanged(now - t), {}, ())
                           for low in range(cookie & SLICE_BITS, SLICE_BITS + 1,
                                            (mask & SLICE_BITS) + 1)
                           for c, t in rules.get(low, {}).items()]
                answered += len(entries)
                ctl.flow_stats(1, entries, now)
        if exchange_s and now >= next_exchange:
            profiler_exchange(ctl, now)
            next_exchange = now + exchange_s
        now += 1 / rate
    return packet_in, removed, new_flows, answered


def profiler_exchange(ctl, now: float) -> None:
    """The controller's exchange with a profiler that answers, but for the HTTP: the flow
    records' bodies built (the records reported are let go, as on the testbed, not kept
    for a profiler that is away), then an answer that changes nothing."""
    for _ in ctl.profiler_report(now):
        pass
    ctl.profiler_pairs_sent(now)
    ctl.profiler_answer({"microservices": {}}, {"servers": {}}, now)


def quantiles_ms(seconds: list[float]) -> tuple[float, float]:
    """(p50, p99) in ms."""
    ordered = sorted(seconds)
    if not ordered:
        return 0.0, 0.0
    return 1e3 * ordered[len(ordered) // 2], 1e3 * ordered[int(0.99 * len(ordered))]


def fresh_core(idle_s: int = 10):
    """(configuration, ControllerCore with policy malb and a switch connected, the time):
    controller_alone's configuration, the profiler away, the NAT rules idling out after
    idle_s (what the core dates an idled-out flow's last traffic by)."""
    import time

    from benchmarks.controller_alone import config
    from common.config import parse_config_file_data
    from ryu_apps.core import ControllerCore
    data = config(18081, 16633)
    data["controller"]["idle_timeout_s"] = idle_s
    cfg = parse_config_file_data(data, "core_stalls.yaml")
    now = 1_700_000_000.0
    ctl = ControllerCore(cfg, "malb", xid=lambda dpid: 1, started=now, timer=time.perf_counter)
    ctl.switch_connected(1, now)
    return cfg, ctl, now


def child(args) -> dict:
    """One run, in this process, on the tree its imports come from."""
    import gc
    import time

    from benchmarks import ofswitch
    from benchmarks.controller_alone import VIP_BACKEND, VIP_VIDEO
    from ryu_apps import ofwire

    cfg, ctl, now = fresh_core(args.idle)
    vip, vip_mac = cfg.microservices[0].vip, cfg.controller.vip_mac
    c1, c2 = cfg.testbed.clients[:2]
    for k in range(args.held):
        ctl.packet_in(1, c2.switch_port,
                      ofswitch.syn_frame(vip_mac, c2, vip, 1024 + k, VIP_VIDEO), now)
        now += 1 / 300
    gc.collect()
    gc.freeze()
    pauses: list[tuple[int, float]] = []
    began = [0.0]

    def watch(phase, info):
        if phase == "start":
            began[0] = time.thread_time()
        else:
            pauses.append((info["generation"], time.thread_time() - began[0]))
    gc.callbacks.append(watch)
    frame = (lambda k: ofswitch.syn_frame(vip_mac, c1, vip, 1024 + k % 60000, VIP_BACKEND))
    # the instance's FIN after the reverse rewrite: from the VIP to the client
    fin = (lambda k: ofwire.tcp_frame(c1.mac, vip_mac, vip, c1.ip, VIP_BACKEND,
                                      1024 + k % 60000, 5000, 1001,
                                      flags=ofwire.TCP_FIN | ofwire.TCP_ACK))
    period = cfg.controller.monitoring_period_s if args.profiler else None
    packet_in, _removed, new_flows, answered = drive(
        ctl, frame, c1.switch_port, args.flows, args.rate, args.idle, now, period,
        (args.fins, fin) if args.fins is not None else None)
    if new_flows != args.flows:
        raise SystemExit(f"only {new_flows} of {args.flows} SYNs started a flow (the flow cap, "
                         f"or client ports reused while their flows were active): lower "
                         f"--rate x --idle + --held")
    gc.callbacks.remove(watch)
    tracked = len(gc.get_objects())
    p50, p99 = quantiles_ms(packet_in)
    out = {"new_flows": new_flows, "stats_entries": answered,
           "packet_in_p50_ms": p50, "packet_in_p99_ms": p99,
           "tracked_objects": tracked, "records": len(ctl.flows.flows),
           "active": ctl.flows.active_count(), "watched": len(ctl.policy_core.open_flows)}
    for gen in (0, 1, 2):
        took = sorted(1e3 * d for g, d in pauses if g == gen)
        out[f"gen{gen}"] = {"count": len(took),      # none: 0 ms
                            "p50_ms": statistics.median(took) if took else 0.0,
                            "max_ms": max(took, default=0.0), "sum_ms": sum(took)}
    return out


def short_ends(args) -> dict:
    """A short flow's packet-in and flow-removed under malb, its ends dated back."""
    from benchmarks import ofswitch
    from benchmarks.controller_alone import VIP_UI

    cfg, ctl, now = fresh_core(args.idle)
    vip, vip_mac = cfg.microservices[0].vip, cfg.controller.vip_mac
    c1 = cfg.testbed.clients[0]
    frame = (lambda k: ofswitch.syn_frame(vip_mac, c1, vip, 1024 + k % 60000, VIP_UI))
    packet_in, removed, new_flows, _ = drive(ctl, frame, c1.switch_port, args.short_flows,
                                             args.short_rate, args.idle, now)
    if new_flows != args.short_flows:
        raise SystemExit(f"only {new_flows} of {args.short_flows} ui SYNs started a flow: "
                         f"lower --short-rate x --idle")
    # every flow whose rules idled out has ended in the policy: those of the last --idle
    # seconds are all it may still count
    still_open = len(ctl.policy_core.connections)
    if still_open > args.short_rate * args.idle + 1:
        raise SystemExit(f"the policy still counts {still_open} ui flows open, more than "
                         f"the last {args.idle} s started: idled-out flows did not end")
    (in50, in99), (rm50, rm99) = quantiles_ms(packet_in), quantiles_ms(removed)
    return {"short_packet_in_p50_ms": in50, "short_packet_in_p99_ms": in99,
            "short_removed_p50_ms": rm50, "short_removed_p99_ms": rm99,
            "short_removed_sum_ms": 1e3 * sum(removed), "short_still_open": still_open}


def sample_walk(args) -> dict:
    """The open-flows estimator's per-sample work with 120 s of ended jobs kept."""
    import collections
    import time

    from ryu_apps.estimators.open_flows import OpenFlows

    servers = [f"srv{k}" for k in range(1, 5)]
    flows = OpenFlows(cores={s: 0.5 for s in servers})
    t, k, step = 0.0, 0, 1 / args.rate
    ending: collections.deque = collections.deque()
    while t < 130.0:
        flows.add(k, servers[k % 4], "backend", t)
        ending.append((t + args.job_s, k))
        while ending and ending[0][0] <= t:
            flows.end(ending.popleft()[1], t)
        k += 1
        t += step
    attribute, costs = [], []
    for _ in range(20):
        for s in servers:
            t0 = time.thread_time()
            flows.attribute(s, {"backend": (40.0, 1.0)}, t - 1.0, t)
            attribute.append(time.thread_time() - t0)
            t0 = time.thread_time()
            flows.costs(s, t - 5.0)
            costs.append(time.thread_time() - t0)
    return {"attribute_ms": 1e3 * statistics.median(attribute),
            "costs_ms": 1e3 * statistics.median(costs)}


def run_child(tree: str, args) -> dict:
    argv = [sys.executable, os.path.join(ROOT, "benchmarks", "core_stalls.py"), "--child",
            "--flows", str(args.flows), "--rate", str(args.rate), "--idle", str(args.idle),
            "--held", str(args.held), "--job-s", str(args.job_s),
            "--short-flows", str(args.short_flows), "--short-rate", str(args.short_rate)] + \
        (["--profiler"] if args.profiler else []) + \
        (["--fins", str(args.fins)] if args.fins is not None else [])
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the run on {tree} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


FIGURES = (("gen2", "count"), ("gen2", "max_ms"), ("gen2", "sum_ms"), ("gen1", "max_ms"),
           ("packet_in_p99_ms", None), ("tracked_objects", None), ("records", None),
           ("attribute_ms", None), ("costs_ms", None), ("short_packet_in_p50_ms", None),
           ("short_packet_in_p99_ms", None),
           ("short_removed_p50_ms", None), ("short_removed_p99_ms", None),
           ("short_removed_sum_ms", None))


def figure(r: dict, key: str, sub: str | None):
    return r[key] if sub is None else r[key][sub]


def summarise(rounds: list[dict], names: list[str]) -> dict:
    out = {}
    for name in names:
        for key, sub in FIGURES:
            label = key if sub is None else f"{key}_{sub}"
            vals = [figure(r[name], key, sub) for r in rounds]
            entry = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
            if name != "base" and "base" in names:
                ratios = [figure(r[name], key, sub) / figure(r["base"], key, sub)
                          for r in rounds if figure(r["base"], key, sub)]
                if ratios:
                    entry["vs_base"] = {"median": statistics.median(ratios),
                                        "min": min(ratios), "max": max(ratios)}
            out.setdefault(name, {})[label] = entry
    return out


def markdown(doc: dict) -> str:
    from common.markdown import table
    rows = []
    for name, figs in doc["summary"].items():
        for label, e in figs.items():
            r = e.get("vs_base")
            d = 3 if e["max"] < 10 else 1
            rows.append([name, label, f"{e['median']:.{d}f} ({e['min']:.{d}f}-{e['max']:.{d}f})",
                         "—" if not r else f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})"])
    return (f"# The controller core's stalls\n\nCommand: `{doc['command']}`"
            f"  \nCommit: {doc['commit']}; base: {doc.get('base_commit') or '—'}\n\n"
            f"{doc['rounds_n']} interleaved rounds; medians (min-max); ms of CPU time.\n\n" +
            table(["tree", "figure", "value", "vs base"], rows, "llrr"))


def parser():
    from common.cli import ArgumentParser, bounded
    p = ArgumentParser(prog="python -m benchmarks.core_stalls",
                       description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=bounded(int, 1, 50), default=3)
    p.add_argument("--flows", type=bounded(int, 100, 10_000_000), default=70_000)
    p.add_argument("--rate", type=bounded(float, 1, 100_000), default=1000.0)
    p.add_argument("--idle", type=bounded(int, 1, 3600), default=10,
                   help="the NAT rules' idle timeout, s (the controller's idle_timeout_s)")
    p.add_argument("--held", type=bounded(int, 0, 60_000), default=1000)
    p.add_argument("--job-s", type=bounded(float, 0.1, 100), default=10.0,
                   help="how long each back-end job of the sample part runs")
    p.add_argument("--short-flows", type=bounded(int, 100, 10_000_000), default=30_000)
    p.add_argument("--short-rate", type=bounded(float, 1, 100_000), default=500.0)
    p.add_argument("--profiler", action="store_true",
                   help="the least-load part exchanges with a profiler that answers every "
                        "monitoring period (its flow records reported, as on the testbed); "
                        "without it the profiler is away, as in controller_alone")
    p.add_argument("--fins", type=bounded(float, 0, 3600), metavar="S",
                   help="in the least-load part, each back-end flow's instance sends its FIN "
                        "S seconds after the flow started (the testbed's jobs); without it "
                        "none does, as with controller_alone's emulated switch; below --idle")
    p.add_argument("--base-tree", metavar="DIR",
                   help="another checkout (a git worktree of an earlier commit), measured in "
                        "the same rounds")
    p.add_argument("--out", default=os.path.join(ROOT, "results", "bench"))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.fins is not None and args.fins >= args.idle:
        p.error("--fins: a job's FIN comes before its rules idle out: below --idle")
    if args.child:
        print(json.dumps({**child(args), **sample_walk(args), **short_ends(args)}))
        return 0
    if args.base_tree and not os.path.isfile(os.path.join(args.base_tree, "ryu_apps",
                                                          "flows.py")):
        p.error(f"--base-tree: {args.base_tree} is not a checkout of this project")
    from common import lab
    from common.procs import git_commit
    trees = {"this": ROOT, **({"base": os.path.abspath(args.base_tree)}
                              if args.base_tree else {})}
    os.makedirs(args.out, exist_ok=True)
    rounds = []
    for k in range(args.rounds):
        row = {}
        for name in lab.rotated(list(trees), k):
            print(f"[stalls] round {k + 1}/{args.rounds}: {name}", flush=True)
            row[name] = run_child(trees[name], args)
            print(f"[stalls]   {name}: full collections {row[name]['gen2']['count']}, longest "
                  f"{row[name]['gen2']['max_ms']:.1f} ms, {row[name]['tracked_objects']} "
                  f"objects tracked", flush=True)
        rounds.append(row)
    base_commit = None
    if args.base_tree:
        base_commit = subprocess.run(["git", "-C", args.base_tree, "rev-parse", "--short",
                                      "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"command": lab.invocation("benchmarks.core_stalls", argv if argv is not None
                                     else sys.argv[1:], sudo=False).strip(),
           "commit": git_commit(), "base_commit": base_commit, "rounds_n": args.rounds,
           "rounds": rounds, "summary": summarise(rounds, list(trees))}
    lab.write_results(args.out, "core_stalls", doc, lambda: markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
