"""REST API and Prometheus metrics of the MALB controller (ryu.app.wsgi). The routes and their
answers: docs/controller.md, "REST API"; the body checks (common/httpjson.py's
decode_body), error shapes and limits: docs/reliability.md.

- MalbRest: the handlers: /malb/status, /malb/policy, /malb/weights, /malb/decisions,
  /malb/flows, /malb/instances (join, drain, leave), /metrics; every answer JSON, a
  rejected request changes nothing, a handler's bug a 500 without details;
- NotFound: 404 (with the known resources) or 405 (with Allow) for what no route matched;
- ROUTES, allowed_methods, register_rest: the route table and its registration;
- MAX_BODY_BYTES: the body limit (1 MiB).
"""
from __future__ import annotations

import inspect
import json
import logging
import re
import time
from urllib.parse import unquote_to_bytes

from ryu.app.wsgi import ControllerBase, Response, route

from common.config import POLICIES
from common.httpjson import HttpProblem, check_token, decode_body, field_name, quote
from common.metrics import CONTENT_TYPE
from common.numbers import finite_non_negative
from ryu_apps.microservice_profiles import normalise_weights

APP_KEY = "malb_app"
MAX_BODY_BYTES = 1024 * 1024      # the largest body here is a weights map: a few hundred bytes
log = logging.getLogger("malb.rest")


def _json(payload, status: int = 200) -> Response:
    return Response(status=status, content_type="application/json", charset="utf-8",
                    body=json.dumps(payload, indent=1).encode())


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def _body(req) -> tuple[object, Response | None]:
    """The JSON body, or the error to answer (413, 415, 400 naming the field)."""
    try:
        if (req.content_length or 0) > MAX_BODY_BYTES:
            raise HttpProblem(413, f"body: over the limit of {MAX_BODY_BYTES} bytes")
        raw = req.body_file.read(MAX_BODY_BYTES + 1)     # chunked bodies have no length
        if len(raw) > MAX_BODY_BYTES:
            raise HttpProblem(413, f"body: over the limit of {MAX_BODY_BYTES} bytes")
        return decode_body(raw, req.content_type), None
    except HttpProblem as exc:
        return None, _error(exc.status, exc.message)


def _int_param(req, name: str, default: int, lo: int, hi: int) -> int:
    raw = req.GET.get(name)
    if raw is None:
        return default
    # isdigit() alone takes "²", which int() refuses; 4,300 digits and more, int() refuses
    digits = raw.lstrip("0") or "0"
    if not (raw.isascii() and raw.isdigit()) or len(digits) > len(str(hi)) or \
            not lo <= int(digits) <= hi:
        raise ValueError(f"{name}: expected a whole number in [{lo}, {hi}], got {quote(raw)}")
    return int(digits)


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _undecodable(req) -> Response | None:
    """webob decodes the path and the query as UTF-8 when a handler first reads them, and
    raises there: check both before any handler runs (the error names the parameter)."""
    try:
        req.path_info
    except UnicodeDecodeError:
        return _error(400, "path: not valid UTF-8 (after %-decoding)")
    query = req.environ.get("QUERY_STRING", "").encode("latin-1", "replace")   # PEP 3333
    for piece in query.split(b"&"):
        name, _, value = (unquote_to_bytes(x.replace(b"+", b" ")) for x in piece.partition(b"="))
        try:
            name = name.decode("utf-8")
            value.decode("utf-8")
        except UnicodeDecodeError:
            shown = name if isinstance(name, str) else "query"
            return _error(400, f"{_cut(shown)}: not valid UTF-8 (after %-decoding)")
    return None


def _flag(req, name: str) -> bool:
    """A yes/no query parameter: 1, true, yes or 0, false, no, empty; ValueError naming it."""
    raw = req.GET.get(name, "0")
    if raw not in ("1", "true", "yes", "0", "false", "no", ""):
        raise ValueError(f"{name}: expected 1 or 0, got {quote(raw)}")
    return raw in ("1", "true", "yes")


def _fields(body, required: dict[str, type], example: str) -> Response | None:
    """A body that must be an object with exactly these fields of these types: the error
    names the unknown, missing or mistyped field."""
    if not isinstance(body, dict):
        return _error(400, f"body: expected a JSON object, e.g. {example}")
    extra = set(body) - set(required)
    if extra:
        return _error(400, f"{field_name(min(extra))}: unknown field (known: "
                           f"{', '.join(sorted(required))})")
    for name, kind in required.items():
        if name not in body:
            return _error(400, f"{name}: required, e.g. {example}")
        if not isinstance(body[name], kind):
            what = "true or false" if kind is bool else "a string"
            return _error(400, f"{name}: expected {what}, got {quote(body[name])}")
    return None


class _JsonController(ControllerBase):
    """Whatever a handler raises becomes a JSON 500 and one log record (never eventlet's
    traceback page). Before any handler: the path and query must decode, and check() (a
    subclass's) may answer instead."""
    QUERY: dict[str, tuple[str, ...]] = {}      # handler name -> its query parameters

    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.app = data[APP_KEY]

    def check(self, req) -> Response | None:
        """Unknown query parameters are a 400 naming the first (a typo such as ?actve=1
        must not be silently ignored)."""
        known = self.QUERY.get(req.urlvars.get("action"), ())
        unknown = sorted(set(req.GET) - set(known))
        if unknown:
            return _error(400, f"{field_name(unknown[0])}: unknown query parameter (known: "
                               f"{', '.join(known) or 'none'})")
        return None

    def __call__(self, req):
        try:
            return _undecodable(req) or self.check(req) or super().__call__(req)
        except Exception as exc:
            log.exception("REST %s %s failed", req.method, req.environ.get("PATH_INFO", "?"))
            return _error(500, f"internal error ({type(exc).__name__}); the controller's "
                               f"log has the details")


class MalbRest(_JsonController):
    QUERY = {"get_decisions": ("limit", "microservice"), "get_flows": ("active",),
             "delete_instance": ("force",)}

    def check(self, req) -> Response | None:
        """A write (POST, PUT, DELETE) needs the shared token when the controller has one
        (app.token: security.token or $MALB_TOKEN): 401 otherwise, before anything else
        of the request is looked at."""
        try:
            check_token(getattr(self.app, "token", None), req.method,
                        req.headers.get("Authorization"), req.headers.get("X-MALB-Token"))
        except HttpProblem as exc:
            resp = _error(exc.status, exc.message)
            for name, value in exc.headers:
                resp.headers[name] = value
            return resp
        return super().check(req)

    @route("malb", "/malb/status", methods=["GET", "HEAD"])
    def get_status(self, req, **_):
        return _json(self.app.status())

    @route("malb", "/malb/policy", methods=["GET", "HEAD"])
    def get_policy(self, req, **_):
        return _json({"policy": self.app.policy_core.policy, "choices": list(POLICIES)})

    @route("malb", "/malb/policy", methods=["PUT"])
    def put_policy(self, req, **_):
        body, err = _body(req)
        if err:
            return err
        if not isinstance(body, dict) or "policy" not in body:
            return _error(400, 'policy: required, e.g. {"policy": "srr"}')
        extra = set(body) - {"policy"}
        if extra:
            return _error(400, f"{field_name(min(extra))}: unknown field")
        if not isinstance(body["policy"], str) or body["policy"] not in POLICIES:
            return _error(400, f"policy: must be one of {', '.join(POLICIES)}, "
                               f"got {quote(body['policy'])}")
        old = self.app.policy_core.policy
        self.app.set_policy(body["policy"])
        self.app.logger.info("policy changed over REST: %s -> %s", old, body["policy"])
        return _json({"policy": body["policy"], "previous": old})

    @route("malb", "/malb/weights", methods=["GET", "HEAD"])
    def get_weights(self, req, **_):
        return _json(self._weights())

    def _weights(self) -> dict:
        out = {}
        for ms in self.app.policy_core.pools:
            (a, b, g), source = self.app.policy_core.profiles.weights(ms)
            out[ms] = {"alpha": a, "beta": b, "gamma": g, "source": source}
        return out

    @route("malb", "/malb/weights", methods=["PUT"])
    def put_weights(self, req, **_):
        body, err = _body(req)
        if err:
            return err
        if not isinstance(body, dict) or not body:
            return _error(400, 'body: expected {"<microservice>": {"alpha": a, "beta": b, '
                               '"gamma": g} or null, ...}')
        staged = {}
        for ms, w in body.items():
            if ms not in self.app.policy_core.pools:
                return _error(400, f"{field_name(ms)}: unknown microservice (known: "
                                   f"{', '.join(self.app.policy_core.pools)})")
            if w is None:
                staged[ms] = None
                continue
            if not isinstance(w, dict):
                return _error(400, f"{ms}: expected an object with alpha, beta, gamma, or null")
            extra = set(w) - {"alpha", "beta", "gamma"}
            if extra:
                return _error(400, f"{ms}.{field_name(min(extra))}: unknown field")
            for key in ("alpha", "beta", "gamma"):
                v = w.get(key)
                if not finite_non_negative(v):
                    return _error(400, f"{ms}.{key}: expected a finite number >= 0, "
                                       f"got {quote(v)}")
            try:
                staged[ms] = normalise_weights((w["alpha"], w["beta"], w["gamma"]), ms)
            except ValueError as exc:
                return _error(400, str(exc))
        self.app.set_weights(staged)     # all valid: applied together
        self.app.logger.info("weights set over REST: %s", staged)
        return _json(self._weights())

    @route("malb", "/malb/decisions", methods=["GET", "HEAD"])
    def get_decisions(self, req, **_):
        try:
            limit = _int_param(req, "limit", 100, 1, 100000)
        except ValueError as exc:
            return _error(400, str(exc))
        ms = req.GET.get("microservice")
        items = [d for d in self.app.decisions if ms is None or d["microservice"] == ms]
        return _json({"decisions": items[-limit:], "total_kept": len(self.app.decisions)})

    @route("malb", "/malb/flows", methods=["GET", "HEAD"])
    def get_flows(self, req, **_):
        try:
            active_only = _flag(req, "active")
        except ValueError as exc:
            return _error(400, str(exc))
        idle = self.app.flows.idle_timeout
        now = time.time()
        recs = [r.as_record(idle, self.app.flows.epoch, now)
                for r in self.app.flows.flows.values() if not active_only or r.running]
        return _json({"flows": recs})

    @route("malb", "/malb/instances", methods=["GET", "HEAD"])
    def get_instances(self, req, **_):
        return _json({"instances": self.app.instances_view()})

    @route("malb", "/malb/instances", methods=["POST"])
    def post_instance(self, req, **_):
        body, err = _body(req)
        if err:
            return err
        bad = _fields(body, {"instance": str}, '{"instance": "srv3-ui"}')
        if bad:
            return bad
        name = body["instance"]
        if name not in self.app.instances:
            return _error(400, f"instance: no slot {quote(name)} in the configuration")
        try:
            self.app.add_instance(name)
        except ValueError as exc:
            return _error(409, str(exc))
        return _json({"instance": name, **self.app.instances_view()[name]}, 201)

    @route("malb", "/malb/instances/{name}", methods=["PUT"])
    def put_instance(self, req, name, **_):
        body, err = _body(req)
        if err:
            return err
        bad = _fields(body, {"draining": bool}, '{"draining": true}')
        if bad:
            return bad
        if name not in self.app.policy_core.healthy:
            return _error(404, f"{quote(name)}: not in any pool")
        self.app.set_draining(name, body["draining"])
        return _json({"instance": name, **self.app.instances_view()[name]})

    @route("malb", "/malb/instances/{name}", methods=["DELETE"])
    def delete_instance(self, req, name, **_):
        if name not in self.app.policy_core.healthy:
            return _error(404, f"{quote(name)}: not in any pool")
        try:
            force = _flag(req, "force")
        except ValueError as exc:
            return _error(400, str(exc))
        left = self.app.active_flows_of().get(name, 0)
        if left and not force:
            return _error(409, f"{name}: {left} active flows; drain it first, or ?force=1")
        self.app.remove_instance(name)
        return _json({"instance": name, "removed": True, "active_flows": left})

    @route("malb", "/metrics", methods=["GET", "HEAD"])
    def get_metrics(self, req, **_):
        return Response(status=200, content_type=CONTENT_TYPE.split(";")[0], charset="utf-8",
                        body=self.app.metrics.render().encode())


def _route_table(controller) -> list[tuple[re.Pattern, str, frozenset]]:
    """(path pattern, path, methods) of a controller's @route handlers: what a 405 lists."""
    paths: dict[str, set] = {}
    for _name, fn in inspect.getmembers(controller, inspect.isfunction):
        info = getattr(fn, "routing_info", None)
        if info:
            paths.setdefault(info["path"], set()).update(info.get("methods") or ())
    return [(re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(p)) + "$"), p,
             frozenset(m)) for p, m in sorted(paths.items())]


ROUTES = _route_table(MalbRest)


def allowed_methods(path: str) -> list[str]:
    return sorted({m for pattern, _p, methods in ROUTES if pattern.match(path)
                   for m in methods})


class NotFound(_JsonController):
    """Registered last, for any method: whatever no other route matched."""

    def check(self, req) -> Response | None:
        return None             # a 404 or 405 whatever the query

    # any character: ".*" stops at a newline (%0a), and Ryu then answers its own text 404
    @route("malb-404", "/{path}", requirements={"path": r"[\s\S]*"})
    def not_found(self, req, **kwargs):
        path = req.path_info
        allowed = allowed_methods(path.rstrip("/") or "/")
        if allowed:
            resp = _json({"error": f"{_cut(req.method)}: not allowed on {_cut(path)}",
                          "allowed": allowed}, 405)
            resp.headers["Allow"] = ", ".join(allowed)
            return resp
        known = sorted({p for _pattern, p, _m in ROUTES})
        return _error(404, f"no such resource: {quote(path, 80)} (known: {', '.join(known)})")


def register_rest(wsgi, app) -> None:
    wsgi.register(MalbRest, {APP_KEY: app})
    wsgi.register(NotFound, {APP_KEY: app})
