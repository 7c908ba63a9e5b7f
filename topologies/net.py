"""Debian's Mininet with Containernet's addDocker(), built on DockerHost."""
from __future__ import annotations

from mininet.net import Mininet

from topologies.dockerhost import DockerHost


class DockerMininet(Mininet):
    """Mininet plus ``addDocker(name, dimage=..., ...)`` as Containernet offers it."""

    def addDocker(self, name, cls=DockerHost, **params):
        return self.addHost(name, cls=cls, **params)

    def addLink(self, node1, node2, port1=None, port2=None, cls=None, **params):
        node1 = self[node1] if isinstance(node1, str) else node1
        node2 = self[node2] if isinstance(node2, str) else node2
        if isinstance(node1, DockerHost) or isinstance(node2, DockerHost):
            # Mininet's fast path runs `ip link add ... netns <pid>` inside node1's shell,
            # where a container sees neither that PID nor the root namespace. The slow path
            # creates the veth pair in the root namespace and moves each end.
            params.setdefault("fast", False)
        return super().addLink(node1, node2, port1=port1, port2=port2, cls=cls, **params)
