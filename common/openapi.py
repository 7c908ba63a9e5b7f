"""The OpenAPI 3 descriptions of the project's JSON APIs (docs/api/<name>.yaml, the one place
each is written), loaded for the servers that serve them at GET /openapi.json.

- load(name): a description as a dict (the file read once; a fresh dict each call, which a
  server may make its own deployment's before serving it);
- body_schema(spec, path, method): an operation's JSON body schema;
- operations(spec): its (METHOD, path) pairs, to hold a server's route table to it;
- served(name, routes, adapt): the GET /openapi.json handler of a server: the description
  of the routes it has (an agent without an SLO loop has no /slo), made its deployment's
  by adapt (the services, microservices or instances that server knows).
"""
from __future__ import annotations

import copy
import functools
import os

import yaml

from common.paths import shipped

API_DIR = shipped("api")
METHODS = ("get", "put", "post", "delete", "patch")


@functools.cache
def _parsed(name: str) -> dict:
    # parsed once: YAML takes tens of ms, and the controller answers on its event loop
    with open(os.path.join(API_DIR, f"{name}.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load(name: str) -> dict:
    """docs/api/<name>.yaml as a fresh dict (callers may change theirs)."""
    return copy.deepcopy(_parsed(name))


def body_schema(spec: dict, path: str, method: str) -> dict:
    """The JSON request body's schema of an operation (to make it a deployment's)."""
    return spec["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]


def operations(spec: dict) -> set[tuple[str, str]]:
    """{(METHOD, path)} the description holds, paths as the route tables write them."""
    return {(m.upper(), path) for path, item in spec["paths"].items() for m in item
            if m in METHODS}


def served(name: str, routes: dict, adapt=None):
    """GET /openapi.json over `routes` (the server's whole table, this route included once
    added): docs/api/<name>.yaml without the paths the server does not serve, then
    adapt(spec) when given."""
    def get_openapi(query, body):
        spec = load(name)
        have = set(routes)
        for path in list(spec["paths"]):
            item = spec["paths"][path]
            for method in [m for m in item if m in METHODS]:
                if (method.upper(), path) not in have:
                    del item[method]
            if not any(m in item for m in METHODS):
                del spec["paths"][path]
        if adapt is not None:
            adapt(spec)
        return 200, spec
    return get_openapi
