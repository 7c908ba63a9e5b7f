"""REST API and Prometheus metrics of the MALB controller (ryu.app.wsgi).

    GET  /malb/status       policy; servers (load, health, flows assigned); microservices
                            (weights and their source, flow class and its source); profiler
    PUT  /malb/policy       {"policy": "malb" | "srr" | "ln"}
    GET  /malb/weights      effective weights per microservice, with their source
    PUT  /malb/weights      {"<microservice>": {"alpha": a, "beta": b, "gamma": g} | null}
                            manual override (null: back to the profiler's weights)
    GET  /malb/decisions    recent decisions, newest last (?limit=N, ?microservice=M)
    GET  /malb/flows        NAT flows the controller knows (?active=1 for active only)
    GET  /malb/instances    instances in the pools: health, draining, active flows
    POST /malb/instances    {"instance": "<slot>"}: it joins its pool (a placement's move)
    PUT  /malb/instances/X  {"draining": true|false}: no new flows / new flows again
    DELETE /malb/instances/X  it leaves its pool (409 while it has flows, unless ?force=1)
    GET  /metrics           Prometheus text
Bad bodies get 400 with {"error": "<field>: <problem>"}; unknown routes 404 with JSON.
A rejected request changes nothing.
"""
from __future__ import annotations

import json

from ryu.app.wsgi import ControllerBase, Response, route

from common.metrics import CONTENT_TYPE
from ryu_apps.policy import POLICIES, normalise_weights

APP_KEY = "malb_app"


def _json(payload, status: int = 200) -> Response:
    return Response(status=status, content_type="application/json", charset="utf-8",
                    body=json.dumps(payload, indent=1).encode())


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def _body(req) -> tuple[object, Response | None]:
    try:
        return json.loads(req.body or b"null"), None
    except ValueError as exc:
        return None, _error(400, f"body is not valid JSON: {exc}")


def _int_param(req, name: str, default: int, lo: int, hi: int) -> int:
    raw = req.GET.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not lo <= int(raw) <= hi:
        raise ValueError(f"{name}: expected a whole number in [{lo}, {hi}], got {raw!r}")
    return int(raw)


class MalbRest(ControllerBase):
    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.app = data[APP_KEY]

    @route("malb", "/malb/status", methods=["GET"])
    def get_status(self, req, **_):
        return _json(self.app.status())

    @route("malb", "/malb/policy", methods=["GET"])
    def get_policy(self, req, **_):
        return _json({"policy": self.app.core.policy, "choices": list(POLICIES)})

    @route("malb", "/malb/policy", methods=["PUT"])
    def put_policy(self, req, **_):
        body, err = _body(req)
        if err:
            return err
        if not isinstance(body, dict) or "policy" not in body:
            return _error(400, 'policy: required, e.g. {"policy": "srr"}')
        if body["policy"] not in POLICIES:
            return _error(400, f"policy: must be one of {', '.join(POLICIES)}, "
                               f"got {body['policy']!r}")
        old = self.app.core.policy
        self.app.core.set_policy(body["policy"])
        self.app.logger.info("policy changed over REST: %s -> %s", old, body["policy"])
        return _json({"policy": body["policy"], "previous": old})

    @route("malb", "/malb/weights", methods=["GET"])
    def get_weights(self, req, **_):
        return _json(self._weights())

    def _weights(self) -> dict:
        out = {}
        for ms in self.app.core.pools:
            (a, b, g), source = self.app.core.weights(ms)
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
            if ms not in self.app.core.pools:
                return _error(400, f"{ms}: unknown microservice (known: "
                                   f"{', '.join(self.app.core.pools)})")
            if w is None:
                staged[ms] = None
                continue
            if not isinstance(w, dict):
                return _error(400, f"{ms}: expected an object with alpha, beta, gamma, or null")
            for key in ("alpha", "beta", "gamma"):
                v = w.get(key)
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    return _error(400, f"{ms}.{key}: expected a number >= 0, got {v!r}")
            extra = set(w) - {"alpha", "beta", "gamma"}
            if extra:
                return _error(400, f"{ms}.{sorted(extra)[0]}: unknown field")
            try:
                staged[ms] = normalise_weights((w["alpha"], w["beta"], w["gamma"]), ms)
            except ValueError as exc:
                return _error(400, str(exc))
        for ms, w in staged.items():   # all valid: apply together
            self.app.core.set_manual_weights(ms, w)
        self.app.logger.info("weights set over REST: %s", staged)
        return _json(self._weights())

    @route("malb", "/malb/decisions", methods=["GET"])
    def get_decisions(self, req, **_):
        try:
            limit = _int_param(req, "limit", 100, 1, 100000)
        except ValueError as exc:
            return _error(400, str(exc))
        ms = req.GET.get("microservice")
        items = [d for d in self.app.decisions if ms is None or d["microservice"] == ms]
        return _json({"decisions": items[-limit:], "total_kept": len(self.app.decisions)})

    @route("malb", "/malb/flows", methods=["GET"])
    def get_flows(self, req, **_):
        active_only = req.GET.get("active") in ("1", "true", "yes")
        idle = self.app.flows.idle_timeout
        recs = [r.as_record(idle, self.app.flows.epoch) for r in self.app.flows.flows.values()
                if not active_only or r.ended is None]
        return _json({"flows": recs})

    @route("malb", "/malb/instances", methods=["GET"])
    def get_instances(self, req, **_):
        return _json({"instances": self.app.instances_view()})

    @route("malb", "/malb/instances", methods=["POST"])
    def post_instance(self, req, **_):
        body, err = _body(req)
        if err:
            return err
        if not isinstance(body, dict) or set(body) != {"instance"} or \
                not isinstance(body["instance"], str):
            return _error(400, 'instance: required, e.g. {"instance": "srv3-ui"}')
        name = body["instance"]
        if name not in self.app.instances:
            return _error(400, f"instance: no slot {name[:60]!r} in the configuration")
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
        if not isinstance(body, dict) or set(body) != {"draining"} or \
                not isinstance(body["draining"], bool):
            return _error(400, 'draining: required, true or false, e.g. {"draining": true}')
        if name not in self.app.core.healthy:
            return _error(404, f"{name[:60]}: not in any pool")
        self.app.set_draining(name, body["draining"])
        return _json({"instance": name, **self.app.instances_view()[name]})

    @route("malb", "/malb/instances/{name}", methods=["DELETE"])
    def delete_instance(self, req, name, **_):
        if name not in self.app.core.healthy:
            return _error(404, f"{name[:60]}: not in any pool")
        force = req.GET.get("force") in ("1", "true")
        left = self.app.active_flows_of().get(name, 0)
        if left and not force:
            return _error(409, f"{name}: {left} active flows; drain it first, or ?force=1")
        self.app.remove_instance(name)
        return _json({"instance": name, "removed": True, "active_flows": left})

    @route("malb", "/metrics", methods=["GET"])
    def get_metrics(self, req, **_):
        return Response(status=200, content_type=CONTENT_TYPE.split(";")[0], charset="utf-8",
                        body=self.app.metrics.render().encode())


class NotFound(ControllerBase):
    """Registered last: whatever no other route matched."""

    @route("malb-404", "/{path:.*}", methods=["GET", "PUT", "POST", "DELETE", "PATCH"])
    def not_found(self, req, **kwargs):
        known = ["/malb/status", "/malb/policy", "/malb/weights", "/malb/decisions",
                 "/malb/flows", "/malb/instances", "/metrics"]
        if req.path in known:
            return _error(405, f"{req.method} not allowed on {req.path}")
        return _error(404, f"no such resource: {req.path} (known: {', '.join(known)})")


def register_rest(wsgi, app) -> None:
    wsgi.register(MalbRest, {APP_KEY: app})
    wsgi.register(NotFound, {APP_KEY: app})
