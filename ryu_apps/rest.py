"""REST API and Prometheus metrics of the MALB controller, served by the project's own JSON
server (common/httpjson.py's JsonServer, waitress) inside the controller process: the same
server, limits and error shapes as the agents and the profiler, under Ryu and under os-ken
alike. The routes and their answers: docs/controller.md, "REST API"; the limits and the
checks: docs/reliability.md.

- routes(app): the route table, {(METHOD, path): handler}; every answer JSON (/metrics is
  Prometheus text, /malb/view the live view's page), a rejected request changes nothing;
  /openapi.json describes them all (docs/api/controller.yaml);
- LIVE_VIEW: that page (ryu_apps/live_view.html: one file, no external assets), and the
  Content-Security-Policy that keeps it to this server;
- server(app, host, port): the controller's JsonServer (bound now; its loop is the caller's
  to run);
- MAX_BODY_BYTES, SOCKET_TIMEOUT_S, IDLE_TIMEOUT_S, MAX_CONNECTIONS: its limits.

The handlers run in the server's worker threads; under the controller's hub (eventlet,
threads patched, as ryu-manager and ryu_apps/osken_manager.py both run it) those are green
threads in the one OS thread the app's event handlers run in, so a handler sees the
controller between two events, as Ryu's WSGI handlers did.
"""
from __future__ import annotations

import os
import time

from common import openapi
from common.config import POLICIES
from common.httpjson import BadRequest, HttpProblem, JsonServer, Page, field_name, quote
from common.metrics import render
from common.numbers import finite_non_negative
from ryu_apps.microservice_profiles import normalise_weights

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "live_view.html"),
          encoding="utf-8") as _fh:
    LIVE_VIEW = _fh.read()
# the page's own script and style only, and reads of this server: nothing from elsewhere
LIVE_VIEW_HEADERS = (("Content-Security-Policy",
                      "default-src 'none'; script-src 'unsafe-inline'; "
                      "style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; "
                      "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
                     ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"))

MAX_BODY_BYTES = 1024 * 1024      # the largest body here is a weights map: a few hundred bytes
# a client whose request has not arrived whole in this time is dropped (1,024 silent clients
# once took Ryu's WSGI server offline for good); a kept-alive connection idle this long too
SOCKET_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 30
MAX_CONNECTIONS = 4096            # more wait in the listen backlog; a test holds 1,100 idle


def _int_param(query: dict, name: str, default: int, lo: int, hi: int) -> int:
    raw = _last(query, name)
    if raw is None:
        return default
    # isdigit() alone takes "²", which int() refuses; 4,300 digits and more, int() refuses
    digits = raw.lstrip("0") or "0"
    if not (raw.isascii() and raw.isdigit()) or len(digits) > len(str(hi)) or \
            not lo <= int(digits) <= hi:
        raise BadRequest(f"{name}: expected a whole number in [{lo}, {hi}], got {quote(raw)}")
    return int(digits)


def _last(query: dict, name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _flag(query: dict, name: str) -> bool:
    """A yes/no query parameter: 1, true, yes or 0, false, no, empty; BadRequest naming it."""
    raw = _last(query, name) or "0"
    if raw not in ("1", "true", "yes", "0", "false", "no"):
        raise BadRequest(f"{name}: expected 1 or 0, got {quote(raw)}")
    return raw in ("1", "true", "yes")


def _fields(body, required: dict[str, type], example: str) -> None:
    """A body that must be an object with exactly these fields of these types: BadRequest
    naming the unknown, missing or mistyped field."""
    if not isinstance(body, dict):
        raise BadRequest(f"body: expected a JSON object, e.g. {example}")
    extra = set(body) - set(required)
    if extra:
        raise BadRequest(f"{field_name(min(extra))}: unknown field (known: "
                         f"{', '.join(sorted(required))})")
    for name, kind in required.items():
        if name not in body:
            raise BadRequest(f"{name}: required, e.g. {example}")
        if not isinstance(body[name], kind):
            what = "true or false" if kind is bool else "a string"
            raise BadRequest(f"{name}: expected {what}, got {quote(body[name])}")


def _only(known: tuple[str, ...] = ()):
    """A handler that takes only these query parameters: any other is a 400 naming it (a
    typo such as ?actve=1 must not be silently ignored)."""
    def wrap(handler):
        def checked(query, body, **params):
            unknown = sorted(set(query) - set(known))
            if unknown:
                raise BadRequest(f"{field_name(unknown[0])}: unknown query parameter "
                                 f"(known: {', '.join(known) or 'none'})")
            return handler(query, body, **params)
        checked.__name__ = handler.__name__
        return checked
    return wrap


def routes(app) -> dict:
    """The REST routes over the controller app (MalbController, or what a test gives with
    the same attributes): the policy core, flows, decisions, instances, metrics and the
    actions set_policy, set_weights, add_instance, set_draining, remove_instance."""

    def weights() -> dict:
        out = {}
        for ms in app.policy_core.pools:
            (a, b, g), source = app.policy_core.profiles.weights(ms)
            out[ms] = {"alpha": a, "beta": b, "gamma": g, "source": source}
        return out

    @_only()
    def get_status(query, body):
        return 200, app.status()

    @_only()
    def get_policy(query, body):
        return 200, {"policy": app.policy_core.policy, "choices": list(POLICIES)}

    @_only()
    def put_policy(query, body):
        if not isinstance(body, dict) or "policy" not in body:
            raise BadRequest('policy: required, e.g. {"policy": "srr"}')
        extra = set(body) - {"policy"}
        if extra:
            raise BadRequest(f"{field_name(min(extra))}: unknown field")
        if not isinstance(body["policy"], str) or body["policy"] not in POLICIES:
            raise BadRequest(f"policy: must be one of {', '.join(POLICIES)}, "
                             f"got {quote(body['policy'])}")
        old = app.policy_core.policy
        app.set_policy(body["policy"])
        app.logger.info("policy changed over REST: %s -> %s", old, body["policy"])
        return 200, {"policy": body["policy"], "previous": old}

    @_only()
    def get_weights(query, body):
        return 200, weights()

    @_only()
    def put_weights(query, body):
        if not isinstance(body, dict) or not body:
            raise BadRequest('body: expected {"<microservice>": {"alpha": a, "beta": b, '
                             '"gamma": g} or null, ...}')
        staged = {}
        for ms, w in body.items():
            if ms not in app.policy_core.pools:
                raise BadRequest(f"{field_name(ms)}: unknown microservice (known: "
                                 f"{', '.join(app.policy_core.pools)})")
            if w is None:
                staged[ms] = None
                continue
            if not isinstance(w, dict):
                raise BadRequest(f"{ms}: expected an object with alpha, beta, gamma, or null")
            extra = set(w) - {"alpha", "beta", "gamma"}
            if extra:
                raise BadRequest(f"{ms}.{field_name(min(extra))}: unknown field")
            for key in ("alpha", "beta", "gamma"):
                v = w.get(key)
                if not finite_non_negative(v):
                    raise BadRequest(f"{ms}.{key}: expected a finite number >= 0, "
                                     f"got {quote(v)}")
            try:
                staged[ms] = normalise_weights((w["alpha"], w["beta"], w["gamma"]), ms)
            except ValueError as exc:
                raise BadRequest(str(exc)) from None
        app.set_weights(staged)     # all valid: applied together
        app.logger.info("weights set over REST: %s", staged)
        return 200, weights()

    @_only(("limit", "microservice"))
    def get_decisions(query, body):
        limit = _int_param(query, "limit", 100, 1, 100000)
        ms = _last(query, "microservice")
        items = [d for d in app.decisions if ms is None or d["microservice"] == ms]
        return 200, {"decisions": items[-limit:], "total_kept": len(app.decisions)}

    @_only(("active",))
    def get_flows(query, body):
        active_only = _flag(query, "active")
        idle, now = app.flows.idle_timeout, time.time()
        return 200, {"flows": [r.as_record(idle, app.flows.epoch, now)
                               for r in app.flows.flows.values()
                               if not active_only or r.running]}

    @_only()
    def get_instances(query, body):
        return 200, {"instances": app.instances_view()}

    @_only()
    def post_instance(query, body):
        _fields(body, {"instance": str}, '{"instance": "srv3-ui"}')
        name = body["instance"]
        if name not in app.instances:
            raise BadRequest(f"instance: no slot {quote(name)} in the configuration")
        try:
            app.add_instance(name)
        except ValueError as exc:
            raise HttpProblem(409, str(exc)) from None
        return 201, {"instance": name, **app.instances_view()[name]}

    @_only()
    def put_instance(query, body, name):
        _fields(body, {"draining": bool}, '{"draining": true}')
        if name not in app.policy_core.healthy:
            raise HttpProblem(404, f"{quote(name)}: not in any pool")
        app.set_draining(name, body["draining"])
        return 200, {"instance": name, **app.instances_view()[name]}

    @_only(("force",))
    def delete_instance(query, body, name):
        if name not in app.policy_core.healthy:
            raise HttpProblem(404, f"{quote(name)}: not in any pool")
        force = _flag(query, "force")
        left = app.active_flows_of().get(name, 0)
        if left and not force:
            raise HttpProblem(409, f"{name}: {left} active flows; drain it first, or ?force=1")
        app.remove_instance(name)
        return 200, {"instance": name, "removed": True, "active_flows": left}

    def deployment(spec: dict) -> None:
        """The description made this deployment's: the weights a PUT may set are its
        microservices', the instances a POST may add its configured slots."""
        weights = openapi.body_schema(spec, "/malb/weights", "put")
        one = weights["additionalProperties"]
        weights["properties"] = {ms: one for ms in app.policy_core.pools}
        weights["additionalProperties"] = False
        openapi.body_schema(spec, "/malb/instances", "post")["properties"]["instance"][
            "enum"] = sorted(app.instances)

    @_only()
    def get_view(query, body):
        return 200, Page(LIVE_VIEW, "text/html; charset=utf-8", LIVE_VIEW_HEADERS)

    @_only()
    def get_role(query, body):
        return 200, app.role_status()

    @_only()
    def get_metrics(query, body):
        return 200, render(app.metrics)    # a str: sent as Prometheus text

    table = {
        ("GET", "/malb/status"): get_status, ("GET", "/malb/role"): get_role,
        ("GET", "/malb/policy"): get_policy, ("PUT", "/malb/policy"): put_policy,
        ("GET", "/malb/weights"): get_weights, ("PUT", "/malb/weights"): put_weights,
        ("GET", "/malb/decisions"): get_decisions,
        ("GET", "/malb/flows"): get_flows,
        ("GET", "/malb/instances"): get_instances, ("POST", "/malb/instances"): post_instance,
        ("PUT", "/malb/instances/{name}"): put_instance,
        ("DELETE", "/malb/instances/{name}"): delete_instance,
        ("GET", "/metrics"): get_metrics,
        ("GET", "/malb/view"): get_view,
    }
    for key in [k for k in table if k[0] != "GET"]:
        table[key] = _on_master(app, table[key])
    table[("GET", "/openapi.json")] = _only()(openapi.served("controller", table, deployment))
    return table


def _on_master(app, handler):
    """A change a standby refuses (409 naming the master): the master's state is the one
    that counts, and the standby's is dropped when it takes over."""
    def checked(query, body, **params):
        roles = getattr(app, "roles", None)
        if roles is not None and not roles.active:
            return 409, {"error": f"this controller is the standby: make changes on the "
                                  f"master ({roles.peer})", "master": roles.peer}
        return handler(query, body, **params)
    checked.__name__ = handler.__name__
    return checked


def server(app, host: str, port: int) -> JsonServer:
    """The controller's REST server on host:port, bound now (OSError when it cannot be);
    writes need app.token when it is set."""
    return JsonServer((host, port), routes(app), name="malb.rest", threads=4,
                      max_body_bytes=MAX_BODY_BYTES, request_timeout_s=SOCKET_TIMEOUT_S,
                      idle_timeout_s=IDLE_TIMEOUT_S, connection_limit=MAX_CONNECTIONS,
                      token=getattr(app, "token", None))
