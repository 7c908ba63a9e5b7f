"""The fault suite: the running stack under load, one fault after another.

    sudo .venv/bin/python -m experiments.faults                        # every fault, ~8 min
    sudo .venv/bin/python -m experiments.faults --faults agent,switch --seconds 30
    sudo .venv/bin/python -m experiments.faults --out results/faults-try --hold 3

The paper testbed comes up with the controller, the host agents and the profiler
(experiments/stack.py). For each fault in turn, the clients play a segment of open-loop load
through the VIPs (short ui objects and back-end jobs at a few requests per second, a few
long video streams), and a few seconds into it the fault is injected:

- agent:      the host agent of the first server killed with SIGKILL, restarted --hold s later;
- profiler:   the profiler killed with SIGKILL as soon as its history file is being written,
              restarted --hold s later on the same history;
- controller: the controller process stopped (SIGTERM), started again --hold s later; the switches
              reconnect on their own;
- takeover:   (with --standby, in place of controller) the master controller killed with
              SIGKILL beside its standby; the standby's claim timed; the killed one started
              again as the standby once the other has taken over;
- container:  the ui instance of the second server killed (`docker kill`); it stays dead and
              the health probes must take it out of its pool;
- hung:       the ui instance of the third server frozen (`docker pause`: every process
              stopped, its port up, nothing refusing) until its load segment is over; the
              health probes must take it out of its pool;
- starved:    (not in the default set yet) the ui instance of the fourth server left 1 ms of
              CPU a second (`docker update`): its process runs, neither stopped nor frozen,
              its port up, and its service answers after seconds; only the service checks'
              timeouts can find it (a process stuck but running), until its load segment is
              over;
- switch:     the switches' controller connection dropped and their flow tables wiped
              (`ovs-vsctl del-controller`, `ovs-ofctl del-flows`), the connection given back
              --hold s later (as tests/integration/test_controller.py does);
- ovs:        (not in the default set yet) Open vSwitch restarted with its own script
              (`ovs-ctl restart`: flows saved and put back; its connection tracker's state,
              tracker mode's connections, lost);
- docker:     the Docker engine unreachable for --docker-pause s: the dockerd serving the
              agents' socket is stopped with SIGSTOP and resumed with SIGCONT (containers run
              on under containerd; nothing is restarted).

Faults run in that order whatever order --faults gives (the killed instance stays dead, and
a controller started after it would begin with every instance in its pool). Only processes
the run started and recorded under /run/malb/pids are signalled, plus the dockerd proven to
serve the agents' Docker socket; only containers and bridges of the testbed are touched.

Measured per fault: requests that failed in the fault's window (from the load generators'
records, by intended start; the window runs from the injection to recovery), requests in
flight when it began that failed; new flows the controller sent to a dead instance more
than two health intervals after it died (its decisions against the kill time); history rows
committed before the fault and missing after it (the profiler's SQLite tables); seconds
from the end of the fault until the stack works again (the component answers, the profiler
has fresh samples of every server, requests through the VIPs succeed). Results: faults.md
(the table), faults.json, decisions.json and the raw run (run/) in --out.
"""
from __future__ import annotations
from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from common import lab
from common.cli import ArgumentParser, bounded, choice_list, fail, require_testbed
from common.config import POLICIES, ConfigError, check_testbed_builds, config_path, \
    load_config_data, parse_config_file_data
from common.procs import ROOT
from experiments.faults.analysis import (GRACE_HEALTH_INTERVALS, RECOVERY_TARGET_PERIODS,
                                             analyse, read_requests, summary_markdown)
from experiments.faults.suite import LEAD_S, VIDEO_SECONDS, FaultSuite
from experiments.faults.probing import WORKLOAD_MICROSERVICES

FAULTS = ("agent", "profiler", "controller", "takeover", "container", "hung", "starved",
          "switch", "ovs", "docker")
# not yet in the default set: starved and ovs until they have run; takeover needs --standby
DEFAULT_FAULTS = tuple(f for f in FAULTS if f not in ("starved", "ovs", "takeover"))


def config_data(opts) -> dict:
    data = load_config_data(opts.config)
    data.setdefault("testbed", {})["clients"] = 2
    data.setdefault("controller", {})["monitoring_period_s"] = opts.period
    data.setdefault("profiler", {})["period_s"] = opts.period
    if opts.dataplane or opts.tracker:
        data["controller"].setdefault("dataplane", {})["short_flows"] = \
            "switch" if opts.dataplane else "tracker"
    return data


def run(opts, data: dict, out_dir: str, log=print) -> dict:
    from experiments.stack import Stack   # deferred: Mininet, for the runs only
    run_dir = os.path.join(out_dir, "run")
    with Stack(data, run_dir, policy=opts.policy, standby=opts.standby) as st:
        log(f"[faults] stack up ({st.testbed.backend}, {st.testbed.datapath} datapath); "
            f"waiting for monitoring")
        st.wait_monitoring(60)
        st.wait_for(lambda: st.controller_get("/malb/status")["profiler"]["reachable"], 30,
                    "the controller reaches the profiler")
        suite = FaultSuite(st, opts, log)
        records = suite.run(opts.faults)
        decisions = suite.recorder.decisions()
        h = st.cfg.controller.health
        info = {"testbed": st.testbed.describe(),
                "health": {"method": h.method, "interval_s": h.interval_s,
                           "timeout_s": h.timeout_s, "unhealthy_after": h.unhealthy_after},
                "period_s": suite.period,
                "decisions": {"recorded": len(decisions), "polls": suite.recorder.polls,
                              "failed_polls": suite.recorder.errors,
                              "possible_gaps": suite.recorder.gaps}}
    grace = GRACE_HEALTH_INTERVALS * info["health"]["interval_s"]
    target = RECOVERY_TARGET_PERIODS * info["period_s"]
    requests = read_requests(run_dir)
    results = analyse(records, requests, decisions, grace, target)
    with open(os.path.join(out_dir, "decisions.json"), "w") as fh:
        json.dump(decisions, fh)
    planned = sum(r.get("planned", 0) for r in records)
    return {**info, "grace_s": grace, "recovery_target_s": target, "faults": results,
            "requests": {"planned": planned, "recorded": len(requests),
                         "failed": sum(1 for r in requests if r.get("error"))}}


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m experiments.faults", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", type=choice_list(FAULTS), default=list(DEFAULT_FAULTS),
                   help=f"which faults (default all: {','.join(DEFAULT_FAULTS)}); "
                        f"they run in the order {','.join(FAULTS)}")
    p.add_argument("--seconds", type=bounded(float, 20, 3600), default=45.0,
                   help="seconds of load around each fault (default 45)")
    p.add_argument("--rate", type=bounded(float, 0.1, 100), default=4.0,
                   help="requests per second through the VIPs, all clients (default 4)")
    p.add_argument("--hold", type=bounded(float, 0, 60), default=5.0,
                   help="seconds an agent, the profiler, the controller or the switches stay "
                        "down (default 5)")
    p.add_argument("--docker-pause", type=bounded(float, 1, 30), default=10.0,
                   help="seconds the Docker engine stays stopped (default 10)")
    p.add_argument("--recovery-timeout", type=bounded(float, 10, 600), default=60.0,
                   help="seconds to wait for recovery after each fault (default 60)")
    p.add_argument("--period", type=bounded(float, 0.5, 60), default=3.0,
                   help="monitoring and profiler period in seconds (default 3, the paper's)")
    p.add_argument("--policy", choices=POLICIES, default="malb",
                   help="controller policy (default malb)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dataplane", action="store_true",
                      help="short flows balanced by the switch (controller.dataplane."
                           "short_flows: switch): the ui service's flows take no packet-in")
    mode.add_argument("--tracker", action="store_true",
                      help="short flows translated by the switch's connection tracker "
                           "(controller.dataplane.short_flows: tracker)")
    p.add_argument("--standby", action="store_true",
                   help="a standby controller beside the master (docs/controller.md, \"A "
                        "standby controller\"); the controller fault is then takeover")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", help="base configuration (default configs/paper.yaml)")
    p.add_argument("--out", help="results directory (default results/faults-<time>)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.standby and "controller" in args.faults:
        if "--faults" in (argv if argv is not None else sys.argv[1:]):
            parser().error("--faults: controller with --standby would hand the switches "
                           "over; name takeover instead")
        args.faults = [f if f != "controller" else "takeover" for f in args.faults]
    if "takeover" in args.faults and not args.standby:
        parser().error("--faults: takeover needs a standby controller (--standby)")
    args.faults = [f for f in FAULTS if f in args.faults]        # the fixed order
    if args.seconds < min(LEAD_S, args.seconds / 4) + max(args.hold, args.docker_pause) + 5:
        parser().error("--seconds: too short for the fault's hold and pause")
    try:
        cfg = parse_config_file_data(config_data(args), config_path(args.config))
        check_testbed_builds(cfg)
        for name in WORKLOAD_MICROSERVICES:
            cfg.microservice(name)
        if "container" in args.faults and not cfg.instances_of("ui"):
            raise ConfigError("microservices: no ui instance to kill")
    except KeyError as exc:
        fail(f"configuration: the workload needs the microservice {exc} (video, ui, "
             f"backend as in configs/paper.yaml)", code=2)
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
    require_testbed("the fault suite")
    out_dir = lab.results_dir(args.out, "faults-")
    command = lab.invocation("experiments.faults", argv).strip()
    # SIGTERM ends the run through its cleanup (the stack torn down, dockerd resumed)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    per_fault = 2 + args.seconds + VIDEO_SECONDS + 5
    print(f"[faults] {len(args.faults)} faults ({', '.join(args.faults)}), about "
          f"{(60 + len(args.faults) * per_fault) / 60:.0f} min; results in {out_dir}",
          flush=True)
    stamp = lab.stamp(command, with_images=True)          # the code and time the run starts with
    measured = run(args, config_data(args), out_dir, log=lambda m: print(m, flush=True))
    doc = {**measured, **stamp,
           "config": os.path.relpath(config_path(args.config), ROOT), "options": vars(args)}
    text = lab.write_results(out_dir, "faults", doc, lambda: summary_markdown(doc), echo=False)
    print("\n" + text)
    print(f"[faults] results in {out_dir}")
    return 0 if all(r["met"] for r in doc["faults"]) else 1


if __name__ == "__main__":
    sys.exit(main())
