"""The named workloads of the load-balancing comparison (experiments/lb_comparison.py
--scenario NAME), each declared once, as plain data.

Holds:
- the request-class shapes: Objects (ui objects), Job (a back-end job of fixed length),
  DrawnJob (a job whose length each request draws from a bounded Pareto), Stream (video),
  Entry (a call-graph request to an entry service);
- Antagonist: a busy thread started on a server part-way through the load phases, inside
  one of its containers or beside them (experiments/antagonist.py plays it);
- Scenario: one preset (classes, servers, antagonists, base configuration, the flags it
  takes) and SCENARIOS: paper, heavy-tail, antagonist, unequal, callgraph, and
  DeathStarBench's hotel reservation and social network (hotel, social);
- GOVERNED: the flags whose defaults a scenario sets or that it refuses, and `resolve`,
  which checks a parsed namespace against its scenario and fills those defaults in;
- request_classes, antagonist_spec, longest_request_s, base_config_path,
  connections_per_request, describe: what
  the comparison, its summary and the fluid model (experiments/lb_model.py) read;
- bounded_pareto_mean and bounded_pareto_low: the arithmetic of the heavy-tailed draws;
- callgraph_config_text: configs/callgraph-lb.yaml as the generator writes it
  (`python -m experiments.scenarios --callgraph-config > configs/callgraph-lb.yaml`);
- dsb_config_text: configs/hotel-lb.yaml and social-lb.yaml from the placement
  configurations of DeathStarBench's applications (`python -m experiments.scenarios
  --dsb-config hotel > configs/hotel-lb.yaml`).

Pure but for the configuration writers (dsb_config_text reads the placement configuration
it starts from): no testbed; the draws themselves happen in experiments/loadgen.py
(schedule), from the workload spec and its seed.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from collections.abc import Mapping

from common.config.schema import MODELINE
from common.paths import shipped


class ScenarioError(ValueError):
    """A flag that does not fit the scenario; the message names both."""


# ---------------------------------------------------------------- request classes
@dataclass(frozen=True)
class Objects:
    """ui objects of `size` bytes (services/rom.py: about 20 ms of CPU per MB, then the
    transfer)."""
    name: str
    ms: str
    weight: float
    size: int

    def path(self, opts) -> str:
        return f"/object?size={self.size}"

    def longest_s(self, opts) -> float:
        return 0.0


@dataclass(frozen=True)
class Job:
    """Back-end jobs of `seconds` at `cpu` of one core (the paper's), both scaled by the
    comparison's --duration-scale and --cpu-scale."""
    name: str
    ms: str
    weight: float
    seconds: float
    cpu: float

    def path(self, opts) -> str:
        # the expressions of the paper's spec, so its workload is the same to the byte
        return (f"/job?seconds={self.seconds * opts.duration_scale:g}"
                f"&cpu={self.cpu * opts.cpu_scale:g}&mode={opts.job_mode}")

    def longest_s(self, opts) -> float:
        return self.seconds * opts.duration_scale


@dataclass(frozen=True)
class DrawnJob:
    """Back-end jobs at the paper's duty cycle `cpu` whose length each request draws from
    a bounded Pareto of shape `alpha` with mean `mean_seconds`, cut at `cap` x the mean."""
    name: str
    ms: str
    weight: float
    mean_seconds: float
    cpu: float
    alpha: float
    cap: float

    def draw(self, opts) -> dict:
        s = opts.duration_scale
        high = self.cap * self.mean_seconds
        low = bounded_pareto_low(self.alpha, high, self.mean_seconds)
        return {"seconds": {"dist": "bounded-pareto", "alpha": self.alpha,
                            "low": float(f"{low * s:.6g}"), "high": float(f"{high * s:.6g}")}}

    def path(self, opts) -> str:
        return (f"/job?seconds={{seconds}}&cpu={self.cpu * opts.cpu_scale:g}"
                f"&mode={opts.job_mode}")

    def longest_s(self, opts) -> float:
        return self.cap * self.mean_seconds * opts.duration_scale


@dataclass(frozen=True)
class Stream:
    """Video streams at --video-rate kB/s, watched --video-seconds (scaled)."""
    name: str
    ms: str
    weight: float

    def path(self, opts) -> str:
        return (f"/stream?rate={opts.video_rate:g}"
                f"&seconds={opts.video_seconds * opts.duration_scale:g}")

    def longest_s(self, opts) -> float:
        return opts.video_seconds * opts.duration_scale


@dataclass(frozen=True)
class Entry:
    """A request to a call-graph entry service (services/callgraph.py answers any path
    after its own work and its calls)."""
    name: str           # the entry service's name, also the class's
    weight: float

    @property
    def ms(self) -> str:
        return self.name

    def path(self, opts) -> str:
        return "/"

    def longest_s(self, opts) -> float:
        return 0.0


# ---------------------------------------------------------------- antagonists
@dataclass(frozen=True)
class Antagonist:
    """A busy thread on `server` from `start` to `stop` (fractions of the load phases):
    inside the server's instance of `microservice` (its container: the host agent's docker
    stats count it as that microservice's CPU), or, with no microservice, beside the
    containers in the server's cgroup (no agent sees it; the containers get less CPU).
    `cores`: the share of each 50 ms the thread is busy (1: always); the server's CPU
    quota caps what it gets, as it caps the containers."""
    name: str
    server: str
    microservice: str | None
    start: float
    stop: float
    cores: float = 1.0


# ---------------------------------------------------------------- the presets
PAPER_CLASSES = (
    Objects("ui-light", "ui", 1600, 1_000_000),
    Objects("ui-medium", "ui", 1500, 10_000_000),
    Job("backend-medium", "backend", 900, 10, 0.15),
    Job("backend-heavy", "backend", 550, 30, 0.32),
    Stream("video", "video", 650),
)

# Bounded Pareto with alpha 1.1 (near the fits of measured job and file sizes, 1.0-1.2),
# cut at 4 x the class mean so the drain after the load stays within two minutes at full
# scale: the median job is 0.72 x the mean, 1 % run 3.6 x it, the longest tenth does 28 %
# of the class's work. Each class keeps its paper mean and duty cycle, so the offered CPU
# per request is the paper's (about 4.6 CPU-seconds x --cpu-scale per back-end request).
TAIL_ALPHA, TAIL_CAP = 1.1, 4.0
HEAVY_TAIL_CLASSES = (
    PAPER_CLASSES[0], PAPER_CLASSES[1],
    DrawnJob("backend-medium", "backend", 900, 10, 0.15, TAIL_ALPHA, TAIL_CAP),
    DrawnJob("backend-heavy", "backend", 550, 30, 0.32, TAIL_ALPHA, TAIL_CAP),
    PAPER_CLASSES[4],
)

# The call-graph application: placement.apps.generate with these arguments wrote
# configs/callgraph-lb.yaml (a unit test keeps the two the same).
CALLGRAPH_CONFIG = "configs/callgraph-lb.yaml"
CALLGRAPH_GENERATOR = MappingProxyType(dict(
    services=10, seed=10, entries=3, replicas=3, servers=4, switches=1, server_cpu=0.3,
    heavy_cpu_share=0.25, heavy_cpu_ms=20, cross=2))
CALLGRAPH_CLASSES = (Entry("svc01", 1), Entry("svc02", 1), Entry("svc03", 1))

# DeathStarBench's hotel reservation and social network for balancing: the call structure
# and per-call costs of the placement configurations (docs/deathstarbench-graphs.md), only
# the services the benchmark's mixed workload reaches, each on DSB_REPLICAS servers (round
# robin from its own offset, so never two on one server), on the configurations' testbed
# of four switches in a chain and eight servers. The classes are the mix's entries at equal
# weights, not its shares (hotel: 60/39/0.5/0.5): at the shares, a run would need 200,000
# requests for its rarest class to reach the 1,000 a p99 needs.
DSB_APPS = MappingProxyType({
    "hotel": ("configs/hotelreservation.yaml", "configs/hotel-lb.yaml"),
    "social": ("configs/socialnetwork.yaml", "configs/social-lb.yaml")})
DSB_REPLICAS = 2
DSB_SERVERS, DSB_SERVER_CPU = 8, 0.2
# a run's requests are 2.25 x phase x peak (rates from a quarter of the peak up, the peak,
# and down): 60 s phases at these peaks give each class 1,080 requests expected
DSB_PHASE_S = 60.0
DSB_PEAK_RATE = MappingProxyType({"hotel": 32.0, "social": 24.0})
HOTEL_CLASSES = (Entry("hrsearch", 1), Entry("hrrecommend", 1), Entry("hrlogin", 1),
                 Entry("hrreserve", 1))
SOCIAL_CLASSES = (Entry("sncomposepost", 1), Entry("snreadhometimeline", 1),
                  Entry("snreadusertimeline", 1))

# Flags a scenario may set a default for or refuse: dest -> (flag, default of the rest).
# Their parser default is None, so `resolve` can tell a flag given from one left out.
GOVERNED: Mapping[str, tuple[str, Any]] = MappingProxyType({
    "servers": ("--servers", 4),
    "server_cpu": ("--server-cpu", [0.3]),
    "peak_rate": ("--peak-rate", 1.5),
    "video_rate": ("--video-rate", 1500.0),
    "video_seconds": ("--video-seconds", 20.0),
    "cpu_scale": ("--cpu-scale", 0.25),
    "job_mode": ("--job-mode", "work"),
    "duration_scale": ("--duration-scale", 1.0),
    "config": ("--config", None),
    # None: the comparison's own default (30 s, or 600 with --paper)
    "phase_seconds": ("--phase-seconds", None),
})


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str                          # one line: what it is and why
    classes: tuple
    defaults: Mapping[str, Any] = field(default_factory=dict)   # GOVERNED dest -> value
    refuses: Mapping[str, str] = field(default_factory=dict)    # GOVERNED dest -> why
    antagonists: tuple[Antagonist, ...] = ()
    config: str | None = None           # base configuration (None: --config or paper.yaml)
    paper_figures: bool = False         # the paper's Tables II and III beside ours

    def __post_init__(self):
        for dest in (*self.defaults, *self.refuses):
            if dest not in GOVERNED:
                raise ValueError(f"scenario {self.name}: {dest} is not a governed flag")

    def accepts(self) -> list[str]:
        """The governed flags this scenario takes."""
        return [flag for dest, (flag, _) in GOVERNED.items() if dest not in self.refuses]

    @property
    def call_graph(self) -> bool:
        """Its requests enter a call-graph application (services calling services)."""
        return any(isinstance(c, Entry) for c in self.classes)


NO_VIDEO_OR_JOBS = "the call-graph application has no video streams or back-end jobs"
SCENARIOS: Mapping[str, Scenario] = MappingProxyType({s.name: s for s in (
    Scenario("paper", "the MALB paper's Scenario 2: its five request classes on equal "
             "servers", PAPER_CLASSES, paper_figures=True),
    Scenario("heavy-tail", "back-end job lengths drawn per request from a bounded Pareto "
             f"(alpha {TAIL_ALPHA:g}, cut at {TAIL_CAP:g} x the mean) with the paper's "
             "means and duty cycles, instead of its two fixed sizes", HEAVY_TAIL_CLASSES),
    Scenario("antagonist", "the paper's workload with a busy thread inside srv1's ui "
             "container over the middle third of the load, and one beside srv3's "
             "containers (in its cgroup, unseen by its agent) from 1/2 to 5/6 of it",
             PAPER_CLASSES,
             refuses={"servers": "its antagonists run on srv1 and srv3 of four servers",
                      "server_cpu": "it runs on equal 0.3-core servers, so the antagonist "
                                    "is the only difference between them"},
             antagonists=(Antagonist("srv1-ui-inside", "srv1", "ui", 1 / 3, 2 / 3),
                          Antagonist("srv3-beside", "srv3", None, 1 / 2, 5 / 6))),
    Scenario("unequal", "the paper's workload on servers of unequal CPU shares "
             "(0.6, 0.3, 0.3, 0.2 cores by default)", PAPER_CLASSES,
             defaults={"server_cpu": [0.6, 0.3, 0.3, 0.2]}),
    Scenario("callgraph", "requests to the three entry services of a generated call-graph "
             "application (10 services, 3 replicas each on 4 servers, calls through "
             "their VIPs, two 20 ms services among 1-3 ms ones)", CALLGRAPH_CLASSES,
             defaults={"peak_rate": 12.0},
             refuses={"video_rate": NO_VIDEO_OR_JOBS, "video_seconds": NO_VIDEO_OR_JOBS,
                      "cpu_scale": NO_VIDEO_OR_JOBS, "job_mode": NO_VIDEO_OR_JOBS,
                      "duration_scale": NO_VIDEO_OR_JOBS,
                      "config": f"its application is {CALLGRAPH_CONFIG}"},
             config=CALLGRAPH_CONFIG),
    *(Scenario(name, f"DeathStarBench's {title}: {', '.join(c.name for c in classes)} at "
                     f"equal weights, every service behind its VIP on {DSB_REPLICAS} of "
                     f"{DSB_SERVERS} servers of {DSB_SERVER_CPU:g} cores, four switches; "
                     f"{DSB_PHASE_S:g} s phases, so that each class has 1,000 requests",
               classes,
               defaults={"peak_rate": peak, "servers": DSB_SERVERS,
                         "server_cpu": [DSB_SERVER_CPU], "phase_seconds": DSB_PHASE_S},
               refuses={**{dest: NO_VIDEO_OR_JOBS for dest in (
                   "video_rate", "video_seconds", "cpu_scale", "job_mode",
                   "duration_scale")},
                   "config": f"its application is {DSB_APPS[name][1]}"},
               config=DSB_APPS[name][1])
      for name, title, classes, peak in (
          ("hotel", "hotel reservation", HOTEL_CLASSES, DSB_PEAK_RATE["hotel"]),
          ("social", "social network", SOCIAL_CLASSES, DSB_PEAK_RATE["social"]))),
)})


def scenario_of(opts) -> Scenario:
    """The namespace's scenario; results written before scenarios existed are 'paper'."""
    return SCENARIOS[getattr(opts, "scenario", None) or "paper"]


def resolve(opts) -> None:
    """Check the governed flags given against the scenario (ScenarioError naming the first
    that does not fit) and fill in the ones left out with the scenario's defaults."""
    sc = scenario_of(opts)
    for dest, (flag, default) in GOVERNED.items():
        value = getattr(opts, dest, None)
        if value is not None and dest in sc.refuses:
            raise ScenarioError(f"{flag} does not fit --scenario {sc.name}: "
                                f"{sc.refuses[dest]}")
        if value is None:
            value = sc.defaults.get(dest, default)
            setattr(opts, dest, list(value) if isinstance(value, (list, tuple)) else value)


# ---------------------------------------------------------------- what the runs read
def request_classes(opts) -> list[dict]:
    """The scenario's request classes as the workload spec takes them: name, microservice
    ("ms"), weight, path, and the draws of a class that draws."""
    out = []
    for c in scenario_of(opts).classes:
        item = {"name": c.name, "ms": c.ms, "weight": c.weight, "path": c.path(opts)}
        if isinstance(c, DrawnJob):
            item["draw"] = c.draw(opts)
        out.append(item)
    return out


def longest_request_s(opts) -> float:
    """The longest request the classes can make at full CPU (the wait for the last one)."""
    return max(c.longest_s(opts) for c in scenario_of(opts).classes)


def antagonist_spec(opts, container_of) -> list[dict]:
    """The scenario's antagonists for the workload spec, in seconds from the start of the
    load; container_of(server, microservice) names the instance's container."""
    load_s = 3 * opts.phase_seconds
    out = []
    for a in scenario_of(opts).antagonists:
        item = {"name": a.name, "server": a.server,
                "where": "container" if a.microservice else "beside"}
        if a.microservice:
            item.update(container=container_of(a.server, a.microservice),
                        microservice=a.microservice)
        item.update(start_s=round(a.start * load_s, 3), stop_s=round(a.stop * load_s, 3),
                    cores=a.cores)
        out.append(item)
    return out


def base_config_path(opts) -> str | None:
    """The base configuration: the scenario's own, else --config (None: the default)."""
    own = scenario_of(opts).config
    return shipped(own) if own else opts.config


def connections_per_request(opts) -> float | None:
    """A call-graph scenario's TCP connections per request, weighted over its classes: the
    client's to the entry service and one per call down the graph (services/callgraph.py
    opens a connection per call); None for the other scenarios."""
    from common.config import load_config     # deferred: the configuration's parser
    sc = scenario_of(opts)
    if not sc.call_graph:
        return None
    cfg = load_config(base_config_path(opts))
    memo: dict[str, float] = {}

    def below(name: str) -> float:
        if name not in memo:
            memo[name] = sum(c.count * (1 + below(c.service))
                             for c in cfg.microservice(name).calls)
        return memo[name]
    total = sum(c.weight for c in sc.classes)
    return sum(c.weight * (1 + below(c.name)) for c in sc.classes) / total


def describe(opts) -> str:
    """The workload in a sentence or two, for summary.md."""
    sc = scenario_of(opts)
    s = opts.duration_scale
    if sc.call_graph:
        return (f"requests to the entry services {', '.join(c.name for c in sc.classes)} "
                f"of {sc.config} (weights "
                f"{':'.join(f'{c.weight:g}' for c in sc.classes)}), every call through "
                f"its VIP")
    text = (f"video streams of {opts.video_rate:g} kB/s for {opts.video_seconds * s:g} s; "
            f"back-end jobs at {opts.cpu_scale:g} x the paper's CPU, {opts.job_mode} mode")
    if sc.name == "heavy-tail":
        text += (f", their lengths drawn per request from a bounded Pareto (alpha "
                 f"{TAIL_ALPHA:g}) with the paper's means ({10 * s:g} s and {30 * s:g} s), "
                 f"cut at {TAIL_CAP:g} x the mean")
    for a in sc.antagonists:
        where = f"inside {a.server}'s {a.microservice} container" if a.microservice else \
            f"beside {a.server}'s containers, in its cgroup"
        text += (f"; a busy thread ({a.cores:g} core at most) {where} from "
                 f"{a.start * 3 * opts.phase_seconds:.0f} s to "
                 f"{a.stop * 3 * opts.phase_seconds:.0f} s of the load")
    return text


# ---------------------------------------------------------------- bounded Pareto
def bounded_pareto_mean(alpha: float, low: float, high: float) -> float:
    """Mean of the Pareto of shape alpha cut to [low, high]."""
    if not 0 < low < high or alpha <= 0:
        raise ValueError("bounded Pareto: 0 < low < high and alpha > 0")
    r = (low / high) ** alpha
    if abs(alpha - 1) < 1e-12:
        return high * low / (high - low) * math.log(high / low)
    return (alpha / (alpha - 1)) * (low ** alpha / (1 - r)) * \
        (low ** (1 - alpha) - high ** (1 - alpha))


def bounded_pareto_low(alpha: float, high: float, mean: float) -> float:
    """The lower bound that gives the bounded Pareto (alpha, cut at high) this mean
    (bisection: the mean grows with the lower bound)."""
    if not 0 < mean < high:
        raise ValueError(f"bounded Pareto: the mean ({mean:g}) must lie below the cut "
                         f"({high:g})")
    lo, hi = mean * 1e-9, mean
    for _ in range(200):
        mid = (lo + hi) / 2
        if bounded_pareto_mean(alpha, mid, high) < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---------------------------------------------------------------- the call-graph config
def callgraph_config_text() -> str:
    """configs/callgraph-lb.yaml: a header saying where it comes from, then the generator's
    output for CALLGRAPH_GENERATOR."""
    import yaml   # deferred: PyYAML, only for writing the file
    from placement.apps import entry_services, generate
    data = generate(**CALLGRAPH_GENERATOR)
    args = ", ".join(f"{k}={v!r}" for k, v in CALLGRAPH_GENERATOR.items())
    by_name = {m["name"]: m for m in data["microservices"]}

    def reached(name: str) -> list[str]:
        return [name] + [x for c in by_name[name].get("calls", ())
                         for x in reached(c["service"])]
    trees = "".join(f"#   {e}: {len(reached(e))} services served (the entry and its calls), "
                    f"{sum(by_name[x]['cpu_ms'] for x in reached(e)):g} ms of CPU\n"
                    for e in entry_services(data))
    header = (f"{MODELINE}# The call-graph application of `lb_comparison --scenario callgraph`, "
              f"written "
              f"by\n# `python -m experiments.scenarios --callgraph-config`:\n# placement.apps."
              f"generate({args}).\n# One switch, four servers, every service on three of "
              f"them. A request to each entry:\n{trees}")
    return header + yaml.safe_dump(data, sort_keys=False)


def dsb_config_text(app: str) -> str:
    """configs/<app>-lb.yaml: the placement configuration of DeathStarBench's application
    with the services its benchmark mix reaches, each with DSB_REPLICAS replicas, on
    DSB_SERVERS servers of DSB_SERVER_CPU cores; a header saying where it comes from."""
    import yaml   # deferred: PyYAML, only for writing the file
    from placement.apps import entry_mix, entry_services
    source = DSB_APPS[app][0]
    path = shipped(source)
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    mix = entry_mix(path, entry_services(data))
    by_name = {m["name"]: m for m in data["microservices"]}
    reached: set[str] = set()

    def reach(name: str) -> None:
        if name not in reached:
            reached.add(name)
            for c in by_name[name].get("calls", ()):
                reach(c["service"])
    for entry in mix:
        reach(entry)
    kept = [{**m, "replicas": DSB_REPLICAS} for m in data["microservices"]
            if m["name"] in reached]
    for m in kept:
        m.pop("servers", None)
    out = {**data, "servers": {**data["servers"], "count": DSB_SERVERS,
                               "cpu": DSB_SERVER_CPU},
           "microservices": kept}
    left = [m["name"] for m in data["microservices"] if m["name"] not in reached]
    header = (f"{MODELINE}# DeathStarBench's application of `lb_comparison --scenario {app}`, "
              f"written by\n# `python -m experiments.scenarios --dsb-config {app}` from "
              f"{source}\n# (its sources, calls and sizes: that file and "
              f"docs/deathstarbench-graphs.md): the services\n# its benchmark mix "
              f"({', '.join(mix)}) reaches, {DSB_REPLICAS} replicas each.\n"
              f"# Left out, not reached by the mix: {', '.join(left) or 'none'}.\n")
    return header + yaml.safe_dump(out, sort_keys=False)


def parser():
    from common.cli import ArgumentParser     # deferred: the command line only
    p = ArgumentParser(prog="python -m experiments.scenarios", description=(
        "Write a comparison configuration the scenarios use to standard output: "
        "configs/callgraph-lb.yaml (--callgraph-config), or configs/hotel-lb.yaml and "
        "social-lb.yaml from DeathStarBench's placement configurations (--dsb-config)."))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--callgraph-config", action="store_true",
                       help="the four-service call graph's (configs/callgraph-lb.yaml)")
    which.add_argument("--dsb-config", choices=sorted(DSB_APPS),
                       help="a DeathStarBench application's (configs/<app>-lb.yaml)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    sys.stdout.write(callgraph_config_text() if args.callgraph_config
                     else dsb_config_text(args.dsb_config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
