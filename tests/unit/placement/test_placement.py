"""From configuration and graph to a problem, from a plan to moves and manifests; the move
sequence against fakes; the command line's refusals (nothing moves on bad input)."""
from __future__ import annotations

import contextlib
import json
import socket
from types import SimpleNamespace

import kubernetes_validate
import pytest
import yaml

from common.config import load_config, parse_config
from placement.apply import ApplyError, InProcessTestbed, MoveResult, RemoteTestbed, \
    apply_moves
from placement.apps import generate
from placement.model import PlacementError
from placement.partitioner import plan
from placement.k8s import manifests, to_yaml
from placement.problem import Move, build_problem, current_assignment, moves_between
from tests.conftest import ROOT, run_module
from topologies.__main__ import start_control
from topologies.testbed import Testbed

BOOKINFO = f"{ROOT}/configs/bookinfo.yaml"
GRAPH = {"vertices": {"productpage": {"cpu_cores": 0.12, "memory_mb": 30},
                      "details": {"cpu_cores": 0.05, "memory_mb": 25},
                      "reviews": {"cpu_cores": 0.08, "memory_mb": 25},
                      "ratings": {"cpu_cores": None, "memory_mb": None}},
         "edges": [{"caller": "clients@s1", "callee": "productpage", "bytes_per_s": 2e5},
                   {"caller": "productpage", "callee": "details", "bytes_per_s": 3e5},
                   {"caller": "productpage", "callee": "reviews", "bytes_per_s": 4e5},
                   {"caller": "reviews", "callee": "ratings", "bytes_per_s": 2e5}]}
SPREAD = {"productpage": ["srv1"], "details": ["srv2"], "reviews": ["srv3"],
          "ratings": ["srv4"]}


def test_problem_from_the_configuration_and_the_graph():
    cfg = load_config(BOOKINFO)
    p = build_problem(cfg, GRAPH, SPREAD)
    assert {u.name: round(u.cpu, 3) for u in p.units} == {
        "productpage": 0.12, "details": 0.05, "reviews": 0.08, "ratings": 0.02}  # a floor
    assert p.anchors == {("productpage", "s1"): 2e5}
    assert p.edges[("details", "productpage")] == 3e5
    a = current_assignment(p, SPREAD)
    # details and ratings sit across the trunk from their callers
    assert p.trunk_traffic(a) == 3e5 + 2e5
    assert [h.switch for h in p.hosts] == ["s1", "s2", "s1", "s2"]


def test_a_plan_fills_a_server_only_to_the_utilization_cap():
    cfg = load_config(BOOKINFO)       # 0.5 cores per server; the units need 0.27 cores
    on_one = plan(build_problem(cfg, GRAPH, SPREAD, max_utilization=1.0), near="s1")
    assert on_one.hosts_used == 1 and on_one.trunk_traffic == 0
    capped = build_problem(cfg, GRAPH, SPREAD, max_utilization=0.5)
    assert [h.cpu for h in capped.hosts] == [0.25] * 4
    two = plan(capped, near="s1")
    assert two.hosts_used == 2 and two.trunk_traffic == 0     # srv1 and srv3, both on s1
    assert set(two.assignment.values()) == {"srv1", "srv3"}
    with pytest.raises(PlacementError, match="max_utilization"):
        build_problem(cfg, GRAPH, SPREAD, max_utilization=0)


def test_replicas_split_the_traffic_and_the_use():
    cfg = parse_config({"servers": {"count": 3}, "microservices": [
        {"name": "web", "abbrev": "web", "port": 9001, "kind": "callgraph", "replicas": 2,
         "calls": [{"service": "db"}]},
        {"name": "db", "abbrev": "db", "port": 9002, "kind": "callgraph", "replicas": 1}]})
    graph = {"vertices": {"web": {"cpu_cores": 0.4, "memory_mb": 100}},
             "edges": [{"caller": "web", "callee": "db", "bytes_per_s": 1000}]}
    p = build_problem(cfg, graph, {"web": ["srv1", "srv2"], "db": ["srv3"]})
    assert {u.name: u.cpu for u in p.units} == {"web#1": 0.2, "web#2": 0.2, "db": 0.02}
    assert p.edges == {("db", "web#1"): 500.0, ("db", "web#2"): 500.0}


def test_moves_pair_the_servers_left_with_those_taken():
    before = {"a": ["srv1", "srv2"], "b": ["srv3"]}
    after = {"a": ["srv2", "srv4"], "b": ["srv3"]}
    assert moves_between(before, after) == [Move("a", "srv1", "srv4")]
    with pytest.raises(PlacementError, match="2 replicas now, 1 in the plan"):
        moves_between(before, {"a": ["srv1"], "b": ["srv3"]})


@pytest.mark.parametrize("graph, message", [
    ({"edges": [{"caller": "x", "callee": "details", "bytes_per_s": 1}]},
     "edges[0].caller: unknown microservice or client switch 'x'"),
    ({"edges": [{"caller": "clients@s9", "callee": "details", "bytes_per_s": 1}]},
     "unknown microservice or client switch 'clients@s9'"),
    ({"edges": [{"caller": "details", "callee": "nope", "bytes_per_s": 1}]},
     "edges[0].callee: unknown microservice 'nope'"),
    ({"edges": [{"caller": "details", "callee": "reviews", "bytes_per_s": -1}]},
     "edges[0].bytes_per_s: expected a number >= 0"),
    ({"vertices": {"mystery": {}}}, "vertices: unknown microservice 'mystery'"),
    ([], "graph: expected"),
])
def test_a_graph_that_does_not_fit_the_configuration_is_refused(graph, message):
    with pytest.raises(PlacementError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_problem(load_config(BOOKINFO), graph, SPREAD)


def test_kubernetes_manifests_pass_the_kubernetes_schema():
    cfg = load_config(BOOKINFO)
    docs = manifests(cfg, {"productpage": ["srv1"], "details": ["srv1"],
                           "reviews": ["srv3"], "ratings": ["srv3"]}, GRAPH)
    assert [d["kind"] for d in docs] == ["Deployment", "Service"] * 4
    for d in docs:
        kubernetes_validate.validate(d, "1.29", strict=True)
    pp = docs[0]["spec"]["template"]["spec"]["affinity"]
    node = pp["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert node["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["srv1"]
    weights = {t["podAffinityTerm"]["labelSelector"]["matchLabels"]["app"]: t["weight"] for t
               in pp["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]}
    assert weights == {"reviews": 100, "details": 75}     # heaviest edge = 100
    # the pods run: command, environment, resources and probes (the export test starts them)
    c = docs[0]["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["python3", "-m", "services.callgraph", "--port", "9001"]
    assert c["workingDir"] == "/opt/malb" and c["image"] == "malb/service:latest"
    env = {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env["MALB_INSTANCE"] == "metadata.name" and env["MALB_SERVER"] == "spec.nodeName"
    calls = {x["service"]: x["host"] for x in json.loads(env["MALB_SPEC"])["calls"]}
    assert calls == {"details": "details", "reviews": "reviews"}   # by Service name
    srv1 = cfg.server("srv1")        # productpage and details share srv1
    assert c["resources"]["limits"] == c["resources"]["requests"] == {
        "cpu": f"{int(srv1.cpu / 2 * 1000)}m", "memory": f"{srv1.memory_mb // 2}Mi"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": 9001}
    assert node["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "malb/server"
    with_registry = manifests(cfg, {"productpage": ["srv1"], "details": ["srv1"],
                                    "reviews": ["srv3"], "ratings": ["srv3"]}, GRAPH,
                              registry="registry.example.org:5000/lab/")
    assert with_registry[0]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "registry.example.org:5000/lab/malb/service:latest"
    # the restricted Pod Security Standard: no root, no escalation, no capability, a
    # read-only root filesystem, the runtime's seccomp profile
    pod = docs[0]["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsNonRoot"] and pod["runAsUser"] != 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    # YAML without anchors and aliases (the labels are one object in two places)
    text = to_yaml(docs)
    assert "&id" not in text and "*id" not in text
    assert [d["kind"] for d in yaml.safe_load_all(text)] == [d["kind"] for d in docs]
    # a manifest the schema refuses is refused (the check can fail)
    bad = json.loads(json.dumps(docs[0]))
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.29", strict=True)


class FakeController:
    def __init__(self, healthy_after=1, flows=None):
        self.pool = {"srv2-det": {"microservice": "details", "server": "srv2",
                                  "healthy": True, "draining": False, "active_flows": 0}}
        self.calls, self.healthy_after, self.flows = [], healthy_after, list(flows or [0])

    def instances(self):
        for v in self.pool.values():
            if v["draining"]:
                v["active_flows"] = self.flows.pop(0) if self.flows else 0
            elif not v["healthy"]:
                self.healthy_after -= 1
                v["healthy"] = self.healthy_after <= 0
        return self.pool

    def add(self, name):
        self.calls.append(("add", name))
        self.pool[name] = {"healthy": False, "draining": False, "active_flows": 0}

    def drain(self, name):
        self.calls.append(("drain", name))
        self.pool[name]["draining"] = True

    def remove(self, name, force=False):
        self.calls.append(("remove", name, force))
        self.pool.pop(name)


class FakeTestbed:
    def __init__(self):
        self.calls = []

    def start(self, inst):
        self.calls.append(("start", inst.name))

    def stop(self, name):
        self.calls.append(("stop", name))


def fake_clock():
    t = [0.0]
    return (lambda: t[0]), (lambda s: t.__setitem__(0, t[0] + s))


def test_a_move_starts_the_new_instance_then_drains_and_removes_the_old():
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(healthy_after=2, flows=[3, 1, 0]), FakeTestbed()
    clock, sleep = fake_clock()
    (result,) = apply_moves(cfg, [Move("details", "srv2", "srv1")], ctl, tb, log=lambda m: None,
                            clock=clock, sleep=sleep)
    assert tb.calls == [("start", "srv1-det"), ("stop", "srv2-det")]
    assert ctl.calls == [("add", "srv1-det"), ("drain", "srv2-det"),
                         ("remove", "srv2-det", False)]
    assert isinstance(result, MoveResult) and not result.forced and result.flows_left == 0


def test_a_move_forces_out_flows_at_the_drain_timeout_and_undoes_an_unhealthy_start():
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(flows=[5] * 1000), FakeTestbed()
    clock, sleep = fake_clock()
    (result,) = apply_moves(cfg, [Move("details", "srv2", "srv1")], ctl, tb,
                            drain_timeout_s=10, log=lambda m: None, clock=clock, sleep=sleep)
    assert result.forced and result.flows_left == 5 and ctl.calls[-1] == \
        ("remove", "srv2-det", True)
    ctl, tb = FakeController(healthy_after=10 ** 6), FakeTestbed()
    with pytest.raises(ApplyError, match="not healthy within 30 s; the move is undone") as err:
        apply_moves(cfg, [Move("details", "srv2", "srv1")], ctl, tb, log=lambda m: None,
                    clock=clock, sleep=sleep)
    assert tb.calls == [("start", "srv1-det"), ("stop", "srv1-det")]
    assert "srv2-det" in ctl.pool and not ctl.pool["srv2-det"]["draining"]
    assert err.value.clean                 # nothing of the batch left: the layout before it


def two_on_srv2(ctl) -> list[Move]:
    """details and reviews both on srv2 in ctl's pool; the batch that moves them away."""
    ctl.pool["srv2-rev"] = {**ctl.pool["srv2-det"], "microservice": "reviews"}
    return [Move("details", "srv2", "srv1"), Move("reviews", "srv2", "srv3")]


def test_a_batch_of_moves_starts_every_new_instance_before_draining_the_old_ones():
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(healthy_after=3, flows=[2, 0, 0]), FakeTestbed()
    moves = two_on_srv2(ctl)
    clock, sleep = fake_clock()
    results = apply_moves(cfg, moves, ctl, tb, log=lambda m: None, clock=clock, sleep=sleep,
                          batch=2)
    assert tb.calls[:2] == [("start", "srv1-det"), ("start", "srv3-rev")]
    assert ctl.calls[:4] == [("add", "srv1-det"), ("add", "srv3-rev"), ("drain", "srv2-det"),
                             ("drain", "srv2-rev")]
    # the old instance without flows goes first; each old one goes once, not forced
    assert ctl.calls[4:] == [("remove", "srv2-rev", False), ("remove", "srv2-det", False)]
    assert sorted(tb.calls[2:]) == [("stop", "srv2-det"), ("stop", "srv2-rev")]
    assert [r.move.microservice for r in results] == ["details", "reviews"]
    assert set(ctl.pool) == {"srv1-det", "srv3-rev"}
    # one at a time, the same moves take longer: the waits no longer overlap
    ctl1, tb1 = FakeController(healthy_after=3, flows=[2, 0, 0]), FakeTestbed()
    two_on_srv2(ctl1)
    clock1, sleep1 = fake_clock()
    apply_moves(cfg, moves, ctl1, tb1, log=lambda m: None, clock=clock1, sleep=sleep1)
    assert clock1() > clock()


def test_a_batch_with_an_unhealthy_new_instance_is_undone_whole():
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(healthy_after=10 ** 6), FakeTestbed()
    moves = two_on_srv2(ctl)
    clock, sleep = fake_clock()
    with pytest.raises(ApplyError, match="not healthy within 30 s; the moves are undone, "
                                         "srv2-det, srv2-rev keep serving"):
        apply_moves(cfg, moves, ctl, tb, log=lambda m: None, clock=clock, sleep=sleep,
                    batch=2)
    assert tb.calls == [("start", "srv1-det"), ("start", "srv3-rev"), ("stop", "srv1-det"),
                        ("stop", "srv3-rev")]
    assert set(ctl.pool) == {"srv2-det", "srv2-rev"}
    assert not any(v["draining"] for v in ctl.pool.values())
    with pytest.raises(ValueError, match="batch: expected at least 1"):
        apply_moves(cfg, moves, ctl, tb, log=lambda m: None, batch=0)


def test_undoing_a_batch_drains_a_new_instance_that_already_takes_flows():
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(flows=[4, 0]), FakeTestbed()
    moves = two_on_srv2(ctl)
    add = ctl.add

    def add_healthy_details_only(name):     # srv1-det comes up, srv3-rev never does
        add(name)
        ctl.pool[name]["healthy"] = name == "srv1-det"
    ctl.add, ctl.healthy_after = add_healthy_details_only, 10 ** 6
    clock, sleep = fake_clock()
    with pytest.raises(ApplyError, match="srv3-rev: not healthy within 30 s; the moves are "
                                         "undone, srv2-det, srv2-rev keep serving$"):
        apply_moves(cfg, moves, ctl, tb, log=lambda m: None, clock=clock, sleep=sleep,
                    batch=2)
    # the one never healthy goes at once; the healthy one is drained, and goes when its
    # flows are done, not forced
    assert ctl.calls[2:] == [("remove", "srv3-rev", True), ("drain", "srv1-det"),
                             ("remove", "srv1-det", False)]
    assert tb.calls[2:] == [("stop", "srv3-rev"), ("stop", "srv1-det")]
    assert set(ctl.pool) == {"srv2-det", "srv2-rev"}


def test_a_start_that_fails_in_a_batch_undoes_the_instances_started_before_it():
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(healthy_after=10 ** 6), FakeTestbed()
    moves = two_on_srv2(ctl)
    start = tb.start

    def start_details_only(inst):
        if inst.name != "srv1-det":
            raise ApplyError(f"{inst.name}: its service did not start listening within 20 s")
        start(inst)
    tb.start = start_details_only
    with pytest.raises(ApplyError, match="srv3-rev: its service did not start listening "
                                         "within 20 s; the moves are undone"):
        apply_moves(cfg, moves, ctl, tb, log=lambda m: None, batch=2)
    assert tb.calls == [("start", "srv1-det"), ("stop", "srv1-det")]
    assert set(ctl.pool) == {"srv2-det", "srv2-rev"}


def test_an_instance_that_does_not_listen_is_not_left_on_the_testbed():
    class Testbed:
        deployed: set = set()

        def add_instance(self, inst):
            self.deployed.add(inst.name)

        def wait_services(self, timeout_s, instances):
            return [i.name for i in instances]          # none listening

        def remove_instance(self, name):
            self.deployed.remove(name)
    tb = Testbed()
    with pytest.raises(ApplyError, match="srv1-det: its service did not start listening"):
        InProcessTestbed(tb).start(load_config(BOOKINFO).slot("srv1", "details"))
    assert tb.deployed == set()


@contextlib.contextmanager
def control_api(add_instance=None, listening=True):
    """The real control API (Testbed.control_routes, start_control) over a fake testbed:
    (the fake, its URL, its configuration)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = parse_config({"servers": {"count": 2}, "testbed": {"control_port": port}})
    fake = SimpleNamespace(cfg=cfg, deployed=set())
    fake.add_instance = add_instance or (lambda inst: fake.deployed.add(inst.name))
    fake.remove_instance = fake.deployed.remove
    fake.wait_services = lambda timeout, which: [] if listening else [i.name for i in which]
    fake.control_routes = lambda: Testbed.control_routes(fake)
    server = start_control(fake)
    try:
        yield fake, f"http://127.0.0.1:{port}", cfg
    finally:
        server.shutdown()
        server.server_close()


def test_an_instance_the_control_api_started_but_not_heard_is_stopped_again():
    with control_api(listening=False) as (fake, url, cfg):
        with pytest.raises(ApplyError, match="srv1-ui: the testbed did not start it: .*HTTP "
                                             "504"):
            RemoteTestbed(url).start(cfg.slot("srv1", "ui"))
        assert fake.deployed == set()


def test_the_generated_application_is_a_valid_dag_of_20_to_50_services():
    cfg = parse_config(generate(30, seed=7))
    assert len(cfg.microservices) == 30 and all(m.kind == "callgraph" for m in cfg.microservices)
    called = {c.service for m in cfg.microservices for c in m.calls}
    assert called == {m.name for m in cfg.microservices[1:]}      # all but the entry
    sizes = {c.response_bytes for m in cfg.microservices for c in m.calls}
    assert sizes == {2000, 40000}                                   # heavy and light
    assert generate(30, seed=7) == generate(30, seed=7)


@pytest.mark.parametrize("args, files, message", [
    (["plan", "--graph", "{g}", "--layout", "{l}"], {"g": "{bad json"}, "not valid JSON"),
    (["plan", "--graph", "{g}", "--layout", "{l}"],
     {"g": json.dumps({"edges": [{"caller": "nobody", "callee": "details",
                                  "bytes_per_s": 1}]})}, "unknown microservice or client"),
    (["plan", "--graph", "{g}", "--layout", "{l}"],
     {"l": json.dumps({**SPREAD, "details": ["srv9"]})}, "layout.details: unknown server"),
    (["plan", "--graph", "{g}", "--layout", "{l}"],
     {"g": json.dumps({**GRAPH, "vertices": {"details": {"cpu_cores": 5.0}}})},
     "capacity: the units need 5.06 cores, the servers have 1.2 (each filled to at most "
     "--max-utilization 0.6)"),
    (["apply", "--graph", "{g}", "--layout", "{l}", "--testbed", "http://127.0.0.1:1"],
     {"g": json.dumps({**GRAPH, "vertices": {"details": {"cpu_cores": 5.0}}})},
     "capacity: the units need 5.06 cores, the servers have 1.2 (each filled to at most "
     "--max-utilization 0.6)"),
    (["plan", "--graph", "{g}", "--layout", "{l}", "--queue-price", "5"], {},
     "--queue-price: only with --objective latency"),
    (["plan", "--graph", "{g}", "--layout", "{l}", "--objective", "latency", "--queue-price",
      "-1"], {}, "--queue-price"),
    (["export", "--format", "k8s", "--plan", "{g}"], {"g": "[]"}, "--plan: expected a plan"),
    (["export", "--format", "k8s", "--registry", "https://x y"], {},
     "--registry: expected a registry host[:port][/path], got 'https://x y'"),
])
def test_bad_input_is_one_line_and_exit_2_and_nothing_moves(tmp_path, args, files, message):
    paths = {"g": tmp_path / "graph.json", "l": tmp_path / "layout.json"}
    paths["g"].write_text(files.get("g", json.dumps(GRAPH)))
    paths["l"].write_text(files.get("l", json.dumps(SPREAD)))
    argv = [a.format(g=paths["g"], l=paths["l"]) for a in args]
    res = run_module("placement", *argv, "--config", BOOKINFO, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "move" not in res.stdout


def test_generate_writes_a_configuration_that_loads(tmp_path):
    out = tmp_path / "app.yaml"
    res = run_module("placement", "generate", "--services", "20", "--seed", "3", "--out",
                     str(out), timeout=60)
    assert res.returncode == 0, res.stderr
    cfg = load_config(str(out))
    assert len(cfg.microservices) == 20 and yaml.safe_load(out.read_text())["servers"]


def test_plan_says_what_it_tried_how_far_from_the_optimum_and_where_the_layout_is_over(
        tmp_path):
    # every service on srv1: 0.27 cores of its 0.3 (0.5 x the 0.6 cap) fit, so also put a
    # heavy details there, over the cap
    graph = {**GRAPH, "vertices": {**GRAPH["vertices"], "details": {"cpu_cores": 0.2}}}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    (tmp_path / "l.json").write_text(json.dumps({ms: ["srv1"] for ms in SPREAD}))
    out = tmp_path / "plan.json"
    res = run_module("placement", "plan", "--graph", str(tmp_path / "g.json"), "--layout",
                     str(tmp_path / "l.json"), "--config", BOOKINFO, "--out", str(out),
                     timeout=120)
    assert res.returncode == 0, res.stderr
    assert "the current layout breaks a limit: srv1: CPU 0.42 of 0.3 cores" in res.stdout
    assert "(optimal)" in res.stdout and "tried greedy + refinement: cost" in res.stdout
    doc = json.loads(out.read_text())
    assert doc["optimal"] and doc["gap"] < 1e-3 and doc["bound"] <= doc["after"]["cost"]
    assert doc["before"]["violations"] == ["srv1: CPU 0.42 of 0.3 cores"]
    assert doc["attempts"][-1]["method"].startswith("exact program (HiGHS, optimal")
    res = run_module("placement", "plan", "--graph", str(tmp_path / "g.json"), "--layout",
                     str(tmp_path / "l.json"), "--config", BOOKINFO, "--time-limit", "0",
                     "--out", str(out), timeout=120)
    doc = json.loads(out.read_text())
    assert res.returncode == 0 and doc["bound"] is None and doc["gap"] is None
    assert not any(a["method"].startswith("exact") for a in doc["attempts"])


def test_a_replan_from_the_command_line_moves_at_most_its_share(tmp_path):
    (tmp_path / "g.json").write_text(json.dumps(GRAPH))
    (tmp_path / "l.json").write_text(json.dumps(SPREAD))
    out = tmp_path / "plan.json"
    argv = ["plan", "--graph", str(tmp_path / "g.json"), "--layout", str(tmp_path / "l.json"),
            "--config", BOOKINFO, "--out", str(out)]
    assert run_module("placement", *argv, timeout=120).returncode == 0
    fresh = json.loads(out.read_text())
    assert len(fresh["moves"]) >= 2                  # the spread layout is far from the plan
    res = run_module("placement", *argv, "--max-moved", "0.25", timeout=120)
    assert res.returncode == 0, res.stderr
    capped = json.loads(out.read_text())
    assert len(capped["moves"]) <= 1 and capped["method"].startswith("re-plan")
    assert capped["after"]["cost"] <= capped["before"]["cost"]
    res = run_module("placement", *argv, "--max-moved", "2", timeout=60)
    assert res.returncode == 2 and "--max-moved" in res.stderr


def test_a_controller_that_does_not_answer_a_poll_is_asked_again_and_an_undo_drains():
    from common.httpjson import HttpError
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(healthy_after=2, flows=[3, 0]), FakeTestbed()
    answer, silent = ctl.instances, [2, 5]      # the 2nd and the 5th polls get no answer

    def sometimes_silent():
        silent[:] = [k - 1 for k in silent]
        if 0 in silent:
            raise HttpError("GET /malb/instances: timed out")
        return answer()
    ctl.instances = sometimes_silent
    clock, sleep = fake_clock()
    (result,) = apply_moves(cfg, [Move("details", "srv2", "srv1")], ctl, tb,
                            log=lambda m: None, clock=clock, sleep=sleep)
    assert tb.calls == [("start", "srv1-det"), ("stop", "srv2-det")]
    assert not result.forced and set(ctl.pool) == {"srv1-det"}
    # an undo that cannot tell which new instances are healthy drains each of them (one
    # may carry flows) rather than cutting them off
    ctl, tb = FakeController(healthy_after=10 ** 6), FakeTestbed()
    ctl.instances = lambda: (_ for _ in ()).throw(HttpError("timed out"))
    with pytest.raises(ApplyError, match="not healthy within 30 s; the move is undone"):
        apply_moves(cfg, [Move("details", "srv2", "srv1")], ctl, tb, drain_timeout_s=5,
                    log=lambda m: None, clock=clock, sleep=sleep)
    assert ctl.calls == [("add", "srv1-det"), ("drain", "srv1-det"),
                         ("remove", "srv1-det", True)]
    assert tb.calls == [("start", "srv1-det"), ("stop", "srv1-det")]


def test_a_failed_retirement_says_what_is_left_and_the_batches_done_before_it():
    cfg = load_config(BOOKINFO)
    ctl, tb = FakeController(), FakeTestbed()
    moves = two_on_srv2(ctl)
    remove = ctl.remove

    def refuse_reviews(name, force=False):
        if name == "srv2-rev":
            raise ApplyError("srv2-rev: the controller refused")
        remove(name, force)
    ctl.remove = refuse_reviews
    clock, sleep = fake_clock()
    with pytest.raises(ApplyError, match="srv3-rev serve, but retiring the old instances "
                                         "failed: .*left behind, draining: srv2-rev$") as err:
        apply_moves(cfg, moves, ctl, tb, log=lambda m: None, clock=clock, sleep=sleep)
    assert [r.move.microservice for r in err.value.done] == ["details"]
    assert ctl.pool["srv2-rev"]["draining"] and "srv3-rev" in ctl.pool
    assert not err.value.clean


def test_the_testbed_builds_an_instance_whole_or_not_at_all(monkeypatch):
    import subprocess
    import topologies.testbed as testbed_module

    class Net(dict):
        def addDocker(self, name, **_):
            self[name] = SimpleNamespace(name=name)
            return self[name]

        def addLink(self, node, switch, **_):
            self.links.append(SimpleNamespace(intf1=SimpleNamespace(node=node, name="a"),
                                              intf2=SimpleNamespace(node=switch, name="p")))
            return self.links[-1]

        def linksBetween(self, a, b):
            return [lk for lk in self.links if {lk.intf1.node.name, lk.intf2.node.name} ==
                    {a.name, b.name}]

        def delLink(self, link):
            self.links.remove(link)

        def delHost(self, node):
            del self[node.name]

    def ovs_refuses(cmd, check=False, **_):
        if check and cmd[:2] == ["ovs-vsctl", "--may-exist"]:
            raise subprocess.CalledProcessError(1, cmd, stderr="no bridge s1")
        return SimpleNamespace(returncode=0)
    monkeypatch.setattr(testbed_module.subprocess, "run", ovs_refuses)
    cfg = load_config(BOOKINFO)
    inst = cfg.slot("srv1", "details")
    net = Net({inst.switch: SimpleNamespace(name=inst.switch)})
    net.links = []
    fake = SimpleNamespace(cfg=cfg, net=net, deployed=set(), datapath="user",
                           _docker_params=lambda i: {})
    fake._discard = lambda i, node: Testbed._discard(fake, i, node)
    with pytest.raises(ApplyError, match="srv1-det: the testbed did not start it: .*"
                                         "ovs-vsctl"):
        InProcessTestbed(SimpleNamespace(
            add_instance=lambda i: Testbed.add_instance(fake, i))).start(inst)
    assert set(net) == {inst.switch} and net.links == [] and fake.deployed == set()


def test_a_start_the_control_api_did_not_answer_in_time_is_stopped_again():
    import time
    deployed = set()

    def slow_add(inst):                  # deployed after the client has given up waiting
        time.sleep(0.5)
        deployed.add(inst.name)
    with control_api(slow_add) as (fake, url, cfg):
        fake.deployed = deployed
        fake.remove_instance = deployed.remove
        with pytest.raises(ApplyError, match="srv1-ui: the testbed did not start it"):
            RemoteTestbed(url, timeout_s=0.4).start(cfg.slot("srv1", "ui"))
        assert deployed == set()


def test_the_latency_objective_from_the_command_line_spreads_the_queue(tmp_path):
    (tmp_path / "g.json").write_text(json.dumps(GRAPH))
    (tmp_path / "l.json").write_text(json.dumps(SPREAD))
    out = tmp_path / "plan.json"
    argv = ["plan", "--graph", str(tmp_path / "g.json"), "--layout", str(tmp_path / "l.json"),
            "--config", BOOKINFO, "--out", str(out), "--time-limit", "2"]
    assert run_module("placement", *argv, timeout=120).returncode == 0
    traffic = json.loads(out.read_text())
    res = run_module("placement", *argv, "--objective", "latency", "--queue-price", "1e7",
                     timeout=120)
    assert res.returncode == 0, res.stderr
    assert "requests queued (modelled)" in res.stdout
    latency = json.loads(out.read_text())
    assert traffic["objective"] == "traffic" and latency["objective"] == "latency"
    assert latency["queue_price"] == 1e7
    # the priced plan holds fewer requests at its servers, for more traffic x distance
    assert latency["after"]["queueing"] < traffic["after"]["queueing"]
    assert latency["after"]["traffic_cost"] >= traffic["after"]["traffic_cost"]
    assert latency["after"]["servers_used"] > traffic["after"]["servers_used"]
