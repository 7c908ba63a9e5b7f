"""ControllerMetrics: every metric the controller serves on /metrics (its prometheus_client
registry), named once here; the Ryu shell (ryu_apps/malb.py) counts what happens, and the
core's results name theirs (Result.metrics, looked up in by_name)."""
from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from common.metrics import new_registry

CHOOSE_BUCKETS = (0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005)
LATENCY_BUCKETS = (0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                   0.1, 0.5)
PROBE_POLL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
STALL_BUCKETS = (0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                 0.2, 0.5, 1, 2, 5)


class ControllerMetrics:
    def __init__(self):
        self.registry = r = new_registry("controller")
        self.decisions = Counter(
            "malb_decisions_total", "Load-balancing decisions.",
            ("microservice", "server", "policy", "algorithm"), registry=r)
        self.packet_in = Counter("malb_packet_in_total", "Packet-in messages.", ("kind",),
                                 registry=r)
        self.latency = Histogram(
            "malb_decision_latency_seconds",
            "From packet-in to the flow rules and packet-out being sent.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.loop_lag = Histogram(
            "malb_event_loop_lag_seconds",
            "How late a 10 ms timer on the controller's event loop fires: the time every "
            "event waited behind other work then (Ryu's parsing included).",
            buckets=STALL_BUCKETS, registry=r)
        self.gc_pause = Histogram(
            "malb_gc_pause_seconds", "One run of Python's cyclic garbage collector in the "
            "controller's process: the event loop stands still for it.", ("generation",),
            buckets=STALL_BUCKETS, registry=r)
        self.handler = Histogram(
            "malb_handler_seconds", "One event handled by the controller, from its decoded "
            "message to the messages queued for sending (Ryu's parsing before not included).",
            ("event",), buckets=STALL_BUCKETS, registry=r)
        self.choose = Histogram(
            "malb_choose_seconds", "The policy core's decision alone (choose()).",
            ("algorithm",), buckets=CHOOSE_BUCKETS, registry=r)
        self.no_backend = Counter(
            "malb_no_backend_total", "New flows dropped: no healthy instance (but the caller).",
            ("microservice",), registry=r)
        self.profiler = Counter(
            "malb_profiler_requests_total", "Calls to the profiler.", ("call", "result"),
            registry=r)
        self.health = Gauge("malb_instance_healthy",
                            "1 when the instance passes its health probe.", ("instance_name",),
                            registry=r)
        self.flows = Gauge("malb_active_flows", "NAT flows under way: with rules on a switch, "
                           "or kept by its connection tracker (tracker mode).", registry=r)
        self.stats_cycle = Gauge(
            "malb_flow_stats_cycle_seconds",
            "Time to poll every NAT rule once (the period, or longer above the budget).",
            registry=r)
        self.dp_slots = Gauge(
            "malb_dataplane_slots", "Maglev slots of an instance in its select group.",
            ("microservice", "instance_name"), registry=r)
        self.dp_open = Gauge(
            "malb_dataplane_open_connections", "TCP connections open on an instance as the "
            "switches last counted them (data-plane mode, connection_poll_s).",
            ("instance_name",), registry=r)
        self.dp_moved = Counter(
            "malb_dataplane_slots_moved_total", "Select-group slots given to another instance.",
            ("microservice",), registry=r)
        self.probe_poll = Histogram(
            "malb_probe_poll_seconds", "One GET /probes of an agent, sent to answer applied "
            "(or failed).", ("server",), buckets=PROBE_POLL_BUCKETS, registry=r)
        self.channel_lag = Gauge(
            "malb_switch_channel_lag_seconds",
            "Round trip of the health loop's last echo request to the switch: how long "
            "its messages queue before the controller handles them.", ("switch",), registry=r)
        self.probe_answers = Counter(
            "malb_probe_answers_total", "GET /probes answers of an agent applied.", ("server",),
            registry=r)
        self.probe_readings = Counter(
            "malb_probe_readings_total", "Instance readings from /probes answers given to the "
            "policy core.", ("server",), registry=r)
        self.probe_failures = Counter(
            "malb_probe_failures_total", "GET /probes problems: poll (no answer), instance "
            "(the agent could not read one), malformed (a part of an answer refused).",
            ("server", "kind"), registry=r)
        self.role = Gauge("malb_controller_master",
                          "1 while this controller is master (or has no standby peer), 0 while "
                          "it is standby.", registry=r)
        self.takeovers = Counter("malb_takeovers_total",
                                 "Times this controller took the master role from its peer.",
                                 registry=r)
        # `instance_name`, not `instance`: Prometheus gives every scraped series its target's
        # address as `instance` (and would rename ours to `exported_instance`)
        # the ones the core names in its results (Result.metrics), by their exposed names
        # (prometheus_client keeps a counter's name without its _total)
        self.by_name = {exposed_name(m): m for m in (
            self.health, self.flows, self.stats_cycle, self.dp_slots, self.dp_moved,
            self.channel_lag, self.probe_answers, self.probe_readings, self.probe_failures)}


def exposed_name(metric) -> str:
    """The name a metric has on /metrics: a counter's with its _total."""
    family = metric.describe()[0]
    return family.name + ("_total" if family.type == "counter" else "")
