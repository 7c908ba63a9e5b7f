"""The controller's listening ports, checked at start-up so that a second controller on the
same ports is one clear error (docs/controller.md, "Configuration"; docs/reliability.md).
Nothing of Ryu, os-ken or eventlet is patched.

The REST server (ryu_apps/rest.py) binds its own socket without SO_REUSEPORT, so its bind
fails when the port is taken. The OpenFlow listener is the framework's, bound with eventlet,
which sets SO_REUSEPORT: a second controller would bind beside the first and share its
switches. check_free binds the OpenFlow address once without SO_REUSEPORT and closes it
again: that bind fails while anyone listens there, whatever their options.

- check_free, PortInUse: the addresses free now, or the first taken named with what it is for;
- refusal: the message for an address that could not be bound.
"""
from __future__ import annotations

import errno
import socket


class PortInUse(RuntimeError):
    """A listening port could not be bound; the message names it and what it is for."""


def refusal(what: str, host: str, port: int, exc: OSError) -> PortInUse:
    hint = " (another process listens there: a second controller?)" \
        if exc.errno == errno.EADDRINUSE else ""
    return PortInUse(f"{what} {host or '*'}:{port}: {exc.strerror or exc}{hint}")


def check_free(addresses: dict[str, tuple[str, int]]) -> None:
    """{what it is for: (host, port)}: PortInUse naming the first address someone listens
    on (or that cannot be bound at all). A controller starting in the same instant may
    still pass; one started at any other time does not."""
    for what, (host, port) in addresses.items():
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        probe = socket.socket(family, socket.SOCK_STREAM)
        try:
            # as the framework binds, less SO_REUSEPORT (a listener's connections in
            # TIME_WAIT do not count, a listener does)
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
        except OSError as exc:
            raise refusal(what, host, port, exc) from None
        finally:
            probe.close()
