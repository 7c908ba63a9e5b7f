"""A Prometheus scrape configuration and a Grafana dashboard for a running platform, made from
its configuration (where the controller, the agents and the profiler listen).

    .venv/bin/python -m deploy.monitoring                           # configs/paper.yaml
    .venv/bin/python -m deploy.monitoring --config my.yaml --out /etc/malb-monitoring

- scrape_config(cfg): prometheus.yml's content (one job per kind of process);
- kubernetes_scrape_config(): the job that finds the services' pods on Kubernetes;
- dashboard(): the Grafana dashboard (JSON model, the Prometheus data source chosen when
  it is imported): panels, each a PromQL query on the metrics of docs/metrics.md;
- write, main: the three files (deploy/ holds them for the default configuration;
  tests/unit/test_monitoring.py keeps them current).

The services inside the testbed's containers are on the testbed's own networks, which
Prometheus on the host does not reach (the agents read them through their namespaces); on
Kubernetes, `python -m placement export` gives each pod the prometheus.io annotations, and
prometheus-kubernetes.yml's job finds them when Prometheus runs in the cluster.
"""
from __future__ import annotations

import json
import os
import sys
from urllib.parse import urlsplit

import yaml

from common.cli import ArgumentParser, fail
from common.config import ConfigError, load_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "deploy")
SCRAPE_INTERVAL_S = 5       # the controller's and agents' figures move each second
RATE_WINDOW = "1m"


def _target(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def scrape_config(cfg) -> dict:
    """prometheus.yml: the controller, each server's agent (labelled with its server) and
    the profiler."""
    c = cfg.controller
    return {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s",
                   "evaluation_interval": f"{SCRAPE_INTERVAL_S}s"},
        "scrape_configs": [
            {"job_name": "malb-controller",
             "static_configs": [{"targets": [f"{c.rest_host}:{c.rest_port}"]}]},
            {"job_name": "malb-agents",
             "static_configs": [{"targets": [_target(s.agent_url)],
                                 "labels": {"malb_server": s.name}} for s in cfg.servers]},
            {"job_name": "malb-profiler",
             "static_configs": [{"targets": [_target(cfg.profiler.url)]}]},
        ]}


def kubernetes_scrape_config() -> dict:
    """The job that finds the services' pods on Kubernetes by the annotations
    `python -m placement export` gives them, for a Prometheus running in the cluster."""
    return {"scrape_configs": [{
        "job_name": "malb-kubernetes-pods",
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
             "action": "keep", "regex": "true"},
            {"source_labels": ["__address__",
                               "__meta_kubernetes_pod_annotation_prometheus_io_port"],
             "action": "replace", "regex": r"([^:]+)(?::\d+)?;(\d+)",
             "replacement": "$1:$2", "target_label": "__address__"},
            {"source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
             "action": "replace", "regex": "(.+)", "target_label": "__metrics_path__"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}]}]}


def _rate(expr: str) -> str:
    return f"rate({expr}[{RATE_WINDOW}])"


def _sum_rate(metric: str, by: str = "") -> str:
    """The per-second rate of a counter, summed (by these labels)."""
    return f"sum{f' by ({by})' if by else ''} ({_rate(metric)})"


def _quantile(q: float, metric: str, by: str = "") -> str:
    keep = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({keep}) ({_rate(metric + '_bucket')}))"


# (row, [(title, unit, [(expr, legend)], description)])
PANELS = [
    ("Controller", [
        ("New flows per second", "reqps",
         [(_sum_rate('malb_packet_in_total{kind="new_flow"}'), "new flows")],
         "Packet-ins of new TCP flows through the VIPs."),
        ("Decisions per second by instance's server", "reqps",
         [(_sum_rate("malb_decisions_total", "microservice, server"),
           "{{microservice}} on {{server}}")], "Where the balancer sends new flows."),
        ("Decision latency", "s",
         [(_quantile(0.5, "malb_decision_latency_seconds"), "p50"),
          (_quantile(0.99, "malb_decision_latency_seconds"), "p99")],
         "From a packet-in to the flow rules and packet-out sent."),
        ("Event loop lag", "s",
         [(_quantile(0.99, "malb_event_loop_lag_seconds"), "p99")],
         "How long every event waited behind other work."),
        ("Active NAT flows", "short", [("malb_active_flows", "flows")], ""),
        ("Instances healthy", "short", [("malb_instance_healthy", "{{instance_name}}")],
         "1 while an instance passes its health checks."),
        ("Flows dropped: no healthy instance", "short",
         [(_sum_rate("malb_no_backend_total", "microservice"), "{{microservice}}")],
         ""),
        ("Select-group slots (data-plane mode)", "short",
         [("malb_dataplane_slots", "{{instance_name}}")], ""),
    ]),
    ("Servers", [
        ("Server use relative to capacity", "percentunit",
         [("malb_agent_server_utilization_ratio", "{{server}} {{resource}}")],
         "What the profiler receives from each agent."),
        ("CPU beside the containers", "percentunit",
         [("malb_agent_server_outside_cpu_ratio", "{{server}}")],
         "CPU no container's statistics show (malb's outside_use counts it)."),
        ("Container CPU (cores)", "short",
         [(_sum_rate("malb_agent_container_cpu_seconds_total", "container"),
           "{{container}}")], ""),
        ("Container network sent", "Bps",
         [(_sum_rate("malb_agent_container_network_transmit_bytes_total", "container"),
           "{{container}}")], ""),
        ("Container memory", "bytes",
         [("malb_agent_container_memory_bytes", "{{container}}")], ""),
    ]),
    ("Profiler", [
        ("Weights (alpha, beta, gamma)", "percentunit",
         [("malb_profiler_weight_ratio", "{{microservice}} {{resource}}")],
         "Each microservice's weight of CPU, memory and network in its load."),
        ("Servers with stale data", "short", [("malb_profiler_server_stale", "{{server}}")],
         ""),
        ("Profiler period", "s",
         [(_quantile(0.99, "malb_profiler_period_seconds"), "p99")], ""),
    ]),
    ("SLO loop", [
        ("SLI against target", "s",
         [("malb_slo_sli_seconds", "{{service}} SLI"),
          ("malb_slo_target_seconds", "{{service}} target")], ""),
        ("Frequency", "hertz", [("malb_slo_frequency_hertz", "{{service}}")],
         "Emulated or real: the agent's GET /slo says which."),
        ("Power", "watt",
         [(_sum_rate("malb_slo_energy_joules_total", "service"), "{{service}}")],
         "Modelled energy per second (slo/energy.py's power model)."),
    ]),
    ("Processes", [
        ("Resident memory", "bytes", [("process_resident_memory_bytes", "{{job}} {{instance}}")],
         ""),
        ("CPU (cores)", "short",
         [(_rate("process_cpu_seconds_total"), "{{job}} {{instance}}")], ""),
    ]),
]


def dashboard() -> dict:
    """The dashboard's JSON model, rows of panels two to a line."""
    panels, y, pid = [], 0, 1
    for row, items in PANELS:
        panels.append({"type": "row", "title": row, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y = pid + 1, y + 1
        for k, (title, unit, queries, description) in enumerate(items):
            panels.append({
                "type": "timeseries", "title": title, "id": pid, "description": description,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (k % 2), "y": y + 8 * (k // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
                             "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                            for i, (expr, legend) in enumerate(queries)]})
            pid += 1
        y += 8 * ((len(items) + 1) // 2)
    return {
        "title": "MALB", "uid": "malb-overview", "tags": ["malb", "openflow"],
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "5s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
        "description": "The controller's balancing, the servers' use, the profiler's weights "
                       "and the SLO loop (docs/metrics.md lists every metric)."}


def write(out_dir: str, cfg) -> list[str]:
    """prometheus.yml, prometheus-kubernetes.yml and grafana/malb.json in out_dir."""
    os.makedirs(os.path.join(out_dir, "grafana"), exist_ok=True)
    files = {"prometheus.yml": ("Prometheus scrape configuration for MALB's processes",
                                scrape_config(cfg)),
             "prometheus-kubernetes.yml": ("The scrape job for the services' pods on "
                                           "Kubernetes (Prometheus in the cluster)",
                                           kubernetes_scrape_config())}
    paths = []
    for name, (what, doc) in files.items():
        paths.append(os.path.join(out_dir, name))
        with open(paths[-1], "w") as fh:
            fh.write(f"# {what} (python -m deploy.monitoring)\n")
            yaml.safe_dump(doc, fh, sort_keys=False)
    paths.append(os.path.join(out_dir, "grafana", "malb.json"))
    with open(paths[-1], "w") as fh:
        json.dump(dashboard(), fh, indent=1)
        fh.write("\n")
    return paths


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m deploy.monitoring", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", metavar="FILE",
                   help="YAML configuration (default: $MALB_CONFIG or configs/paper.yaml)")
    p.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                   help="where prometheus.yml, prometheus-kubernetes.yml and grafana/malb.json "
                        "go (default: deploy/)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
    try:
        for path in write(args.out, cfg):
            print(path)
    except OSError as exc:
        fail(f"--out {args.out}: {exc.strerror or exc}", code=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
