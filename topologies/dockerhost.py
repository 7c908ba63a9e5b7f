"""A Docker container as a Mininet host, for machines without Containernet: the subset of
Containernet's ``Docker`` node that the project uses, under the same names (net.addDocker,
node.cmd, popen, updateCpuLimit, updateMemoryLimit), so one topology file runs on both
backends (docs/testbed.md, "Backends").

- DockerHost: the node, and where it differs from Containernet's, all deliberate;
- ProjectNode: what the project's nodes do alike on both backends (resource updates through
  the Docker API, a shell that dies with its container does not hang cmd());
- docker_client, docker_cli: the Docker SDK client and CLI;
- leftover_is_ours, remove_leftover: an earlier run's container of the same name.
"""
from __future__ import annotations

import select
import shutil

import docker
from mininet.log import debug, info, warn
from mininet.node import Host

from common.config import CONTAINER_PREFIX

PROJECT_LABEL = "malb"
# Keeps the container alive and exits promptly on SIGTERM (no init process needed).
KEEPALIVE_CMD = ["bash", "-c", "trap 'exit 0' TERM INT; sleep infinity & wait"]
SHELL_POLL_MS = 500   # how often a wait for a node's output checks that its shell lives

_client = None


def docker_client():
    """One Docker client per process (the SDK opens a connection pool)."""
    global _client
    if _client is None:
        _client = docker.from_env(timeout=120)
    return _client


def docker_cli() -> str:
    path = shutil.which("docker")
    if not path:
        raise RuntimeError("the docker command is not installed; run `make setup`")
    return path


def _binds(volumes) -> dict:
    """Containernet style ['/host:/container:rw', ...] -> SDK binds."""
    binds = {}
    for spec in volumes or []:
        parts = spec.split(":")
        if len(parts) < 2:
            raise ValueError(f"volume {spec!r}: expected /host/path:/container/path[:ro|rw]")
        binds[parts[0]] = {"bind": parts[1], "mode": parts[2] if len(parts) > 2 else "rw"}
    return binds


class ProjectNode:
    """What the project's container nodes do alike on both backends (a mixin for
    DockerHost here and for Containernet's Docker in topologies/containernet.py).

    Resource updates go through the Docker API, so Docker's record of the limits is what
    the kernel enforces, and -1 (the default) leaves a value as it is. (Containernet's own
    updateCpuLimit writes the cgroup directly and takes cpu_quota=-1 as "no limit".)
    Subclasses provide _docker_update(**limits)."""

    resources: dict

    def _docker_update(self, **limits) -> None:
        raise NotImplementedError

    def update_resources(self, **kwargs):
        self.resources.update(kwargs)
        update = {k: v for k, v in self.resources.items() if v is not None}
        if update.get("cpu_quota", 0) in (-1, 0):
            update.pop("cpu_quota", None)
        self._docker_update(**update)

    def updateCpuLimit(self, cpu_quota=-1, cpu_period=-1, cpu_shares=-1, cores=None):
        """Containernet's arguments; -1 leaves a value unchanged."""
        update = {}
        if cpu_quota is not None and cpu_quota != -1:
            update["cpu_quota"] = cpu_quota
        if cpu_period is not None and cpu_period >= 0:
            update["cpu_period"] = cpu_period
        if cpu_shares is not None and cpu_shares >= 0:
            update["cpu_shares"] = cpu_shares
        if cores:
            update["cpuset_cpus"] = cores
        if update:
            self.resources.update(update)
            self._docker_update(**update)

    def updateMemoryLimit(self, mem_limit=-1, memswap_limit=-1):
        update = {}
        if mem_limit is not None and mem_limit != -1:
            update["mem_limit"] = mem_limit
            # Docker refuses a memory limit above the current memory+swap limit unless both
            # change together; unlimited swap unless the caller says otherwise.
            update["memswap_limit"] = -1
        if memswap_limit is not None and memswap_limit != -1:
            update["memswap_limit"] = memswap_limit
        if update:
            self.resources.update(update)
            self._docker_update(**update)

    # -- a container that is killed or removed behind Mininet's back ends its shell. Mininet
    #    keeps the other end of the shell's pty open, so no end of file ever comes and cmd()
    #    would wait forever in read() (a teardown after a killed container hung there): the
    #    wait for output is sliced and ends when the shell has gone.
    def _shell_alive(self) -> bool:
        return self.shell is not None and self.shell.poll() is None

    def read(self, size=1024):
        if not self.readbuf:
            # poll, not select: a long test session's descriptors pass select's 1024
            waiting = select.poll()
            waiting.register(self.stdout.fileno(), select.POLLIN | select.POLLHUP)
            while not waiting.poll(SHELL_POLL_MS):
                if not self._shell_alive():
                    return ""
        return super().read(size)

    def monitor(self, timeoutms=None, findPid=True):
        data = super().monitor(timeoutms, findPid)
        if self.waiting and not data and not self._shell_alive():
            warn(f"*** {self.name}: its container's shell has ended (container stopped or "
                 f"removed); not completed: {self.lastCmd}\n")
            self.waiting = False
        return data


def leftover_is_ours(container) -> bool:
    """A container of an earlier testbed of this project: labelled malb (our own node), or
    made by Containernet (which drops our labels) with our environment."""
    if container.labels.get(PROJECT_LABEL) is not None:
        return True
    env = container.attrs.get("Config", {}).get("Env") or []
    return "com.containernet" in container.labels and \
        any(e.startswith("MALB_INSTANCE=") for e in env)


def remove_leftover(client, cname: str) -> None:
    """Remove an earlier run's container of that name if it is the project's (a killed run
    leaves them, and Docker refuses the name again); refuse to touch anyone else's."""
    try:
        old = client.containers.get(cname)
    except docker.errors.NotFound:
        return
    if not leftover_is_ours(old):
        raise RuntimeError(f"a container named {cname} exists and is not the project's "
                           f"(no '{PROJECT_LABEL}' label, no MALB_INSTANCE); remove or "
                           f"rename it")
    info(f"*** removing leftover container {cname}\n")
    old.remove(force=True)


class DockerHost(ProjectNode, Host):
    """Mininet host whose namespaces and cgroups are those of a Docker container. Where it
    differs from Containernet's node, all deliberate: containers run with
    network_mode='none' (their only interfaces are topology links); every container carries
    the label ``malb`` (plus ``malb.node`` and the caller's labels), so cleanup and the host
    agents can find them; ``cgroup_parent`` is accepted, so several containers can share one
    server's CPU share and memory limit (common/cgroups.py); only NET_ADMIN is added instead
    of running privileged."""

    def __init__(self, name, dimage=None, dcmd=None, cpu_quota=-1, cpu_period=None,
                 cpu_shares=None, cpuset_cpus=None, mem_limit=None, memswap_limit=None,
                 environment=None, volumes=None, labels=None, cgroup_parent=None, **kwargs):
        if not dimage:
            raise ValueError(f"{name}: addDocker needs dimage=<image>")
        self.dimage = dimage
        self.dcmd = dcmd
        self.cname = CONTAINER_PREFIX + name
        self.resources = dict(cpu_quota=cpu_quota, cpu_period=cpu_period, cpu_shares=cpu_shares,
                              cpuset_cpus=cpuset_cpus, mem_limit=mem_limit,
                              memswap_limit=memswap_limit)
        self._starting_shell = False
        client = docker_client()
        remove_leftover(client, self.cname)
        all_labels = {PROJECT_LABEL: "1", "malb.node": name}
        all_labels.update(labels or {})
        create = dict(
            image=dimage, name=self.cname, hostname=name,
            command=dcmd if dcmd is not None else KEEPALIVE_CMD,
            detach=True, tty=True, stdin_open=True, network_mode="none",
            labels=all_labels, environment=environment or {}, volumes=_binds(volumes),
            cap_add=["NET_ADMIN"], cgroup_parent=cgroup_parent,
            cpuset_cpus=cpuset_cpus, mem_limit=mem_limit, memswap_limit=memswap_limit,
            cpu_shares=cpu_shares, cpu_period=cpu_period,
        )
        if cpu_quota is not None and cpu_quota > 0:
            create["cpu_quota"] = cpu_quota
        create = {k: v for k, v in create.items() if v is not None}
        try:
            self.container = client.containers.run(**create)
        except docker.errors.ImageNotFound:
            raise RuntimeError(f"{name}: image {dimage!r} not found; run `make setup` to build the "
                               f"project's images") from None
        self.container.reload()
        self.did = self.container.id
        self.container_pid = self.container.attrs["State"]["Pid"]
        debug(f"{name}: container {self.did[:12]} pid {self.container_pid}\n")
        super().__init__(name, **kwargs)

    # -- shell and processes run *inside* the container (namespaces and cgroups), so what
    #    they start is limited and accounted like the container itself (docker stats).
    def startShell(self, mnopts=None):
        self._starting_shell = True
        try:
            super().startShell(mnopts)
        finally:
            self._starting_shell = False
        # Mininet moves interfaces into the namespace of self.pid: the container's.
        self.pid = self.container_pid

    def _popen(self, cmd, **params):
        if self._starting_shell:
            # Mininet's shell command is ['mnexec', '<opts>', 'env', 'PS1=..', 'bash', ...]
            cmd = [docker_cli(), "exec", "-it", self.cname] + list(cmd[2:])
            # mnexec -c would have made the shell a session leader; Mininet's terminate()
            # signals the shell's process group.
            params["start_new_session"] = True
        return super()._popen(cmd, **params)

    def popen(self, *args, **kwargs):
        kwargs.setdefault("mncmd", [docker_cli(), "exec", "-i", self.cname])
        return super().popen(*args, **kwargs)

    def terminate(self):
        super().terminate()
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass

    def _docker_update(self, **limits) -> None:
        self.container.update(**limits)

