"""One testbed per machine: the lock a running testbed holds, so that a second one, or a
cleanup, cannot take apart what another process built (they share the bridges, the
containers' names, the addresses and the platform's ports).

The lock is flock(2) on /run/malb/testbed.lock, held from a testbed's start to the end of
its stop: the kernel lets go of it when the holder exits however it exits, so it is never
stale. The file names the holder (pid and command) for the message the others get.

- acquire, release, held_here: the lock, in the process that builds the testbed;
- holder: who holds it, when another process does (None when nobody does);
- TestbedBusy: the error a second testbed or a cleanup gets.
"""
from __future__ import annotations

import fcntl
import os

from common.state import STATE_DIR, TESTBED_LOCK_FILE

LOCK_PATH = TESTBED_LOCK_FILE
_fd: int | None = None          # this process's hold on the lock


class TestbedBusy(RuntimeError):
    __test__ = False    # not a pytest test class


def _describe(text: str) -> str:
    pid, _, command = text.strip().partition(" ")
    command = " ".join(command.split())      # one line, whatever the command held
    if len(command) > 120:
        command = command[:117] + "..."
    return f"pid {pid} ({command})" if pid.isdigit() else "another process"


def _command() -> str:
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            return " ".join(fh.read().replace(b"\0", b" ").decode(errors="replace").split())
    except OSError:
        return "?"


def held_here() -> bool:
    return _fd is not None


def holder(path: str | None = None) -> str | None:
    """Who holds the lock, when a process other than this one does."""
    path = path or LOCK_PATH
    if _fd is not None or not os.path.exists(path):
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        return _describe(os.pread(fd, 4096, 0).decode(errors="replace"))
    finally:
        os.close(fd)


def acquire(path: str | None = None) -> None:
    """Take the lock for this process, or TestbedBusy naming the process that has it."""
    global _fd
    if _fd is not None:
        return
    path = path or LOCK_PATH
    os.makedirs(os.path.dirname(path) or STATE_DIR, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        who = _describe(os.pread(fd, 4096, 0).decode(errors="replace"))
        os.close(fd)
        raise TestbedBusy(f"a testbed is running on this machine ({who}); one at a time: "
                          f"wait for it to end, or stop it") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {_command()}\n".encode(), 0)
    _fd = fd


def release() -> None:
    global _fd
    if _fd is None:
        return
    try:
        os.ftruncate(_fd, 0)
    finally:
        os.close(_fd)       # closing the last descriptor lets go of the flock
        _fd = None
