"""The MALB controller on a network the project did not build: Mininet's own LinearTopo (two
switches, two plain hosts on each, Mininet's addresses), three hosts running the project's
ui service, the fourth a client. The configuration's `network:` section names the switches
and the instances' addresses; the controller finds the link between the switches and where
each instance is (docs/configuration.md, "Your own network").

    sudo .venv/bin/python examples/controller_on_mininet.py
"""
import os
import sys
import tempfile
import time
from collections import Counter
from functools import partial

import yaml
from mininet.net import Mininet
from mininet.node import OVSSwitch
from mininet.topo import LinearTopo

from common.httpjson import get_json
from common.procs import ROOT, controller_service
from topologies.backend import remote_controller_class, resolve_datapath
from topologies.params import disable_tx_offload

VIP, PORT = "10.0.0.100", 8002


def main() -> int:
    run = tempfile.mkdtemp(prefix="malb-example-")
    datapath = resolve_datapath("auto")
    switch = partial(OVSSwitch, datapath=datapath, protocols="OpenFlow13", failMode="secure")
    net = Mininet(topo=LinearTopo(k=2, n=2), switch=switch, controller=None, autoSetMacs=True)
    # a socket check of the port (Mininet's telnet check can choke on the binary HELLO)
    net.addController("c0", controller=remote_controller_class(), ip="127.0.0.1", port=6653)
    client, *servers = net.hosts               # h1s1 is the client
    # the configuration: Mininet chose the addresses; we only say which host serves what
    config = {
        "servers": [{"name": h.name} for h in servers],
        "microservices": [{"name": "ui", "port": PORT, "vip": VIP, "flow_class": "short"}],
        "controller": {"monitoring_period_s": 1, "health": {"interval_s": 1, "timeout_s": 0.5}},
        "network": {"switches": [{"name": s.name, "dpid": int(s.dpid, 16)} for s in net.switches],
                    "instances": [{"microservice": "ui", "server": h.name, "ip": h.IP(),
                                   "mac": h.MAC()} for h in servers]}}
    path = os.path.join(run, "config.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(config, fh)
    controller = controller_service(path, "srr", os.path.join(run, "controller.log")).start()
    pids = {}
    try:
        net.start()
        if datapath == "user":      # the userspace datapath needs TX offload off (docs/testbed.md)
            for h in net.hosts:
                disable_tx_offload(h.pid, h.defaultIntf().name)
        for h in servers:
            # the service itself in the background (not a subshell around it), so that $!
            # is the pid the cleanup below stops; the last word of the answer: Mininet's
            # shells have job control, and bash says "[1] <pid>" first
            h.cmd(f"cd {ROOT}")
            pids[h] = h.cmd(f"MALB_INSTANCE={h.name} {sys.executable} -m services.rom ui "
                            f"--port {PORT} > {run}/{h.name}.log 2>&1 & echo $!").split()[-1]
        deadline = time.time() + 30
        while time.time() < deadline:
            st = get_json("http://127.0.0.1:8080/malb/status", timeout=5)
            if st["links"] and not st["instances_unlocated"] and all(
                    i["healthy"] for s in st["servers"].values() for i in s["instances"].values()):
                break
            time.sleep(0.5)
        print("links:", st["links"])
        print("instances:", {n: v and f"{v['switch']} port {v['port']} ({v['how']})"
                             for n, v in st["instance_locations"].items()})
        out = client.cmd(f"for i in $(seq 6); do curl -s -D - -o /dev/null --max-time 10 "
                         f"http://{VIP}:{PORT}/bytes?n=1000 | grep -i x-served-by; done")
        served = Counter(line.split(":", 1)[1].strip() for line in out.splitlines()
                         if ":" in line)
        print("served by:", dict(served))
        return 0 if sorted(served.values()) == [2, 2, 2] else 1
    finally:
        for h, pid in pids.items():
            # stopped, and waited for (up to 5 s), then killed: a service answering its last
            # requests must not outlive the example that started it
            if not pid.isdigit():
                print(f"{h.name}: the service's pid was not read ({pid!r}); not stopped",
                      file=sys.stderr)
                continue
            left = h.cmd(f"kill {pid}; for i in $(seq 50); do kill -0 {pid} 2>/dev/null || "
                         f"break; sleep 0.1; done; kill -0 {pid} 2>/dev/null && "
                         f"kill -9 {pid} && echo KILLED")
            if "KILLED" in left:
                print(f"{h.name}: the service outlived SIGTERM by 5 s; killed", file=sys.stderr)
        net.stop()
        controller.stop()


if __name__ == "__main__":
    sys.exit(main())
