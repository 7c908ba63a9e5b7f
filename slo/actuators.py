"""What sets a service's "frequency", behind one small interface (set_mhz, restore), chosen
automatically and overridable (docs/slo.md, "Actuators"). Both take their directory roots
as arguments, so tests drive them on a fake tree.

- SysfsFrequency: real per-core DVFS through cpufreq;
- QuotaFrequency: emulated, the pinned container's CPU bandwidth scaled by f / f_max;
- cgroup_cpu_dir: the cgroup holding a process's CPU bandwidth, and its version;
- ActuatorError: the frequency cannot be set here.
"""
from __future__ import annotations

import os

from common.cgroups import CGROUP_ROOT
SYSFS_CPU = "/sys/devices/system/cpu"


class ActuatorError(RuntimeError):
    """The frequency cannot be set here: the message says why."""


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


def _write(path: str, value) -> None:
    with open(path, "w") as fh:
        fh.write(str(value))


class SysfsFrequency:
    """Per-core DVFS through cpufreq (/sys/devices/system/cpu/cpuN/cpufreq): the userspace
    governor's scaling_setspeed when that governor is on, else scaling_min_freq =
    scaling_max_freq = f (the range the driver, intel_pstate with HWP included, must stay
    in). The original settings are read first and written back by restore()."""
    kind = "cpufreq"
    emulated = False

    def __init__(self, cpus: list[int], root: str = SYSFS_CPU):
        if not cpus:
            raise ActuatorError("cpufreq: no cores to set")
        # cpuN/cpufreq is a link to the core's policy (cpufreq/policyM); a policy may drive
        # several cores (acpi-cpufreq on shared clock domains: affected_cpus lists them),
        # and setting it would slow cores that are not the service's
        self.dirs, seen = [], set()
        for c in cpus:
            d = os.path.join(root, f"cpu{c}", "cpufreq")
            if not os.path.isdir(d):
                raise ActuatorError(f"{d}: no cpufreq for this core (no driver, or no such "
                                    f"core)")
            try:
                affected = {int(x) for x in _read(os.path.join(d, "affected_cpus")).split()}
            except (OSError, ValueError):
                affected = {c}          # a tree without the file: the core alone
            others = sorted(affected - set(cpus))
            if others:
                raise ActuatorError(
                    f"{d}: its frequency policy also drives cpu{', cpu'.join(map(str, others))}"
                    f" (affected_cpus {' '.join(map(str, sorted(affected)))}): pin the "
                    f"service to every core of the policy, or use the emulated actuator")
            real = os.path.realpath(d)
            if real not in seen:
                seen.add(real)
                self.dirs.append(d)
        self.original: dict[str, dict[str, str]] = {}
        for d in self.dirs:
            self.original[d] = {k: _read(os.path.join(d, k)) for k in
                                ("scaling_min_freq", "scaling_max_freq", "scaling_governor")}
        lo = max(int(_read(os.path.join(d, "cpuinfo_min_freq"))) for d in self.dirs)
        hi = min(int(_read(os.path.join(d, "cpuinfo_max_freq"))) for d in self.dirs)
        self.range_mhz = (lo // 1000, hi // 1000)

    def set_mhz(self, mhz: int) -> None:
        khz = int(mhz) * 1000
        try:
            for d in self.dirs:
                if self.original[d]["scaling_governor"] == "userspace":
                    _write(os.path.join(d, "scaling_setspeed"), khz)
                    continue
                # keep min <= max at every write: raise max first when going up
                cur_max = int(_read(os.path.join(d, "scaling_max_freq")))
                order = ("scaling_max_freq", "scaling_min_freq") if khz > cur_max else \
                    ("scaling_min_freq", "scaling_max_freq")
                for name in order:
                    _write(os.path.join(d, name), khz)
        except OSError as exc:
            raise ActuatorError(f"cpufreq: {exc.filename}: {exc.strerror}") from None

    def restore(self) -> None:
        for d, orig in self.original.items():
            try:
                # widen first (min down, max up), then set both: always a valid range
                _write(os.path.join(d, "scaling_min_freq"),
                       min(int(orig["scaling_min_freq"]),
                           int(_read(os.path.join(d, "scaling_min_freq")))))
                _write(os.path.join(d, "scaling_max_freq"), orig["scaling_max_freq"])
                _write(os.path.join(d, "scaling_min_freq"), orig["scaling_min_freq"])
            except OSError:
                pass        # restoring is best effort: the others still get theirs

    def describe(self) -> dict:
        return {"actuator": self.kind, "emulated": False, "cores": self.dirs}


def cgroup_cpu_dir(pid: int, proc: str = "/proc", root: str = CGROUP_ROOT) -> tuple[str, int]:
    """(the cgroup directory holding a process's CPU bandwidth, cgroup version) from
    /proc/<pid>/cgroup: the 'cpu' controller's line on v1, the unified one on v2."""
    try:
        lines = _read(os.path.join(proc, str(pid), "cgroup")).splitlines()
    except OSError as exc:
        raise ActuatorError(f"process {pid}: {exc.strerror}") from None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return os.path.join(root, _v1_mount(controllers, root), path.lstrip("/")), 1
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if controllers == "":
            return os.path.join(root, path.lstrip("/")), 2
    raise ActuatorError(f"process {pid}: no cpu cgroup")


def _v1_mount(controllers: str, root: str) -> str:
    """The v1 hierarchy's directory name: 'cpu,cpuacct' is mounted as that name (with 'cpu'
    a link to it) on most systems; use whichever exists."""
    for name in (controllers, "cpu"):
        if os.path.isdir(os.path.join(root, name)):
            return name
    return controllers


class QuotaFrequency:
    """Emulated, for machines without cpufreq (this VM, CI): the pinned container's CPU
    bandwidth (CFS quota, cgroup v1 or v2) scaled by f / f_max, so the service really runs
    slower at a lower "frequency". restore() writes the original quota back."""
    kind = "cgroup-quota"
    emulated = True

    def __init__(self, cgroup_dir: str, version: int, base_cores: float,
                 f_max_mhz: int, period_us: int = 100_000):
        if base_cores <= 0:
            raise ActuatorError("emulated frequency: base cores must be > 0")
        self.dir, self.version = cgroup_dir, version
        self.base_cores, self.f_max_mhz, self.period_us = base_cores, f_max_mhz, period_us
        self.file = os.path.join(cgroup_dir, "cpu.max" if version == 2 else
                                 "cpu.cfs_quota_us")
        try:
            self.original = _read(self.file)
            self.original_period = None if version == 2 else \
                _read(os.path.join(cgroup_dir, "cpu.cfs_period_us"))
        except OSError as exc:
            raise ActuatorError(f"{self.file}: {exc.strerror}") from None

    def quota_us(self, mhz: int) -> int:
        return max(1000, int(self.base_cores * self.period_us * mhz / self.f_max_mhz))

    def set_mhz(self, mhz: int) -> None:
        q = self.quota_us(mhz)
        try:
            if self.version == 2:
                _write(self.file, f"{q} {self.period_us}")
            else:
                _write(os.path.join(self.dir, "cpu.cfs_period_us"), self.period_us)
                _write(self.file, q)
        except OSError as exc:
            raise ActuatorError(f"{self.file}: {exc.strerror}") from None

    def restore(self) -> None:
        try:
            if self.version == 1 and self.original_period:
                _write(os.path.join(self.dir, "cpu.cfs_period_us"), self.original_period)
            _write(self.file, self.original)
        except OSError:
            pass            # the container is gone: nothing to restore

    def describe(self) -> dict:
        return {"actuator": self.kind, "emulated": True, "cgroup": self.dir,
                "base_cores": self.base_cores}
