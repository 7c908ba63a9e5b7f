"""policy_status: the policy core's state as GET /malb/status shows it (plain Python)."""
from __future__ import annotations


def policy_status(core, now: float) -> dict:
    """What GET /malb/status shows of the policy core: per server its loads, their ages and
    freshness, the flows pending, running, watched and assigned, its instances; per
    microservice its weights, flow weights, flow class and per-flow use."""
    servers = {}
    for s in core.servers:
        load = core.loads[s]
        sw = core.switch_net[s]
        servers[s] = {
            "cpu": load.cpu, "mem": load.mem, "net": load.net, "source": load.source,
            "by_microservice": load.parts,
            "sample_age_s": _age(load.sample_time, now), "sample_window_s": load.window,
            "outside_cpu": load.outside_cpu,
            "net_switch": sw.net, "net_switch_age_s": _age(sw.sample_time, now),
            "fresh": core.is_fresh(s, now),
            "pending_flows": core.pending(s),
            "running_flows_estimate": round(core.running_load(s, now)[2], 2),
            "watched_flows": core.open_flows.running(s, now),
            # what the watched flows that samples have measured use (% of the server)
            "watched_flows_measured": {
                ms: {"flows": k, "cpu": round(cpu, 3), "net": round(net, 3)}
                for ms, (_, k, cpu, net) in core.open_flows.costs(s, now).items() if k},
            "flows_assigned": {ms: n for (srv, ms), n in sorted(core.assigned_total.items())
                               if srv == s},
            "instances": {b.name: {"microservice": b.microservice,
                                   "healthy": core.healthy[b.name],
                                   "draining": b.name in core.draining,
                                   # malb: short flows open, watched to their FIN
                                   "open_short_flows": core.connections.open_count(b.name)
                                   if core.profiles.flow_class(b.microservice)[0] == "short"
                                   else 0,
                                   # every watched flow open (least connections)
                                   "open_connections": core.connections.open_count(b.name),
                                   "probe": _probe_view(core, b.name, now)}
                          for bs in core.pools.values() for b in bs if b.server == s},
        }
    microservices = {}
    for ms, pool in core.pools.items():
        w, wsrc = core.profiles.weights(ms, now)
        fw, fwsrc = core.profiles.flow_weights(ms, now)
        cls, csrc = core.profiles.flow_class(ms)
        microservices[ms] = {
            "weights": {"alpha": round(w[0], 6), "beta": round(w[1], 6),
                        "gamma": round(w[2], 6)},
            "weights_source": wsrc, "flow_class": cls, "flow_class_source": csrc,
            # what malb's long-flow choice weighs with (flow_weights)
            "flow_weights": {"alpha": round(fw[0], 6), "beta": round(fw[1], 6),
                             "gamma": round(fw[2], 6)},
            "flow_weights_source": fwsrc,
            "instances": [b.name for b in pool],
            "healthy_instances": [b.name for b in pool if core.healthy[b.name]],
        }
    for ms, info in microservices.items():
        use = core.profiles.per_flow.get(ms)
        info["per_flow"] = None if use is None else dict(zip(("cpu", "mem", "net"), use))
    return {"policy": core.policy, "servers": servers, "microservices": microservices,
            "prediction_lag_s": core.profiles.prediction_lag_s}

def _probe_view(core, instance: str, now: float) -> dict | None:
    p = core.probes.get(instance)
    if p is None:
        return None
    return {"in_flight": p.in_flight, "latency_s": _round(p.latency_s, 6),
            "latency_p99_s": _round(p.latency_p99_s, 6), "age_s": _age(p.time, now)}


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def _age(t: float | None, now: float) -> float | None:
    return None if t is None else round(now - t, 3)
