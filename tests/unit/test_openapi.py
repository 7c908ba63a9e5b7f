"""The APIs against their OpenAPI descriptions (docs/api/*.yaml): each server's route table
is exactly what its description lists, it serves the description at /openapi.json, and a
property-based test generated from the description by schemathesis (a fixed seed, a bounded
number of requests per operation) gets no server error and only answers the description
allows. The controller: its real app (ryu_apps/malb.py without ryu-manager, one fake switch
connected) behind its real REST server on 127.0.0.1; the profiler: its service behind its
JsonServer; an agent: a fake Docker engine, with its SLO runner (docs/api/README.md)."""
import contextlib
import json
import time
import urllib.request
from types import SimpleNamespace

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from common import openapi
from common.config import POLICIES, load_config, parse_config
from agents.agent import http_server, served_routes
from common.httpjson import JsonServer
from profiler.service import ProfilerService
from profiler.store import HistoryStore
from ryu_apps import rest
from tests.lib.agents import make_agent
from tests.lib.fuzzing import examples
from tests.lib.shell import connect, make_app
from topologies.testbed import Testbed


@contextlib.contextmanager
def serving(server):
    """A JsonServer in a thread: its base URL, the server shut down afterwards."""
    server.start_background()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def description(routes: dict) -> dict:
    """What a route table's GET /openapi.json answers."""
    return routes[("GET", "/openapi.json")]({}, None)[1]


PAPER = load_config("configs/paper.yaml")


def described_for(cfg) -> dict:
    """What the controller's GET /openapi.json answers for a configuration (its route's own
    code, over what it reads of the app): the description made that deployment's."""
    app = SimpleNamespace(policy_core=SimpleNamespace(pools={m.name: [] for m in
                                                             cfg.microservices}),
                          instances={i.name: None for i in cfg.slots})
    return description(rest.routes(app))


CONTROLLER = schemathesis.openapi.from_dict(described_for(PAPER))
# per operation: about 1,000 requests over the four APIs when thorough, 200 when quick
EXAMPLES = examples(25, quick=5)
SEEDED = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def controller():
    """The controller app on configs/paper.yaml with one switch, its REST server on a free
    port: yields the base URL."""
    with pytest.MonkeyPatch.context() as mp:
        real_server = rest.server        # make_app stubs it out
        app_gen = make_app(mp)
        app = next(app_gen)
        connect(app)
        try:
            with serving(real_server(app, "127.0.0.1", 0)) as url:
                yield url
        finally:
            next(app_gen, None)


# rules OpenAPI 3.0 cannot say, and the check each makes moot where it holds (the server's
# 400 still names the field): a valid request may be refused, or an invalid one taken
NOT_SAYABLE = {
    ("GET", "/history"): (positive_data_acceptance,
                          "column must be one of the kind's columns: two parameters at once"),
    ("POST", "/slo/observations"): (negative_data_rejection,
                                    "an observation is [end > 0, latency >= 0]: a rule per "
                                    "position of a pair, which 3.0 has no prefixItems for; "
                                    "described as > 0 for both, a latency of 0 is taken"),
}


def make_profiler():
    """The profiler on two servers, an end-to-end objective on front -> leaf (PUT /budgets
    exists only with one)."""
    cfg = parse_config({"servers": {"count": 2}, "profiler": {"period_s": 3},
                        "microservices": [
        {"name": "front", "port": 9001, "kind": "callgraph", "servers": ["srv1"],
         "calls": [{"service": "leaf"}], "slo": {"target_ms": 50, "scope": "end-to-end"}},
        {"name": "leaf", "port": 9002, "kind": "callgraph", "servers": ["srv2"],
         "slo": {"target_ms": 20}}]})
    return ProfilerService(cfg, store=HistoryStore(":memory:", 3600), collector=dict,
                           clock=lambda: 1000.0)


def served_description(service) -> dict:
    return service.routes()[("GET", "/openapi.json")]({}, None)[1]


def _profiler_description() -> dict:
    service = make_profiler()
    try:
        return served_description(service)
    finally:
        service.stop()


PROFILER = schemathesis.openapi.from_dict(_profiler_description())


@pytest.fixture(scope="module")
def profiler():
    service = make_profiler()
    try:
        with serving(JsonServer(("127.0.0.1", 0), service.routes(),
                                name="openapi-profiler")) as url:
            yield url
    finally:
        service.stop()


def test_the_controllers_routes_are_its_description():
    described = openapi.operations(openapi.load("controller"))
    assert set(rest.routes(make_stub())) == described


def test_the_profilers_routes_are_its_description():
    service = make_profiler()
    try:
        assert set(service.routes()) == openapi.operations(openapi.load("profiler"))
        put = openapi.body_schema(served_description(service), "/budgets", "put")
        assert put["properties"]["entry"]["enum"] == ["front"]
    finally:
        service.stop()


@pytest.mark.parametrize("name", ["controller", "profiler", "agent", "testbed"])
def test_every_operation_is_named_and_every_write_says_it_takes_the_token(name):
    spec = openapi.load(name)
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearerToken"] == {**schemes["bearerToken"], "type": "http",
                                      "scheme": "bearer"}
    assert schemes["malbToken"] == {**schemes["malbToken"], "type": "apiKey",
                                    "in": "header", "name": "X-MALB-Token"}
    ids = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            ids.append(op["operationId"])
            # the token when one is set (security.token, MALB_TOKEN); none needed without
            want = [{"bearerToken": []}, {"malbToken": []}, {}] if method != "get" else None
            assert op.get("security") == want, (method, path)
    assert len(ids) == len(set(ids))


def test_the_description_lists_every_policy():
    spec = openapi.load("controller")
    put = openapi.body_schema(spec, "/malb/policy", "put")
    assert put["properties"]["policy"]["enum"] == list(POLICIES)


def test_the_controller_serves_its_description_made_its_own(controller):
    with urllib.request.urlopen(f"{controller}/openapi.json", timeout=5) as r:
        assert r.headers["Content-Type"] == "application/json"
        served = json.load(r)
    assert served == described_for(PAPER)         # what the property-based test runs on
    written = openapi.load("controller")
    weights = openapi.body_schema(served, "/malb/weights", "put")
    assert sorted(weights["properties"]) == ["backend", "ui", "video"]
    assert weights["additionalProperties"] is False
    assert {p: set(v) for p, v in served["paths"].items()} == \
        {p: set(v) for p, v in written["paths"].items()}


@CONTROLLER.parametrize()
@SEEDED
def test_the_controller_answers_as_described(case, controller):
    case.call_and_validate(base_url=controller)


def excluded(case) -> list:
    moot = NOT_SAYABLE.get((case.method, case.path))
    return [moot[0]] if moot else []


@PROFILER.parametrize()
@SEEDED
def test_the_profiler_answers_as_described(case, profiler):
    case.call_and_validate(base_url=profiler, excluded_checks=excluded(case))


# an agent (fake Docker, one published sample) with its SLO runner for srv1's ui
AGENT_APP, _SLO, AGENT_ROUTES = make_agent()
AGENT = schemathesis.openapi.from_dict(description(AGENT_ROUTES))


@pytest.fixture(scope="module")
def agent():
    # a sample of now: the one make_agent published at import is stale (/health's 503)
    # once the run has gone on for a minute before this module's turn
    AGENT_APP._publish(time.time(), [], None, time.monotonic())
    try:
        with serving(http_server(("127.0.0.1", 0), AGENT_ROUTES, name="openapi-agent")) as url:
            yield url
    finally:
        AGENT_APP.pool.shutdown()


def test_the_agents_routes_are_its_description_and_it_names_its_loops():
    assert set(AGENT_ROUTES) == openapi.operations(openapi.load("agent"))
    served = description(AGENT_ROUTES)
    put = openapi.body_schema(served, "/slo", "put")
    assert put["properties"]["service"]["enum"] == ["ui"]
    # an agent without a loop describes no /slo
    agent, _slo, _routes = make_agent()
    try:
        bare = served_routes(agent)
        paths = description(bare)["paths"]
        assert "/slo" not in paths and "/slo/observations" not in paths
        assert openapi.operations({"paths": paths}) == set(bare)
    finally:
        agent.pool.shutdown()


@AGENT.parametrize()
@SEEDED
def test_the_agent_answers_as_described(case, agent):
    case.call_and_validate(base_url=agent, excluded_checks=excluded(case))


class StandInTestbed:
    """What Testbed.control_routes uses of a testbed (its real method, bound to this): the
    configuration's slots, the instances running, starting and stopping them (no Mininet)."""

    def __init__(self, cfg):
        self.cfg, self.deployed = cfg, {i.name for i in cfg.instances}

    def add_instance(self, inst):
        self.deployed.add(inst.name)

    def remove_instance(self, name):
        self.deployed.discard(name)

    def wait_services(self, timeout_s, instances):
        return []


TESTBED_ROUTES = Testbed.control_routes(StandInTestbed(PAPER))
TESTBED = schemathesis.openapi.from_dict(description(TESTBED_ROUTES))


@pytest.fixture(scope="module")
def testbed():
    with serving(JsonServer(("127.0.0.1", 0), TESTBED_ROUTES, name="openapi-testbed")) as url:
        yield url


def test_the_testbeds_routes_are_its_description_and_it_names_its_slots():
    assert set(TESTBED_ROUTES) == openapi.operations(openapi.load("testbed"))
    served = description(TESTBED_ROUTES)
    delete = served["paths"]["/instances"]["delete"]["parameters"][0]["schema"]
    assert delete["enum"] == sorted(i.name for i in PAPER.slots)


@TESTBED.parametrize()
@SEEDED
def test_the_testbed_control_api_answers_as_described(case, testbed):
    case.call_and_validate(base_url=testbed, excluded_checks=excluded(case))


def make_stub():
    """An object with what routes() reads when it builds the table (nothing, until a
    request comes)."""
    return object()
