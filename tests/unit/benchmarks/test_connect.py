"""benchmarks/connect.py on loopback: paced (open loop) and closed-loop connection setups
against a real listening socket, and failures counted where nothing listens."""
import json
import socket
import threading

import pytest

from benchmarks import connect


@pytest.fixture
def listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1024)
    stop = threading.Event()

    def accept():
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()
    stop.set()
    t.join()
    srv.close()


def test_paced_starts_every_connection_at_its_time_and_times_each(listener):
    lat, failures, late = connect.paced([listener], rate=200, seconds=0.5, timeout=30)
    assert len(lat) == 100 and failures == 0
    assert all(0 < v < 30 for v in lat)        # each set-up's own time, within its timeout
    # how many started late depends on the machine's load, not on the code: counted only
    assert isinstance(late, int) and 0 <= late <= 100


def test_closed_loop_and_the_json_line(listener, capsys):
    lat, failures, _ = connect.closed_loop([listener], workers=2, seconds=0.3, timeout=30)
    assert lat and failures == 0
    connect.main(["--target", f"{listener[0]}:{listener[1]}", "--rate", "100",
                  "--seconds", "0.2"])
    out = json.loads(capsys.readouterr().out)
    assert out["connections"] == 20 and out["offered_per_s"] == 100 and out["p99_s"] > 0


def test_a_port_nobody_listens_on_counts_failures():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    lat, failures, _ = connect.paced([("127.0.0.1", port)], rate=100, seconds=0.1, timeout=1)
    assert not lat and failures == 10
