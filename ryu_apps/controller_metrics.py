"""ControllerMetrics: every metric the controller serves on /metrics (its registry), named
once here; the Ryu shell (ryu_apps/malb.py) counts what happens, and the core's results
name theirs (Result.metrics, looked up in by_name)."""
from __future__ import annotations

from common.metrics import Registry

CHOOSE_BUCKETS = (0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005)
LATENCY_BUCKETS = (0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                   0.1, 0.5)
PROBE_POLL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
STALL_BUCKETS = (0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5)


class ControllerMetrics:
    def __init__(self):
        self.registry = Registry()
        self.decisions = self.registry.counter(
            "malb_decisions_total", "Load-balancing decisions.",
            ("microservice", "server", "policy", "algorithm"))
        self.packet_in = self.registry.counter("malb_packet_in_total", "Packet-in messages.",
                                               ("kind",))
        self.latency = self.registry.histogram(
            "malb_decision_latency_seconds",
            "From packet-in to the flow rules and packet-out being sent.", (), LATENCY_BUCKETS)
        self.loop_lag = self.registry.histogram(
            "malb_event_loop_lag_seconds",
            "How late a 10 ms timer on the controller's event loop fires: the time every "
            "event waited behind other work then (Ryu's parsing included).", (), STALL_BUCKETS)
        self.handler = self.registry.histogram(
            "malb_handler_seconds", "One event handled by the controller, from its decoded "
            "message to the messages queued for sending (Ryu's parsing before not included).",
            ("event",), STALL_BUCKETS)
        self.choose = self.registry.histogram(
            "malb_choose_seconds", "The policy core's decision alone (choose()).",
            ("algorithm",), CHOOSE_BUCKETS)
        self.no_backend = self.registry.counter(
            "malb_no_backend_total", "New flows dropped: no healthy instance.", ("microservice",))
        self.profiler = self.registry.counter(
            "malb_profiler_requests_total", "Calls to the profiler.", ("call", "result"))
        self.health = self.registry.gauge("malb_instance_healthy",
                                          "1 when the instance passes its health probe.",
                                          ("instance",))
        self.flows = self.registry.gauge("malb_active_flows",
                                         "NAT flows with rules on a switch.", ())
        self.stats_cycle = self.registry.gauge(
            "malb_flow_stats_cycle_seconds",
            "Time to poll every NAT rule once (the period, or longer above the budget).", ())
        self.dp_slots = self.registry.gauge(
            "malb_dataplane_slots", "Maglev slots of an instance in its select group.",
            ("microservice", "instance"))
        self.dp_moved = self.registry.counter(
            "malb_dataplane_slots_moved_total", "Select-group slots given to another instance.",
            ("microservice",))
        self.probe_poll = self.registry.histogram(
            "malb_probe_poll_seconds", "One GET /probes of an agent, sent to answer applied "
            "(or failed).", ("server",), PROBE_POLL_BUCKETS)

        self.channel_lag = self.registry.gauge(
            "malb_switch_channel_lag_seconds",
            "Round trip of the health loop's last echo request to the switch: how long "
            "its messages queue before the controller handles them.", ("switch",))
        self.probe_answers = self.registry.counter(
            "malb_probe_answers_total", "GET /probes answers of an agent applied.", ("server",))
        self.probe_readings = self.registry.counter(
            "malb_probe_readings_total", "Instance readings from /probes answers given to the "
            "policy core.", ("server",))
        self.probe_failures = self.registry.counter(
            "malb_probe_failures_total", "GET /probes problems: poll (no answer), instance "
            "(the agent could not read one), malformed (a part of an answer refused).",
            ("server", "kind"))
        # the ones the core names in its results (Result.metrics), by name
        self.by_name = {m.name: m for m in (self.health, self.flows, self.stats_cycle,
                                            self.dp_slots, self.dp_moved,
                                            self.channel_lag, self.probe_answers,
                                            self.probe_readings, self.probe_failures)}
