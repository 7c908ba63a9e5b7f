"""Small JSON-over-HTTP pieces shared by the agents, the profiler, the testbed and the
controller's REST API (docs/reliability.md, "HTTP hardening": why waitress, the limits, what
is checked, the error shapes).

- get_json, post_json, put_json, delete_json: client calls with a timeout; any failure an
  HttpError with a one-line reason; writes carry the shared token (auth_headers);
- JsonServer: a route table served over HTTP/1.1 by waitress, answering JSON (a handler
  may answer Prometheus text as a str, or a Page: the controller's live view); under
  eventlet (the controller) its loop waits through _HubPoller;
- decode_body, dispatch, check_token: the JSON side as plain functions: a body checked, a
  request through the routes, the token on writes (errors: HttpProblem, BadRequest);
- quote, field_name, too_deep: errors that name the field and quote a short prefix.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import http.client
import json
import logging
import math
import os
import re
import resource
import select
import sys
import threading
import time
import urllib.error
import urllib.request
from http import HTTPStatus
from urllib.parse import parse_qs, unquote_to_bytes

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import Error as WaitressError

from common.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE


log = logging.getLogger("malb.http")
# waitress warns "Task queue depth is N" for every request queued behind its workers: a
# burst of a few hundred clients is normal here, not worth hundreds of log lines.
logging.getLogger("waitress.queue").setLevel(logging.ERROR)


class HttpError(RuntimeError):
    """A call that failed; status: the HTTP status of an answer, None when none came."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class BadRequest(ValueError):
    """Raised by a handler: answered with 400 and {"error": message}."""


MAX_BODY_BYTES = 64 * 1024 * 1024   # a flow report of 100k records is ~25 MB
MAX_HEADER_BYTES = 32 * 1024        # request line and headers: ours are a few hundred bytes
HTTP_VERSIONS = ("1.0", "1.1")
MAX_JSON_DEPTH = 32                 # our bodies nest 4 levels at most
MAX_ERROR_CHARS = 300               # an error message is cut there, whatever a handler says
QUOTE_CHARS = 40                    # how much of a bad value an error quotes


def _call(req: urllib.request.Request, timeout: float) -> dict:
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode(errors="replace")
        raise HttpError(f"{req.full_url}: HTTP {exc.code} {detail}", exc.code) from None
    except (TimeoutError, urllib.error.URLError, ConnectionError, OSError,
            http.client.HTTPException) as exc:   # HTTPException: a peer that hung up early
        reason = getattr(exc, "reason", exc)
        raise HttpError(f"{req.full_url}: {reason}") from None
    try:
        return json.loads(body) if body else {}
    except ValueError:
        raise HttpError(f"{req.full_url}: answer is not JSON") from None


def get_json(url: str, timeout: float = 2.0) -> dict:
    return _call(urllib.request.Request(url, headers={"Accept": "application/json"}), timeout)


def auth_headers(token: str | None) -> dict:
    """The header a write request carries when the servers require a token (none else)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def post_json(url: str, body, timeout: float = 2.0, method: str = "POST",
              token: str | None = None) -> dict:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          **auth_headers(token)})
    return _call(req, timeout)


def put_json(url: str, body, timeout: float = 2.0, token: str | None = None) -> dict:
    return post_json(url, body, timeout, method="PUT", token=token)


def delete_json(url: str, timeout: float = 2.0, token: str | None = None) -> dict:
    return _call(urllib.request.Request(url, method="DELETE",
                                        headers={"Accept": "application/json",
                                                 **auth_headers(token)}), timeout)


# ------------------------------------------------------------------ checks (plain functions)
def quote(value, limit: int = QUOTE_CHARS) -> str:
    """repr() of a value for an error message, cut to a short prefix (a 10 MB bad value
    must not come back whole)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if isinstance(value, (list, dict)) and len(value) > 8:
        return f"a{'n object' if isinstance(value, dict) else ' list'} of {len(value)} items"
    try:
        text = repr(value)
    except ValueError:            # an int past Python's 4,300-digit str() limit
        return "a number too long to print"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]]{1,40}")


def field_name(name) -> str:
    """A field or parameter name as an error names it: as it is when plain (letters,
    digits, _ . - [ ], at most 40), else quoted and cut short ('policy ', a 10 kB key)."""
    if isinstance(name, str) and _PLAIN_NAME.fullmatch(name):
        return name
    return quote(_printable(name) if isinstance(name, str) else name)


def _cap(message: str) -> str:
    return message if len(message) <= MAX_ERROR_CHARS else message[:MAX_ERROR_CHARS] + "..."


class HttpProblem(Exception):
    """An answer other than the handler's: status, message and extra headers."""

    def __init__(self, status: int, message: str, headers: tuple = ()):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


class Page:
    """A handler's answer that is not JSON: its body, content type and extra headers."""

    def __init__(self, body: str, content_type: str, headers: tuple = ()):
        self.body, self.content_type, self.headers = body, content_type, tuple(headers)


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def too_deep(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a JSON text nests arrays and objects more than ``limit`` levels, checked
    before parsing (json.loads would raise RecursionError near 1,000 levels, and a parsed
    deep value can still break whoever walks it). C-speed steps only: strings out, then
    one innermost level of brackets removed per round."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    s = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    for _ in range(limit):
        if not s:
            return False
        shorter = _INNERMOST.sub(b"", s)
        if shorter == s:
            return False             # unbalanced: json.loads says where
        s = shorter
    return bool(s)


class _NonFinite:
    """What a number no handler can use parses to (a non-finite one, an integer beyond any
    float), so that the error can name its field."""

    def __init__(self, text: str, expected: str = "a finite number"):
        self.text, self.expected = text, expected


FLOAT_MAX = sys.float_info.max
_LONG_DIGITS = re.compile(rb"[0-9]{309,}")     # 10**308 has 309 digits


def _walk(value, path: str = ""):
    """(path, value) of every key and leaf, iteratively; paths as in our errors:
    flows[3].duration_s."""
    stack = [(path, value)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                sub = f"{path}.{k}" if path else str(k)
                yield sub, k
                stack.append((sub, v))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
        else:
            yield path, value


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode()


def decode_body(raw: bytes, content_type: str | None):
    """A request body as JSON (None when empty), or HttpProblem: 415 without a JSON
    Content-Type, 400 too deep, not JSON, a non-finite number or a string that is not
    valid Unicode (each naming the field)."""
    if not raw:
        return None
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise HttpProblem(415, "Content-Type: expected application/json, got "
                               f"{quote(content_type or '(none)')}")
    if too_deep(raw):
        raise HttpProblem(400, f"body: nested deeper than {MAX_JSON_DEPTH} levels")
    nonfinite: list = []

    def finite(text: str):      # 1e400 parses to inf, NaN and Infinity are accepted
        value = float(text)
        if math.isfinite(value):
            return value
        nonfinite.append(_NonFinite(text))
        return nonfinite[-1]

    def constant(text: str):
        nonfinite.append(_NonFinite(text))
        return nonfinite[-1]

    def integer(text: str):     # only when the body has a run of 309 digits or more
        value = int(text)
        if abs(value) <= FLOAT_MAX:
            return value
        nonfinite.append(_NonFinite(text, "a number of at most 1.8e308"))
        return nonfinite[-1]
    huge = _LONG_DIGITS.search(raw) is not None
    try:
        body = json.loads(raw, parse_float=finite, parse_constant=constant,
                          **({"parse_int": integer} if huge else {}))
    except RecursionError:
        raise HttpProblem(400, "body: nested too deeply") from None
    except ValueError as exc:   # UnicodeDecodeError too; the 4,300-digit limit on ints
        raise HttpProblem(400, f"body is not valid JSON: {_cap(str(exc))}") from None
    surrogates = _SURROGATE_ESCAPE.search(raw)
    if nonfinite or surrogates:          # rare: only then walk the body
        for path, v in _walk(body):
            where = _printable(path) or "body"
            if isinstance(v, _NonFinite):
                raise HttpProblem(400, f"{where}: expected {v.expected}, got {quote(v.text)}")
            if isinstance(v, str) and surrogates:
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    raise HttpProblem(400, f"{where}: not valid Unicode (a lone surrogate), "
                                           f"got {quote(_printable(v))}") from None
    return body


WRITE_METHODS = frozenset({"POST", "PUT", "DELETE", "PATCH"})


def presented_token(authorization: str | None, x_token: str | None) -> str | None:
    """The token a request carries: X-MALB-Token, else Authorization: Bearer <token>."""
    if x_token:
        return x_token.strip()
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def check_token(token: str | None, method: str, authorization: str | None,
                x_token: str | None) -> None:
    """HttpProblem 401 when the server has a token, the method writes and the request does
    not carry that token. Compared in constant time (over digests, so that not even the
    length shows)."""
    if token is None or method not in WRITE_METHODS:
        return
    given = presented_token(authorization, x_token)
    if given is None:
        raise HttpProblem(401, f"Authorization: {method} needs the token (header "
                               f"'Authorization: Bearer <token>' or 'X-MALB-Token: <token>')",
                          (("WWW-Authenticate", 'Bearer realm="malb"'),))
    if not hmac.compare_digest(_digest(given), _digest(token)):
        raise HttpProblem(401, "Authorization: wrong token",
                          (("WWW-Authenticate", 'Bearer realm="malb", error="invalid_token"'),))


_PARAMETER = re.compile(r"\{(\w+)\}")


@functools.lru_cache(maxsize=512)
def _template(path: str) -> re.Pattern | None:
    """A route path with parameters ({name}: one path segment) as a pattern; None for a
    plain path."""
    if "{" not in path:
        return None
    pieces, at = [], 0
    for m in _PARAMETER.finditer(path):
        pieces += [re.escape(path[at:m.start()]), f"(?P<{m.group(1)}>[^/]+)"]
        at = m.end()
    return re.compile("".join(pieces) + re.escape(path[at:]))


def _find(routes: dict, method: str, path: str):
    """(handler, path parameters) of a request, or (None, {}): a plain route first."""
    handler = routes.get((method, path))
    if handler is not None:
        return handler, {}
    for (m, p), handler in routes.items():
        pattern = _template(p) if m == method else None
        match = pattern.fullmatch(path) if pattern else None
        if match:
            return handler, match.groupdict()
    return None, {}


def route_methods(routes: dict, path: str) -> list[str]:
    """The methods the routes answer on a path (HEAD wherever GET is), sorted."""
    methods = {m for (m, p) in routes
               if p == path or ((t := _template(p)) is not None and t.fullmatch(path))}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def parse_query(query: str) -> dict[str, list[str]]:
    """A query string as parse_qs does it, blank values kept (`?actve=` is a parameter a
    handler can refuse by name), or a 400 naming the parameter whose name or value is not
    UTF-8 after %-decoding (parse_qs would turn it into U+FFFD, and the handler would then
    answer about a value nobody sent)."""
    for piece in query.split("&"):
        name, _, value = (unquote_to_bytes(x.replace("+", " ")) for x in piece.partition("="))
        try:
            name = name.decode("utf-8")
            value.decode("utf-8")
        except UnicodeDecodeError:
            shown = field_name(name) if isinstance(name, str) else "query"
            raise HttpProblem(400, f"{shown}: not valid UTF-8 (after %-decoding)") from None
    return parse_qs(query, keep_blank_values=True)


def dispatch(routes: dict, name: str, method: str, path: str, query: str,
             content_type: str | None, raw: bytes, *, token: str | None = None,
             authorization: str | None = None,
             x_token: str | None = None) -> tuple[int, tuple, object]:
    """One request through the route table: (status, extra headers, payload). Never
    raises: a handler's bug is a 500 that says only its exception's type, and is logged.
    A route's path may have parameters ("/instances/{name}", one segment each), handed to
    its handler as keyword arguments. Order: 404, 405, 401 (a write without the token,
    when the server has one), then the query's and the body's checks and the handler."""
    path = path.rstrip("/") or "/"
    # HEAD wherever GET is (RFC 9110, 9.3.2): the GET's status and headers, no body (the
    # server leaves the body out)
    handler, params = _find(routes, "GET" if method == "HEAD" else method, path)
    if handler is None:
        allowed = route_methods(routes, path)
        if allowed:
            return 405, (("Allow", ", ".join(allowed)),), {
                "error": f"{_printable(method)[:80]}: not allowed on {_printable(path)[:80]}",
                "allowed": allowed}
        return 404, (), {"error": f"no such resource: {quote(_printable(path), 80)}",
                         "resources": sorted({p for _, p in routes})}
    try:
        check_token(token, method, authorization, x_token)
        parsed = parse_query(query)
        body = decode_body(raw, content_type)
        status, payload = handler(parsed, body, **params)
    except HttpProblem as exc:
        return exc.status, exc.headers, {"error": _cap(exc.message)}
    except BadRequest as exc:
        return 400, (), {"error": _cap(str(exc))}
    except Exception as exc:  # a bug must not kill the server; say what happened
        log.exception("%s: %s %s failed", name, method, path)
        return 500, (), {"error": f"internal error ({type(exc).__name__}); "
                                  f"the server's log has the details"}
    return status, (), payload


def _encode(status: int, payload) -> tuple[str, list, bytes]:
    extra: list = []
    if isinstance(payload, str):
        data, ctype = payload.encode(), METRICS_CONTENT_TYPE    # only /metrics answers text
    elif isinstance(payload, Page):
        data, ctype, extra = payload.body.encode(), payload.content_type, list(payload.headers)
    else:
        if 400 <= status and isinstance(payload, dict) and isinstance(payload.get("error"), str):
            payload = {**payload, "error": _cap(payload["error"])}
        data, ctype = json.dumps(payload).encode(), "application/json"
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"{status} {phrase}", [("Content-Type", ctype),
                                  ("Content-Length", str(len(data))), *extra], data


def _wsgi_text(value: str, what: str) -> str:
    """PEP 3333 hands paths and queries over as latin-1 decoded bytes: back to UTF-8, or a
    400 naming what is not."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise HttpProblem(400, f"{what}: not valid UTF-8 (after %-decoding)") from None


# ------------------------------------------------------------------ the server
class _JsonErrorTask(ErrorTask):
    """waitress' own errors (malformed request, 413, 431, 501 for an unknown
    Transfer-Encoding) as JSON; waitress closes the connection after them."""

    def execute(self):
        e = self.request.error
        message = f"{e.reason}: {e.body}"
        if e.code == 413:     # waitress refuses from its limit on; ours is the last size allowed
            limit = self.channel.server.adj.max_request_body_size - 1
            message = f"{e.reason}: the body is over the limit of {limit} bytes"
        body = json.dumps({"error": _cap(message)}).encode()
        self.status = f"{e.code} {e.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _VersionNotSupported(WaitressError):
    code = 505
    reason = "HTTP Version Not Supported"


class _Parser(HTTPRequestParser):
    """waitress' parser, refusing request lines of HTTP versions other than 1.0 and 1.1
    (it answers `HTTP/9.9` as 1.0)."""

    def received(self, data):
        consumed = super().received(data)
        if self.headers_finished and self.error is None and not self.empty and \
                self.version not in HTTP_VERSIONS:
            self.error = _VersionNotSupported(f"HTTP/{self.version[:10]}: only HTTP/1.0 and "
                                              f"HTTP/1.1 are served")
            self.completed = True
        return consumed


class _Channel(HTTPChannel):
    error_task_class = _JsonErrorTask
    parser_class = _Parser
    request_started = 0.0

    def __init__(self, server, sock, addr, adj, map=None):
        super().__init__(server, sock, addr, adj, map=map)
        server.admit(self)

    def del_channel(self, map=None):
        fileno = self._fileno
        super().del_channel(map)
        self.server.forget(self, fileno)

    def received(self, data):
        if self.request is None and data:
            self.request_started = time.monotonic()   # the first bytes of a request
        return super().received(data)

    def send_continue(self):
        """No 100 Continue for a request already whole (no body, as a GET's): RFC 9110
        lets a server omit it there, and waitress (3.0.2) marks the request incomplete
        after sending it, so such a request was never answered (it waited for the
        connection's timeout)."""
        if self.request.completed:
            self.request.expect_continue = False
            return
        super().send_continue()


FILES_BESIDE_CONNECTIONS = 256   # the process's other descriptors: logs, databases, peers


def room_for_connections(limit: int) -> int:
    """Raise this process's soft limit of open files so that `limit` connections fit beside
    its other files, up to the hard limit (Linux's usual soft limit, 1,024, is below the
    controller's 4,096 connections: past it accept fails and the listener spins). Returns
    the connections that fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = limit + FILES_BESIDE_CONNECTIONS
    if soft != resource.RLIM_INFINITY and soft < want:
        soft = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(1, min(limit, soft - FILES_BESIDE_CONNECTIONS))


def _host(addr) -> str:
    return addr[0] if isinstance(addr, tuple) else str(addr)


class _Server(TcpWSGIServer):
    channel_class = _Channel
    request_timeout_s = 30.0
    accept_batch = 64
    per_address_limit: int | None = 64
    shed_after_s = 1.0          # idle (or its request arriving) this long: may be closed
    SHED_LOG_EVERY_S = 60.0

    def __init__(self, *args, **kwargs):
        self._by_address: dict = {}     # address -> {fileno: channel}, oldest first
        self.shed = 0                   # idle connections closed for others
        self._logged = float("-inf")
        super().__init__(*args, **kwargs)

    def _idle(self, c, now: float) -> bool:
        """No handler serves it, and it has been idle, or its request arriving, for
        shed_after_s."""
        return not (c.requests or c.will_close or c.close_when_flushed) and \
            now - c.last_activity >= self.shed_after_s

    def _sheddable(self, channels, now: float):
        """The oldest idle one of `channels` (oldest first); None if none is."""
        return next((c for c in channels if self._idle(c, now)), None)

    def _shed(self, channel, why: str) -> None:
        channel.will_close = True        # closed by the loop at its next turn
        self.shed += 1
        self._log(why)

    def _log(self, why: str) -> None:
        now = time.monotonic()
        if now - self._logged >= self.SHED_LOG_EVERY_S:
            self._logged = now
            log.warning("%s: %s (%d idle connections closed so far; logged once a minute)",
                        self.adj.ident, why, self.shed)

    def admit(self, channel) -> None:
        """A new connection, from an address that may already hold per_address_limit: the
        address's oldest connection that no handler serves and that has been idle (or its
        request arriving) for shed_after_s is closed to make room. New connections are never
        refused for it (a burst of clients behind one address sends its requests at once);
        those that then idle are trimmed by maintenance."""
        mine = self._by_address.setdefault(_host(channel.addr), {})
        mine[channel._fileno] = channel
        if self.per_address_limit is not None and len(mine) > self.per_address_limit:
            self._trim(_host(channel.addr), mine, time.time(), most=1)

    def _trim(self, host: str, mine: dict, now: float, most: int) -> None:
        """Close up to `most` of the address's oldest idle connections while it holds more
        than per_address_limit open."""
        open_ = [c for c in mine.values() if not (c.will_close or c.close_when_flushed)]
        excess = min(most, len(open_) - (self.per_address_limit or 0))
        victims = [c for c in open_ if self._idle(c, now)][:max(0, excess)]
        for victim in victims:
            self._shed(victim, f"{host} holds more than {self.per_address_limit} "
                               f"connections: its oldest idle ones closed")

    def forget(self, channel, fileno) -> None:
        host = _host(channel.addr)
        mine = self._by_address.get(host)
        if mine is not None and mine.get(fileno) is channel:
            del mine[fileno]
            if not mine:
                del self._by_address[host]

    def readable(self):
        """waitress stops listening while the connection limit is reached; ours listens on
        while a connection idle for shed_after_s could make room (handle_accept)."""
        listening = super().readable()
        if listening or not self.accepting:
            return listening
        return self._sheddable(self.active_channels.values(), time.time()) is not None

    def handle_accept(self):
        """Take up to accept_batch queued connections per wake-up, within the connection
        limit. waitress takes one, and every wake-up of its loop waits on every open
        connection, so a queue of N costs N wake-ups of O(N) each."""
        for k in range(self.accept_batch):
            if len(self._map) >= self.adj.connection_limit:
                # full: the oldest connection idle (or half-sent) for shed_after_s makes
                # room for the first waiting, else they wait in the listen backlog (once a
                # wake-up: a queue that turns out empty then costs one connection at most)
                if k:
                    return
                victim = self._sheddable(self.active_channels.values(), time.time())
                if victim is None:
                    return
                self._shed(victim, f"{self.adj.connection_limit} connections open: the "
                                   f"oldest idle one closed")
            before = len(self._map)
            super().handle_accept()
            if len(self._map) == before:     # the queue is empty (or accept failed)
                return

    def maintenance(self, now):
        """waitress closes connections idle for channel_timeout; also close those whose
        request (headers or body) is still incomplete after request_timeout_s, and an
        address's idle ones beyond per_address_limit (`now`: waitress' time.time())."""
        super().maintenance(now)
        if self.per_address_limit is not None:
            for host, mine in list(self._by_address.items()):
                if len(mine) > self.per_address_limit:
                    self._trim(host, mine, now, most=len(mine))
        cutoff = time.monotonic() - self.request_timeout_s
        for channel in self.active_channels.values():
            if channel.request is not None and channel.request_started < cutoff:
                channel.will_close = True


class _HubPoller:
    """wasyncore's poll for a process under eventlet's monkey-patching (the controller's).
    eventlet's green select adds and removes a hub listener for every socket on every call
    and returns one ready socket, so each event costs O(open connections). Here the
    connections sit in one epoll of their own, changed only when a socket's interest
    changes; the hub waits on that epoll's descriptor alone, and one wake-up handles every
    ready socket."""

    def __init__(self):
        import eventlet.hubs
        real_select = eventlet.patcher.original("select")
        self._epoll = real_select.epoll()
        self._trampoline = eventlet.hubs.trampoline
        self._yield = eventlet.sleep
        self._real_write = eventlet.patcher.original("os").write
        self._held: dict[int, tuple[object, int]] = {}    # fd -> (dispatcher, event mask)

    def wake_without_waiting(self, trigger) -> None:
        """waitress wakes its loop by writing a byte to a pipe from whichever handler thread
        finished. eventlet 0.35 and later's green os.write first waits until the pipe is
        writable, and two green threads waiting on one descriptor is an error there (a
        handler's answer then never leaves): the write end is made non-blocking and
        written with the real os.write; a full pipe already holds a wake-up."""
        fd, write = trigger.trigger, self._real_write
        os.set_blocking(fd, False)

        def pull() -> None:
            try:
                write(fd, b"x")
            except BlockingIOError:
                pass
        trigger._physical_pull = pull

    def _sync(self, map: dict) -> None:
        ep, held = self._epoll, self._held
        for fd in [fd for fd in held if fd not in map]:
            del held[fd]
            self._forget(fd)
        for fd, obj in list(map.items()):
            mask = 0
            if obj.readable():
                mask |= select.POLLIN | select.POLLPRI
            if obj.writable() and not obj.accepting:
                mask |= select.POLLOUT
            was = held.get(fd)
            if was is not None and was[0] is obj and was[1] == mask:
                continue
            if was is not None and was[0] is not obj:
                self._forget(fd)         # the number reused: the old socket is closed
                was = None
            if not mask:                 # as poll: no interest, not polled (not even HUP)
                if was is not None:
                    self._forget(fd)
                held.pop(fd, None)
                continue
            try:
                try:
                    if was is None:
                        ep.register(fd, mask)
                    else:
                        ep.modify(fd, mask)
                except FileExistsError:
                    ep.modify(fd, mask)
                except FileNotFoundError:    # closed and reopened under the same dispatcher
                    ep.register(fd, mask)
            except OSError:              # not a socket any more: as poll's POLLNVAL
                held.pop(fd, None)
                wasyncore.readwrite(obj, select.POLLNVAL)
                continue
            held[fd] = (obj, mask)

    def _forget(self, fd: int) -> None:
        try:
            self._epoll.unregister(fd)
        except OSError:                  # closed already: the kernel dropped it
            pass

    def poll(self, timeout: float, map: dict) -> None:
        self._sync(map)
        ready = self._epoll.poll(0)
        if not ready:
            try:
                self._trampoline(self._epoll.fileno(), read=True, timeout=timeout,
                                 timeout_exc=_PollTimeout)
            except _PollTimeout:
                return
            ready = self._epoll.poll(0)
        for fd, flags in ready:
            obj = map.get(fd)
            if obj is not None:
                wasyncore.readwrite(obj, flags)   # epoll's bits are poll's on Linux
        # the hub's turn after every wake-up, as green select gave it: with sockets always
        # ready the loop would keep the handler threads, and the controller, from running
        self._yield(0)

    def close(self) -> None:
        self._epoll.close()


class _PollTimeout(Exception):
    pass


class JsonServer:
    """routes: {(METHOD, path): handler(query: dict, body: object|None, **path parameters)
    -> (status, payload)}; a path may hold parameters, "/instances/{name}". A payload that
    is a str is sent as text (Prometheus); anything else as JSON. A handler raises
    BadRequest for a 400 (its message names the field).

    Limits: max_body_bytes (413 over that), request_timeout_s for a whole request to arrive,
    idle_timeout_s for a kept-alive connection, connection_limit open connections
    (beyond it, the oldest idle one is closed for a waiting client), per_address_limit open
    connections from one address that idle or trickle (beyond it, its oldest idle ones are
    closed; None: no limit), threads running handlers. token: when given, every
    POST, PUT and DELETE must carry it (401 otherwise); reads stay open."""

    def __init__(self, address, routes: dict, name: str = "malb", *, threads: int = 8,
                 max_body_bytes: int = MAX_BODY_BYTES, request_timeout_s: float = 30.0,
                 idle_timeout_s: int = 60, connection_limit: int = 1000,
                 per_address_limit: int | None = 64, backlog: int = 1024,
                 token: str | None = None):
        self.routes = routes
        self.name = name
        self.token = token
        host, port = address
        fits = room_for_connections(connection_limit)
        if fits < connection_limit:
            log.warning("%s: %d connections at most, not %d: the hard limit of open files "
                        "(ulimit -Hn) leaves room for no more", name, fits, connection_limit)
            connection_limit = fits
        # eventlet's monkey-patching (the controller's hub) takes select.poll away
        self._use_poll = hasattr(select, "poll")
        adj = Adjustments(host=host, port=port, ipv6=False, threads=threads,
                          backlog=backlog, connection_limit=connection_limit,
                          channel_timeout=idle_timeout_s, cleanup_interval=1,
                          asyncore_loop_timeout=1, asyncore_use_poll=self._use_poll,
                          max_request_body_size=max_body_bytes + 1, ident=name,
                          max_request_header_size=MAX_HEADER_BYTES,
                          expose_tracebacks=False)
        self._map: dict = {}
        self._server = _Server(self._app, map=self._map, adj=adj)
        self._server.per_address_limit = per_address_limit
        self._hub_poller = None if self._use_poll else _HubPoller()   # once bound: no leak
        if self._hub_poller is not None:
            self._hub_poller.wake_without_waiting(self._server.trigger)
        self._server.request_timeout_s = request_timeout_s
        self.server_address = (self._server.effective_host, int(self._server.effective_port))
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._closed = False

    def _app(self, environ, start_response):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        raw = environ["wsgi.input"].read(length) if length > 0 else b""
        try:
            path = _wsgi_text(environ.get("PATH_INFO") or "/", "path")
            query = _wsgi_text(environ.get("QUERY_STRING") or "", "query")
        except HttpProblem as exc:
            status, headers, payload = exc.status, (), {"error": exc.message}
        else:
            if (environ.get("REQUEST_URI") or "").startswith("//"):
                # waitress strips the extra leading slashes; `//profiles` is not `/profiles`
                path = "//" + path.lstrip("/")
            status, headers, payload = dispatch(
                self.routes, self.name, environ["REQUEST_METHOD"], path, query,
                environ.get("CONTENT_TYPE"), raw, token=self.token,
                authorization=environ.get("HTTP_AUTHORIZATION"),
                x_token=environ.get("HTTP_X_MALB_TOKEN"))
        line, base, data = _encode(status, payload)
        start_response(line, base + list(headers))
        # HEAD: the headers a GET would have, no body (waitress sends whatever the
        # application returns; a body here would be read as the next answer's start)
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [data]

    def serve_forever(self) -> None:
        """Serve until shutdown() (socketserver's semantics)."""
        self._stopped.clear()
        try:
            while not self._stop.is_set():
                if self._hub_poller is not None:
                    self._hub_poller.poll(1.0, self._map)
                else:
                    wasyncore.loop(timeout=1.0, map=self._map, use_poll=True, count=1)
        finally:
            self._close_all()
            self._stopped.set()

    def start_background(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name=f"{self.name}-http", daemon=True)
        t.start()
        return t

    def shutdown(self) -> None:
        """Stop serve_forever and wait for it; open connections are closed."""
        self._stop.set()
        try:
            self._server.pull_trigger()      # wake the poll at once
        except OSError:
            pass
        self._stopped.wait(timeout=10)

    def server_close(self) -> None:
        if not self._stopped.is_set():       # never served: nothing else closes it
            self._close_all()

    def _close_all(self) -> None:
        if self._closed:
            return
        self._closed = True
        for obj in list(self._map.values()):
            try:
                obj.close()
            except OSError:
                pass
        self._server.task_dispatcher.shutdown(timeout=5)
        if self._hub_poller is not None:
            self._hub_poller.close()
