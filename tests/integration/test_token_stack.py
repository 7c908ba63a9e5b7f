"""The whole stack with the shared token set (security.token): every write without it is
refused by every server, and everything the platform's own processes do still works, so
each of them sends it (the controller's flow reports to the profiler, the profiler's and
the controller's reads of the agents, a client's requests through the VIP)."""
from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request

import pytest

from common.httpjson import auth_headers
from experiments.stack import Stack
from tests.integration.helpers import FAST_CONFIG, served_by

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("clean_machine")]
TOKEN = "integration-test-token-0123456789"


def send(method: str, url: str, body, token: str | None = None) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                 headers={"Content-Type": "application/json",
                                          **auth_headers(token)})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_writes_need_the_token_everywhere_and_the_platform_carries_it(tmp_path):
    data = copy.deepcopy(FAST_CONFIG)
    data["servers"] = {"count": 2}
    data["security"] = {"token": TOKEN}
    with Stack(data, str(tmp_path), policy="malb") as st:
        assert st.cfg.security.token == TOKEN
        rest = st.controller_url("/malb/policy")
        profiler = f"{st.cfg.profiler.url}/flows"
        # without the token (or with a wrong one): 401 from each server, nothing changed
        assert send("PUT", rest, {"policy": "srr"}) == 401
        assert send("PUT", rest, {"policy": "srr"}, token="x" * 20) == 401
        assert st.controller_get("/malb/policy")["policy"] == "malb"
        assert send("POST", profiler, {"flows": []}) == 401
        # (an agent without an SLO loop has no write route: test_token.py checks its server)
        # with it: accepted
        assert send("PUT", rest, {"policy": "srr"}, token=TOKEN) == 200
        assert send("POST", profiler, {"flows": []}, token=TOKEN) == 200
        # the platform's own writes carry it: flow reports reach the profiler's history,
        # and traffic through the VIP is balanced as before
        cli = st.testbed.node("cli1")
        served = served_by(cli, "http://10.0.0.100:8002/object?size=10000", 4)
        assert len(served) == 4 and not any(s.startswith("FAIL") for s in served), served
        st.wait_for(lambda: st.profiler_get("/health")["history"]["flows"] >= 4, 20,
                    "the controller's flow reports stored by the profiler")
        st.wait_monitoring(20)         # the profiler reads every agent
        # no write of the controller's to the profiler was refused (its own REST access log
        # has the 401s of the refused requests above)
        refused = [line for line in open(st.controller.log_path)
                   if "profiler" in line and "401" in line]
        assert not refused, refused
