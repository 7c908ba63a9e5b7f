"""Where a testbed's CPU goes during a benchmark step: cumulative CPU seconds of the
controller, Open vSwitch, the profiler, the host agents, the servers' cgroups and the whole
machine, read before and after a step (benchmarks.haproxy, benchmarks.modes,
benchmarks.fastpath) or a measured phase (experiments.placement_comparison).

- CpuMeters: read() the parts' CPU seconds now (None for a part that cannot be read);
- used: per part, CPU seconds over a step and cores (CPU seconds / step seconds).
"""
from __future__ import annotations

from common.cgroups import detect_layout, read_server_cpu_seconds
from common.state import CLK_TCK, ovs_vswitchd_pid, process_cpu_seconds


def machine_cpu_seconds() -> float | None:
    """Busy CPU seconds of the whole machine (all CPUs; idle and iowait left out)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    guest = sum(fields[8:10]) if len(fields) > 9 else 0     # already counted in user, nice
    return (sum(fields) - idle - guest) / CLK_TCK


def _pid(service) -> int | None:
    proc = getattr(service, "proc", None)
    return proc.pid if proc is not None else None


class CpuMeters:
    """The parts of a running experiments.stack.Stack (its controller as it is at each read:
    a benchmark may restart it between reads of different steps)."""

    def __init__(self, stack):
        self.stack = stack
        self.ovs = ovs_vswitchd_pid()
        self.layout = None
        if getattr(stack.testbed, "backend", None) == "mininet":
            from topologies.dockerhost import docker_client   # deferred: Docker's SDK
            self.layout = detect_layout(docker_client().info())

    def read(self) -> dict[str, float | None]:
        def cpu(pid):
            return None if pid is None else process_cpu_seconds(pid)

        servers = None
        if self.layout is not None:
            each = [read_server_cpu_seconds(self.layout, s.name) for s in self.stack.cfg.servers]
            servers = None if None in each else sum(each)
        agents = [cpu(_pid(a)) for a in self.stack.agents.values()]
        return {"controller": cpu(_pid(self.stack.controller)), "ovs": cpu(self.ovs),
                "profiler": cpu(_pid(self.stack.profiler)),
                "agents": None if not agents or None in agents else sum(agents),
                "servers": servers, "machine": machine_cpu_seconds()}


def used(before: dict, after: dict, seconds: float) -> dict:
    """Per part: CPU seconds over the step (`<part>_cpu_s`) and cores (`<part>_cores`)."""
    out = {}
    for k in before:
        d = None if before[k] is None or after.get(k) is None else after[k] - before[k]
        out[f"{k}_cpu_s"] = None if d is None else round(d, 3)
        out[f"{k}_cores"] = None if d is None or seconds <= 0 else round(d / seconds, 4)
    return out
