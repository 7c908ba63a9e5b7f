"""What the controller's REST handlers use of the app, for unit tests: fake_app (a
PolicyCore and recorders of instance changes), state_of (what a rejected request must leave
as it was) and served (the REST server over it, on a free port)."""
import logging
from contextlib import contextmanager
from types import SimpleNamespace

from tests.lib.http_client import Client
from tests.lib.policy_core import make_core


def fake_app():
    """What the REST handlers use of MalbController; instance changes are recorded."""
    calls = []
    core = make_core()
    return SimpleNamespace(
        policy_core=core, set_policy=core.set_policy, decisions=[], logger=logging.getLogger("t"),
        set_weights=lambda weights: [core.profiles.set_manual_weights(ms, w)
                                     for ms, w in weights.items()],
        flows=SimpleNamespace(idle_timeout=10, epoch="", flows={}),
        status=lambda: 1 / 0,          # a bug, to see the 500
        instances={"srv1-ui": None, "srv5-ui": None}, calls=calls,
        add_instance=lambda name: calls.append(("add", name)),
        set_draining=lambda name, on: calls.append(("drain", name, on)),
        remove_instance=lambda name: calls.append(("remove", name)),
        active_flows_of=lambda: {}, instances_view=lambda: {"srv1-ui": {}, "srv5-ui": {}})


def state_of(app):
    return app.policy_core.policy, dict(app.policy_core.profiles.manual_weights), list(app.calls)


@contextmanager
def served(app):
    """The controller's REST server (ryu_apps/rest.py) over app on 127.0.0.1 (a free
    port), serving in a thread: yields a tests.lib.http_client.Client connected to it."""
    from ryu_apps import rest      # deferred: the controller's modules, only for REST tests
    server = rest.server(app, "127.0.0.1", 0)
    server.start_background()
    client = Client(server.server_address)
    try:
        yield client
    finally:
        client.close()
        server.shutdown()
        server.server_close()
