"""What the policies' unit tests share: a PolicyCore over the paper's three microservices on
four servers, and ways to feed it loads and profiles."""
from common.config import parse_config
from ryu_apps.policies import Backend
from ryu_apps.policy_core import PolicyCore, controller_settings

SERVERS = ["srv1", "srv2", "srv3", "srv4"]


def make_core(policy="malb", classes=None, **kw):
    pools = {}
    order = 0
    for ms in ("video", "ui", "backend"):
        for i, srv in enumerate(SERVERS, 1):
            pools.setdefault(ms, []).append(
                Backend(f"{srv}-{ms}", ms, srv, f"10.0.{i}.1", f"02:00:00:01:0{i}:01", 80, order))
            order += 1
    classes = classes or {"video": "long", "ui": "short", "backend": "long"}
    settings = {**controller_settings(parse_config({}).controller), **kw}
    return PolicyCore(pools, classes, policy=policy, clock=lambda: 100.0, **settings)


def maglev_table(core, ms):
    """The maglev policy's table of the microservice's instances in service."""
    return core.strategy.table(ms, [b for b in core.pools[ms] if core.in_service(b)])


def loads(core, t=99.0, **per_server):
    """per_server: srvN=(cpu, mem, net)"""
    for srv in SERVERS:
        cpu, mem, net = per_server.get(srv, (10.0, 10.0, 10.0))
        core.update_server_load(srv, cpu, mem, net, t)


def flow(port, client="10.0.200.1"):
    return ("tcp", client, port, "10.0.0.2", 8002)


def running_core(policy="malb", capacities=None, **kw):
    core = make_core(policy, capacities=capacities, **kw)
    # backend jobs: 60 % last 10 s, 40 % 30 s; one costs 0.03 cores; CPU only
    core.profiles.update({"backend": (1.0, 0.0, 0.0)}, {}, 100.0,
                         per_flow={"backend": (10.0, 0.0, 0.0)},
                         per_flow_abs={"backend": (0.03, 0.0)},
                         durations={"backend": [10.0] * 12 + [30.0] * 8})
    return core


def measured(core, t, **per_server):
    for srv in SERVERS:
        cpu = per_server.get(srv, 10.0)
        core.update_server_load(srv, cpu, 10.0, 10.0, t, measured=(cpu, 10.0, 10.0))


def same_choices(a, b, flows: int = 20, ms: str = "backend") -> bool:
    """Whether two policy cores send the same new flows (watched, every third ending two
    later) to the same servers."""
    for k in range(flows):
        if k % 3 == 0:
            for core in (a, b):
                core.flow_ended(k - 2, 100.0 + k)
        if a.choose(ms, 100.0 + k, watched=k).server != \
                b.choose(ms, 100.0 + k, watched=k).server:
            return False
    return True
