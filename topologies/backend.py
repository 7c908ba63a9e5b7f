"""Which emulator and which OVS datapath this machine offers.

- Backend: real Containernet when ``from mininet.net import Containernet`` works, otherwise
  Debian's Mininet plus :class:`topologies.dockerhost.DockerHost` (``DockerMininet``).
- Datapath: the kernel datapath when Open vSwitch can create a bridge with it, else the
  userspace (netdev) datapath; either can be forced.
- network_class, docker_node_class, remote_controller_class: the classes a testbed is built
  with on the chosen backend; container_link_options, what a link to a container takes.
"""
from __future__ import annotations

import os
import socket
import subprocess
import uuid
from functools import cache

BACKENDS = ("auto", "containernet", "mininet")


class BackendError(RuntimeError):
    pass


@cache
def containernet_available() -> bool:
    try:
        # deferred: Containernet, whose import is the test of whether it is here
        from mininet.net import Containernet  # noqa: F401  (only real Containernet has it)
        return True
    except ImportError:
        return False


BACKEND_ENV_VAR = "MALB_BACKEND"


def resolve_backend(requested: str = "auto") -> str:
    """'containernet' or 'mininet'. auto: $MALB_BACKEND when set, else Containernet when it
    is importable."""
    if requested == "auto" and os.environ.get(BACKEND_ENV_VAR):
        requested = os.environ[BACKEND_ENV_VAR]
        if requested not in BACKENDS:
            raise BackendError(f"${BACKEND_ENV_VAR}: unknown backend {requested!r} (choose "
                               f"from {', '.join(BACKENDS)})")
    if requested not in BACKENDS:
        raise BackendError(f"unknown backend {requested!r} (choose from {', '.join(BACKENDS)})")
    if requested == "auto":
        return "containernet" if containernet_available() else "mininet"
    if requested == "containernet" and not containernet_available():
        raise BackendError("Containernet is not importable here (`from mininet.net import "
                           "Containernet` fails); install it or use --backend mininet")
    return requested


def network_class(backend: str):
    """The Mininet network class for a backend; both offer addDocker()."""
    if backend == "containernet":
        from mininet.net import Containernet   # deferred: only where Containernet is
        return Containernet
    from topologies.net import DockerMininet   # deferred, as Containernet above
    return DockerMininet


def remote_controller_class():
    """Mininet's RemoteController with its start-up check made over a socket. Mininet's own
    check telnets to the port and decodes what comes back as UTF-8; the controller answers
    with its binary OpenFlow HELLO, which can fail a testbed's start with a
    UnicodeDecodeError. Not listening is still only Mininet's warning."""
    from mininet.log import warn                 # deferred: Mininet or Containernet's
    from mininet.node import RemoteController

    class CheckedRemoteController(RemoteController):
        def isListening(self, ip, port):
            try:
                with socket.create_connection((ip, port), timeout=2):
                    return True
            except OSError:
                warn(f"Unable to contact the remote controller at {ip}:{port}\n")
                return False
    return CheckedRemoteController


def docker_node_class(backend: str):
    """The project's container node for a backend (the same API on both)."""
    # deferred: each backend's node imports its Mininet; only the chosen one is there
    if backend == "containernet":
        from topologies.containernet import ContainernetDocker
        return ContainernetDocker
    from topologies.dockerhost import DockerHost   # deferred: as above
    return DockerHost


def container_link_options(backend: str) -> dict:
    """addLink's options for a link to a container node on a backend. Mininet's fast path
    makes the veth pair inside node1's shell, where the project's DockerHost sees neither
    that PID nor the root namespace: it takes the slow path (`mn --custom` builds with
    plain Mininet, so the topology says it). Containernet's Docker node needs the fast
    path: its Link with fast=False moves an end of the pair to no node at all."""
    return {} if backend == "containernet" else {"fast": False}


@cache
def kernel_datapath_available() -> bool:
    """Ask Open vSwitch itself: create a throw-away bridge on the kernel datapath."""
    if not os.path.exists("/sys/module/openvswitch"):
        # ovs-ctl loads the module when it can; without it the kernel datapath cannot work
        return False
    probe = "malbprobe" + uuid.uuid4().hex[:6]
    try:
        out = subprocess.run(["ovs-vsctl", "--timeout=10", "add-br", probe, "--", "set", "bridge",
                              probe, "datapath_type=system"],
                             capture_output=True, text=True, timeout=15)
        return out.returncode == 0 and "Error" not in out.stderr
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", probe],
                       capture_output=True, timeout=15)


def resolve_datapath(requested: str = "auto") -> str:
    """'user' or 'kernel' (Mininet's OVSSwitch datapath argument)."""
    if requested == "auto":
        return "kernel" if kernel_datapath_available() else "user"
    if requested == "kernel" and not kernel_datapath_available():
        raise BackendError("the Open vSwitch kernel datapath is not available on this machine "
                           "(no openvswitch kernel module); use --datapath user")
    if requested not in ("user", "kernel"):
        raise BackendError(f"unknown datapath {requested!r} (choose from auto, user, kernel)")
    return requested
