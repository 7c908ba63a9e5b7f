"""The faults themselves (Faults), each injected on the running stack by a fault_<name>
method that returns when it started and ended, what it touched, and the checks that say the
stack has recovered (experiments/faults/suite.py runs them one after another under load).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from common.httpjson import HttpError, get_json
from common.state import OVS_PID_FILE, process_state, same_process
from experiments.faults.probing import (DecisionRecorder, FaultError, Probe,
                                        bridge_controllers, file_size, project_dockerd,
                                        restore_controllers, run_cmd, short, snapshot,
                                        verified_pid, wait_for_write)
OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"      # how setup starts Open vSwitch
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


class Faults:
    """The faults on a running stack (st), their targets chosen from its configuration;
    dead: the instances that count as dead, from when."""

    def __init__(self, st, opts, log):
        self.stack, self.opts, self.log = st, opts, log
        self.cfg = st.cfg
        self.probe = Probe(st)
        self.recorder = DecisionRecorder(st)
        self.dead: dict[str, float] = {}
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
            "takeover": "the master controller SIGKILLed beside its standby, started again "
                        "as the standby once the other has taken over",
            "container": f"container of {self.container.name} killed (stays dead)",
            "hung": f"container of {self.hung.name} frozen (docker pause: its port up, "
                    f"nothing answering) until the end of its load",
            "starved": f"container of {self.starved.name} left {STARVED_QUOTA_US // 1000} ms "
                       f"of CPU a second (its process running, its port up) until the end "
                       f"of its load",
            "switch": f"switches' controller connection dropped and flows wiped for "
                      f"{o.hold:g} s",
            "ovs": "Open vSwitch restarted as an operator does (ovs-ctl restart: its flows "
                   "saved and put back, its connection tracker's state lost)",
            "docker": f"dockerd stopped (SIGSTOP) for {o.docker_pause:g} s",
        }[fault]

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
        svc = self.stack.agents[server]
        pid = verified_pid(svc)
        start = time.time()
        svc.kill(signal.SIGKILL)
        self.log(f"[faults] agent: agent-{server} (pid {pid}) killed; restart in "
                 f"{self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart(f"agent-{server}", lambda: self.stack.start_agent(server))
        return {"start": start, "end": end,
                "details": {"pid": pid, "server": server, "restart_error": failed},
                "checks": [("agent answers", lambda: p.agents([server])),
                           ("profiler fresh", lambda: p.profiler_fresh(since=end))]}

    def fault_profiler(self) -> dict:
        p, svc = self.probe, self.stack.profiler
        pid = verified_pid(svc)
        wal = self.stack.history_path + "-wal"
        writing = wait_for_write(wal, 2 * self.cfg.profiler.period_s + 1)
        start = time.time()
        svc.kill(signal.SIGKILL)
        committed = snapshot(self.stack.history_path, start, self.log)
        self.log(f"[faults] profiler: pid {pid} killed "
                 f"{'while writing its history' if writing else '(no write seen in time)'}; "
                 f"restart in {self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart("the profiler", self.stack.start_profiler)
        return {"start": start, "end": end, "history_before": committed,
                "details": {"pid": pid, "killed_while_writing": writing,
                            "restart_error": failed},
                "checks": [("profiler answers", p.profiler_up),
                           ("profiler fresh", p.profiler_fresh),
                           ("controller reaches the profiler",
                            lambda: p.controller_profiler(since=end))]}

    def fault_controller(self) -> dict:
        p, svc = self.probe, self.stack.controller
        pid = verified_pid(svc)
        self.recorder.poll()      # the decisions it is about to forget
        start = time.time()
        svc.stop()
        self.log(f"[faults] controller: pid {pid} stopped; start again in {self.opts.hold:g} s")
        time.sleep(self.opts.hold)
        end = time.time()
        failed = self._restart("the controller", self.stack.start_controller)
        return {"start": start, "end": end, "details": {"pid": pid, "restart_error": failed},
                "checks": [("controller answers", p.controller_up),
                           ("switches connected", p.switches),
                           ("controller reaches the profiler",
                            lambda: p.controller_profiler(since=end)),
                           ("requests through the VIPs", p.vips)]}

    def fault_takeover(self) -> dict:
        """The master killed beside its standby (a pair: --standby): the standby's claim
        awaited and timed, the stack turned to it, the killed one started again as the
        standby. The fault is the kill: recovery counts from it."""
        p, st = self.probe, self.stack
        if st.standby is None:
            raise FaultError("no standby controller (the suite's --standby)")
        svc, pid = st.controller, verified_pid(st.controller)
        verified_pid(st.standby)
        self.recorder.poll()      # the decisions it is about to take with it
        standby_role = f"http://127.0.0.1:{st.pair.standby_ports()[1]}/malb/role"
        start = time.time()
        svc.kill(signal.SIGKILL)
        claimed = None
        while time.time() - start < self.opts.recovery_timeout:
            try:
                if get_json(standby_role, 1.0).get("role") == "master":
                    claimed = time.time()
                    break
            except HttpError:
                pass
            time.sleep(0.05)
        took = None if claimed is None else round(claimed - start, 3)
        self.log(f"[faults] takeover: master pid {pid} killed; the standby "
                 f"{'claimed after ' + str(took) + ' s' if took is not None else 'did not claim'}")
        failed = None
        if claimed is not None:
            st.promote_standby()
            failed = self._restart("the old master as standby", st.start_standby)
        return {"start": start, "end": start,
                "details": {"pid": pid, "takeover_s": took, "restart_error": failed},
                "checks": [("controller answers", p.controller_up),
                           ("the standby is master", p.master),
                           ("switches connected", p.switches),
                           ("controller reaches the profiler",
                            lambda: p.controller_profiler(since=start)),
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
        log_offset = file_size(self.stack.controller.log_path)
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

    def fault_ovs(self) -> dict:
        """Open vSwitch restarted with its own script, as setup started it; under tracker
        mode its connection tracker's state is lost, and the tracked connections' next
        segments come to the controller."""
        p = self.probe
        for sw in self.cfg.testbed.switches:
            if run_cmd(["ovs-vsctl", "--timeout=5", "br-get-external-id", sw.name, "malb"],
                       check=False).strip() != "1":
                raise FaultError(f"bridge {sw.name} is not tagged external-ids:malb=1 (not "
                                 f"the testbed's): Open vSwitch not restarted")
        before = read_pid(OVS_PID_FILE)
        start = time.time()
        res = subprocess.run([OVS_CTL, "restart"], capture_output=True, text=True,
                             timeout=120)
        end = time.time()
        if res.returncode != 0:
            raise FaultError(f"ovs-ctl restart: {(res.stderr or res.stdout).strip()[-200:]}")
        after = read_pid(OVS_PID_FILE)
        self.log(f"[faults] ovs: ovs-vswitchd {before} -> {after} in {end - start:.1f} s")
        return {"start": start, "end": end,
                "details": {"pid_before": before, "pid_after": after,
                            "restart_s": round(end - start, 2)},
                "checks": [("switches connected", p.switches),
                           ("requests through the VIPs", p.vips),
                           ("controller answers", p.controller_up)]}

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


def read_pid(path: str) -> int | None:
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None
