"""Small JSON-over-HTTP pieces shared by the agents, the profiler and the controller.

- :func:`get_json` / :func:`post_json`: client calls with a timeout; any failure becomes an
  :class:`HttpError` with a one-line reason (the caller decides what "unreachable" means).
- :class:`JsonServer`: a threaded HTTP server with a route table, JSON errors (400 naming the
  bad field, 404 for unknown routes, 405 for wrong methods) and a Prometheus endpoint.
"""
from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


log = logging.getLogger("malb.http")


class HttpError(RuntimeError):
    pass


class BadRequest(ValueError):
    """Raised by a handler: answered with 400 and {"error": message}."""


MAX_BODY_BYTES = 64 * 1024 * 1024   # a flow report of 100k records is ~25 MB


def _call(req: urllib.request.Request, timeout: float) -> dict:
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode(errors="replace")
        raise HttpError(f"{req.full_url}: HTTP {exc.code} {detail}") from None
    except (urllib.error.URLError, socket.timeout, ConnectionError, OSError,
            http.client.HTTPException) as exc:   # HTTPException: a peer that hung up early
        reason = getattr(exc, "reason", exc)
        raise HttpError(f"{req.full_url}: {reason}") from None
    try:
        return json.loads(body) if body else {}
    except ValueError:
        raise HttpError(f"{req.full_url}: answer is not JSON") from None


def get_json(url: str, timeout: float = 2.0) -> dict:
    return _call(urllib.request.Request(url, headers={"Accept": "application/json"}), timeout)


def post_json(url: str, body, timeout: float = 2.0, method: str = "POST") -> dict:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    return _call(req, timeout)


def put_json(url: str, body, timeout: float = 2.0) -> dict:
    return post_json(url, body, timeout, method="PUT")


def delete_json(url: str, timeout: float = 2.0) -> dict:
    return _call(urllib.request.Request(url, method="DELETE",
                                        headers={"Accept": "application/json"}), timeout)


class JsonServer(ThreadingHTTPServer):
    """routes: {(METHOD, path): handler(query: dict, body: object|None) -> (status, payload)}.
    A payload that is a str is sent as text (Prometheus); anything else as JSON."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, routes: dict, name: str = "malb"):
        self.routes = routes
        self.name = name
        super().__init__(address, _Handler)

    def start_background(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name=f"{self.name}-http", daemon=True)
        t.start()
        return t


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: JsonServer

    def log_message(self, fmt, *args):
        pass

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        path = url.path.rstrip("/") or "/"
        handler = self.server.routes.get((method, path))
        if handler is None:
            allowed = sorted(m for (m, p) in self.server.routes if p == path)
            if allowed:
                return self._send(405, {"error": f"{method} not allowed on {path}",
                                        "allowed": allowed})
            return self._send(404, {"error": f"no such resource: {path}",
                                    "resources": sorted({p for _, p in self.server.routes})})
        body = None
        if method in ("POST", "PUT"):
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 <= length <= MAX_BODY_BYTES:
                    raise ValueError(length)
            except ValueError:
                return self._send(400, {"error": "Content-Length: expected a number of bytes "
                                                 f"from 0 to {MAX_BODY_BYTES}"})
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError as exc:
                return self._send(400, {"error": f"body is not valid JSON: {exc}"})
        try:
            status, payload = handler(parse_qs(url.query), body)
        except BadRequest as exc:
            status, payload = 400, {"error": str(exc)}
        except Exception as exc:  # a bug must not kill the server; say what happened
            log.exception("%s: %s %s failed", self.server.name, method, path)
            status, payload = 500, {"error": f"internal error ({type(exc).__name__}); "
                                             f"the server's log has the details"}
        self._send(status, payload)

    def _send(self, status: int, payload) -> None:
        if isinstance(payload, str):
            data, ctype = payload.encode(), "text/plain; version=0.0.4; charset=utf-8"
        else:
            data, ctype = json.dumps(payload).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")
