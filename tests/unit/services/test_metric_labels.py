"""The services' metrics keep a bounded set of series whatever clients send: a path that is
no endpoint is "other" (services/rom.py), an X-Caller the spec does not name is "other"
(services/callgraph.py), and probes (/health, /metrics, /latency) are not traffic. 1,000
made-up paths and callers against real services on loopback, the series counted from
/metrics before and after."""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.lib.services import start_service

JUNK = 1000


def get(port: int, path: str, headers: dict | None = None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def series(port: int, prefix: str) -> dict[tuple, float]:
    """{(sample name, labels...): value} of the service's own families."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, *sorted(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) if f.name.startswith(prefix)
            for s in f.samples}


def counted(port: int, prefix: str, sample: str, label: str, want: dict[str, float]
            ) -> dict[tuple, float]:
    """The series once the requests sent so far are counted: a service counts a request
    after its answer has gone, so a read right after the last answer may come first."""
    deadline = time.monotonic() + 10
    while True:
        found = series(port, prefix)
        got = {dict(k[1:])[label]: v for k, v in found.items() if k[0] == sample}
        if all(got.get(key) == n for key, n in want.items()) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def labels(found: dict, sample: str, label: str) -> set[str]:
    return {dict(key[1:])[label] for key in found if key[0] == sample}


def test_made_up_paths_add_no_series_to_a_rom_service():
    proc, port = start_service(["services.rom", "ui"])
    try:
        assert get(port, "/object?size=1000") == 200 and get(port, "/nowhere") == 404
        before = counted(port, "rom_", "rom_requests_total", "endpoint",
                         {"/object": 1, "other": 1})
        for k in range(JUNK):
            assert get(port, f"/junk/{k}?x={k}") == 404
        for probe in ("/health", "/metrics", "/latency"):
            get(port, probe)
        after = counted(port, "rom_", "rom_requests_total", "endpoint",
                        {"/object": 1, "other": JUNK + 1})
        assert set(after) == set(before), set(after) ^ set(before)
        assert labels(after, "rom_requests_total", "endpoint") == {"/object", "other"}
        counts = {dict(k[1:])["endpoint"]: v for k, v in after.items()
                  if k[0] == "rom_requests_total"}
        assert counts == {"/object": 1, "other": JUNK + 1}     # no probe counted
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_made_up_callers_add_no_series_to_a_call_graph_service():
    spec = json.dumps({"service": "back", "cpu_ms": 0, "response_bytes": 10,
                       "callers": ["front"], "calls": []})
    proc, port = start_service(["services.callgraph", "--spec", spec])
    try:
        assert get(port, "/work") == 200
        assert get(port, "/work", {"X-Caller": "front"}) == 200
        assert get(port, "/work", {"X-Caller": "stranger"}) == 200
        before = counted(port, "callgraph_", "callgraph_requests_total", "caller",
                         {"client": 1, "front": 1, "other": 1})
        for k in range(JUNK):
            assert get(port, f"/work/{k}", {"X-Caller": f"junk-{k}"}) == 200
        for probe in ("/health", "/metrics", "/latency"):
            get(port, probe)
        after = counted(port, "callgraph_", "callgraph_requests_total", "caller",
                        {"other": JUNK + 1})
        assert set(after) == set(before), set(after) ^ set(before)
        assert labels(after, "callgraph_requests_total", "caller") == {"client", "front",
                                                                       "other"}
        other = [v for k, v in after.items() if k[0] == "callgraph_requests_total"
                 and dict(k[1:])["caller"] == "other"]
        assert other == [JUNK + 1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_spec_whose_callers_are_not_names_is_refused():
    from services.callgraph import SpecError, load_spec
    for bad in ('"front"', '[1]', '{"a": 1}'):
        try:
            load_spec(f'{{"service": "back", "callers": {bad}}}')
        except SpecError as exc:
            assert re.fullmatch(r"spec\.callers: expected a list of service names", str(exc))
        else:
            raise AssertionError(f"callers {bad} was taken")
