"""topologies/backend.py: the controller class a testbed is built with."""
from __future__ import annotations

import socket

import pytest

from topologies import backend


def test_the_controllers_start_up_check_reads_no_bytes_from_it():
    # Mininet's own check decodes the controller's binary HELLO as UTF-8, which can fail a
    # testbed's start; this one only connects
    check = backend.remote_controller_class().isListening
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert check(None, "127.0.0.1", port) is True
    assert check(None, "127.0.0.1", port) is False


@pytest.mark.parametrize("chosen, fast", [("mininet", False), ("containernet", None)])
def test_a_containers_link_carries_only_options_its_backend_takes(monkeypatch, chosen, fast):
    # Containernet's Link with fast=False moves an end of the pair to no node (its
    # moveIntf with dstNode None); the project's DockerHost needs the slow path
    from mininet.node import Host

    from common.config import load_config
    from topologies import topo as topo_module
    from topologies.topo import TestbedTopo
    monkeypatch.setattr(backend, "resolve_backend", lambda requested: chosen)
    monkeypatch.setattr(backend, "docker_node_class", lambda name: Host)
    # the servers' cgroup parents ask the Docker engine and write cgroups: not here
    monkeypatch.setattr(topo_module, "server_docker_params",
                        lambda cfg, name: {s.name: {} for s in cfg.servers})
    topo = TestbedTopo(load_config(None), backend=chosen, datapath="user")
    cfg = topo.cfg
    links = [topo.linkInfo(inst.name, inst.switch) for inst in cfg.instances]
    assert links and all(info.get("fast") is fast for info in links)
