"""The host's cgroups, for the testbed, the agents and the experiments: server groups, each a
parent cgroup (--cgroup-parent) that carries one server's CPU share and memory limit for all
of its containers, on cgroup v1 or v2 with the cgroupfs or the systemd driver
(docs/testbed.md, "Server groups").

- CgroupLayout, detect_layout, group_parent, group_dirs: where the groups go on this host;
- apply_server_limits, read_server_limits, read_server_cpu_seconds: limits set, read back;
- remove_groups: every server group removed (empty ones only).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

CGROUP_ROOT = "/sys/fs/cgroup"
CFS_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupLayout:
    version: int          # 1 or 2
    driver: str           # cgroupfs or systemd


def detect_layout(docker_info: dict) -> CgroupLayout:
    version = int(docker_info.get("CgroupVersion") or
                  (2 if os.path.exists(f"{CGROUP_ROOT}/cgroup.controllers") else 1))
    return CgroupLayout(version, docker_info.get("CgroupDriver", "cgroupfs"))


def group_parent(layout: CgroupLayout, server: str) -> str:
    """The --cgroup-parent value for a server's containers."""
    if layout.driver == "systemd":
        return f"malb-{server}.slice"
    return f"/malb/{server}"


def group_dirs(layout: CgroupLayout, server: str) -> dict[str, str]:
    if layout.driver == "systemd":
        rel = f"malb.slice/malb-{server}.slice"
    else:
        rel = f"malb/{server}"
    if layout.version == 2:
        return {"unified": f"{CGROUP_ROOT}/{rel}"}
    return {"cpu": f"{CGROUP_ROOT}/cpu/{rel}", "memory": f"{CGROUP_ROOT}/memory/{rel}",
            "cpuacct": f"{CGROUP_ROOT}/cpuacct/{rel}"}


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


def _enable_v2_controllers(path: str) -> None:
    """cpu and memory must be enabled in every ancestor's subtree_control."""
    parts = os.path.relpath(path, CGROUP_ROOT).split(os.sep)
    current = CGROUP_ROOT
    for part in parts:
        control = os.path.join(current, "cgroup.subtree_control")
        try:
            _write(control, "+cpu +memory")
        except OSError as exc:
            # refused, e.g. by systemd's delegation: fine only if they are on already
            try:
                with open(control) as fh:
                    enabled = set(fh.read().split())
            except OSError:
                enabled = set()
            if not {"cpu", "memory"} <= enabled:
                raise RuntimeError(f"{control}: cannot enable the cpu and memory controllers "
                                   f"({exc.strerror}); the server limits would not "
                                   f"apply") from None
        current = os.path.join(current, part)


def apply_server_limits(layout: CgroupLayout, server: str, cpu_cores: float,
                        memory_mb: int) -> str:
    """Create the server's parent cgroup with its limits; returns the cgroup-parent value."""
    dirs = group_dirs(layout, server)
    quota = max(1000, int(cpu_cores * CFS_PERIOD_US))
    mem_bytes = int(memory_mb) * 1024 * 1024
    if layout.version == 2:
        path = dirs["unified"]
        os.makedirs(path, exist_ok=True)
        _enable_v2_controllers(path)
        _write(f"{path}/cpu.max", f"{quota} {CFS_PERIOD_US}")
        _write(f"{path}/memory.max", str(mem_bytes))
    else:
        for d in dirs.values():
            os.makedirs(d, exist_ok=True)
        _write(f"{dirs['cpu']}/cpu.cfs_period_us", str(CFS_PERIOD_US))
        _write(f"{dirs['cpu']}/cpu.cfs_quota_us", str(quota))
        _write(f"{dirs['memory']}/memory.limit_in_bytes", str(mem_bytes))
    return group_parent(layout, server)


def read_server_limits(layout: CgroupLayout, server: str) -> tuple[float, int] | None:
    """(cpu cores, memory bytes) as the kernel holds them, or None if the group is gone."""
    dirs = group_dirs(layout, server)
    try:
        if layout.version == 2:
            quota, period = open(f"{dirs['unified']}/cpu.max").read().split()
            mem = open(f"{dirs['unified']}/memory.max").read().strip()
            cores = float("inf") if quota == "max" else int(quota) / int(period)
            return cores, (0 if mem == "max" else int(mem))
        quota = int(open(f"{dirs['cpu']}/cpu.cfs_quota_us").read())
        period = int(open(f"{dirs['cpu']}/cpu.cfs_period_us").read())
        mem = int(open(f"{dirs['memory']}/memory.limit_in_bytes").read())
        return (float("inf") if quota < 0 else quota / period), mem
    except (OSError, ValueError):
        return None


def read_server_cpu_seconds(layout: CgroupLayout, server: str) -> float | None:
    """CPU time the server's containers used so far, in seconds, or None if the group is
    gone (cgroup v1: cpuacct.usage in ns; v2: usage_usec in cpu.stat)."""
    dirs = group_dirs(layout, server)
    try:
        if layout.version == 2:
            with open(f"{dirs['unified']}/cpu.stat") as fh:
                stat = dict(line.split() for line in fh if line.strip())
            return int(stat["usage_usec"]) / 1e6
        with open(f"{dirs['cpuacct']}/cpuacct.usage") as fh:
            return int(fh.read()) / 1e9
    except (OSError, ValueError, KeyError):
        return None


def remove_groups() -> list[str]:
    """Remove every malb server group (empty cgroups only; the kernel refuses others)."""
    removed = []
    for top in (f"{CGROUP_ROOT}/{sub}" for sub in ("cpu", "cpuacct", "memory", "cpuset", "pids",
                                                   "blkio", "devices", "freezer", "systemd",
                                                   "net_cls", "perf_event", "hugetlb", "")):
        for base in ("malb", "malb.slice"):
            root = os.path.join(top, base)
            if not os.path.isdir(root):
                continue
            # children first
            for dirpath, _dirnames, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(dirpath)
                    removed.append(dirpath)
                except OSError:
                    pass
    return removed
