"""The views of the controller core's state that REST serves (ryu_apps/rest.py): plain
dicts, read from the core and its managers, changing nothing.

- instances_view(core): GET /malb/instances; status(core): GET /malb/status.
"""
from __future__ import annotations


def instances_view(core) -> dict:
    """Every instance: its pool, health, draining and active flows; those out of every pool
    that still carry flows too (removed while draining)."""
    counts = core.active_flows_of()
    out = {}
    for pool in core.policy_core.pools.values():
        for b in pool:
            out[b.name] = {"microservice": b.microservice, "server": b.server,
                           "healthy": core.policy_core.healthy[b.name],
                           "draining": b.name in core.policy_core.draining,
                           "active_flows": counts.get(b.name, 0),
                           "health": core.health.state[b.name].last_result
                           if b.name in core.health.state else None}
    # instances out of every pool that still carry flows (removed while draining)
    instances = core.plan.instances
    for name, n in counts.items():
        out.setdefault(name, {"microservice": instances[name].microservice,
                              "server": instances[name].server, "healthy": None,
                              "draining": None, "active_flows": n, "health": None,
                              "in_pool": False})
    return out


def status(core) -> dict:
    """The policy core's status with what the controller adds: health, VIPs, the profiler's
    and the probes' state, switches, flows, the data plane, locations and links."""
    st = core.policy_core.status()
    health = core.health.status()
    for s in st["servers"].values():
        for name, inst in s["instances"].items():
            inst["health"] = health[name]["last_result"]
            inst["service_check"] = health[name]["service"]
    for m in core.cfg.microservices:
        if m.name in st["microservices"]:
            st["microservices"][m.name].update(vip=m.vip, port=m.port, protocol=m.protocol)
    st["profiler"] = dict(core.profiler.state)
    st["probes"] = core.probes.status(core.policy_core.clock())
    st["switches"] = sorted(f"{d:016x}" for d in core.switches)
    st["active_flows"] = core.flows.active_count()
    st["flow_records"] = len(core.flows.flows)     # active and ended ones kept
    st["monitoring_period_s"] = core.cfg.controller.monitoring_period_s
    st["dataplane"] = core.dataplane.status()
    st["channel_lag_s"] = {f"{d:016x}": round(lag, 4)
                           for d, lag in sorted(core.health_checks.channel_lag.items())}
    st["packet_in_limit_per_s"] = core.switch_rules.meter_status()
    st["instances_unlocated"] = core.plan.locations.unlocated()
    st["instance_locations"] = core.plan.locations.view()
    st["links"] = core.links.view()
    return st
