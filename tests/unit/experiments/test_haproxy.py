"""The outside balancer's pure parts (experiments/haproxy.py): haproxy.cfg rendering, the
agent-check weight rule, the responder against a fake host agent, CPU arithmetic."""
from __future__ import annotations

import copy
import json
import os

from common.state import process_cpu_seconds
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from common.config import DEFAULT_MICROSERVICES, parse_config
from experiments import haproxy
from experiments.haproxy import agent_answer, agent_weight, capacity_weights, cores_over, \
    host_cpu_percent, parse_stat_csv, render_config
from tests.conftest import PY, ROOT


def cfg_with(proxy=True, microservices=None, health=None, **extra):
    data = {"testbed": {"proxy": proxy},
            "microservices": microservices or copy.deepcopy(DEFAULT_MICROSERVICES), **extra}
    if health:
        data["controller"] = {"health": health}
    return parse_config(data)


def sections(text: str) -> dict[str, list[str]]:
    """{"frontend ui": [its lines], ...}"""
    out, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            current = line.strip()
            out[current] = []
        elif line.strip() and current:
            out[current].append(line.strip())
    return out


@pytest.mark.parametrize("mode, balance", [("roundrobin", "roundrobin"),
                                           ("leastconn", "leastconn"), ("agent", "leastconn")])
def test_one_tcp_frontend_per_microservice_and_a_backend_of_its_instances(mode, balance):
    cfg = cfg_with()
    s = sections(render_config(cfg, mode))
    assert "mode tcp" in s["defaults"]
    for m in cfg.microservices:
        assert s[f"frontend {m.name}"] == [f"bind 10.0.201.1:{m.port}",
                                           f"default_backend {m.name}"]
        backend = s[f"backend {m.name}"]
        assert backend[0] == f"balance {balance}"
        servers = [x.split()[1:3] for x in backend[1:]]
        assert servers == [[i.name, f"{i.ip}:{m.port}"] for i in cfg.instances_of(m.name)]
        agent = [x for x in backend[1:] if "agent-check" in x]
        if mode == "agent":
            assert agent == [f"server {i.name} {i.ip}:{m.port} agent-check agent-addr "
                             f"127.0.0.1 agent-port {haproxy.AGENT_PORT} agent-send "
                             f"\"{i.server}\\n\" agent-inter 1000ms"
                             for i in cfg.instances_of(m.name)]
        else:
            assert not agent


def test_health_checks_follow_the_controllers_and_timeouts_outlast_long_jobs():
    s = sections(render_config(cfg_with(), "leastconn"))
    # the controller's defaults: tcp, every 2 s, 1 s timeout, down after 2, up after 1
    assert "default-server weight 100 check inter 2000ms fall 2 rise 1" in s["defaults"]
    assert "timeout check 1000ms" in s["defaults"]
    timeouts = {x.split()[1]: x.split()[2] for x in s["defaults"] if x.startswith("timeout")}
    assert int(timeouts["client"].rstrip("s")) >= 300 <= int(timeouts["server"].rstrip("s"))
    assert "maxconn 4096" in s["global"] and "maxconn 4096" in s["defaults"]
    # no line per connection: CPU the OpenFlow path does not spend
    assert "option dontlog-normal" in s["defaults"]
    none = sections(render_config(cfg_with(health={"method": "none"}), "leastconn"))
    assert "default-server weight 100" in none["defaults"]
    assert not any("check" in x for x in none["defaults"])
    fast = sections(render_config(cfg_with(health={"interval_s": 0.5, "timeout_s": 0.2,
                                                   "unhealthy_after": 3}), "agent"))
    assert "default-server weight 100 check inter 500ms fall 3 rise 1" in fast["defaults"]


def test_backends_hold_only_the_placed_instances():
    ms = copy.deepcopy(DEFAULT_MICROSERVICES)
    ms[2]["replicas"] = 2
    cfg = cfg_with(microservices=ms)
    backend = sections(render_config(cfg, "roundrobin"))["backend backend"]
    assert [x.split()[1] for x in backend[1:]] == [i.name for i in cfg.instances_of("backend")]
    assert len(backend) == 3


@pytest.mark.parametrize("kwargs, message", [
    ({"proxy": False}, "testbed.proxy: the outside balancer needs the proxy host"),
    ({"microservices": [{"name": "dns", "port": 53, "protocol": "udp"}]},
     "microservices[0].protocol: HAProxy balances TCP only, dns is udp"),
])
def test_what_haproxy_cannot_balance_is_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValueError) as exc:
        render_config(cfg_with(**kwargs), "leastconn")
    assert str(exc.value).startswith(message)
    with pytest.raises(ValueError, match="^mode: one of roundrobin, leastconn, agent"):
        render_config(cfg_with(), "random")


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy not installed (make setup)")
@pytest.mark.parametrize("mode", haproxy.MODES)
def test_haproxy_itself_accepts_every_rendered_mode(tmp_path, mode):
    path = tmp_path / "h.cfg"
    path.write_text(render_config(cfg_with(), mode, stats_socket=str(tmp_path / "s.sock")))
    res = subprocess.run(["haproxy", "-c", "-f", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "WARNING" not in res.stdout + res.stderr


def test_the_render_command_prints_the_configuration_or_one_line_and_exit_2():
    res = subprocess.run([PY, "-m", "experiments.haproxy", "render", "--mode", "agent",
                          "--proxy"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0 and "frontend ui" in res.stdout and "agent-check" in res.stdout
    res = subprocess.run([PY, "-m", "experiments.haproxy", "render"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: configuration: testbed.proxy:")


# ---------------------------------------------------------------- the agent-check rule
@pytest.mark.parametrize("cpu, weight", [
    (0.0, 100), (25.0, 75), (37.4, 63), (37.6, 62), (99.0, 1), (99.6, 1), (100.0, 1),
    (130.0, 1),        # a share measured a little above its quota: still 1, never 0
    (-0.5, 100), (None, None), (float("nan"), None)])
def test_a_servers_weight_is_its_idle_cpu_share_and_never_zero(cpu, weight):
    assert agent_weight(cpu) == weight


@pytest.mark.parametrize("totals, cpu", [
    ({"cpu_percent": 40.0, "outside_cpu_percent": 25.0}, 65.0),   # an antagonist beside
    ({"cpu_percent": 40.0, "outside_cpu_percent": None}, 40.0),   # the whole is not read
    ({"cpu_percent": 40.0}, 40.0), ({"cpu_percent": 0.0, "outside_cpu_percent": 0.0}, 0.0),
    ({"cpu_percent": None, "outside_cpu_percent": 25.0}, None),   # partial totals
    ({}, None), ({"cpu_percent": "40"}, None), ({"cpu_percent": float("inf")}, None),
    ({"cpu_percent": 40.0, "outside_cpu_percent": "x"}, None),
    ({"cpu_percent": 40.0, "outside_cpu_percent": -1.0}, None)])
def test_the_agent_is_fed_the_whole_servers_cpu(totals, cpu):
    assert host_cpu_percent(totals) == cpu


def test_the_agents_answer_is_a_percentage_line_or_nothing():
    assert agent_answer(63) == b"63%\n"
    assert agent_answer(1) == b"1%\n"
    assert agent_answer(None) == b""


# ---------------------------------------------------------------- CPU arithmetic
def test_cores_over_an_interval_interpolate_cumulative_readings():
    readings = [(100.0, 10.0), (101.0, 10.5), (103.0, 12.5)]
    assert cores_over(readings, 100.0, 101.0) == pytest.approx(0.5)
    assert cores_over(readings, 101.0, 103.0) == pytest.approx(1.0)
    assert cores_over(readings, 100.5, 102.0) == pytest.approx((11.5 - 10.25) / 1.5)
    assert cores_over(readings, 100.0, 103.0) == pytest.approx(2.5 / 3)
    # not covered, or no interval: unknown, not zero
    assert cores_over(readings, 99.0, 101.0) is None
    assert cores_over(readings, 102.0, 104.0) is None
    assert cores_over(readings, 101.0, 101.0) is None
    assert cores_over([], 1.0, 2.0) is None


def test_this_process_cpu_is_read_from_proc():
    before = process_cpu_seconds(os.getpid())
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert process_cpu_seconds(os.getpid()) - before >= 0.15
    assert process_cpu_seconds(2 ** 22 + 1) is None


def test_show_stat_csv_is_parsed_by_its_header():
    text = ("# pxname,svname,scur,stot,status,weight,\n"
            "ui,FRONTEND,0,12,OPEN,,\nui,srv1-ui,1,6,UP,63,\n\n")
    rows = parse_stat_csv(text)
    assert rows[1]["svname"] == "srv1-ui" and rows[1]["weight"] == "63"
    with pytest.raises(ValueError):
        parse_stat_csv("Unknown command\n")


def test_a_workload_spec_is_sent_to_the_proxy_instead_of_the_vips():
    cfg = cfg_with()
    spec = {"seed": 1, "classes": [
        {"name": "ui-light", "host": "10.0.0.100", "port": 8002, "weight": 1, "path": "/o"},
        {"name": "job", "host": "10.0.0.100", "port": 8003, "weight": 1, "path": "/j"}]}
    out = haproxy.retarget(spec, cfg)
    assert [(c["host"], c["port"]) for c in out["classes"]] == [("10.0.201.1", 8002),
                                                                ("10.0.201.1", 8003)]
    assert spec["classes"][0]["host"] == "10.0.0.100"       # the original is unchanged
    with pytest.raises(ValueError, match="classes: 'x' goes to 10.0.0.100:9999"):
        haproxy.retarget({"classes": [{"name": "x", "host": "10.0.0.100", "port": 9999}]},
                         cfg)


# ---------------------------------------------------------------- the responder
class FakeAgents:
    """Host agents' GET /stats on loopback, one port per server: answers[server] is
    (cpu_percent or None, age_s[, outside_cpu_percent]), or an HTTP status."""

    def __init__(self, servers):
        self.answers: dict[str, object] = {}
        self.http = {name: self._serve(name) for name in servers}

    def _serve(self, name):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                answer = fake.answers.get(name, 503)
                if isinstance(answer, int):
                    self.send_response(answer)
                    body = b'{"error": "no sample yet"}'
                else:
                    cpu, age, *outside = answer
                    self.send_response(200)
                    body = json.dumps({"server": name, "age_s": age,
                                       "totals": {"cpu_percent": cpu,
                                                  "outside_cpu_percent": outside[0]
                                                  if outside else None}}).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=http.serve_forever, daemon=True).start()
        return http

    def url(self, name):
        return f"http://127.0.0.1:{self.http[name].server_address[1]}"

    def close(self):
        for http in self.http.values():
            http.shutdown()
            http.server_close()


def ask(port: int, text: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(text)
        out = b""
        while chunk := s.recv(64):
            out += chunk
        return out


def test_the_responder_answers_each_servers_weight_from_its_agent():
    names = ("srv1", "srv2", "srv3", "srv4")
    agents = FakeAgents(names)
    try:
        cfg = parse_config({"testbed": {"proxy": True}, "servers": [
            {"name": n, "agent_url": agents.url(n)} for n in names]})
        agents.answers = {"srv1": (10.0, 0.2), "srv2": (None, 0.2), "srv3": (80.0, 9.0)}
        sock = socket.create_server(("127.0.0.1", 0))
        responder = haproxy.AgentResponder(cfg, sock).start()
        port = sock.getsockname()[1]
        try:
            assert ask(port, b"srv1\n") == b"90%\n"
            # partial totals, a stale sample (older than 3 agent periods), no sample: nothing
            assert ask(port, b"srv2\n") == b"" and ask(port, b"srv3\n") == b""
            assert ask(port, b"srv4\n") == b""
            assert ask(port, b"srv9\n") == b"" and ask(port, b"\xff\n") == b""
            report = responder.report()
            assert report["checks"] == {"answered": 1, "unknown": 3, "bad_request": 2}
            assert report["weights"] == {"srv1": 90, "srv2": None, "srv3": None,
                                         "srv4": None}
            assert "partial" in report["errors"]["srv2"]
            assert "old" in report["errors"]["srv3"] and "HttpError" in report["errors"]["srv4"]
            # the next poll (one agent period) follows the agent, and counts what runs
            # beside the containers (a practitioner's agent reports the whole host)
            agents.answers["srv1"] = (50.0, 0.1, 20.0)
            deadline = time.time() + 5
            while ask(port, b"srv1\n") != b"30%\n" and time.time() < deadline:
                time.sleep(0.1)
            assert ask(port, b"srv1\n") == b"30%\n"
            assert responder.report()["cpu_percent"]["srv1"] == 70.0
        finally:
            responder.stop()
        with pytest.raises(OSError):
            ask(port, b"srv1\n")
    finally:
        agents.close()


@pytest.mark.integration       # root: run with the integration tier
@pytest.mark.skipif(os.geteuid() != 0, reason="setns needs root")
def test_a_socket_made_in_another_namespace_is_served_from_this_one():
    # a process in a network namespace of its own (unshare), its loopback up
    proc = subprocess.Popen(["unshare", "--net", "sh", "-c", "ip link set lo up; sleep 30"])
    own = os.readlink("/proc/thread-self/ns/net")
    try:
        time.sleep(0.3)
        assert os.readlink(f"/proc/{proc.pid}/ns/net") != os.readlink("/proc/self/ns/net")
        sock = haproxy.listen_in_namespace(proc.pid, "127.0.0.1", 0)
        port = sock.getsockname()[1]
        with sock:
            # not reachable here ...
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            # ... but from inside the namespace, accepted here
            client = subprocess.Popen(["nsenter", f"--net=/proc/{proc.pid}/ns/net", PY, "-c",
                                       f"import socket; s = socket.create_connection(("
                                       f"'127.0.0.1', {port})); print(s.recv(16).decode())"],
                                      stdout=subprocess.PIPE, text=True)
            sock.settimeout(5)
            conn, _ = sock.accept()
            with conn:
                conn.sendall(b"75%\n")
            assert client.communicate(timeout=5)[0].strip() == "75%"
        # this thread's own namespace did not change
        assert os.readlink("/proc/thread-self/ns/net") == own
    finally:
        proc.kill()
        proc.wait()


def test_the_benchmarks_summary_means_each_path_and_sets_haproxy_against_the_servers():
    # deferred: Mininet and the Docker SDK, which benchmarks.haproxy's stack imports
    from benchmarks.haproxy import markdown, summary
    row = {"requests": 400, "controller_cpu_s": 0.1, "ovs_cpu_s": 3.0, "haproxy_cores": None,
           "haproxy_idle_cores": None}
    rows = [{**row, "path": "VIP (srr)", "ok": 400, "seconds": 9.0, "mb_per_s": 44.0,
             "haproxy_cpu_s": None, "servers_cpu_s": 2.0},
            {**row, "path": "HAProxy agent", "ok": 400, "seconds": 20.0, "mb_per_s": 20.0,
             "haproxy_cpu_s": 1.0, "servers_cpu_s": 4.0, "haproxy_cores": 0.05},
            {**row, "path": "HAProxy agent", "ok": 399, "seconds": 22.0, "mb_per_s": 18.0,
             "haproxy_cpu_s": 1.2, "servers_cpu_s": None, "haproxy_cores": 0.055}]
    vip, agent = summary(rows)
    assert (vip["ok"], vip["haproxy_cpu_s"], vip["haproxy_vs_servers"]) == ("400/400", None,
                                                                          None)
    # a figure a burst lacks is left out of its mean, not read as zero
    assert (agent["ok"], agent["seconds"], agent["haproxy_cpu_s"], agent["servers_cpu_s"]) \
        == ("799/800", 21.0, 1.1, 4.0)
    assert agent["haproxy_vs_servers"] == pytest.approx(1.1 / 4.0, abs=1e-3)
    table = markdown({"settings": {"objects": 200, "size": 10 ** 6, "parallel": 8,
                                   "rounds": 2}, "command": "c", "commit": "x",
                      "summary": [vip, agent]})
    assert "| VIP (srr) | 400/400 | 9.0 | 44.0 | - |" in table


def test_servers_of_unequal_shares_get_weights_in_proportion():
    cfg = parse_config({"testbed": {"proxy": True},
                        "servers": [{"name": f"srv{k}", "cpu": c}
                                    for k, c in enumerate((0.5, 0.4, 0.3, 0.2), 1)]})
    assert capacity_weights(cfg) == {"srv1": 100, "srv2": 80, "srv3": 60, "srv4": 40}
    text = render_config(cfg, "leastconn")
    assert "server srv4-ui 10.0.4.2:8002 weight 40" in text
    assert "server srv1-ui 10.0.1.2:8002\n" in text or "server srv1-ui 10.0.1.2:8002 " in text
