"""The statistics of the MALB paper's Scenario 2 (section IV.B), as plain functions.

Inputs are plain data: per-timestamp server samples ``{t: {server: {cpu, mem, net}}}``
(percent of each server's capacity) and request records (dicts as written by
experiments/loadgen.py). Outputs are dicts ready for JSON, tables and plots.

- Table II: at each timestamp, the standard deviation and the range (max - min) across
  servers of CPU, memory, network and energy; averaged over the run.
- Fig. 3: average and worst-case use of CPU and network, over all servers and for the most
  loaded one; worst case = mean of the top 3 % of samples (the paper: "the average of the 30
  higher values ... the 3 % of total measurements").
- Table III: per request class, the number of requests (and how many failed), the response
  time (ms) or, for video, the throughput (kB/s), average and standard deviation, Jain's
  fairness index, and for every class the median and p99 of the response time (ms; for
  video, until the stream's end).
- Energy: the non-linear CPU model of Fan, Weber and Barroso (2007) with r = 1.4 and linear
  memory and network models, each component between a baseline of 40 % of its busy power and
  its busy power (the paper's figures: CPU 160 W, memory 36 W, disk 12 W, PCI slots 25 W,
  motherboard 25 W, fan 10 W).
- What balancing costs: part_cores, balancing_cpu_per_1000 (a run's controller, profiler,
  proxy and switch CPU per 1,000 requests).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from profiler.weights import RESOURCES

WORST_FRACTION = 0.03
ELASTICITY_THRESHOLD = 70.0


@dataclass(frozen=True)
class ServerPowerModel:
    cpu_w: float = 160.0
    memory_w: float = 36.0
    disk_w: float = 12.0
    pci_w: float = 25.0         # network interface (PCI slots): linear in network use
    motherboard_w: float = 25.0
    fan_w: float = 10.0
    baseline: float = 0.4       # idle power as a fraction of busy power, every component
    r: float = 1.4              # Fan et al.'s calibration parameter


def _unit(percent: float) -> float:
    return min(1.0, max(0.0, percent / 100.0))


def server_power(cpu: float, mem: float, net: float,
                 m: ServerPowerModel = ServerPowerModel()) -> float:
    """Watts for utilizations in percent. CPU: P_idle + (P_busy - P_idle)(2u - u^r);
    memory and network: linear between idle and busy; disk, motherboard and fan, which the
    model does not load, at their baseline."""
    u_cpu, u_mem, u_net = _unit(cpu), _unit(mem), _unit(net)
    b = m.baseline
    p = m.cpu_w * (b + (1 - b) * (2 * u_cpu - u_cpu ** m.r))
    p += m.memory_w * (b + (1 - b) * u_mem)
    p += m.pci_w * (b + (1 - b) * u_net)
    p += (m.disk_w + m.motherboard_w + m.fan_w) * b
    return p


def _spread(values: list[float]) -> tuple[float, float]:
    return statistics.pstdev(values), max(values) - min(values)


def table2(samples: dict[float, dict[str, dict]], model: ServerPowerModel = ServerPowerModel(),
           servers: list[str] | None = None) -> dict:
    """{metric: {"stdev": mean over timestamps, "range": ..., "timestamps": n}} for cpu,
    mem, net and energy. Timestamps where a server's value is missing (or, given the
    expected ``servers``, where one of them has no fresh sample) are skipped for that metric,
    never filled with zeros: a spread over fewer servers is a different number."""
    per = {k: {"stdev": [], "range": []} for k in (*RESOURCES, "energy")}
    for t in sorted(samples):
        servers_at = samples[t]
        if len(servers_at) < 2 or (servers and not set(servers) <= set(servers_at)):
            continue
        servers_at = {n: s for n, s in servers_at.items() if not servers or n in servers}
        for r in RESOURCES:
            vals = [s.get(r) for s in servers_at.values()]
            if all(v is not None for v in vals):
                sd, rg = _spread(vals)
                per[r]["stdev"].append(sd)
                per[r]["range"].append(rg)
        if all(all(s.get(r) is not None for r in RESOURCES) for s in servers_at.values()):
            watts = [server_power(s["cpu"], s["mem"], s["net"], model)
                     for s in servers_at.values()]
            sd, rg = _spread(watts)
            per["energy"]["stdev"].append(sd)
            per["energy"]["range"].append(rg)
    return {k: {"stdev": _mean(v["stdev"]), "range": _mean(v["range"]),
                "timestamps": len(v["stdev"])} for k, v in per.items()}


def in_periods(samples: dict[float, dict[str, dict]], sample_period_s: float,
               period_s: float) -> dict[float, dict[str, dict]]:
    """The samples as means over consecutive periods of `period_s`, for monitoring that
    samples faster (every `sample_period_s`) than the figures are read. A spread over 1 s
    means is larger than one over 3 s means for every policy, so figures taken at different
    monitoring periods compare only over the same period. Each period is keyed by its last
    sample's time and holds, per server, the mean of that server's samples in it; a server
    with none there is missing, as in the samples. Samples already `period_s` or more
    apart come back as they are."""
    if sample_period_s >= period_s - 1e-9 or not samples:
        return samples
    start = min(samples)
    bins: dict[int, dict] = {}
    for t in sorted(samples):
        # a sample one period after the first opens the next, whatever float rounding says
        k = int((t - start) / period_s + 1e-6)
        b = bins.setdefault(k, {"t": t, "servers": {}})
        b["t"] = t
        for name, s in samples[t].items():
            b["servers"].setdefault(name, []).append(s)
    return {b["t"]: {name: {r: _mean_if_complete([s.get(r) for s in ss])
                            for r in {r for s in ss for r in s}}
                     for name, ss in b["servers"].items()}
            for b in bins.values()}


def _mean_if_complete(values: list) -> float | None:
    """None when any sample lacks the figure: a mean over part of a period is another
    number."""
    return None if any(v is None for v in values) else statistics.fmean(values)


def energy_per_server(samples: dict[float, dict[str, dict]], period_s: float,
                      model: ServerPowerModel = ServerPowerModel()) -> dict[str, dict]:
    """Average power (W) and energy (Wh, each sample standing for one period) per server."""
    watts: dict[str, list[float]] = {}
    for servers in samples.values():
        for name, s in servers.items():
            if all(s.get(r) is not None for r in RESOURCES):
                watts.setdefault(name, []).append(server_power(s["cpu"], s["mem"], s["net"],
                                                               model))
    return {n: {"mean_w": _mean(w), "energy_wh": sum(w) * period_s / 3600.0,
                "samples": len(w)} for n, w in sorted(watts.items())}


def worst_case(values: list[float], fraction: float = WORST_FRACTION) -> float | None:
    """Mean of the top `fraction` of the values (at least one value)."""
    if not values:
        return None
    k = max(1, int(round(len(values) * fraction)))
    return _mean(sorted(values, reverse=True)[:k])


def fig3(samples: dict[float, dict[str, dict]], fraction: float = WORST_FRACTION) -> dict:
    """Per resource (cpu, net): the average over all servers and samples; the worst case
    over all servers (each server's worst case, averaged); the most loaded server's
    average and worst case (the server with the highest worst case); and each server's
    average (on unequal servers, whether a policy loads the small ones more than the big
    ones, which the spread at each timestamp does not say)."""
    out = {}
    for r in ("cpu", "net"):
        per_server: dict[str, list[float]] = {}
        for servers in samples.values():
            for name, s in servers.items():
                if s.get(r) is not None:
                    per_server.setdefault(name, []).append(s[r])
        if not per_server:
            out[r] = None
            continue
        worst = {n: worst_case(v, fraction) for n, v in per_server.items()}
        top = max(worst, key=lambda n: (worst[n], n))
        everything = [v for vals in per_server.values() for v in vals]
        out[r] = {"average": _mean(everything), "worst_case": _mean(list(worst.values())),
                  "most_loaded_server": top, "most_loaded_average": _mean(per_server[top]),
                  "most_loaded_worst_case": worst[top],
                  "above_threshold": worst[top] > ELASTICITY_THRESHOLD,
                  "per_server_average": {n: _mean(per_server[n]) for n in sorted(per_server)}}
    out["threshold"] = ELASTICITY_THRESHOLD
    return out


def jain(values: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n at worst."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    sq = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * sq) if sq > 0 else 1.0


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def table3(requests: list[dict], stream_classes: tuple[str, ...] = ("video",)) -> dict:
    """Per class: requests sent, completed, failed; the metric (RT in ms, or TP in kB/s for
    streams) average and standard deviation over completed requests; Jain's index over
    the completed requests' service rates (1/RT, or TP), so 1 means every request of the
    class was served equally well; the completed requests' RT median, p95 and p99 (ms),
    for every class (a stream's RT runs to its end)."""
    out = {}
    classes = sorted({r["class"] for r in requests})
    for c in classes:
        rows = [r for r in requests if r["class"] == c]
        ok = [r for r in rows if not r.get("error")]
        stream = any(c.startswith(s) for s in stream_classes)
        rts = [float(r["latency_s"]) * 1000.0 for r in ok]
        if stream:
            values = [float(r["throughput_kB_s"]) for r in ok if r.get("throughput_kB_s")
                      not in (None, "")]
            rates = values
        else:
            values = rts
            rates = [1000.0 / v for v in values if v > 0]
        out[c] = {"requests": len(rows), "completed": len(ok), "failed": len(rows) - len(ok),
                  "metric": "TP" if stream else "RT",
                  "unit": "kB/s" if stream else "ms",
                  "average": _mean(values),
                  "stdev": statistics.stdev(values) if len(values) > 1 else None,
                  "jain": jain(rates),
                  **rt_percentiles(rts)}
    return out


def rt_percentiles(rts: list[float]) -> dict[str, float | None]:
    return {"rt_p50": percentile(rts, 50), "rt_p95": percentile(rts, 95),
            "rt_p99": percentile(rts, 99)}


def end_to_end(requests: list[dict], stream_classes: tuple[str, ...] = ("video",)) -> dict:
    """Every request of every class but the streams, as the clients saw them together:
    requests, completed, failed, and the completed ones' RT p50, p95 and p99 (ms). On a
    call graph a request's RT is its entry's answer, its calls included."""
    rows = [r for r in requests
            if not any(r["class"].startswith(s) for s in stream_classes)]
    rts = completed_rts(rows, stream_classes)
    return {"requests": len(rows), "completed": len(rts), "failed": len(rows) - len(rts),
            **rt_percentiles(rts)}


def completed_rts(requests: list[dict], stream_classes: tuple[str, ...] = ("video",)
                  ) -> list[float]:
    """The response times (ms) of the completed requests of every class but the streams."""
    return [float(r["latency_s"]) * 1000.0 for r in requests if not r.get("error")
            and not any(r["class"].startswith(s) for s in stream_classes)]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def mean_fig3(fig3s: list[dict]) -> dict:
    """Fig. 3 over several runs: the numbers averaged, the threshold verdict taken on the
    averaged worst case, the most loaded server named only when every run agrees."""
    merged = mean_of_runs(fig3s)
    for r in ("cpu", "net"):
        m = merged.get(r)
        if not isinstance(m, dict):
            continue
        names = {f[r]["most_loaded_server"] for f in fig3s if isinstance(f.get(r), dict)}
        m["most_loaded_server"] = names.pop() if len(names) == 1 else None
        worst = m.get("most_loaded_worst_case")
        m["above_threshold"] = (worst > merged.get("threshold", ELASTICITY_THRESHOLD)
                                if isinstance(worst, (int, float)) else None)
    return merged


def mean_of_runs(results: list[dict]) -> dict:
    """Average of the numbers in several runs' dicts of the same shape (None stays None
    when every run has None; otherwise the mean of the runs that have a number)."""
    if not results:
        return {}
    first = results[0]
    if isinstance(first, dict):
        return {k: mean_of_runs([r.get(k) for r in results if isinstance(r, dict)])
                for k in first}
    numbers = [r for r in results if isinstance(r, (int, float)) and not isinstance(r, bool)
               and not (isinstance(r, float) and math.isnan(r))]
    if numbers and len(numbers) == len([r for r in results if r is not None]):
        return sum(numbers) / len(numbers)
    return first


BALANCING_PARTS = ("controller", "profiler", "proxy", "switch")
PROXIES = ("haproxy", "nginx")       # an outside balancer's runs meter it under its name


def part_cores(cores: dict, part: str) -> float | None:
    """A run's mean cores of one of BALANCING_PARTS (proxy: whichever proxy it ran)."""
    keys = PROXIES if part == "proxy" else (part,)
    return next((cores[k] for k in keys if cores.get(k) is not None), None)


def balancing_cpu_per_1000(result: dict, load_s: float) -> float | None:
    """CPU seconds every balancing part of a run (controller, profiler, its proxy, the
    switch) used over the load phases per 1,000 requests arriving in them; None when the
    controller or the switch was not metered or no request was planned."""
    cores = result.get("balancer_cores") or {}
    requests = result.get("requests_planned") or 0
    if requests <= 0 or any(part_cores(cores, p) is None for p in ("controller", "switch")):
        return None
    used = sum(part_cores(cores, p) or 0.0 for p in BALANCING_PARTS)
    return 1000.0 * used * load_s / requests
