"""`docker stats` arithmetic on raw stats documents, as plain functions.

CPU % is computed exactly as the docker CLI does: the container's CPU time delta over the
host's CPU time delta, times the number of online CPUs, times 100 (so one busy core is 100 %,
and a container can reach N x 100 % on N cores). Memory is usage minus the inactive page
cache (``total_inactive_file`` on cgroup v1, ``inactive_file`` on v2), as the CLI shows it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from collections.abc import Sequence

from common.netuse import network_percent


@dataclass(frozen=True)
class RawSample:
    time: float                 # when we read it (monotonic seconds)
    cpu_total_ns: int           # container CPU time
    system_ns: int              # host CPU time
    online_cpus: int
    memory_bytes: int | None    # usage without inactive cache
    memory_limit: int | None
    rx_bytes: int | None
    tx_bytes: int | None


def parse_stats(doc: dict, now: float, net: tuple[int, int] | None = None) -> RawSample:
    """A raw sample from one stats document (``one_shot``: no precpu part needed).
    ``net`` = (rx, tx) bytes read elsewhere, for containers with no Docker network."""
    cpu = doc.get("cpu_stats") or {}
    usage = cpu.get("cpu_usage") or {}
    if "total_usage" not in usage or "system_cpu_usage" not in cpu:
        raise ValueError("stats have no CPU counters (container not running?)")
    online = cpu.get("online_cpus") or len(usage.get("percpu_usage") or []) or 1
    mem = doc.get("memory_stats") or {}
    memory = None
    if "usage" in mem:
        stats = mem.get("stats") or {}
        inactive = stats.get("total_inactive_file", stats.get("inactive_file", 0))
        memory = mem["usage"] - inactive if inactive < mem["usage"] else mem["usage"]
    rx = tx = None
    networks = doc.get("networks")
    if networks:
        rx = sum(n.get("rx_bytes", 0) for n in networks.values())
        tx = sum(n.get("tx_bytes", 0) for n in networks.values())
    elif net is not None:
        rx, tx = net
    return RawSample(now, int(usage["total_usage"]), int(cpu["system_cpu_usage"]), int(online),
                     memory, mem.get("limit"), rx, tx)


def cpu_percent(prev: RawSample, cur: RawSample) -> float | None:
    """docker stats' CPU %: None until two samples with the host clock moving exist."""
    cpu_delta = cur.cpu_total_ns - prev.cpu_total_ns
    system_delta = cur.system_ns - prev.system_ns
    if system_delta <= 0 or cpu_delta < 0:
        return None
    return cpu_delta / system_delta * cur.online_cpus * 100.0


def window_base(raws: Sequence[RawSample], window_s: float) -> RawSample | None:
    """The raw sample a window of about ``window_s`` seconds ending at the latest
    (``raws[-1]``; oldest first) starts from: the one whose distance back from the latest
    is nearest ``window_s``, the older on a tie (the oldest there is when the history is
    shorter). None with fewer than two."""
    if len(raws) < 2:
        return None
    end = raws[-1].time
    return min(raws[:-1], key=lambda r: abs(end - r.time - window_s))


def rates(prev: RawSample, cur: RawSample) -> tuple[float | None, float | None]:
    dt = cur.time - prev.time
    if dt <= 0 or None in (prev.rx_bytes, cur.rx_bytes, prev.tx_bytes, cur.tx_bytes):
        return None, None
    return (max(0, cur.rx_bytes - prev.rx_bytes) / dt, max(0, cur.tx_bytes - prev.tx_bytes) / dt)


def proc_net_dev(text: str) -> tuple[int, int]:
    """(rx, tx) bytes over every interface but loopback, from /proc/<pid>/net/dev."""
    rx = tx = 0
    for line in text.splitlines()[2:]:
        name, _, data = line.partition(":")
        if name.strip() == "lo" or not data:
            continue
        fields = data.split()
        rx += int(fields[0])
        tx += int(fields[8])
    return rx, tx


@dataclass(frozen=True)
class Capacity:
    cpu_cores: float
    memory_bytes: int
    network_bytes_per_s: float
    source: str


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


class CpuReading(NamedTuple):
    """One reading of the whole server's CPU-time counter."""
    time: float                 # when we read it (monotonic seconds)
    seconds: float              # CPU seconds used so far


def whole_cores(prev: CpuReading | None, cur: CpuReading | None) -> float | None:
    """Cores the whole server used between two readings of its CPU-time counter; None
    without two readings or with the counter gone back (the group was made again)."""
    if prev is None or cur is None or cur.time <= prev.time or cur.seconds < prev.seconds:
        return None
    return (cur.seconds - prev.seconds) / (cur.time - prev.time)


def server_totals(containers: list[dict], cap: Capacity,
                  whole_cpu_cores: float | None = None) -> dict:
    """The server's use relative to its capacity, from its readable containers.

    ``whole_cpu_cores``: what the whole server used over the same time (its cgroup, or the
    machine), when the agent can read that; the part of it outside the containers (a
    process beside them, the host's own work) is ``outside_cpu_percent``, None when either
    side is unknown. docker stats cannot see it, and a server whose containers are starved
    by it measures as idle.

    Running containers that cannot be read, or that have no rate yet, are named in
    ``missing`` and the totals are partial: a resource that one of them leaves unknown is
    None, never the sum of the others (which would read as a drop in load). A server with
    no running container uses nothing: a complete reading of 0 (a placement may empty a
    server). Containers that are not running use nothing and do not make the totals
    partial."""
    cpu_cores = mem = rx = tx = 0.0
    missing, cpu_known, net_known = [], True, True
    for c in containers:
        if c.get("state", "running") != "running":
            continue
        if not c.get("readable") or c.get("cpu_percent") is None or c.get("memory_bytes") is None:
            missing.append(c["name"])
            cpu_known = net_known = False
            continue
        cpu_cores += c["cpu_percent"] / 100.0
        mem += c["memory_bytes"]
        if c.get("rx_bytes_per_s") is None or c.get("tx_bytes_per_s") is None:
            missing.append(f"{c['name']} (network)")   # unread traffic is not zero traffic
            net_known = False
            continue
        rx += c["rx_bytes_per_s"]
        tx += c["tx_bytes_per_s"]
    complete = not missing

    def known(ok: bool, value: float | None, digits: int):
        return _round(value, digits) if ok else None
    outside = None
    if cpu_known and whole_cpu_cores is not None and cap.cpu_cores:
        outside = 100.0 * max(0.0, whole_cpu_cores - cpu_cores) / cap.cpu_cores
    return {
        "cpu_cores": known(cpu_known, cpu_cores, 4),
        "cpu_percent": known(cpu_known, 100.0 * cpu_cores / cap.cpu_cores
                             if cap.cpu_cores else None, 3),
        "outside_cpu_percent": _round(outside, 3),
        "memory_bytes": int(mem) if cpu_known else None,
        "memory_percent": known(cpu_known, 100.0 * mem / cap.memory_bytes
                                if cap.memory_bytes else None, 3),
        "rx_bytes_per_s": known(net_known, rx, 1), "tx_bytes_per_s": known(net_known, tx, 1),
        "network_percent": known(net_known,
                                 network_percent(rx, tx, cap.network_bytes_per_s), 3),
        "complete": complete, "missing": missing,
    }
