"""benchmarks/naive_ct.py, the per-flow peer that keeps each connection's translation in Open
vSwitch's connection tracker, with real parts: ryu-manager, a userspace Open vSwitch bridge,
a client and the four ui instances in network namespaces at the paper configuration's addresses,
and real TCP through the VIP."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from common.config import load_config
from common.procs import ROOT, controller_argv
from tests.lib.services import free_port

pytestmark = pytest.mark.integration
PAPER = os.path.join(ROOT, "configs", "paper.yaml")
BRIDGE = "malbct0"
# answers each request with the instance's name and closes: a connection per request
SERVER = ("import http.server, sys\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        body = sys.argv[2].encode()\n"
          "        self.send_response(200); self.send_header('Content-Length', len(body))\n"
          "        self.end_headers(); self.wfile.write(body)\n"
          "    def log_message(self, *a): pass\n"
          "http.server.HTTPServer(('', int(sys.argv[1])), H).serve_forever()\n")
CLIENT = ("import sys, urllib.request\n"
          "for _ in range(int(sys.argv[2])):\n"
          "    try:\n"
          "        print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n"
          "    except OSError as exc:\n"
          "        print('FAIL', exc)\n")


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30).stdout


def host(ns: str, ip: str, mac: str, ofport: int) -> None:
    """A namespace on the bridge at port `ofport`, with the address and MAC given."""
    near = f"{ns}-a"
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", near, "type", "veth", "peer", "name", "eth0", "netns", ns)
    sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "address", mac)
    sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/16", "dev", "eth0")
    for cmd in (("ip", "link", "set", "eth0", "up"), ("ip", "link", "set", "lo", "up"),
                ("ethtool", "-K", "eth0", "tx", "off")):
        sh("ip", "netns", "exec", ns, *cmd)
    sh("ip", "link", "set", near, "up")
    sh("ethtool", "-K", near, "tx", "off")
    sh("ovs-vsctl", "add-port", BRIDGE, near, "--", "set", "interface", near,
       f"ofport_request={ofport}")


def rule_count() -> int:
    return len(sh("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", BRIDGE).splitlines()) - 1


@pytest.fixture
def bench_net(tmp_path):
    cfg = load_config(PAPER)
    client, uis = cfg.testbed.clients[0], cfg.instances_of("ui")
    spaces = ["malbct-cli"] + [f"malbct-ui{k}" for k in range(len(uis))]
    procs = []
    port = free_port()
    try:
        sh("ovs-vsctl", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev",
           "fail_mode=secure", "protocols=OpenFlow13", "external-ids:malb=1")
        host(spaces[0], client.ip, client.mac, client.switch_port)
        for ns, inst in zip(spaces[1:], uis):
            host(ns, inst.ip, inst.mac, inst.switch_port)
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c",
                                           SERVER, str(cfg.microservice("ui").port),
                                           inst.name]))
        log = open(tmp_path / "ryu.log", "w")
        procs.append(subprocess.Popen(
            controller_argv(apps=["--ofp-tcp-listen-port", str(port),
                                  os.path.join(ROOT, "benchmarks", "naive_ct.py")]),
            stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "MALB_CONFIG": PAPER, "PYTHONPATH": ROOT}))
        sh("ovs-vsctl", "set-controller", BRIDGE, f"tcp:127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        while "CONTROLLER" not in sh("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", BRIDGE):
            assert time.monotonic() < deadline, (tmp_path / "ryu.log").read_text()
            time.sleep(0.2)
        yield cfg, spaces[0], uis, tmp_path / "ryu.log"
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE], capture_output=True)
        for ns in spaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            subprocess.run(["ip", "link", "del", f"{ns}-a"], capture_output=True)


def test_connections_go_round_robin_through_the_tracker_and_add_no_rule(bench_net):
    cfg, client, uis, log = bench_net
    url = f"http://{cfg.microservice('ui').vip}:{cfg.microservice('ui').port}/"
    names = [i.name for i in uis]
    # one round over the instances: the client port's answer rule goes in, and the L2 rules
    # of the client's answers to each instance's own ARP
    first = sh("ip", "netns", "exec", client, sys.executable, "-c", CLIENT, url,
               str(len(names))).split()
    assert sorted(first) == sorted(names), (first, log.read_text())
    rules = rule_count()
    who = sh("ip", "netns", "exec", client, sys.executable, "-c", CLIENT, url, "20").split()
    assert who == [first[k % len(names)] for k in range(20)], who
    assert rule_count() == rules
    tracked = sh("ovs-appctl", "dpctl/dump-conntrack", "zone=7")
    for inst in uis:
        assert f"reply=(src={inst.ip},dst={cfg.testbed.clients[0].ip}," in tracked, tracked
