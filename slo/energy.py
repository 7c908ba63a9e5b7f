"""CPU energy: measured from RAPL where it can be read, otherwise modelled, and always said
which (docs/slo.md, "Energy").

- CorePowerModel: SLO-AEEM's per-core model (Song et al.), P = m V + C V^2 f with V linear in f;
- emulated_busy_s: the busy time at an emulated frequency (a smaller CPU quota);
- Rapl, counter_delta: the RAPL package counters, wrap-around handled.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class CorePowerModel:
    """SLO-AEEM's power model of one pinned core: leakage m V(f), paid all the time, and
    dynamic power C V(f)^2 f while busy, the voltage linear in f between (f_min, v_min) and
    (f_max, v_max). A core busy b seconds at f in an interval of t seconds uses
    E = t m V(f) + b C V(f)^2 f. The defaults are a core of the paper's class (Xeon Gold
    5318Y: 165 W over 24 cores, about 6.9 W a core fully busy at 2.1 GHz, a quarter of it
    leakage); they set the scale, the ratios between policies come from V(f) and f."""

    f_min_mhz: float = 1000.0
    f_max_mhz: float = 2100.0
    v_min: float = 0.70
    v_max: float = 1.00
    core_w_at_max: float = 6.9       # one core fully busy at f_max
    leakage_share: float = 0.25      # of core_w_at_max

    def voltage(self, f_mhz: float) -> float:
        if self.f_max_mhz == self.f_min_mhz:
            return self.v_max
        x = (f_mhz - self.f_min_mhz) / (self.f_max_mhz - self.f_min_mhz)
        return self.v_min + max(0.0, min(1.0, x)) * (self.v_max - self.v_min)

    def leakage_w(self, f_mhz: float) -> float:
        m = self.leakage_share * self.core_w_at_max / self.v_max
        return m * self.voltage(f_mhz)

    def dynamic_w(self, f_mhz: float) -> float:
        c = (1 - self.leakage_share) * self.core_w_at_max / (self.v_max ** 2 * self.f_max_mhz)
        return c * self.voltage(f_mhz) ** 2 * f_mhz

    def energy_j(self, f_mhz: float, seconds: float, busy_s: float, cores: int = 1) -> float:
        """Energy of `cores` pinned cores over `seconds`, busy `busy_s` core-seconds in all."""
        busy_s = max(0.0, min(busy_s, seconds * cores))
        return seconds * cores * self.leakage_w(f_mhz) + busy_s * self.dynamic_w(f_mhz)

    def describe(self) -> dict:
        return {"source": "modelled", "model": "P = m V + C V^2 f, V linear in f",
                "f_mhz": [self.f_min_mhz, self.f_max_mhz], "v": [self.v_min, self.v_max],
                "core_w_at_max": self.core_w_at_max, "leakage_share": self.leakage_share}


def emulated_busy_s(cpu_s: float, f_mhz: float, f_max_mhz: float) -> float:
    """Busy time at emulated frequency f of work measured as cpu_s at full speed: under the
    emulated actuator a lower frequency is a smaller CPU quota, so the same cycles take
    f_max / f as long."""
    return cpu_s * f_max_mhz / f_mhz


def counter_delta(before: int, after: int, max_range: int) -> int:
    """A RAPL counter's increase, across one wrap-around at max_range."""
    return after - before if after >= before else after + max_range - before


class Rapl:
    """Package energy from /sys/class/powercap/intel-rapl:N (root-only since Linux 5.10).
    `available()` says whether it can be read; `read_uj()` the counters summed over the
    packages, wrap-around handled between reads."""

    def __init__(self, root: str = "/sys/class/powercap"):
        self.zones = []
        try:
            names = sorted(os.listdir(root))
        except OSError:
            names = []
        for name in names:
            # packages only (intel-rapl:0, :1); subzones (intel-rapl:0:0) are inside them
            if name.startswith("intel-rapl:") and name.count(":") == 1:
                self.zones.append(os.path.join(root, name))
        self._last: dict[str, int] = {}
        self._total_uj = 0

    def _read(self, zone: str, what: str) -> int:
        with open(os.path.join(zone, what)) as fh:
            return int(fh.read())

    def available(self) -> bool:
        try:
            return bool(self.zones) and all(self._read(z, "energy_uj") >= 0
                                            for z in self.zones)
        except (OSError, ValueError):
            return False

    def read_uj(self) -> int:
        """Energy counted since the first read, in µJ."""
        for z in self.zones:
            now = self._read(z, "energy_uj")
            if z in self._last:
                self._total_uj += counter_delta(self._last[z], now,
                                                self._read(z, "max_energy_range_uj"))
            self._last[z] = now
        return self._total_uj
