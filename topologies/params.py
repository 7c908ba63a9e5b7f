"""How the testbed's nodes and links are made, without importing Mininet (the Testbed and
the Mininet Topo in topologies/topo.py share it):

- service_command(): the shell line that starts an instance's service;
- server_docker_params(), docker_params(): an instance's container, with its server's
  share of CPU and memory;
- link_shaping(): a bandwidth-limited link's parameters;
- disable_tx_offload(): TX checksum offload off on a node's link (the userspace datapath).
"""
from __future__ import annotations

import json
import subprocess

from common.cgroups import CFS_PERIOD_US, apply_server_limits, detect_layout
from common.config import Config, Instance, callgraph_spec

SERVICE_DIR = "/opt/malb"


def service_command(cfg: Config, inst: Instance) -> str:
    """The shell line that starts an instance's service in its container, in the
    background, its output in /tmp/<microservice>.log."""
    ms = cfg.microservice(inst.microservice)
    cmd = ms.command.format(port=ms.port, name=ms.name, instance=inst.name)
    return f"cd {SERVICE_DIR} 2>/dev/null; nohup {cmd} > /tmp/{ms.name}.log 2>&1 &"


def server_docker_params(cfg: Config, backend: str) -> dict[str, dict]:
    """Per server: how its containers share the server's CPU share and memory."""
    params = {}
    if backend == "mininet":
        from topologies.dockerhost import docker_client   # deferred: the Docker SDK
        layout = detect_layout(docker_client().info())
        for srv in cfg.servers:
            parent = apply_server_limits(layout, srv.name, srv.cpu, srv.memory_mb)
            params[srv.name] = {"cgroup_parent": parent}
    else:
        # Containernet's Docker node has no cgroup_parent: split the server's share
        # evenly between its containers (documented in docs/testbed.md).
        for srv in cfg.servers:
            n = max(1, len(cfg.instances_on(srv.name)))
            params[srv.name] = {"cpu_period": CFS_PERIOD_US,
                                "cpu_quota": max(1000, int(srv.cpu * CFS_PERIOD_US / n)),
                                "mem_limit": f"{max(6, srv.memory_mb // n)}m"}
    return params


def docker_params(cfg: Config, inst: Instance, node_cls, server_params: dict) -> dict:
    """How the container of an instance is made: its image, address, environment
    (call-graph services find their spec in MALB_SPEC) and its server's limits."""
    ms = cfg.microservice(inst.microservice)
    env = {"MALB_INSTANCE": inst.name, "MALB_SERVER": inst.server,
           "MALB_MICROSERVICE": ms.name}
    if ms.kind == "callgraph":
        env["MALB_SPEC"] = json.dumps(callgraph_spec(cfg, ms))
    cores = cfg.server(inst.server).cores
    pinned = {"cpuset_cpus": ",".join(map(str, cores))} if cores else {}
    return dict(**pinned, cls=node_cls, dimage=ms.image,
                ip=f"{inst.ip}/{cfg.testbed.prefix_len}", mac=inst.mac, environment=env,
                labels={"malb.server": inst.server, "malb.microservice": ms.name,
                        "malb.instance": inst.name},
                **server_params[inst.server])


def link_shaping(bw: float | None) -> dict:
    """A TCLink's parameters for a link limited to bw Mbit/s ({} for none). TBF rather than
    Mininet's default HTB: HTB at tens of Mbit/s logs a quantum warning per link (as an
    error) and shapes no better."""
    return {"bw": bw, "use_tbf": True} if bw else {}


def disable_tx_offload(pid: int, intf: str) -> None:
    """`ethtool -K <intf> tx off` inside a namespace, run from outside (no ethtool needed in
    the container image)."""
    res = subprocess.run(["nsenter", "-t", str(pid), "-n", "ethtool", "-K", intf, "tx", "off"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"could not switch TX offload off on {intf} (pid {pid}): "
                           f"{res.stderr.strip()}")
