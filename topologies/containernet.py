"""The project's container node on real Containernet (imported only where it is installed).

Containernet's own ``Docker`` node differs from what the topologies need in ways that broke
monitoring and readiness; this subclass keeps its API and fixes them:

- no network but the topology's links: ``network_mode='none'`` and no published ports
  (Containernet attaches Docker's default network and publishes every port);
- a shell without line editing: Containernet starts ``bash --norc -is`` without
  ``--noediting``, and readline's bracketed-paste escapes then wrap every ``cmd()`` output;
- resource updates through the Docker API with -1 meaning "unchanged", as on our own node
  (Containernet writes the cgroup with cgset, behind Docker's back, and takes -1 as "no
  limit");
- an earlier run's container of the same name is removed when it is ours (Containernet
  only does that with ``rm=True`` and otherwise fails with a 409 name conflict);
- a shell that dies with its container does not hang ``cmd()`` (topologies/dockerhost.py).

What stays Containernet's: its labels (it sets its own, so ours are dropped: the agents
select containers by the configured names instead) and its cgroup parent (/docker: a
server's CPU share is split among its containers, docs/testbed.md).
"""
from __future__ import annotations

from mininet.node import Docker

from common.config import CONTAINER_PREFIX
from topologies.dockerhost import ProjectNode, docker_client, remove_leftover


class ContainernetDocker(ProjectNode, Docker):
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
