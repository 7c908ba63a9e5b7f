"""The controller's listening sockets (REST and OpenFlow), bound by the app itself without
SO_REUSEPORT before Ryu would bind them, so that a second controller on the same ports is
one clear error (docs/controller.md, "Configuration"; docs/reliability.md). Nothing of Ryu
is edited.

- reserve, release, PortInUse: the sockets bound now, or the port in use named;
- install: eventlet.listen replaced by a function that hands Ryu the reserved sockets, and
  Ryu's REST server run with REST_SOCKET_TIMEOUT_S and REST_MAX_CONNECTIONS.
"""
from __future__ import annotations

import errno
import socket

import eventlet

_held: dict[tuple[str, int], object] = {}
_original_listen = None


class PortInUse(RuntimeError):
    """A listening port could not be bound; the message names it and what it is for."""


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def reserve(addresses: dict[str, tuple[str, int]], backlog: int = 128) -> None:
    """Bind and listen on each address now: {what it is for: (host, port)}. PortInUse
    naming the first that fails (the others bound so far are closed again). Called from
    MalbController's __init__, which runs before Ryu binds anything (instantiate_apps, then
    the WSGI server, then ofp_handler's listener on its first scheduling)."""
    install()
    bound = []
    for what, (host, port) in addresses.items():
        try:
            sock = _original_listen((host, port), family=_family(host), backlog=backlog,
                                    reuse_addr=True, reuse_port=False)
        except OSError as exc:
            for key in bound:
                _held.pop(key).close()
            hint = " (another process listens there: a second controller?)" \
                if exc.errno == errno.EADDRINUSE else ""
            raise PortInUse(f"{what} {host or '*'}:{port}: {exc.strerror or exc}{hint}") \
                from None
        _held[(host, port)] = sock
        bound.append((host, port))


def release() -> None:
    """Close the sockets reserved and not taken (tests; a failed start)."""
    while _held:
        _held.popitem()[1].close()


def _listen(addr, family=socket.AF_INET, backlog=50, reuse_addr=True, reuse_port=None):
    """eventlet.listen for this process: a reserved socket for its address, else a new one
    without SO_REUSEPORT unless asked for explicitly."""
    if isinstance(addr, tuple) and tuple(addr[:2]) in _held:
        return _held.pop(tuple(addr[:2]))
    return _original_listen(addr, family=family, backlog=backlog, reuse_addr=reuse_addr,
                            reuse_port=bool(reuse_port))


# The REST server's connections (Ryu runs eventlet.wsgi.server with its defaults: at most
# 1,024 connections and no timeout, so 1,024 idle clients took the REST API offline for
# good). A client silent this long is dropped; the cap is far above what the API needs.
REST_SOCKET_TIMEOUT_S = 30.0
REST_MAX_CONNECTIONS = 4096


def _serve_forever(self):
    """ryu.lib.hub.WSGIServer.serve_forever with a socket timeout and a larger cap."""
    # deferred: Ryu's WSGI stack, only in a running controller
    import eventlet.wsgi
    from ryu.lib.hub import LoggingWrapper
    self.logger = LoggingWrapper()
    eventlet.wsgi.server(self.server, self.handle, self.logger,
                         socket_timeout=REST_SOCKET_TIMEOUT_S, max_size=REST_MAX_CONNECTIONS)


def install() -> None:
    """Replace eventlet.listen (which ryu.lib.hub calls, and which sets SO_REUSEPORT on every
    socket with a port number, eventlet's default since 0.20) by _listen, and Ryu's WSGI
    server loop by _serve_forever; idempotent."""
    global _original_listen
    from ryu.lib import hub   # deferred: Ryu, only in a running controller
    if _original_listen is None:
        _original_listen = eventlet.listen
    if eventlet.listen is not _listen:
        eventlet.listen = _listen
    hub.WSGIServer.serve_forever = _serve_forever
