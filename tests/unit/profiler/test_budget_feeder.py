"""profiler/budget_feeder.py against real agents' SLO runners (agents/slo.py) over HTTP:
the end-to-end objective's budgets reach the loops of the services it calls, a loop that
holds another target gets its budget again, and an agent that does not answer is named."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from agents.slo import SloRunner
from common.config import parse_config
from common.httpjson import JsonServer
from common.metrics import new_registry, render
from profiler.budget_feeder import BudgetFeeder, objectives
from tests.lib.metrics import value

# front -> mid -> leaf, each on its own server; the clients' latency is front's SLI
NAMES = (("front", "mid"), ("mid", "leaf"), ("leaf", None))
TARGET_MS = 40.0


def config_data(agent_urls=None):
    servers = [{"name": f"srv{k + 1}", "cpu": 0.5,
                **({"agent_url": agent_urls[k]} if agent_urls else {})} for k in range(3)]
    return {"servers": servers, "microservices": [
        {"name": n, "port": 9001 + k, "kind": "callgraph", "servers": [f"srv{k + 1}"],
         "calls": [{"service": c}] if c else [],
         "slo": {"target_ms": TARGET_MS if n == "front" else 20.0, "sli": "client",
                 **({"scope": "end-to-end"} if n == "front" else {})}}
        for k, (n, c) in enumerate(NAMES)]}


class Actuator:
    emulated = True

    def set_mhz(self, mhz):
        pass

    def restore(self):
        pass

    def describe(self):
        return {"kind": "none: a test's"}


@pytest.fixture
def agents():
    """One real SloRunner per server behind a real JsonServer, its loops' SLIs fed by
    client reports (no container here)."""
    cfg = parse_config(config_data())
    runners, servers = [], []
    for k in range(3):
        r = SloRunner(cfg, f"srv{k + 1}", client=None, registry=new_registry("agent"),
                      actuator="emulated")
        for loop in r.loops.values():
            loop.make_actuator = Actuator
            loop.cpu_fn = lambda: None
        http = JsonServer(("127.0.0.1", 0), r.routes(), name="agent")
        http.start_background()
        runners.append(r)
        servers.append(http)
    yield runners, [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    for s in servers:
        s.shutdown()


def report(runner, service, latency_ms):
    """Clients' reports of 200 requests of about latency_ms, then a loop step: its SLI."""
    now = time.time()
    runner.observe({"service": service, "observations": [
        [now - 1.0 + k / 1000, latency_ms * (0.9 + 0.1 * (k % 10) / 9)] for k in range(200)]})
    runner.loops[service].step(time.monotonic())


# own parts front 10, mid 15, leaf 20; each call 2 ms there and back
LATENCY = {"leaf": 20.0, "mid": 15.0 + 22.0, "front": 10.0 + 39.0}
GRAPH = {"edges": [{"caller": "front", "callee": "mid", "rt_p95_ms": 39.0},
                   {"caller": "mid", "callee": "leaf", "rt_p95_ms": 22.0},
                   {"caller": "clients@s1", "callee": "front", "rt_p95_ms": None}]}


def test_the_objectives_come_from_the_configuration():
    cfg = parse_config(config_data())
    (o,) = objectives(cfg)
    assert (o.entry, o.target_ms, o.services) == ("front", TARGET_MS, ["leaf", "mid"])
    assert o.calls == {"front": [("mid", 1)], "mid": [("leaf", 1)], "leaf": []}


def test_the_budgets_reach_the_loops_below_the_entry_and_are_kept_there(agents):
    runners, urls = agents
    cfg = parse_config(config_data(urls))
    registry = new_registry("profiler")
    with ThreadPoolExecutor(4) as pool:
        feeder = BudgetFeeder(cfg, pool, registry)
        feeder.step(0.0, GRAPH)
        (status,) = feeder.status()["objectives"]
        assert status["waiting_for"] == ["leaf", "mid", "front"] and status["factor"] is None
        for r, (name, _c) in zip(runners, NAMES):
            report(r, name, LATENCY[name])
        feeder.step(1.0, GRAPH)
        (status,) = feeder.status()["objectives"]
        assert status["feasible"] and status["factor"] < 1      # 40 ms, of 49 measured
        budgets = status["budgets_ms"]
        assert budgets["front"] == pytest.approx(TARGET_MS, abs=0.5)
        held = {n: r.loops[n].settings.target_ms for r, (n, _c) in zip(runners, NAMES)}
        assert held["front"] == TARGET_MS                       # the entry keeps its own
        assert held["mid"] == pytest.approx(budgets["mid"], abs=0.01)
        assert held["leaf"] == pytest.approx(budgets["leaf"], abs=0.01)
        assert held["leaf"] < held["mid"] < TARGET_MS
        assert value(render(registry), "malb_profiler_budget_seconds", service="leaf") == \
            pytest.approx(held["leaf"] / 1000)
        # a hand-made change to a loop the objective owns is undone at the next period
        runners[2].change({"service": "leaf", "target_ms": 500})
        feeder.step(2.0, GRAPH)
        assert runners[2].loops["leaf"].settings.target_ms == pytest.approx(held["leaf"],
                                                                            abs=0.01)
        assert feeder.status()["errors"] == []


def test_an_agent_that_does_not_answer_is_named_and_its_service_waits(agents):
    runners, urls = agents
    for r, (name, _c) in zip(runners, NAMES):
        report(r, name, LATENCY[name])
    urls = [*urls[:2], "http://127.0.0.1:9"]           # leaf's agent: nothing listens
    cfg = parse_config(config_data(urls))
    with ThreadPoolExecutor(4) as pool:
        feeder = BudgetFeeder(cfg, pool, new_registry("profiler"))
        feeder.step(0.0, GRAPH)
    status = feeder.status()
    assert status["objectives"][0]["waiting_for"] == ["leaf"]
    assert len(status["errors"]) == 1 and status["errors"][0].startswith("srv3: GET /slo:")
    assert runners[1].loops["mid"].settings.target_ms == 20.0      # nothing sent yet


def test_paused_the_loops_keep_their_targets_and_active_again_they_get_the_budgets(agents):
    runners, urls = agents
    for r, (name, _c) in zip(runners, NAMES):
        report(r, name, LATENCY[name])
    cfg = parse_config(config_data(urls))
    with ThreadPoolExecutor(4) as pool:
        feeder = BudgetFeeder(cfg, pool, new_registry("profiler"))
        answer = feeder.change({"entry": "front", "active": False})
        assert answer["active"] is False and answer["target_ms"] == TARGET_MS
        feeder.step(0.0, GRAPH)
        assert runners[2].loops["leaf"].settings.target_ms == 20.0       # left alone
        answer = feeder.change({"entry": "front", "active": True, "target_ms": 45})
        assert answer["active"] is True and answer["target_ms"] == 45.0
        feeder.step(1.0, GRAPH)
        (status,) = feeder.status()["objectives"]
        assert status["budgets_ms"]["front"] == pytest.approx(45.0, abs=0.5)
        assert runners[0].loops["front"].settings.target_ms == 45.0      # the entry's too
        assert runners[2].loops["leaf"].settings.target_ms == \
            pytest.approx(status["budgets_ms"]["leaf"], abs=0.01)


def test_the_priced_split_waits_for_the_loops_frequencies_and_sends_its_budgets(agents):
    runners, urls = agents
    cfg = parse_config(config_data(urls))
    assert objectives(cfg)[0].split == "uniform"
    with ThreadPoolExecutor(4) as pool:
        feeder = BudgetFeeder(cfg, pool, new_registry("profiler"))
        # 49 ms measured at the maximum frequency: the priced split, which never asks for
        # more than the maximum, needs a target above it
        answer = feeder.change({"entry": "front", "split": "priced", "target_ms": 60})
        assert answer["split"] == "priced"
        for r, (name, _c) in zip(runners, NAMES):
            report(r, name, LATENCY[name])
        feeder.step(0.0, GRAPH)           # no load measured yet: no busy share
        (status,) = feeder.status()["objectives"]
        assert status["waiting_for"] == ["leaf frequency", "mid frequency", "front frequency"]
        for r, (name, _c) in zip(runners, NAMES):
            r.loops[name].load = {"front": 0.2, "mid": 0.3, "leaf": 0.6}[name]
        feeder.step(1.0, GRAPH)
        (status,) = feeder.status()["objectives"]
        assert status["feasible"] and 49 < status["budgets_ms"]["front"] <= 60
        freq = status["freq_mhz"]
        assert set(freq) == {"front", "mid", "leaf"} and freq["leaf"] >= freq["front"]
        assert runners[2].loops["leaf"].settings.target_ms == \
            pytest.approx(status["budgets_ms"]["leaf"], abs=0.01)


@pytest.mark.parametrize("body, message", [
    ([], "body: expected"),
    ({"entry": "mid", "active": False}, "entry: 'mid' has no end-to-end objective "
                                        r"\(have: front\)"),
    ({"entry": "front"}, "nothing to change"),
    ({"entry": "front", "target_ms": 0}, "target_ms: expected a number from 0.1"),
    ({"entry": "front", "target_ms": float("inf")}, "target_ms: expected a number"),
    ({"entry": "front", "target_ms": True}, "target_ms: expected a number"),
    ({"entry": "front", "active": "no"}, "active: expected true or false"),
    ({"entry": "front", "active": False, "colour": 1}, "'colour': unknown field"),
    ({"entry": "front", "target_ms": 45, "active": "no"}, "active: expected true or false"),
    ({"entry": "front", "split": "even"}, "split: expected one of uniform, priced"),
    ({"entry": "front", "split": ["priced"]}, "split: expected one of"),
])
def test_a_bad_change_is_refused_naming_the_field_and_changes_nothing(body, message):
    from common.httpjson import BadRequest
    feeder = BudgetFeeder(parse_config(config_data()), None, new_registry("profiler"))
    before = feeder.status()
    with pytest.raises(BadRequest, match=message):
        feeder.change(body)
    assert feeder.status() == before
