"""The host SLO loop inside the agent (SLO-AEEM, Song et al.): for each microservice with an
SLO that runs on this server, a slo.loop.ServiceLoop whose SLI is the service's GET /latency
(read in the container's network namespace) or what its clients report (`slo.sli: client`,
slo/client_sli.py), whose queue (for the predictive rule) is the same GET /latency's
in_flight and count, whose CPU time is its cgroup's and whose actuator is cpufreq on the
server's pinned cores where the machine has it, else the container's CPU quota (emulated).
REST: GET /slo, PUT /slo, POST /slo/observations; Prometheus metrics in the agent's
/metrics."""
from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import threading
import time

from prometheus_client import Counter, Gauge

from common.config import Config
from common.httpjson import BadRequest, field_name, quote
from common.numbers import is_finite
from common.config.model import SLI_SOURCES
from slo.actuators import SYSFS_CPU, ActuatorError, QuotaFrequency, SysfsFrequency, \
    cgroup_cpu_dir
from slo.client_sli import ClientLatencies, parse_observations
from slo.frequency_controller import LoopSettings
from slo.predictive import PredictiveSettings
from slo.energy import CorePowerModel, Rapl
from slo.loop import ServiceLoop

log = logging.getLogger("malb.slo")
OBJECTIVE_FIELDS = {"target_ms": (int, float), "percentile": (int, float),
                    "margin": (int, float), "band_mode": (str,), "policy": (str,),
                    "sli": (str,)}


def choose_actuator(kind: str, cores: tuple[int, ...], sysfs: str = SYSFS_CPU) -> str:
    """cpufreq when asked, or (auto) when every pinned core has a cpufreq directory; else
    emulated."""
    if kind != "auto":
        return kind
    if cores and all(os.path.isdir(f"{sysfs}/cpu{c}/cpufreq") for c in cores):
        return "cpufreq"
    return "emulated"


class ContainerProbe:
    """The container of one instance: its pid (looked up again after a restart), its
    service's latency summary and its CPU time."""

    def __init__(self, client, container: str, port: int):
        self.client, self.container, self.port = client, container, port
        self.pid = 0

    def _pid(self) -> int:
        if self.pid and os.path.exists(f"/proc/{self.pid}"):
            return self.pid
        c = self.client.containers.get(self.container)
        self.pid = c.attrs.get("State", {}).get("Pid") or 0
        if not self.pid:
            raise ActuatorError(f"{self.container}: not running")
        return self.pid

    def latency(self, window_s: float) -> dict | None:
        res = subprocess.run(["nsenter", "-t", str(self._pid()), "-n", "curl", "-s", "-m",
                              "1", f"http://127.0.0.1:{self.port}/latency?window="
                                   f"{window_s:.2f}"],
                             capture_output=True, text=True, timeout=3)
        return json.loads(res.stdout) if res.returncode == 0 else None

    def cgroup(self) -> tuple[str, int]:
        return cgroup_cpu_dir(self._pid())

    def cpu_seconds(self) -> float | None:
        where, version = self.cgroup()
        if version == 2:
            with open(f"{where}/cpu.stat") as fh:
                return int(dict(line.split() for line in fh)["usage_usec"]) / 1e6
        acct = where if os.path.exists(f"{where}/cpuacct.usage") else \
            where.replace("/cpu/", "/cpuacct/", 1)
        with open(f"{acct}/cpuacct.usage") as fh:
            return int(fh.read()) / 1e9




class SloRunner:
    def __init__(self, cfg: Config, server: str, client, registry, actuator: str | None = None):
        self.cfg, self.server = cfg, server
        srv = cfg.server(server)
        lc = cfg.agents.slo
        self.period_s = lc.period_s
        self.kind = choose_actuator(actuator or lc.actuator, srv.cores)
        rapl = Rapl()
        self.rapl = rapl if rapl.available() else None
        self.loops: dict[str, ServiceLoop] = {}
        # per service: where its SLI comes from now, and what its clients reported
        self.sli_source: dict[str, str] = {}
        self.client_latencies: dict[str, ClientLatencies] = {}
        for inst in cfg.instances_on(server):
            ms = cfg.microservice(inst.microservice)
            if ms.slo is None:
                continue
            settings = LoopSettings(
                target_ms=ms.slo.target_ms, percentile=ms.slo.percentile,
                margin=ms.slo.margin, f_min_mhz=srv.frequency.min_mhz,
                f_max_mhz=srv.frequency.max_mhz, step_mhz=srv.frequency.step_mhz,
                emergency=lc.emergency, cooldown_s=lc.cooldown_s, dwell_s=lc.dwell_s,
                min_samples=lc.min_samples, band_mode=lc.band_mode, guard=lc.guard)
            probe = ContainerProbe(client, inst.container, ms.port)
            self.sli_source[ms.name] = ms.slo.sli
            self.client_latencies[ms.name] = ClientLatencies()
            self.loops[ms.name] = ServiceLoop(
                ms.name, settings, self._factory(probe, srv, settings),
                self._sli_function(ms.name, probe),
                probe.cpu_seconds, cores=max(1, len(srv.cores)),
                capacity_cores=self._base_cores(srv), window_s=lc.window_s,
                power=CorePowerModel(settings.f_min_mhz, settings.f_max_mhz), rapl=self.rapl,
                policy=lc.policy, queue_fn=probe.latency, predictive=PredictiveSettings(
                    work_scv=lc.predictive.work_scv, offset_gain=lc.predictive.offset_gain,
                    max_down_steps=lc.predictive.max_down_steps,
                    margin=lc.predictive.margin))
        self._stop = threading.Event()
        self._thread = None
        self._metrics(registry)

    def _sli_function(self, name: str, probe: ContainerProbe):
        """The loop's SLI source, read at each step: the service's own histogram, or the
        requests its clients reported (wall clock: their ends are Unix times)."""
        def sli(window_s: float) -> dict | None:
            if self.sli_source[name] == "client":
                return self.client_latencies[name].window(time.time(), window_s)
            return probe.latency(window_s)
        return sli

    def _base_cores(self, srv) -> float:
        """What the service can use at the maximum: its pinned cores (cpufreq) or, emulated,
        the server's CPU share within them."""
        if self.kind == "cpufreq":
            return float(len(srv.cores))
        return min(srv.cpu, len(srv.cores)) if srv.cores else srv.cpu

    def _factory(self, probe: ContainerProbe, srv, settings: LoopSettings):
        def make():
            if self.kind == "cpufreq":
                if not srv.cores:
                    raise ActuatorError(f"{srv.name}: cpufreq needs the server's cores "
                                        f"(servers[].cores)")
                return SysfsFrequency(list(srv.cores))
            base = self._base_cores(srv)
            where, version = probe.cgroup()
            # a 10 ms CFS period: throttling fine-grained enough to read as a slower clock
            return QuotaFrequency(where, version, base, settings.f_max_mhz, period_us=10_000)
        return make

    def _metrics(self, registry) -> None:
        self.m_sli = Gauge("malb_slo_sli_seconds", "SLI: the service's tail latency over the "
                           "loop's window (NaN without one).", ("service",), registry=registry)
        self.m_target = Gauge("malb_slo_target_seconds", "SLO target.", ("service",),
                              registry=registry)
        self.m_freq = Gauge("malb_slo_frequency_hertz", "Frequency set for the service's "
                            "cores (emulated or real).", ("service",), registry=registry)
        self.m_energy = Counter("malb_slo_energy_joules_total", "Modelled CPU energy of the "
                                "service's cores since the agent started (slo/energy.py's "
                                "power model).", ("service",), registry=registry)
        self._energy_counted: dict[str, float] = {}     # joules already in m_energy
        self.m_decisions = Counter("malb_slo_decisions_total", "Loop decisions by action.",
                                   ("service", "action"), registry=registry)

    # ------------------------------------------------------------ running
    def step(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for name, loop in self.loops.items():
            d = loop.step(now)
            self.m_decisions.labels(name, d.action).inc()
            self.m_freq.labels(name).set(d.state.freq_mhz * 1e6)
            self.m_target.labels(name).set(loop.settings.target_ms / 1000)
            self.m_sli.labels(name).set(d.sli_ms / 1000 if d.sli_ms is not None else math.nan)
            # the counter takes what the loop's running total added since the last step
            added = loop.energy_j - self._energy_counted.get(name, 0.0)
            if added > 0:
                self.m_energy.labels(name).inc(added)
                self._energy_counted[name] = loop.energy_j

    def run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.step(started)
            except Exception:   # keep the loop alive; the log has it
                log.exception("SLO loop step failed")
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - started)))
        for loop in self.loops.values():
            loop.restore()

    def start(self) -> None:
        if self.loops:
            self._thread = threading.Thread(target=self.run, name="slo-loop", daemon=True)
            self._thread.start()
            log.info("SLO loop for %s every %.1f s (%s actuator)", ", ".join(self.loops),
                     self.period_s, self.kind)

    def stop(self) -> None:
        """Stop and put every frequency setting back as it was."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        else:
            for loop in self.loops.values():
                loop.restore()

    # ------------------------------------------------------------ HTTP
    def routes(self) -> dict:
        def get(_q, _b):
            now = time.time()
            return 200, {"server": self.server, "actuator": self.kind,
                         "energy_source": "rapl" if self.rapl else "modelled",
                         "period_s": self.period_s,
                         "services": {n: {**loop.status(), "sli_source": self.sli_source[n],
                                          "client_reports":
                                          self.client_latencies[n].status(now)}
                                      for n, loop in self.loops.items()}}

        def put(_q, body):
            return self.change(body)

        def observations(_q, body):
            return self.observe(body)
        return {("GET", "/slo"): get, ("PUT", "/slo"): put,
                ("POST", "/slo/observations"): observations}

    def observe(self, body, now: float | None = None) -> tuple[int, dict]:
        """POST /slo/observations {"service": name, "observations": [[end_unix_s,
        latency_ms], ...]}: requests a client timed end to end; a 400 naming the field, and
        nothing kept, on a bad body."""
        try:
            name, obs = parse_observations(body)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        if name not in self.loops:
            raise BadRequest(f"service: {quote(name)} has no SLO loop on {self.server} "
                             f"(have: {', '.join(sorted(self.loops)) or 'none'})")
        kept = self.client_latencies[name].add(obs, time.time() if now is None else now)
        return 200, {"service": name, "kept": kept, "sli_source": self.sli_source[name]}

    def change(self, body) -> tuple[int, dict]:
        """PUT /slo {"service": name, "target_ms": .., "percentile": .., "margin": ..,
        "band_mode": ..}: a 400 naming the field, and nothing changed, on a bad body."""
        if not isinstance(body, dict):
            raise BadRequest("body: expected a JSON object {\"service\": ..., "
                             "\"target_ms\": ...}")
        name = body.get("service")
        if not isinstance(name, str) or name not in self.loops:   # a list is not hashable
            raise BadRequest(f"service: {quote(name)} has no SLO loop on {self.server} "
                             f"(have: {', '.join(sorted(self.loops)) or 'none'})")
        changes = {k: v for k, v in body.items() if k != "service"}
        if not changes:
            raise BadRequest("body: nothing to change (target_ms, percentile, margin, sli, "
                             "band_mode, policy)")
        for k, v in changes.items():
            if k not in OBJECTIVE_FIELDS:
                raise BadRequest(f"{field_name(k)}: unknown field (known: "
                                 f"{', '.join(sorted(OBJECTIVE_FIELDS))})")
            if isinstance(v, bool) or not isinstance(v, OBJECTIVE_FIELDS[k]):
                raise BadRequest(f"{k}: expected a "
                                 f"{'string' if OBJECTIVE_FIELDS[k] == (str,) else 'number'}"
                                 f", got {quote(v)}")
            if isinstance(v, (int, float)) and not is_finite(v):
                # JSON's integers have no limit: 1 followed by 400 zeros passes as a number
                # and breaks the loop's arithmetic later (OverflowError) if taken
                raise BadRequest(f"{k}: expected a finite number, got {quote(v)}")
        if "percentile" in changes:
            changes["percentile"] = float(changes["percentile"])
        source = changes.pop("sli", None)
        if source is not None and source not in SLI_SOURCES:
            raise BadRequest(f"sli: expected one of {', '.join(SLI_SOURCES)}, "
                             f"got {quote(source)}")
        try:
            settings = self.loops[name].set_objective(**changes)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        if source is not None:
            self.sli_source[name] = source
        return 200, {"service": name, "policy": self.loops[name].policy,
                     "sli": self.sli_source[name],
                     "slo": {"target_ms": settings.target_ms,
                             "percentile": settings.percentile,
                             "margin": settings.margin, "band_mode": settings.band_mode}}
