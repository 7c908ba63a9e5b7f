"""What a comparison run plays and on what: the testbed comparison
(experiments/lb_comparison.py) and the fluid model (experiments/lb_model.py) share it, and
it needs no testbed.

- the policy names a comparison takes: DEFAULT_POLICIES, OUTSIDE_BALANCERS,
  controller_policies, policy_choices;
- the workload: request_classes (the scenario's), workload_spec (one run's schedule input);
- the servers and configuration of a run: per_server, server_specs, heterogeneous,
  config_data, FLAG_OF_FIELD (which flag sets a field, for errors);
- the flags: parser, ComparisonParser (the scenario's defaults filled in as it parses).
"""
from __future__ import annotations

import argparse

from common import config
from common.cli import ArgumentParser, bounded, choice_list, fail, number_list, \
    positive_float, positive_int
from common.config import load_config_data
from experiments import scenarios

# the default run order: the baselines first, then the paper's MALB rule, then ours
DEFAULT_POLICIES = ("srr", "ln", "malb-paper", "malb")
# Balancers outside the controller: a proxy on the proxy host in front of the same
# instances, (proxy, its mode): HAProxy (experiments/haproxy.py) or nginx
# (experiments/nginx.py); the controller runs srr meanwhile, for the switches' host rules
# only (the proxy talks to the instances' own addresses).
OUTSIDE_BALANCERS = {"haproxy-roundrobin": ("haproxy", "roundrobin"),
                     "haproxy-leastconn": ("haproxy", "leastconn"),
                     "haproxy-agent": ("haproxy", "agent"),
                     "nginx-leastconn": ("nginx", "leastconn")}
DEFAULT_PHASE_S = 30.0      # 4 policies x (3 x 30 s + the drain + set-up): about 10 min


def controller_policies() -> tuple[str, ...]:
    """The policies the controller runs: its registry's names (ryu_apps/policies)."""
    return config.POLICIES


def policy_choices() -> tuple[str, ...]:
    """Every name --policies takes, the default ones first. Others (maglev) run only when
    named: a new policy must not lengthen every default run."""
    known = controller_policies()
    return (DEFAULT_POLICIES + tuple(p for p in known if p not in DEFAULT_POLICIES)
            + tuple(OUTSIDE_BALANCERS))


def request_classes(opts) -> list[dict]:
    """The scenario's request classes and their share of the requests (the paper's: its
    request counts 1600, 1500, 900, 550 and 650 per run); experiments/scenarios.py."""
    return scenarios.request_classes(opts)


def workload_spec(cfg, opts, seed: int) -> dict:
    """The workload one run plays: rate profile, classes with their VIPs, the draws of a
    class that draws, the scenario's antagonists (validated as loadgen.validate_spec)."""
    peak, low = opts.peak_rate, opts.peak_rate * opts.low_fraction
    L = opts.phase_seconds
    names = {m.name: m for m in cfg.microservices}

    def container_of(server: str, ms: str) -> str:
        for i in cfg.instances:
            if i.server == server and i.microservice == ms:
                return i.container
        raise KeyError(f"instance of {ms} on {server}")
    classes = []
    for c in request_classes(opts):
        if c["ms"] not in names:
            raise KeyError(f"microservice {c['ms']}")
        ms = names[c["ms"]]
        classes.append({"name": c["name"], "weight": c["weight"], "host": ms.vip,
                        "port": ms.port, "path": c["path"],
                        **({"draw": c["draw"]} if "draw" in c else {})})
    spec = {"seed": seed, "arrivals": "poisson", "classes": classes,
            "phases": [{"name": "increasing", "seconds": L, "from": low, "to": peak},
                       {"name": "stable", "seconds": L, "from": peak, "to": peak},
                       {"name": "decreasing", "seconds": L, "from": peak, "to": low}]}
    busy = scenarios.antagonist_spec(opts, container_of)
    if busy:
        spec["antagonists"] = busy
    return spec


def per_server(values: list, n: int, flag: str) -> list:
    """One value for every server, or one per server."""
    if len(values) == 1:
        return values * n
    if len(values) != n:
        fail(f"{flag}: one value, or one per server ({n}), got {len(values)}", code=2)
    return values


def server_specs(opts) -> list[dict]:
    n = opts.servers
    return [{"name": f"srv{k + 1}", "cpu": cpu, "memory": f"{mem}m", "network_mbit": net,
             "link_mbit": net}
            for k, (cpu, mem, net) in enumerate(zip(
                per_server(opts.server_cpu, n, "--server-cpu"),
                per_server(opts.server_memory, n, "--server-memory"),
                per_server(opts.host_bw, n, "--host-bw")))]


def heterogeneous(opts) -> bool:
    return any(len(set(v)) > 1 for v in (opts.server_cpu, opts.server_memory, opts.host_bw))


def config_data(opts, policy: str | None = None) -> dict:
    """The run's configuration. With an outside balancer among the policies every run has
    the proxy host (one topology for all); the outside balancer's own runs send the
    call-graph services' calls through it too."""
    data = load_config_data(scenarios.base_config_path(opts))
    data.setdefault("testbed", {}).update(clients=opts.clients, host_bw_mbit=None,
                                          client_bw_mbit=opts.client_bw)
    if any(p in OUTSIDE_BALANCERS for p in getattr(opts, "policies", None) or ()):
        data["testbed"]["proxy"] = True
        if policy in OUTSIDE_BALANCERS:
            data["testbed"]["calls_via"] = "proxy"
    data["servers"] = server_specs(opts)
    data.setdefault("controller", {})["monitoring_period_s"] = opts.period
    if getattr(opts, "dataplane", False):
        data["controller"].setdefault("dataplane", {})["short_flows"] = "switch"
    elif getattr(opts, "tracker", False):
        data["controller"].setdefault("dataplane", {})["short_flows"] = "tracker"
    data.setdefault("profiler", {})["period_s"] = opts.period
    if opts.agent_window is not None:
        data["profiler"]["agent_window_s"] = opts.agent_window
    return data


class ComparisonParser(ArgumentParser):
    """The comparison's flags, checked against the scenario as they are parsed: a flag that
    does not fit it is a usage error, one left out takes the scenario's default (every
    parser built on this one, the fluid model's too, sees the same completed options)."""

    def parse_known_args(self, args=None, namespace=None):
        opts, rest = super().parse_known_args(args, namespace)
        if getattr(opts, "dataplane", False) and getattr(opts, "tracker", False):
            self.error("--dataplane and --tracker are two modes of the short flows: give one")
        try:
            scenarios.resolve(opts)
        except scenarios.ScenarioError as exc:
            self.error(str(exc))
        return opts, rest


def _scenarios_help() -> str:
    lines = ["scenarios (--scenario):"]
    for sc in scenarios.SCENARIOS.values():
        refused = [scenarios.GOVERNED[d][0] for d in sc.refuses]
        lines.append(f"  {sc.name}: {sc.about}" +
                     (f"; does not take {', '.join(refused)}" if refused else ""))
    return "\n".join(lines)


def parser(prog: str = "python -m experiments.lb_comparison",
           description: str | None = None) -> argparse.ArgumentParser:
    """The comparison's flags (the fluid model's too, which adds its own)."""
    p = ComparisonParser(prog=prog, description=description, epilog=_scenarios_help(),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    choices = policy_choices()
    p.add_argument("--scenario", choices=tuple(scenarios.SCENARIOS), default="paper",
                   help="the workload (default paper; see below)")
    p.add_argument("--policies", type=choice_list(choices), default=list(DEFAULT_POLICIES),
                   help=f"default {','.join(DEFAULT_POLICIES)}; also "
                        f"{','.join(choices[len(DEFAULT_POLICIES):])}")
    p.add_argument("--runs", type=positive_int, help="runs per policy (default 1; --paper 10)")
    p.add_argument("--phase-seconds", type=positive_float,
                   help=f"length of each of the three phases (default {DEFAULT_PHASE_S:g}; "
                        f"--paper 600; hotel and social 60)")
    # Flags a scenario may set or refuse (scenarios.GOVERNED) default to None here: the
    # parser fills them in from the scenario once it knows which flags were given.
    p.add_argument("--peak-rate", type=positive_float,
                   help="requests per second in the stable phase, all classes (default 1.5; "
                        "callgraph 12, hotel 32, social 24)")
    p.add_argument("--low-fraction", type=bounded(float, 0, 1, lo_open=True), default=0.25,
                   help="start/end rate as a fraction of the peak (default 0.25)")
    p.add_argument("--servers", type=positive_int, help="default 4; hotel and social 8")
    p.add_argument("--clients", type=positive_int, default=2)
    p.add_argument("--server-cpu", type=number_list(float, 0, lo_open=True),
                   help="CPU share of each server in cores, one for all or one per server "
                        "(default 0.3; unequal 0.6,0.3,0.3,0.2)")
    p.add_argument("--server-memory", type=number_list(int, 1), default=[256],
                   help="MB, one for all or one per server (default 256)")
    p.add_argument("--host-bw", "--server-net", type=number_list(float, 0, lo_open=True),
                   default=[20.0], dest="host_bw",
                   help="Mbit/s of each server's instance links, also its network capacity; "
                        "one for all or one per server (default 20)")
    p.add_argument("--client-bw", type=positive_float, default=1000.0,
                   help="Mbit/s of each client's link (default 1000: clients are not the "
                        "bottleneck)")
    p.add_argument("--video-rate", type=positive_float,
                   help="video stream bitrate in kB/s (default 1500, the paper's streams: "
                        "two streams on one server's 20 Mbit/s link compete)")
    p.add_argument("--job-mode", choices=("work", "deadline"),
                   help="back-end jobs: 'work' ends a job when its CPU work is done (its RT "
                        "shows the CPU it got; default), 'deadline' at a fixed time (the "
                        "paper's)")
    p.add_argument("--video-seconds", type=positive_float,
                   help="how long a client watches a stream (default 20)")
    p.add_argument("--cpu-scale", type=positive_float,
                   help="back-end job CPU relative to the paper's 15 %% and 32 %% of a CPU "
                        "(default 0.25: our servers are 0.3-core shares, not machines)")
    p.add_argument("--duration-scale", type=positive_float,
                   help="multiplies back-end job and video durations (smoke tests: 0.1)")
    # 1 s: the policy's view lags the jobs a third as much as at the paper's 3 s
    p.add_argument("--period", type=positive_float, default=1.0,
                   help="monitoring and profiler period in seconds (default 1; the "
                        "paper's: 3). Table II is read over 3 s periods either way "
                        "(--metric-period)")
    p.add_argument("--metric-period", type=positive_float, default=3.0, metavar="SECONDS",
                   help="Table II, Fig. 3 and energy over periods of this length (default 3, "
                        "the paper's monitoring period): with a shorter --period, each "
                        "server's samples are averaged over it, so figures compare across "
                        "monitoring periods; never shorter than --period")
    p.add_argument("--agent-window", type=bounded(float, 0, 600), default=None,
                   metavar="SECONDS",
                   help="what each agent measures for the profiler: its last SECONDS "
                        "(default: the period, so every second of it counts); 0: its "
                        "latest one-second sample, as docker stats shows it")
    p.add_argument("--dataplane", action="store_true",
                   help="data-plane mode (controller.dataplane.short_flows: switch): "
                        "short-flow microservices of the policies that allow it balanced by "
                        "the switch's select group at the shares the controller renders, "
                        "unseen by the controller and the profiler")
    p.add_argument("--tracker", action="store_true",
                   help="tracker mode (controller.dataplane.short_flows: tracker): a decision "
                        "per short-flow connection, its address translation kept by Open "
                        "vSwitch's connection tracker instead of a rule pair per connection")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--first-run", type=positive_int, default=1, metavar="K",
                   help="number the runs from K (default 1); run k plays schedule seed + k, "
                        "so --first-run 6 --runs 5 continues a comparison of 5 runs with "
                        "new schedules, to pool with it (--resummarise A B --out P)")
    p.add_argument("--paper", action="store_true",
                   help="paper-length runs: 10-minute phases, 10 runs per policy (with "
                        "--period 3, the paper's monitoring period too)")
    p.add_argument("--config", help="base configuration (default configs/paper.yaml; "
                                    "callgraph: its own)")
    p.add_argument("--out", help="results directory (default results/<timestamp>)")
    p.add_argument("--progress", type=positive_float, default=15.0,
                   help="seconds between progress lines")
    p.add_argument("--resume", action="store_true",
                   help="continue the comparison in --out that was interrupted: the runs "
                        "that finished are read back from their raw data, the others play "
                        "(a run cut off half-way from its start); refused if that "
                        "comparison was started with other options")
    return p


# Which flag sets a configuration field, to name it in an error.
FLAG_OF_FIELD = {"servers.count": "--servers", ".cpu": "--server-cpu",
                 ".memory": "--server-memory", "network_mbit": "--host-bw",
                 "link_mbit": "--host-bw", "client_bw_mbit": "--client-bw",
                 "host_bw_mbit": "--host-bw", "period_s": "--period",
                 "agent_window_s": "--agent-window",
                 "testbed.clients": "--clients", "servers": "--servers"}
