"""The MALB paper's testbed from your own script: the project's Mininet Topo of a
configuration (topologies/topo.py), the controller started beside it, requests from a
client through the VIPs.

    sudo .venv/bin/python examples/paper_testbed.py [configs/paper.yaml]

The same Topo is what `sudo mn --custom topologies/mn_topos.py --topo malb-paper` builds.
"""
import os
import sys
import tempfile
import time
from collections import Counter

from mininet.net import Mininet

from common.config import load_config
from common.httpjson import get_json
from common.procs import controller_service
from topologies.backend import remote_controller_class
from topologies.net import DockerMininet
from topologies.topo import TestbedTopo


def main(path: str = "configs/paper.yaml") -> int:
    cfg = load_config(path)
    run = tempfile.mkdtemp(prefix="malb-example-")
    controller = controller_service(cfg.source, "srr", os.path.join(run, "controller.log"),
                                    cfg.controller.rest_port).start()
    # self_start: each container starts its service, each host switches TX offload off
    topo = TestbedTopo(cfg, self_start=True)
    net_cls = DockerMininet if topo.backend == "mininet" else Mininet
    net = net_cls(topo=topo, controller=None, autoSetMacs=False)
    host, port = cfg.testbed.controller.rsplit(":", 1)
    # Mininet's RemoteController checks the port with telnet and decodes the answer as
    # UTF-8: the controller's binary OpenFlow HELLO can fail the start; this one checks
    # over a socket
    net.addController("c0", controller=remote_controller_class(), ip=host, port=int(port))
    try:
        net.start()
        status = f"http://127.0.0.1:{cfg.controller.rest_port}/malb/status"
        # every instance answered a health probe: its service listens
        deadline = time.time() + 30
        while time.time() < deadline and not all(
                i["healthy"] and "SYN-ACK" in (i["health"] or "")
                for s in get_json(status, timeout=5)["servers"].values()
                for i in s["instances"].values()):
            time.sleep(0.5)
        client = net[cfg.testbed.clients[0].name]
        ok = True
        for ms in cfg.microservices:
            out = client.cmd(f"for i in $(seq 8); do curl -s -D - -o /dev/null --max-time 20 "
                             f"'http://{ms.vip}:{ms.port}/bytes?n=1000' | "
                             f"grep -i x-served-by; done")
            served = Counter(line.split(":", 1)[1].strip() for line in out.splitlines()
                             if ":" in line)
            print(f"{ms.name} ({ms.vip}:{ms.port}) served by: {dict(sorted(served.items()))}")
            ok = ok and sum(served.values()) == 8
        return 0 if ok else 1
    finally:
        net.stop()
        controller.stop()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
