"""Benchmark: what an agent's GET /probes costs (the readings a probe-reading policy polls
every controller.probe_period_s), against reading the same services with nsenter + curl.

    sudo .venv/bin/python -m benchmarks.probes [--servers 4] [--answers 400] [--rate 4]
        [--seconds 20] [--out results/bench]
    .venv/bin/python -m benchmarks.probes --controller-side [--polls 2000]

On the testbed (the paper's three microservices on every server, host agents, no controller
or profiler: nothing else asks the agents or the services anything), idle services:

1. sequential: --answers GET /probes to srv1's agent, back to back: wall time per answer at
   the client and the agent's own `took_ms`, p50 and p99; the agent process's CPU per answer
   and the services' CPU per reading (their containers' cgroup CPU time), each less what
   the same processes used over as long a time without probes (the agent samples Docker
   every second);
2. the same readings of srv1's instances with `nsenter -t <pid> -n curl .../latency` (how
   the agent reads services' /metrics today): wall time per reading and the CPU of the
   processes it spawns;
3. steady: every agent asked at --rate answers a second for --seconds, as the controller
   polls at 0.25 s: each agent's extra CPU as a share of one core, and the services' extra
   CPU per instance;
4. busy: a CPU-bound loop in each of srv1's containers (its server's CPU share used up, the
   services' own threads contending for their GIL), srv1's agent asked at --rate for
   --seconds: how many readings fail (the per-instance timeout) and the answer's time.

Writes probes.json and probes.md to --out. Takes the testbed's lock only if the caller does
(`flock /tmp/malb-testbed.lock ...` on shared machines).

--controller-side (no testbed, no root): the controller's part of one poll, as its shell
does it under Ryu's hub (eventlet, sockets patched): the HTTP GET of a 3-instance answer
from a JSON server in another process, the JSON, and ControllerCore.probe_answer; the
process's CPU and the wall time per poll.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from common import lab
from common.cli import ArgumentParser, require_testbed
from common.config import DEFAULT_MICROSERVICES
from common.markdown import table
from common.procs import git_commit
from common.stats import quantile


def _proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cgroup_cpu_s(pid: int) -> float:
    """CPU time of the cgroup the process is in (its container), cgroup v1 or v2."""
    with open(f"/proc/{pid}/cgroup") as fh:
        lines = [line.strip().split(":", 2) for line in fh]
    for _, controllers, path in lines:
        if "cpuacct" in controllers.split(","):
            for root in (f"/sys/fs/cgroup/{controllers}", "/sys/fs/cgroup/cpuacct",
                         "/sys/fs/cgroup/cpu,cpuacct"):
                f = f"{root}{path}/cpuacct.usage"
                if os.path.exists(f):
                    with open(f) as fh:
                        return int(fh.read()) / 1e9
    for _, controllers, path in lines:
        if controllers == "":
            with open(f"/sys/fs/cgroup{path}/cpu.stat") as fh:
                usage = dict(line.split() for line in fh)
            return int(usage["usage_usec"]) / 1e6
    raise RuntimeError(f"no CPU accounting found for pid {pid}")


def _get(url: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    return time.perf_counter() - t0, body


def run(args) -> dict:
    from experiments.stack import Stack
    import docker
    data = {"testbed": {"clients": 1}, "servers": {"count": args.servers},
            "microservices": DEFAULT_MICROSERVICES, "agents": {"period_s": 1}}
    client = docker.from_env()
    with tempfile.TemporaryDirectory() as run_dir, \
            Stack(data, run_dir, controller=False, profiler=False) as st:
        cfg = st.cfg
        agents = {s.name: f"{s.agent_url}/probes" for s in cfg.servers}
        agent_pid = {s: st.agents[s].proc.pid for s in agents}
        containers = {i.name: client.containers.get(i.container) for i in cfg.instances}
        pids = {name: c.attrs["State"]["Pid"] for name, c in containers.items()}
        mine = [i for i in cfg.instances if i.server == "srv1"]
        st.wait_for(lambda: all(_get(u)[1]["failed"] == 0 and len(_get(u)[1]["instances"])
                                == len([i for i in cfg.instances if i.server == s])
                                for s, u in agents.items()), 30, "every agent reads all")
        for _ in range(20):                                      # warm-up
            for url in agents.values():
                _get(url)

        def cpu_now():
            return ({s: _proc_cpu_s(p) for s, p in agent_pid.items()},
                    {n: _cgroup_cpu_s(p) for n, p in pids.items()})

        def spent(before, after):
            a = {s: after[0][s] - before[0][s] for s in before[0]}
            c = {n: after[1][n] - before[1][n] for n in before[1]}
            return a, c

        # 1. sequential answers of srv1's agent, and an idle stretch as long
        walls, took = [], []
        b = cpu_now()
        t0 = time.monotonic()
        for _ in range(args.answers):
            w, body = _get(agents["srv1"])
            walls.append(w)
            took.append(body["took_ms"] / 1000.0)
            assert body["failed"] == 0, body
        busy_s = time.monotonic() - t0
        busy = spent(b, cpu_now())
        b = cpu_now()
        time.sleep(busy_s)
        idle = spent(b, cpu_now())
        readings = args.answers * len(mine)
        agent_cpu = (busy[0]["srv1"] - idle[0]["srv1"]) / args.answers
        service_cpu = sum(busy[1][i.name] - idle[1][i.name] for i in mine) / readings
        sequential = {
            "answers": args.answers, "instances_per_answer": len(mine),
            "client_wall_ms": {"p50": 1000 * quantile(walls, 0.5),
                               "p99": 1000 * quantile(walls, 0.99)},
            "agent_took_ms": {"p50": 1000 * quantile(took, 0.5),
                              "p99": 1000 * quantile(took, 0.99)},
            "agent_cpu_ms_per_answer": 1000 * agent_cpu,
            "service_cpu_ms_per_reading": 1000 * service_cpu,
            "seconds": busy_s}

        # 2. the same readings with nsenter + curl
        walls2 = []
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(max(1, args.answers // 4)):
            for i in mine:
                port = cfg.microservice(i.microservice).port
                t = time.perf_counter()
                res = subprocess.run(["nsenter", "-t", str(pids[i.name]), "-n", "curl", "-s",
                                      "-m", "2", f"http://127.0.0.1:{port}/latency?window=1"],
                                     capture_output=True, text=True)
                walls2.append(time.perf_counter() - t)
                assert res.returncode == 0 and "in_flight" in res.stdout, res
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        spawned = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / len(walls2)
        nsenter = {"readings": len(walls2),
                   "wall_ms_per_reading": {"p50": 1000 * quantile(walls2, 0.5),
                                           "p99": 1000 * quantile(walls2, 0.99)},
                   "spawned_cpu_ms_per_reading": 1000 * spawned}

        # 3. every agent at --rate answers a second, as the controller polls
        period = 1.0 / args.rate
        b = cpu_now()
        t0 = time.monotonic()
        rounds, late = 0, 0
        while time.monotonic() - t0 < args.seconds:
            start = time.monotonic()
            for url in agents.values():
                _get(url)
            rounds += 1
            rest = period - (time.monotonic() - start)
            if rest > 0:
                time.sleep(rest)
            else:
                late += 1
        polled_s = time.monotonic() - t0
        polled = spent(b, cpu_now())
        b = cpu_now()
        time.sleep(polled_s)
        idle = spent(b, cpu_now())
        agent_share = [100 * (polled[0][s] - idle[0][s]) / polled_s for s in agents]
        service_share = [100 * (polled[1][n] - idle[1][n]) / polled_s for n in pids]
        # 4. srv1's server busy
        burner = "python3 -c 'while True: pass'"
        for i in mine:
            containers[i.name].exec_run(["sh", "-c", f"{burner} >/dev/null 2>&1 &"],
                                        detach=True)
        time.sleep(2.0)
        took_busy, failed, asked, errors = [], 0, 0, {}
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < args.seconds:
                start = time.monotonic()
                _, body = _get(agents["srv1"])
                took_busy.append(body["took_ms"] / 1000.0)
                asked += len(body["instances"])
                failed += body["failed"]
                for e in body["instances"].values():
                    if e["error"]:
                        errors[e["error"]] = errors.get(e["error"], 0) + 1
                time.sleep(max(0.0, period - (time.monotonic() - start)))
        finally:
            for i in mine:      # inside each container's own process namespace
                containers[i.name].exec_run(["pkill", "-f", "while True: pass"])
        busy_phase = {"readings": asked, "failed": failed, "errors": errors,
                      "agent_took_ms": {"p50": 1000 * quantile(took_busy, 0.5),
                                        "p99": 1000 * quantile(took_busy, 0.99),
                                        "max": 1000 * max(took_busy)},
                      "timeout_s": cfg.agents.probe_timeout_s}
        steady = {"rate_per_s": args.rate, "seconds": polled_s, "rounds": rounds,
                  "late_rounds": late, "agents": len(agents), "instances": len(pids),
                  "agent_extra_cpu_percent_of_a_core": {
                      "mean": statistics.mean(agent_share), "max": max(agent_share)},
                  "service_extra_cpu_percent_of_a_core_per_instance": {
                      "mean": statistics.mean(service_share), "max": max(service_share)}}
    return {"commit": git_commit(), "time": time.time(), "servers": args.servers,
            "sequential": sequential, "nsenter_curl": nsenter, "steady": steady,
            "busy_server": busy_phase}


def markdown(r: dict) -> str:
    s, n, p, b = r["sequential"], r["nsenter_curl"], r["steady"], r["busy_server"]
    return "\n".join([
        f"# GET /probes cost (commit {r['commit']}, {r['servers']} servers, idle services)",
        "",
        table(["figure", "value"], [
            (f"/probes answer ({s['instances_per_answer']} instances), client wall p50 / p99 "
             f"ms", f"{s['client_wall_ms']['p50']:.2f} / {s['client_wall_ms']['p99']:.2f}"),
            ("the agent's own time (`took_ms`) p50 / p99 ms",
             f"{s['agent_took_ms']['p50']:.2f} / {s['agent_took_ms']['p99']:.2f}"),
            ("agent CPU per answer, ms", f"{s['agent_cpu_ms_per_answer']:.2f}"),
            ("service CPU per reading, ms", f"{s['service_cpu_ms_per_reading']:.2f}"),
            ("nsenter + curl per reading: wall p50 / p99 ms",
             f"{n['wall_ms_per_reading']['p50']:.2f} / {n['wall_ms_per_reading']['p99']:.2f}"),
            ("nsenter + curl per reading: CPU of the spawned processes, ms",
             f"{n['spawned_cpu_ms_per_reading']:.2f}"),
            (f"every agent at {p['rate_per_s']:g} answers/s for {p['seconds']:.0f} s: extra "
             f"agent CPU, % of a core, mean / max",
             f"{p['agent_extra_cpu_percent_of_a_core']['mean']:.2f} / "
             f"{p['agent_extra_cpu_percent_of_a_core']['max']:.2f}"),
            ("the same: extra service CPU per instance, % of a core, mean / max",
             f"{p['service_extra_cpu_percent_of_a_core_per_instance']['mean']:.2f} / "
             f"{p['service_extra_cpu_percent_of_a_core_per_instance']['max']:.2f}"),
            ("rounds late (all agents not asked within the period)",
             f"{p['late_rounds']} of {p['rounds']}"),
            (f"srv1's CPU share used up by a busy loop in each container: readings failed "
             f"(timeout {b['timeout_s']:g} s)", f"{b['failed']} of {b['readings']}"),
            ("the same: the agent's answer time p50 / p99 / max ms",
             f"{b['agent_took_ms']['p50']:.1f} / {b['agent_took_ms']['p99']:.1f} / "
             f"{b['agent_took_ms']['max']:.1f}")], "lr"),
        f"Errors while busy: {json.dumps(b['errors']) if b['errors'] else 'none'}", ""])


def controller_side(polls: int) -> dict:
    from ryu_apps.framework import hub
    hub.patch(thread=False)          # as ryu-manager does before loading the app
    from common.config import parse_config
    from common.httpjson import get_json
    from ryu_apps.core import ControllerCore
    cfg = parse_config({"servers": {"count": 1}, "controller": {"health": {"method": "none"}}})
    ctl = ControllerCore(cfg, "srr", xid=lambda dpid: 0, started=time.time())
    now = time.time()
    body = {"server": "srv1", "time": now, "window_s": 1.0, "timeout_s": 0.25,
            "took_ms": 1.7, "failed": 0, "instances": {
                i.name: {"container": i.container, "microservice": i.microservice,
                         "port": cfg.microservice(i.microservice).port, "in_flight": 2,
                         "count": 10, "p50_ms": 12.5, "p99_ms": 80.0, "time": now,
                         "age_s": 0.002, "error": None} for i in cfg.instances}}
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", (
        "import json\n"
        "from common.httpjson import JsonServer\n"
        f"body = json.loads({json.dumps(json.dumps(body))})\n"
        f"s = JsonServer(('127.0.0.1', {port}), {{('GET', '/probes'): lambda q, b: (200, body)}})\n"
        "s.serve_forever()\n")], cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    url = f"http://127.0.0.1:{port}/probes"
    try:
        for _ in range(100):
            try:
                get_json(url, 1.0)
                break
            except Exception:        # noqa: BLE001 -- not listening yet
                time.sleep(0.05)
        out = []

        def loop():
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(polls):
                ctl.probe_answer("srv1", get_json(url, 1.0), time.time())
            out.append((time.process_time() - c0, time.perf_counter() - t0))
        hub.spawn(loop).wait()
    finally:
        server.kill()
        server.wait()
    cpu, wall = out[0]
    return {"polls": polls, "cpu_ms_per_poll": 1000 * cpu / polls,
            "wall_ms_per_poll": 1000 * wall / polls, "answer_bytes": len(json.dumps(body))}


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m benchmarks.probes", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", type=int, default=4)
    p.add_argument("--answers", type=int, default=400)
    p.add_argument("--rate", type=float, default=4.0, help="answers a second per agent")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--out", default="results/bench")
    p.add_argument("--controller-side", action="store_true",
                   help="only the controller's part of a poll (no testbed)")
    p.add_argument("--polls", type=int, default=2000)
    args = p.parse_args(argv)
    if args.controller_side:
        r = controller_side(args.polls)
        print(f"controller side of one poll ({r['answer_bytes']} bytes): CPU "
              f"{r['cpu_ms_per_poll']:.3f} ms, wall {r['wall_ms_per_poll']:.3f} ms "
              f"(over {r['polls']} polls)")
        return 0
    require_testbed("the benchmark")
    result = run(args)
    os.makedirs(args.out, exist_ok=True)
    lab.write_results(args.out, "probes", result, lambda: markdown(result), indent=2,
                      default=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
