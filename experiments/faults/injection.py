"""The faults, injected one after another on a running stack under load (Suite): each
returns when it started and ended and the checks that say the stack has recovered.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from common.state import process_state, same_process
from experiments.faults.analysis import rows_lost
from experiments.faults.probing import (DecisionRecorder, FaultError, Probe, await_checks,
                                            bridge_controllers, file_size, log_lines_since,
                                            project_dockerd, restore_controllers, run_cmd,
                                            short, snapshot, verified_pid, wait_for_write)

VIDEO_SECONDS = 15               # a video stream of the workload lasts this long
REQUEST_TIMEOUT_S = 10           # a request fails after this long without data
LEAD_S = 10                      # load before the fault (at most a quarter of --seconds)
# starved: 1 ms of CPU in each second (the shortest quota the kernel takes, the longest period)
STARVED_QUOTA_US = 1_000
STARVED_PERIOD_US = 1_000_000

# A detached guard that resumes dockerd if this process dies while it is stopped.
WATCHDOG = """
import os, signal, sys, time
pid, start, delay = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
time.sleep(delay)
try:
    stat = open(f"/proc/{pid}/stat", "rb").read()
    if stat[stat.rfind(b")") + 2:].split()[19].decode() == start:
        os.kill(pid, signal.SIGCONT)
except (OSError, IndexError):
    pass
"""


class Suite:
    """The faults, run one after another on a running stack."""

    def __init__(self, st, opts, log):
        self.st, self.opts, self.log = st, opts, log
        self.cfg = st.cfg
        self.probe = Probe(st)
        self.recorder = DecisionRecorder(st)
        self.dead: dict[str, float] = {}
        self.period = max(self.cfg.controller.monitoring_period_s, self.cfg.profiler.period_s)
        self.agent_server = self.cfg.servers[0].name
        # the ui instance of the second server (of the first when it is alone); the hung one
        # of the third (of the last when there are fewer)
        ui = self.cfg.instances_of("ui")
        self.container = next((i for i in ui if i.server != self.agent_server), ui[0])
        self.hung = next((i for i in ui[2:] if i != self.container), ui[-1])
        # the starved one of the fourth (of the last): neither dead nor frozen before it
        self.starved = next((i for i in ui[3:] if i not in (self.container, self.hung)),
                            ui[-1])

    def what(self, fault: str) -> str:
        o = self.opts
        return {
            "agent": f"agent of {self.agent_server} SIGKILLed, restarted after {o.hold:g} s",
            "profiler": f"profiler SIGKILLed while writing its history, restarted after "
                        f"{o.hold:g} s",
            "controller": f"controller stopped, started again after {o.hold:g} s",
            "container": f"container of {self.container.name} killed (stays dead)",
            "hung": f"container of {self.hung.name} frozen (docker pause: its port up, "
                    f"nothing answering) until the end of its load",
            "starved": f"container of {self.starved.name} left {STARVED_QUOTA_US // 1000} ms "
                       f"of CPU a second (its process running, its port up) until the end "
                       f"of its load",
            "switch": f"switches' controller connection dropped and flows wiped for "
                      f"{o.hold:g} s",
            "docker": f"dockerd stopped (SIGSTOP) for {o.docker_pause:g} s",
        }[fault]

    # ------------------------------------------------------------ the steady state
    def steady_checks(self) -> list:
        p = self.probe
        return [("controller answers", p.controller_up), ("switches connected", p.switches),
                ("controller reaches the profiler", p.controller_profiler),
                ("profiler fresh", p.profiler_fresh), ("agents answer", p.agents)]

    # ------------------------------------------------------------ faults
    def _restart(self, what: str, start) -> str | None:
        """Bring a component back; the reason when it does not come (the fault stays
        injected and its checks find it not recovered)."""
        try:
            start()
            return None
        except Exception as exc:     # noqa: BLE001 -- recorded, the checks will say the rest
            self.log(f"[faults] {what} did not come back: {short(exc)}")
            return short(exc)

    def fault_agent(self) -> dict:
        server, p = self.agent_server, self.probe
        svc = self.st.agents[server]
        pid = verified_pid(svc)
        start = time.time()
        svc.kill(signal.SIGKILL)
        self.log(f"[faults] agent: agent-{server} (pid {pid}) killed; restart in "
                 f"{self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart(f"agent-{server}", lambda: self.st.start_agent(server))
        return {"start": start, "end": end,
                "details": {"pid": pid, "server": server, "restart_error": failed},
                "checks": [("agent answers", lambda: p.agents([server])),
                           ("profiler fresh", lambda: p.profiler_fresh(since=end))]}

    def fault_profiler(self) -> dict:
        p, svc = self.probe, self.st.profiler
        pid = verified_pid(svc)
        wal = self.st.history_path + "-wal"
        writing = wait_for_write(wal, 2 * self.cfg.profiler.period_s + 1)
        start = time.time()
        svc.kill(signal.SIGKILL)
        committed = snapshot(self.st.history_path, start, self.log)
        self.log(f"[faults] profiler: pid {pid} killed "
                 f"{'while writing its history' if writing else '(no write seen in time)'}; "
                 f"restart in {self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart("the profiler", self.st.start_profiler)
        return {"start": start, "end": end, "history_before": committed,
                "details": {"pid": pid, "killed_while_writing": writing,
                            "restart_error": failed},
                "checks": [("profiler answers", p.profiler_up),
                           ("profiler fresh", p.profiler_fresh),
                           ("controller reaches the profiler",
                            lambda: p.controller_profiler(since=end))]}

    def fault_controller(self) -> dict:
        p, svc = self.probe, self.st.controller
        pid = verified_pid(svc)
        self.recorder.poll()      # the decisions it is about to forget
        start = time.time()
        svc.stop()
        self.log(f"[faults] controller: pid {pid} stopped; start again in {self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart("the controller", self.st.start_controller)
        return {"start": start, "end": end, "details": {"pid": pid, "restart_error": failed},
                "checks": [("controller answers", p.controller_up),
                           ("switches connected", p.switches),
                           ("controller reaches the profiler",
                            lambda: p.controller_profiler(since=end)),
                           ("requests through the VIPs", p.vips)]}

    def fault_container(self) -> dict:
        p, inst = self.probe, self.container
        c = self._our_container(inst)
        start = time.time()       # it counts as dead from here (the strict reading)
        c.kill()
        end = time.time()
        self.dead[inst.name] = start
        self.log(f"[faults] container: {inst.container} killed; it stays dead")
        return {"start": start, "end": end,
                "details": {"container": inst.container, "id": c.id[:12],
                            "instance": inst.name},
                "checks": [("controller takes it out of its pool", lambda: p.instance_down(inst)),
                           ("requests through the VIP", lambda: p.vips([inst.microservice])),
                           ("profiler fresh", lambda: p.profiler_fresh(since=end))]}

    def _our_container(self, inst):
        """The testbed's running container of an instance, proven ours; FaultError else."""
        import docker       # deferred: the Docker SDK; only the container faults need it
        from topologies.dockerhost import leftover_is_ours
        c = docker.from_env(timeout=30).containers.get(inst.container)
        env = (c.attrs.get("Config") or {}).get("Env") or []
        if not leftover_is_ours(c) or f"MALB_INSTANCE={inst.name}" not in env:
            raise FaultError(f"container {inst.container} is not the testbed's {inst.name}: "
                             f"not touched")
        if c.status != "running":
            raise FaultError(f"container {inst.container} is {c.status}, not running")
        return c

    def fault_hung(self) -> dict:
        """A hung instance: every process of its container frozen (the cgroup freezer, as
        SIGSTOP to all of them), its link and port up. Its kernel still completes TCP
        handshakes while the listen backlog has room, so a TCP health probe may not see it;
        it counts as dead from the freeze for the late-flow figure, and is thawed when its
        load segment is over (the faults after it want the full pool)."""
        p, inst = self.probe, self.hung
        c = self._our_container(inst)
        start = time.time()
        c.pause()
        self.dead[inst.name] = start
        self.log(f"[faults] hung: {inst.container} frozen until the end of its load")

        def thaw():
            c.unpause()
            self.dead.pop(inst.name, None)
            self.log(f"[faults] hung: {inst.container} thawed")
        return {"start": start, "end": start, "after": thaw,
                "details": {"container": inst.container, "id": c.id[:12],
                            "instance": inst.name},
                "checks": [("controller takes it out of its pool", lambda: p.instance_down(inst)),
                           ("requests through the VIP", lambda: p.vips([inst.microservice]))]}

    def fault_starved(self) -> dict:
        """A starved instance: its container's CPU quota cut to STARVED_QUOTA_US a second
        (docker update), its processes running (state R or S: neither stopped nor frozen,
        so nothing tells them from a busy service without a reading), its port up: its
        kernel completes handshakes, and its service answers after seconds. Only the
        readings' timeouts find it, as they would a deadlocked process. It counts as dead
        from the cut; its quota is put back when its load segment is over."""
        p, inst = self.probe, self.starved
        c = self._our_container(inst)
        host = c.attrs.get("HostConfig") or {}
        # -1 and the kernel's 100 ms: no quota, as Docker leaves a container without one
        saved = {"cpu_quota": host.get("CpuQuota") or -1,
                 "cpu_period": host.get("CpuPeriod") or 100_000}
        start = time.time()
        c.update(cpu_period=STARVED_PERIOD_US, cpu_quota=STARVED_QUOTA_US)
        self.dead[inst.name] = start
        self.log(f"[faults] starved: {inst.container} left {STARVED_QUOTA_US // 1000} ms of "
                 f"CPU a second until the end of its load")

        def restore():
            c.update(**saved)
            self.dead.pop(inst.name, None)
            self.log(f"[faults] starved: {inst.container} has its CPU back")
        return {"start": start, "end": start, "after": restore,
                "details": {"container": inst.container, "id": c.id[:12],
                            "instance": inst.name, "restored": saved},
                "checks": [("controller takes it out of its pool", lambda: p.instance_down(inst)),
                           ("requests through the VIP", lambda: p.vips([inst.microservice]))]}

    def fault_switch(self) -> dict:
        p = self.probe
        bridges = [sw.name for sw in self.cfg.testbed.switches]
        saved = {}
        for br in bridges:
            if run_cmd(["ovs-vsctl", "--timeout=5", "br-get-external-id", br, "malb"],
                    check=False).strip() != "1":
                raise FaultError(f"bridge {br} is not tagged external-ids:malb=1 (not the "
                                 f"testbed's): not touched")
            saved[br] = bridge_controllers(br)
            if not saved[br]:
                raise FaultError(f"bridge {br} has no controller to reconnect to")
        rules = {br: max(0, len(run_cmd(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", br],
                                     check=False).strip().splitlines()) - 1)
                 for br in bridges}
        log_offset = file_size(self.st.controller.log_path)
        start = time.time()
        try:
            for br in bridges:
                run_cmd(["ovs-vsctl", "--timeout=5", "del-controller", br])
                run_cmd(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", br])
            self.log(f"[faults] switch: {', '.join(bridges)} disconnected, {sum(rules.values())} "
                     f"rules wiped; reconnect in {self.opts.hold:g} s")
            time.sleep(self.opts.hold)
        finally:
            end = time.time()
            for br in bridges:
                restore_controllers(br, saved[br])
        return {"start": start, "end": end,
                "details": {"bridges": bridges, "rules_wiped": rules, "controllers": saved,
                            "controller_log_offset": log_offset},
                "checks": [("switches reconnected", p.switches),
                           ("requests through the VIPs", p.vips)]}

    def fault_docker(self) -> dict:
        p = self.probe
        pid, evidence = project_dockerd()
        ticks = evidence["start_ticks"]
        self.probe.docker()         # it answers now, through the agents' socket
        guard = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(pid), str(ticks),
                                  str(self.opts.docker_pause + 30)], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        start = end = None
        try:
            if not same_process(pid, ticks):
                raise FaultError(f"dockerd pid {pid} changed before it could be paused")
            start = time.time()
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.2)
            evidence["state_when_paused"] = process_state(pid)
            self.log(f"[faults] docker: dockerd pid {pid} (serving {evidence['socket']}) "
                     f"stopped for {self.opts.docker_pause:g} s")
            time.sleep(max(0.0, self.opts.docker_pause - 0.2))
        finally:
            if start is not None and same_process(pid, ticks):
                os.kill(pid, signal.SIGCONT)
            end = time.time()
            guard.kill()
            guard.wait(timeout=5)
        evidence["state_after"] = process_state(pid)
        return {"start": start, "end": end, "details": {"dockerd": evidence},
                "checks": [("docker answers", p.docker),
                           ("agents answer", p.agents),
                           ("profiler fresh", lambda: p.profiler_fresh(since=end))]}

    # ------------------------------------------------------------ one fault under load
    def run_fault(self, k: int, fault: str) -> dict:
        o, st = self.opts, self.st
        rec = {"fault": fault, "what": self.what(fault), "tag": f"{k + 1}-{fault}",
               "error": None, "start": None, "end": None, "recovered_at": None}
        spec_path = os.path.join(st.run_dir, f"spec-{rec['tag']}.json")
        with open(spec_path, "w") as fh:
            json.dump(workload_spec(self.cfg, o, o.seed + k, fault), fh, indent=1)
        lead = min(LEAD_S, o.seconds / 4)
        seg0 = time.time() + 2
        rec["segment_start"] = seg0
        st.start_loadgen(spec_path, seg0, tag=rec["tag"], timeout_s=REQUEST_TIMEOUT_S)
        time.sleep(max(0.0, seg0 + lead - time.time()))
        before = snapshot(st.history_path, time.time(), self.log)
        injected = None
        try:
            injected = getattr(self, f"fault_{fault}")()
        except Exception as exc:        # noqa: BLE001 -- recorded; the next fault still runs
            rec["error"] = short(exc)
            self.log(f"[faults] {fault}: NOT INJECTED: {rec['error']}")
        if injected is not None:
            rec.update(start=injected["start"], end=injected["end"],
                       details=injected.get("details", {}))
            rec["start_offset_s"] = round(injected["start"] - seg0, 2)
            got = await_checks(injected["checks"], injected["end"], o.recovery_timeout)
            rec.update(recovered_at=got["recovered_at"], milestones=got["milestones"],
                       last_failure=got["last_failure"],
                       window_end=injected["end"] + o.recovery_timeout)
            base = injected.get("history_before") or before
            after = None if base is None else snapshot(st.history_path, base["until"],
                                                        self.log)
            if base is not None and after is not None:
                # the same cut-off: rows with t up to it, before and after the fault
                rec["rows_lost"] = rows_lost(base, after)
                rec["history_rows_checked"] = sum(base["counts"].values()) + \
                    len(base["flow_ids"])
            else:
                rec["rows_lost"] = None
            if fault == "switch":
                rec["details"]["nat_restored"] = log_lines_since(
                    st.controller.log_path, rec["details"].pop("controller_log_offset"),
                    "NAT flows restored")
            lost = rec["rows_lost"]["total"] if rec["rows_lost"] else "not measured"
            if got["recovered_at"] is None:
                self.log(f"[faults] {fault}: NOT recovered within {o.recovery_timeout:g} s "
                         f"({got['last_failure']})")
            else:
                steps = ", ".join(f"{n} {s:g} s" for n, s in got["milestones"].items())
                self.log(f"[faults] {fault}: recovered {got['recovery_s']:.1f} s after the "
                         f"fault ended ({steps}); history rows lost: {lost}")
        rec["dead"] = dict(self.dead)
        # the rest of the segment's load, then every request of it finished
        try:
            self._finish_segment(rec, seg0, fault)
        finally:
            if injected is not None and injected.get("after"):
                injected["after"]()
        return rec

    def _finish_segment(self, rec: dict, seg0: float, fault: str) -> None:
        o, st = self.opts, self.st
        clients = len(self.cfg.testbed.clients)
        st.wait_for(lambda: len(st.loadgen_summaries(rec["tag"])) == clients,
                    max(0.0, seg0 + o.seconds - time.time()) + VIDEO_SECONDS +
                    REQUEST_TIMEOUT_S + 60, f"load of {fault}", interval_s=1.0)
        summaries = st.loadgen_summaries(rec["tag"])
        rec["planned"] = sum(s["planned"] for s in summaries)
        rec["failed_in_segment"] = sum(s["failed"] for s in summaries)
        self.log(f"[faults] {fault}: load done, {rec['planned']} requests, "
                 f"{rec['failed_in_segment']} failed")

    def run(self, faults: list[str]) -> list[dict]:
        records = []
        self.recorder.start()
        try:
            for k, fault in enumerate(faults):
                steady = await_checks(self.steady_checks(), time.time(), self.opts.recovery_timeout)
                if steady["recovered_at"] is None:
                    why = f"the stack was not working before it ({steady['last_failure']})"
                    self.log(f"[faults] {fault}: skipped: {why}; the remaining faults too")
                    for rest in faults[k:]:
                        records.append({"fault": rest, "what": self.what(rest),
                                        "segment_start": time.time(), "error": why,
                                        "start": None})
                    break
                self.log(f"[faults] {k + 1}/{len(faults)} {fault}: {self.what(fault)}")
                records.append(self.run_fault(k, fault))
        finally:
            self.recorder.stop()
        return records


# ============================================================== workload, run, report
def workload_spec(cfg, opts, seed: int, phase: str) -> dict:
    """One segment of open-loop load: short ui objects and back-end jobs, a few long video
    streams, opts.rate requests per second in all, opts.seconds long."""
    paths = {"ui": ("ui-object", 0.47, "/object?size=100000"),
             "backend": ("backend-job", 0.47, "/job?seconds=1&cpu=0.1&mode=work"),
             "video": ("video-stream", 0.06, f"/stream?rate=200&seconds={VIDEO_SECONDS}")}
    classes = []
    for ms_name, (name, weight, path) in paths.items():
        ms = cfg.microservice(ms_name)
        classes.append({"name": name, "host": ms.vip, "port": ms.port, "weight": weight,
                        "path": path})
    return {"seed": seed, "arrivals": "poisson", "classes": classes,
            "phases": [{"name": phase, "seconds": opts.seconds, "from": opts.rate,
                        "to": opts.rate}]}

