"""The testbed on this machine's backend: real OVS, real containers, real TCP."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from common.config import load_config
from tests.conftest import PY, ROOT
from topologies import backend as backends
from common.cgroups import detect_layout, read_server_cpu_seconds, read_server_limits
from topologies.check import check_reach, check_testbed
from topologies.clean import leftovers
from topologies.dockerhost import docker_client
from topologies.testbed import Testbed, TestbedOptions

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("clean_machine")]


def _nothing_left():
    left = leftovers()
    assert left == {"containers": [], "bridges": [], "interfaces": [], "namespaces": []}, left



def test_paper_testbed_reach_every_container_then_leave_nothing():
    cfg = load_config(overrides={"testbed": {"controller": "none"}})
    tb = Testbed(cfg, TestbedOptions(backend="auto"))
    with tb:
        assert tb.backend == backends.resolve_backend("auto")
        assert not tb.wait_services()
        results = check_testbed(tb)
        assert len(results) == 12
        bad = [r for r in results if not r.ok]
        assert not bad, bad
        # every container is found as the project's and says what it runs, on both
        # backends (Containernet keeps only its own and the image's labels)
        containers = docker_client().containers.list(filters={"name": "mn."})
        by_name = {c.name: c for c in containers}
        assert set(by_name) == {i.container for i in cfg.instances}
        c = by_name["mn.srv3-be"]
        assert {"MALB_SERVER=srv3", "MALB_MICROSERVICE=backend",
                "MALB_INSTANCE=srv3-be"} <= set(c.attrs["Config"]["Env"])
        if tb.backend == "mininet":
            assert c.labels["malb.server"] == "srv3"
        assert c.attrs["HostConfig"]["NetworkMode"] == "none"
        assert sorted(tb.node("srv3-be").cmd("ls /sys/class/net").split()) == \
            ["lo", "srv3-be-eth0"]
    _nothing_left()


@pytest.mark.skipif(backends.resolve_backend("auto") != "mininet",
                    reason="server groups use cgroup_parent, which only our Docker node offers")
def test_containers_of_a_server_share_its_cpu_share_and_memory_limit():
    cfg = load_config(overrides={"testbed": {"controller": "none", "clients": 1},
                                 "servers": {"count": 1, "cpu": 0.3, "memory": "200m"}})
    with Testbed(cfg, TestbedOptions(start_services=False)) as tb:
        layout = detect_layout(docker_client().info())
        cores, mem = read_server_limits(layout, "srv1")
        assert cores == pytest.approx(0.3) and mem == 200 * 1024 * 1024
        names = [i.name for i in cfg.instances_on("srv1")]
        for name in names:
            host_config = docker_client().containers.get("mn." + name).attrs["HostConfig"]
            parent = host_config["CgroupParent"]
            assert parent.endswith("malb/srv1")
            tb.node(name).cmd("python3 -c 'while True: pass' > /dev/null 2>&1 &")
        time.sleep(1.0)
        u0, t0 = read_server_cpu_seconds(layout, "srv1"), time.monotonic()
        time.sleep(3.0)
        u1, t1 = read_server_cpu_seconds(layout, "srv1"), time.monotonic()
        used_cores = (u1 - u0) / (t1 - t0)
        # three busy loops, one 0.3-core share: the group gets 0.3 cores, not 3 x 0.3
        assert 0.24 <= used_cores <= 0.34, used_cores
    _nothing_left()


def test_multiswitch_chain_respects_trunk_bandwidth():
    cfg = load_config(overrides={"testbed": {"controller": "none", "switches": 2, "clients": 1,
                                             "trunk_bw_mbit": 20},
                                 "servers": {"count": 2}})
    with Testbed(cfg) as tb:
        assert not tb.wait_services()
        client = tb.node("cli1")
        near = next(i for i in cfg.instances if i.switch == "s1")
        far = next(i for i in cfg.instances if i.switch == "s2")
        port = cfg.microservice(far.microservice).port
        r_far = check_reach(client, far.ip, port, far.name, nbytes=5_000_000)
        r_near = check_reach(client, near.ip, cfg.microservice(near.microservice).port,
                             near.name, nbytes=5_000_000)
        assert r_far.ok and r_near.ok, (r_far, r_near)
        assert 8 <= r_far.tcp_mbit_s <= 22, r_far      # limited by the 20 Mbit/s trunk
        assert r_near.tcp_mbit_s > 2 * r_far.tcp_mbit_s  # same switch: not limited
    _nothing_left()


def test_docker_node_offers_containernets_resource_api():
    cfg = load_config(overrides={"testbed": {"controller": "none", "clients": 1},
                                 "servers": {"count": 1}})
    with Testbed(cfg, TestbedOptions(start_services=False)) as tb:
        node = tb.node("srv1-vid")
        node.updateCpuLimit(cpu_quota=20000, cpu_period=100000)
        node.updateMemoryLimit(mem_limit=64 * 1024 * 1024)
        hc = docker_client().containers.get("mn.srv1-vid").attrs["HostConfig"]
        assert (hc["CpuQuota"], hc["CpuPeriod"], hc["Memory"]) == (20000, 100000, 64 << 20)
        # commands run inside the container: its hostname and only the topology's interface
        assert node.cmd("hostname").strip() == "srv1-vid"
        intfs = node.cmd("ls /sys/class/net").split()
        assert sorted(intfs) == ["lo", "srv1-vid-eth0"]


def test_a_container_removed_behind_the_testbeds_back_does_not_hang_it():
    cfg = load_config(overrides={"testbed": {"controller": "none", "clients": 1},
                                 "servers": {"count": 1}})
    tb = Testbed(cfg, TestbedOptions(start_services=False)).start()
    try:
        docker_client().containers.get("mn.srv1-vid").remove(force=True)
        started = time.monotonic()
        out = tb.node("srv1-vid").cmd("echo alive")   # its pty echoes what was written
        assert time.monotonic() - started < 10 and out.strip() != "alive", out
        assert tb.node("srv1-ui").cmd("echo alive").strip() == "alive"
    finally:
        started = time.monotonic()
        tb.stop()
        assert time.monotonic() - started < 60
    _nothing_left()


def test_clean_testbed_removes_what_a_killed_run_left():
    proc = subprocess.Popen([PY, "-m", "topologies", "up", "--controller", "none",
                             "--servers", "2", "--clients", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 90
        for line in proc.stdout:
            if "running; Ctrl-C" in line or time.time() > deadline:
                break
        left = leftovers()
        assert len(left["containers"]) == 6 and left["bridges"] == ["s1"], left
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert leftovers()["containers"]  # SIGKILL: no chance to tidy up
    res = subprocess.run(["make", "clean-testbed"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    _nothing_left()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_up_tears_down_on_ctrl_c_and_sigterm(sig):
    proc = subprocess.Popen([PY, "-m", "topologies", "up", "--controller", "none",
                             "--servers", "1", "--clients", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if "running; Ctrl-C" in line:
            break
    proc.send_signal(sig)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0 and "torn down" in out, out
    _nothing_left()


@pytest.mark.containernet
def test_same_topology_on_real_containernet():
    cfg = load_config(overrides={"testbed": {"controller": "none", "clients": 1},
                                 "servers": {"count": 2}})
    # a container of a killed earlier run has the name: ours, so it is replaced (no 409)
    docker_client().containers.run("malb/service:latest", ["sleep", "600"], detach=True,
                                   name="mn.srv1-vid", network_mode="none",
                                   environment={"MALB_INSTANCE": "srv1-vid"})
    with Testbed(cfg, TestbedOptions(backend="containernet")) as tb:
        assert tb.backend == "containernet"
        assert not tb.wait_services()
        assert all(r.ok for r in check_testbed(tb))
        node = tb.node("srv1-vid")
        # only the topology's link, no Docker network, no published ports
        hc = docker_client().containers.get("mn.srv1-vid").attrs["HostConfig"]
        assert hc["NetworkMode"] == "none" and not hc.get("PublishAllPorts")
        # command output without line-editing escapes
        assert node.cmd("echo plain").strip() == "plain"
        # limits through Docker, -1 leaves a value unchanged
        node.updateCpuLimit(cpu_quota=20000, cpu_period=100000)
        node.updateCpuLimit(cpu_period=100000)
        hc = docker_client().containers.get("mn.srv1-vid").attrs["HostConfig"]
        assert (hc["CpuQuota"], hc["CpuPeriod"]) == (20000, 100000)


def _our_shells(name: str) -> list[int]:
    """This process's children that are Mininet shells of node `name`."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and f"mininet:{name} " in cmd + " ":
            out.append(int(pid))
    return out


def test_the_controllers_shell_goes_with_its_testbed():
    """Mininet stops a RemoteController by doing nothing: without Testbed.stop ending its
    shell, every testbed left one bash behind in the process that built it."""
    cfg = load_config(overrides={"testbed": {"controller": "127.0.0.1:6653", "clients": 1},
                                 "servers": {"count": 1}})
    before = set(_our_shells("c0"))    # a user's own Mininet network may have left one
    with Testbed(cfg, TestbedOptions(start_services=False)) as tb:
        assert tb.net.controllers and set(_our_shells("c0")) - before, "a controller node"
    assert set(_our_shells("c0")) - before == set()
    _nothing_left()
