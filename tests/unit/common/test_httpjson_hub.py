"""JsonServer in a process under eventlet's monkey-patching, as the controller runs it (its
REST API): the connections wait in an epoll of their own (httpjson._HubPoller), so one
wake-up of the loop handles every ready connection and a queue of new ones, and socket
numbers reused after a close are followed. Each case runs in a child process: patching
this one would change every other test."""
import json
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

CHILD = textwrap.dedent("""
    import eventlet
    eventlet.monkey_patch()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)   # both ends' sockets: ~4,000
    if soft != resource.RLIM_INFINITY and soft < 8192:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (8192 if hard == resource.RLIM_INFINITY else min(8192, hard), hard))
    import http.client, json, socket, sys
    from common.httpjson import JsonServer

    server = JsonServer(("127.0.0.1", 0), {("GET", "/n/{n}"): lambda q, b, n: (200, {"n": n})},
                        name="hub-test", connection_limit=5000, per_address_limit=None)
    port = server.server_address[1]
    out = {"hub_poller": server._hub_poller is not None}

    def polls_until(done, most):
        for k in range(1, most + 1):
            server._hub_poller.poll(0.5, server._map)
            if done():
                return k
        return None

    def channels():
        return [o for o in server._map.values() if hasattr(o, "requests")]

    # 300 connections queued at once, each with a whole request sent: taken from the
    # queue in batches and read in the same wake-ups, not one connection per wake-up
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
    for i, c in enumerate(clients):
        c.sendall(f"GET /n/{i} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n".encode())
    out["polls_to_accept_300"] = polls_until(lambda: len(channels()) == 300, 50)
    for c in clients:
        c.close()
    out["polls_to_close_300"] = polls_until(lambda: not channels(), 50)

    # a dispatcher whose socket number was closed under it: dropped, as poll's POLLNVAL
    import os
    from waitress import wasyncore
    stale = wasyncore.dispatcher(socket.socket(), map=server._map)
    os.close(stale.socket.fileno())
    server._hub_poller.poll(0.1, server._map)
    out["stale_dropped"] = stale not in server._map.values()

    # a socket that stays ready still lets the hub's other green threads run after each
    # wake-up (the handler threads, and in the controller everything else)
    class Sticky(wasyncore.dispatcher):
        def handle_read(self):
            pass                         # never reads: ready at every wake-up
        def writable(self):
            return False
    a, b = socket.socketpair()
    sticky = Sticky(a, map=server._map)
    b.sendall(b"x")
    ran = []
    eventlet.spawn(lambda: ran.append(True))
    server._hub_poller.poll(0.1, server._map)
    out["others_ran"] = bool(ran)
    sticky.close()
    b.close()

    # served for real: idle connections beside, closed ones' numbers reused
    # (one address's: no per-address limit here, the poll loop beside them is the point)
    server.start_background()
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(1500)]
    answers = []
    for round_ in range(3):
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(40)]
        for i, conn in enumerate(conns):
            for j in range(2):                        # kept alive: two requests each
                conn.request("GET", f"/n/{round_}-{i}-{j}")
                r = conn.getresponse()
                answers.append(r.status == 200 and json.loads(r.read())["n"] == f"{round_}-{i}-{j}")
            conn.close()
        for s in idle[:500]:                          # free numbers for the next round
            s.close()
        idle = idle[500:] + [socket.create_connection(("127.0.0.1", port)) for _ in range(500)]
    out["answers"] = len(answers)
    out["right"] = sum(answers)
    for s in idle:
        s.close()
    server.shutdown()
    print(json.dumps(out))
""")


def test_under_eventlet_one_wake_up_handles_every_ready_connection():
    res = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["hub_poller"]
    # eventlet's green select takes one connection per wake-up: 300 and more
    assert out["polls_to_accept_300"] is not None and out["polls_to_accept_300"] <= 10, out
    assert out["polls_to_close_300"] is not None and out["polls_to_close_300"] <= 10, out
    assert out["stale_dropped"], out
    assert out["others_ran"], out
    assert out["answers"] == 240 and out["right"] == 240, out
