"""benchmarks/idle_clients.py's parts against a real JsonServer: the held connections come
from the addresses asked, half of them half-sent, and those the server closes are counted;
a state's figures."""
import time

from benchmarks.idle_clients import closed_by_server, hold, state_row, timed_gets
from common.httpjson import JsonServer


def test_held_connections_are_counted_when_the_server_closes_them():
    srv = JsonServer(("127.0.0.1", 0), {("GET", "/s"): lambda q, b: (200, {})}, name="b",
                     per_address_limit=3)
    srv._server.shed_after_s = 0.2
    srv.start_background()
    try:
        held = hold(srv.server_address[1], 10, sources=2)
        assert len(held) == 10 and {s.getsockname()[0] for s in held} == {"127.0.2.1",
                                                                          "127.0.2.2"}
        time.sleep(2.5)              # 5 per address, 3 kept: the housekeeping trims 2 each
        assert closed_by_server(held) == 4
        times = timed_gets(srv.server_address[1], "/s", 3, 5.0)
        assert all(t is not None for t in times)
        assert timed_gets(srv.server_address[1], "/nowhere", 1, 5.0) == [None]
        for s in held:
            s.close()
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_state_row_counts_failures_apart():
    row = state_row([0.01, None, 0.03, 0.02])
    assert row["requests"] == 4 and row["failed"] == 1
    assert row["p50_s"] == 0.02 and row["max_s"] == 0.03 and 0.02 < row["p99_s"] <= 0.03
    assert state_row([None])["p50_s"] is None
