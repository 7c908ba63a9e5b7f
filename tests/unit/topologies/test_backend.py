"""topologies/backend.py: the controller class a testbed is built with."""
from __future__ import annotations

import socket

from topologies import backend


def test_the_controllers_start_up_check_reads_no_bytes_from_it():
    # Mininet's own check decodes the controller's binary HELLO as UTF-8, which can fail a
    # testbed's start; this one only connects
    check = backend.remote_controller_class().isListening
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert check(None, "127.0.0.1", port) is True
    assert check(None, "127.0.0.1", port) is False
