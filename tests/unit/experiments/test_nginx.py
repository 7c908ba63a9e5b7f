"""The nginx balancer's pure parts (experiments/nginx.py): nginx.conf rendering, the
sockets read from /proc/<pid>/net/tcp, the CPU of a process and its children."""
from __future__ import annotations

import copy
import ipaddress
import multiprocessing
import os
import re
import socket
import subprocess
import time

import pytest

from common.config import DEFAULT_MICROSERVICES, parse_config
from common.state import process_cpu_seconds, process_tree_cpu_seconds
from experiments.haproxy import capacity_weights
from experiments.nginx import connections_to, listening, render_config
from tests.conftest import PY, ROOT


def cfg_with(proxy=True, microservices=None, health=None, **extra):
    data = {"testbed": {"proxy": proxy},
            "microservices": microservices or copy.deepcopy(DEFAULT_MICROSERVICES), **extra}
    if health:
        data["controller"] = {"health": health}
    return parse_config(data)


def upstreams(text: str) -> dict[str, list[str]]:
    """{microservice: its upstream's lines}"""
    return {m.group(1): [x.strip() for x in m.group(2).strip().splitlines()]
            for m in re.finditer(r"upstream (\S+) \{\n(.*?)\n\s*\}", text, re.S)}


def test_one_least_conn_upstream_and_listener_per_microservice():
    cfg = cfg_with()
    text = render_config(cfg, "/run/x/nginx.pid")
    assert "load_module /usr/lib/nginx/modules/ngx_stream_module.so;" in text
    assert "daemon off;" in text and "pid /run/x/nginx.pid;" in text
    assert "worker_processes auto;" in text and "worker_connections 8192;" in text
    assert "proxy_timeout 600s;" in text and "proxy_connect_timeout 5s;" in text
    ups = upstreams(text)
    assert set(ups) == {m.name for m in cfg.microservices}
    for m in cfg.microservices:
        # one set of counts for every worker
        assert ups[m.name][:2] == [f"zone {m.name} 64k;", "least_conn;"]
        servers = [x.split()[1] for x in ups[m.name][2:]]
        assert servers == [f"{i.ip}:{m.port}" for i in cfg.instances_of(m.name)]
        assert f"server {{ listen 10.0.201.1:{m.port}; proxy_pass {m.name}; }}" in text
    # passive health from the controller's health settings: 2 failures, out for 2 intervals
    assert all("max_fails=2 fail_timeout=4s;" in x for u in ups.values() for x in u[2:])


def test_unequal_servers_get_haproxys_capacity_weights_and_no_health_means_no_max_fails():
    cfg = cfg_with(servers=[{"cpu": 1.0}, {"cpu": 0.5}, {"cpu": 0.25}, {"cpu": 0.25}],
                   health={"method": "none"})
    weights = capacity_weights(cfg)
    ups = upstreams(render_config(cfg, "/p"))
    for m in cfg.microservices:
        for inst, line in zip(cfg.instances_of(m.name), ups[m.name][2:], strict=True):
            assert line.startswith(f"server {inst.ip}:{m.port} weight={weights[inst.server]};")
            assert "max_fails" not in line
    assert sorted(set(weights.values())) == [25, 50, 100]


@pytest.mark.parametrize("data, message", [
    ({"proxy": False}, "testbed.proxy: the outside balancer needs the proxy host"),
    ({"microservices": [{"name": "dns", "port": 53, "protocol": "udp"}]},
     "microservices[0].protocol: the nginx balancer proxies TCP only, dns is udp")])
def test_what_the_nginx_balancer_cannot_run_is_named(data, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        render_config(cfg_with(**data), "/p")


def test_the_render_command_prints_the_file_or_one_line_and_exit_2():
    res = subprocess.run([PY, "-m", "experiments.nginx", "render", "--proxy"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0 and "upstream ui {" in res.stdout
    res = subprocess.run([PY, "-m", "experiments.nginx", "render"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: configuration: testbed.proxy:")


# ---------------------------------------------------------------- /proc/<pid>/net/tcp
def hexaddr(ip: str, port: int) -> str:
    return f"{int.from_bytes(ipaddress.IPv4Address(ip).packed, 'little'):08X}:{port:04X}"


def tcp_text(rows) -> str:
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
    return head + "".join(
        f"   {k}: {hexaddr(*local)} {hexaddr(*remote)} {state} 00000000:00000000 "
        f"00:00000000 00000000     0        0 {1000 + k} 1 0000000000000000 100 0 0 10 0\n"
        for k, (local, remote, state) in enumerate(rows))


def test_listening_sockets_and_connections_per_target_from_proc_net_tcp():
    text = tcp_text([
        (("10.0.201.1", 8001), ("0.0.0.0", 0), "0A"),
        (("10.0.201.1", 8002), ("0.0.0.0", 0), "0A"),
        (("10.0.201.1", 40000), ("10.0.1.2", 8002), "01"),
        (("10.0.201.1", 40001), ("10.0.1.2", 8002), "01"),
        (("10.0.201.1", 40002), ("10.0.2.2", 8002), "06"),      # TIME_WAIT: not open
        (("10.0.201.1", 8002), ("10.0.100.1", 50000), "01")])   # a client's, not a target
    assert listening(text) == {("10.0.201.1", 8001), ("10.0.201.1", 8002)}
    targets = {("10.0.1.2", 8002), ("10.0.2.2", 8002), ("10.0.3.2", 8002)}
    assert connections_to(text, targets) == {("10.0.1.2", 8002): 2, ("10.0.2.2", 8002): 0,
                                             ("10.0.3.2", 8002): 0}
    assert listening(tcp_text([])) == set()


def test_the_kernels_own_socket_table_reads_the_same():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            conn, _ = server.accept()
            with conn:
                text = open(f"/proc/{os.getpid()}/net/tcp").read()
                assert ("127.0.0.1", port) in listening(text)
                assert connections_to(text, {("127.0.0.1", port)}) == {("127.0.0.1", port): 1}


# ---------------------------------------------------------------- CPU of a process tree
def _busy_then_wait(spent, done) -> None:
    """Spend 0.2 s of CPU (its own clock: however busy the machine), say so, wait."""
    while time.process_time() < 0.2:
        pass
    spent.set()
    done.wait(60)


def test_a_process_trees_cpu_counts_its_running_children():
    before_tree = process_tree_cpu_seconds(os.getpid())
    ctx = multiprocessing.get_context("fork")
    spent, done = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_busy_then_wait, args=(spent, done))
    child.start()
    try:
        assert spent.wait(60), "the child did not spend its CPU within a minute"
        child_cpu = process_cpu_seconds(child.pid)
        own = process_cpu_seconds(os.getpid())
        tree = process_tree_cpu_seconds(os.getpid())
        assert child_cpu >= 0.2 - 0.01            # clock ticks of 10 ms
        # the tree holds the running child (read after: counters only grow)
        assert tree >= own + child_cpu and tree >= before_tree
    finally:
        done.set()
        child.join(60)
    # ended and reaped: counted in our cutime, so the total does not go back
    assert process_tree_cpu_seconds(os.getpid()) >= tree
    assert process_tree_cpu_seconds(2 ** 22 + 7) is None
