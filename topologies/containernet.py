"""The project's container node on real Containernet (imported only where it is installed):
Containernet's ``Docker`` node, its API kept, with what broke monitoring and readiness fixed
(docs/testbed.md, "Backends").

- ContainernetDocker: the node; what it fixes and what stays Containernet's: its docstring.
"""
from __future__ import annotations

from mininet.node import Docker

from common.config import CONTAINER_PREFIX
from topologies.dockerhost import ProjectNode, docker_client, remove_leftover


class ContainernetDocker(ProjectNode, Docker):
    """Containernet's Docker node, fixed where it broke monitoring and readiness
    (docs/testbed.md, "Backends"): network_mode='none' and no published ports; a shell
    without line editing (``--noediting``: readline's bracketed-paste escapes wrapped every
    cmd() output); resource updates through the Docker API (ProjectNode); an earlier run's
    container of the same name removed when it is ours; a shell that dies with its
    container does not hang cmd(); its Docker client closed with it. Containernet keeps its
    own labels (ours are dropped: the agents select containers by name) and its cgroup
    parent (/docker), so `labels` and `cgroup_parent` are ignored here."""

    def __init__(self, name, labels=None, cgroup_parent=None, **kwargs):
        # labels and cgroup_parent: Containernet has no room for them (see above)
        kwargs.setdefault("network_mode", "none")
        kwargs.setdefault("publish_all_ports", False)
        remove_leftover(docker_client(), CONTAINER_PREFIX + name)
        super().__init__(name, **kwargs)

    def _popen(self, cmd, **params):
        if isinstance(cmd, list) and "--norc" in cmd and "--noediting" not in cmd:
            at = cmd.index("--norc")
            cmd = cmd[:at] + ["--noediting"] + cmd[at:]
        return super()._popen(cmd, **params)

    def _docker_update(self, **limits) -> None:
        self.dcli.update_container(self.dc, **limits)

    def terminate(self):
        try:
            super().terminate()
        finally:
            # each node holds a Docker client of its own: its sockets outlived the testbed
            # (a session's descriptors passed 1024 over the integration suite)
            self.d_client.close()
