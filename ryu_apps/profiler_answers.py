"""The profiler's answer as the controller applies it to its PolicyCore (plain Python).

The controller core applies every answer of the profiler with it (ryu_apps/core.py) and
experiments drive the same path without HTTP (experiments/lb_model.py). Fields of the wrong
type are left out; an answer with weights the core refuses is ignored whole: a warning, and
nothing changes, not even the server loads."""
from __future__ import annotations

from ryu_apps.policy_core import PolicyCore


def _numbers(d: dict, keys) -> bool:
    return all(isinstance(d.get(k), (int, float)) for k in keys)


def apply_profiles(core: PolicyCore, profiles: dict, servers: dict, now: float) -> list[str]:
    """Weights, flow classes, per-flow use and durations per microservice, then each fresh
    server's predicted (or measured) load. Returns warnings."""
    weights, classes, per_flow, per_flow_abs, durations = {}, {}, {}, {}, {}
    for name, p in (profiles.get("microservices") or {}).items():
        if not isinstance(p, dict):
            continue
        w = p.get("weights") or {}
        if _numbers(w, ("alpha", "beta", "gamma")):
            weights[name] = (w["alpha"], w["beta"], w["gamma"])
        classes[name] = p.get("flow_class")
        use = p.get("per_flow") or {}
        if _numbers(use, ("cpu", "mem", "net")):
            per_flow[name] = (use["cpu"], use["mem"], use["net"])
        if _numbers(use, ("cores", "net_bytes_per_s")):
            per_flow_abs[name] = (use["cores"], use["net_bytes_per_s"])
        qs = (p.get("flows") or {}).get("quantiles_s")
        if isinstance(qs, list) and qs and all(isinstance(q, (int, float)) for q in qs):
            durations[name] = qs
    lag = profiles.get("prediction_lag_s")
    try:      # profiles.update checks the weights before it changes anything
        core.profiles.update(weights, classes, now, per_flow,
                             lag if isinstance(lag, (int, float)) else None, per_flow_abs,
                             durations)
    except ValueError as exc:
        return [f"profiler sent bad weights: {exc}; its answer is ignored"]
    for name, s in (servers.get("servers") or {}).items():
        if name not in core.loads or not isinstance(s, dict) or s.get("stale"):
            continue
        est = s.get("predicted") or s
        t = s.get("sample_time")
        use = [est.get(k) if isinstance(est, dict) else None for k in ("cpu", "mem", "net")]
        measured = tuple(s.get(k) for k in ("cpu", "mem", "net"))
        parts = s.get("by_microservice")
        parts = {ms: p for ms, p in parts.items() if isinstance(p, dict)} \
            if isinstance(parts, dict) else None
        if isinstance(t, (int, float)) and all(v is None or isinstance(v, (int, float))
                                               for v in (*use, *measured)):
            window = s.get("sample_window_s")
            outside = s.get("outside_cpu")
            core.update_server_load(name, *use, t, "profiler", measured, parts,
                                    window if isinstance(window, (int, float)) else None,
                                    outside if isinstance(outside, (int, float)) else None)
    return []
