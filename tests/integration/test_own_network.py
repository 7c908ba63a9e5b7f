"""The controller on a network our testbed did not build: plain Mininet hosts at addresses of
this test's choosing, two switches whose link the configuration does not mention, one
instance declared with its switch and port, one with its switch only, one with neither.
Real ryu-manager, real Open vSwitch, real TCP through the VIP."""
from __future__ import annotations

import subprocess
import time
from collections import Counter

import pytest
import yaml

from common.httpjson import get_json
from common.procs import controller_service
from topologies.backend import remote_controller_class, resolve_datapath
from topologies.clean import clean_testbed
from topologies.params import disable_tx_offload

pytestmark = pytest.mark.integration

VIP = "192.168.50.100"
S1, S2 = 0x10, 0x20
REST_PORT = 8080
# name -> (address, MAC, switch, port); the link is s1 port 5 - s2 port 1
HOSTS = {"c1": ("192.168.50.1", "00:00:00:00:00:01", "ow1", 1),
         "h1": ("192.168.50.11", "00:00:00:00:01:01", "ow1", 3),
         "h2": ("192.168.50.12", "00:00:00:00:01:02", "ow2", 2),
         "h3": ("192.168.50.13", "00:00:00:00:01:03", "ow2", 3)}


def config() -> dict:
    ip, mac = {h: v[0] for h, v in HOSTS.items()}, {h: v[1] for h, v in HOSTS.items()}
    return {
        "servers": [{"name": "h1"}, {"name": "h2"}, {"name": "h3"}],
        "microservices": [{"name": "web", "port": 80, "vip": VIP, "flow_class": "short"}],
        "controller": {"monitoring_period_s": 1, "idle_timeout_s": 5,
                       "health": {"method": "tcp", "interval_s": 1, "timeout_s": 0.5}},
        "network": {
            "switches": [{"name": "ow1", "dpid": S1}, {"name": "ow2", "dpid": f"{S2:016x}"}],
            "instances": [
                {"microservice": "web", "server": "h1", "ip": ip["h1"], "mac": mac["h1"],
                 "switch": "ow1", "port": 3},
                {"microservice": "web", "server": "h2", "ip": ip["h2"], "mac": mac["h2"]},
                {"microservice": "web", "server": "h3", "ip": ip["h3"], "mac": mac["h3"],
                 "switch": "ow2"},
            ]}}


def status() -> dict:
    return get_json(f"http://127.0.0.1:{REST_PORT}/malb/status", timeout=5)


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.time() + timeout_s
    last = None
    while time.time() < deadline:
        try:
            last = status()
            if predicate(last):
                return last
        except Exception as exc:      # noqa: BLE001 -- the controller still starting
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout_s} s; last status: {last}")


@pytest.fixture(scope="module")
def own_network(tmp_path_factory):
    from mininet.net import Mininet           # deferred: integration machines only
    from mininet.node import OVSSwitch

    clean_testbed(quiet=True)
    run = tmp_path_factory.mktemp("own-network")
    path = run / "own.yaml"
    path.write_text(yaml.safe_dump(config(), sort_keys=False))
    controller = controller_service(str(path), "srr", str(run / "controller.log"),
                                    REST_PORT).start()
    net = Mininet(controller=None, autoSetMacs=False, build=False)
    servers = {}
    try:
        net.addController("c0", controller=remote_controller_class(), ip="127.0.0.1",
                          port=6653)
        datapath = resolve_datapath("auto")
        for name, dpid in (("ow1", S1), ("ow2", S2)):
            net.addSwitch(name, cls=OVSSwitch, dpid=f"{dpid:016x}", protocols="OpenFlow13",
                          datapath=datapath, failMode="secure")
        for name, (ip, mac, switch, port) in HOSTS.items():
            host = net.addHost(name, ip=f"{ip}/24", mac=mac)
            net.addLink(host, net[switch], port2=port)
        net.addLink(net["ow1"], net["ow2"], port1=5, port2=1)
        net.build()
        net.start()
        for name in ("ow1", "ow2"):      # marked ours: topologies.clean removes it if left
            subprocess.run(["ovs-vsctl", "set", "bridge", name, "external-ids:malb=1"],
                           check=True, capture_output=True)
        if datapath == "user":
            for host in net.hosts:
                disable_tx_offload(host.pid, host.defaultIntf().name)
        for name in ("h1", "h2", "h3"):
            host = net[name]
            root = run / name
            root.mkdir()
            (root / "index.html").write_text(name)
            (root / "big").write_bytes(b"x" * 1_000_000)
            servers[name] = host.cmd(f"python3 -m http.server 80 --bind {HOSTS[name][0]} "
                                     f"--directory {root} > {run}/{name}.log 2>&1 & echo $!"
                                     ).split()[-1]     # after bash's "[1] <pid>" line
        yield net, run
    finally:
        for name, pid in servers.items():
            net[name].cmd(f"kill {pid}")
        net.stop()
        for c in net.controllers:    # Mininet stops a RemoteController without ending its shell
            c.terminate()
        controller.stop()
        clean_testbed(quiet=True)


def test_the_controller_finds_the_link_and_the_instances_and_balances_through_the_vip(
        own_network):
    net, run = own_network
    st = wait_for(lambda s: len(s["switches"]) == 2 and len(s["links"]) == 1 and
                  not s["instances_unlocated"] and
                  all(i["healthy"] for srv in s["servers"].values()
                      for i in srv["instances"].values()), 30,
                  "both switches, their link and every instance found and healthy")
    assert st["links"] == [{"a": f"{S1:016x}", "a_port": 5, "b": f"{S2:016x}", "b_port": 1}]
    assert st["instance_locations"] == {
        "h1-web": {"switch": f"{S1:016x}", "port": 3, "how": "configured"},
        "h2-web": {"switch": f"{S2:016x}", "port": 2, "how": "learned"},
        "h3-web": {"switch": f"{S2:016x}", "port": 3, "how": "learned"}}
    client = net["c1"]
    out = client.cmd(f"for i in 1 2 3 4 5 6; do curl -s --max-time 10 http://{VIP}/; "
                     f"echo; done")
    served = Counter(line.strip() for line in out.splitlines() if line.strip())
    # round robin over the three, two of them behind the link nobody configured
    assert served == {"h1": 2, "h2": 2, "h3": 2}, out
    # larger answers, from each of them: the flows' rules carry them both ways
    for _ in range(3):
        got = client.cmd(f"curl -s --max-time 20 -o /dev/null -w '%{{http_code}} "
                         f"%{{size_download}}' http://{VIP}/big").strip()
        assert got == "200 1000000", got
