"""The APIs against their OpenAPI descriptions (docs/api/*.yaml): each server's route table
is exactly what its description lists, it serves the description at /openapi.json, and a
property-based test generated from the description by schemathesis (a fixed seed, a bounded
number of requests per operation) gets no server error and only answers the description
allows. The controller: its real app (ryu_apps/malb.py without ryu-manager, one fake switch
connected) behind its real REST server on 127.0.0.1."""
import json
import urllib.request
from types import SimpleNamespace

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from common import openapi
from common.config import POLICIES, load_config, parse_config
from common.httpjson import JsonServer
from profiler.service import ProfilerService
from profiler.store import HistoryStore
from ryu_apps import rest
from tests.lib.shell import connect, make_app

PAPER = load_config("configs/paper.yaml")


def described_for(cfg) -> dict:
    """What the controller's GET /openapi.json answers for a configuration (its route's own
    code, over what it reads of the app): the description made that deployment's."""
    app = SimpleNamespace(policy_core=SimpleNamespace(pools={m.name: [] for m in
                                                             cfg.microservices}),
                          instances={i.name: None for i in cfg.instances})
    return rest.routes(app)[("GET", "/openapi.json")]({}, None)[1]


CONTROLLER = schemathesis.openapi.from_dict(described_for(PAPER))
# per operation; 13 operations: a few hundred requests, a few seconds
EXAMPLES = 25
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
        server = real_server(app, "127.0.0.1", 0)
        server.start_background()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            next(app_gen, None)


PROFILER = schemathesis.openapi.from_dict(openapi.load("profiler"))
# operations whose valid requests depend on more than one parameter at once, which OpenAPI
# cannot say: a schema-valid request may be refused there (the 400 still names the field)
CROSS_PARAMETER = {("GET", "/history"): "column must be one of the kind's columns"}


def make_profiler():
    cfg = parse_config({"servers": {"count": 2}, "profiler": {"period_s": 3}})
    return ProfilerService(cfg, store=HistoryStore(":memory:", 3600), collector=dict,
                           clock=lambda: 1000.0)


@pytest.fixture(scope="module")
def profiler():
    service = make_profiler()
    server = JsonServer(("127.0.0.1", 0), service.routes(), name="openapi-profiler")
    server.start_background()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        service.stop()


def test_the_controllers_routes_are_its_description():
    described = openapi.operations(openapi.load("controller"))
    assert set(rest.routes(make_stub())) == described


def test_the_profilers_routes_are_its_description():
    service = make_profiler()
    try:
        assert set(service.routes()) == openapi.operations(openapi.load("profiler"))
    finally:
        service.stop()


def test_the_description_lists_every_policy():
    spec = openapi.load("controller")
    put = spec["paths"]["/malb/policy"]["put"]["requestBody"]["content"]["application/json"]
    assert put["schema"]["properties"]["policy"]["enum"] == list(POLICIES)


def test_the_controller_serves_its_description_made_its_own(controller):
    with urllib.request.urlopen(f"{controller}/openapi.json", timeout=5) as r:
        assert r.headers["Content-Type"] == "application/json"
        served = json.load(r)
    assert served == described_for(PAPER)         # what the property-based test runs on
    written = openapi.load("controller")
    weights = served["paths"]["/malb/weights"]["put"]["requestBody"]["content"][
        "application/json"]["schema"]
    assert sorted(weights["properties"]) == ["backend", "ui", "video"]
    assert weights["additionalProperties"] is False
    assert {p: set(v) for p, v in served["paths"].items()} == \
        {p: set(v) for p, v in written["paths"].items()}


@CONTROLLER.parametrize()
@SEEDED
def test_the_controller_answers_as_described(case, controller):
    case.call_and_validate(base_url=controller)


@PROFILER.parametrize()
@SEEDED
def test_the_profiler_answers_as_described(case, profiler):
    excluded = [positive_data_acceptance] if (case.method, case.path) in CROSS_PARAMETER \
        else []
    case.call_and_validate(base_url=profiler, excluded_checks=excluded)


def make_stub():
    """An object with what routes() reads when it builds the table (nothing, until a
    request comes)."""
    return object()
