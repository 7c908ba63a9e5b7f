"""The controller core's managers, one concern each, in the style of faucet's valve
managers: ryu_apps/core.py holds every one and passes each event to those it concerns, in
turn; each returns or fills a Result (ryu_apps/core_result.py).

    base.py               Manager: the hooks every manager has (a switch up or gone, the
                          pools changed) and the packet-out the controller makes
    switch_rules.py       SwitchRules: the base rules of a switch, its packet-in meters
    dataplane_groups.py   DataplaneGroups: the select groups of data-plane mode
    flow_statistics.py    FlowStatistics: NAT rules removed, restored and polled in slices
    port_rates.py         PortRates: per-port rates, each server's network use
    health_checks.py      HealthChecks: probes, echo markers, port status, verdicts
    agent_probes.py       AgentProbes: the agents' GET /probes answers for the policy
    profiler_exchange.py  ProfilerExchange: flow records and pairs out, profiles in
"""
