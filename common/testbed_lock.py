"""One testbed per machine: the lock a running testbed holds, so that a second one, or a
cleanup, cannot take apart what another process built (they share the bridges, the
containers' names, the addresses and the platform's ports).

The lock is flock(2) on /run/malb/testbed.lock. An experiment takes it when it starts
(common/cli.require_testbed) and keeps it to its end, across the testbeds it brings up
in turn, so that nothing slips in between its runs; a stack and a testbed take it again
inside that (nested holds). The kernel lets go of it when the holder exits however it
exits, so it is never stale. The file names the holder (pid and command) for the message
the others get.

- acquire, release, held_here, holds: the lock, in the process that builds the testbed;
- holder: who holds it, when another process does (None when nobody does);
- TestbedBusy: the error a second testbed or a cleanup gets.
"""
from __future__ import annotations

import fcntl
import os
import time

from common.state import STATE_DIR, TESTBED_LOCK_FILE

LOCK_PATH = TESTBED_LOCK_FILE
ACQUIRE_TRIES = 5           # a holder() check takes the lock shared for an instant
_fd: int | None = None      # this process's hold on the lock
_pid: int | None = None     # the process that took it (a forked child does not hold it)
_holds = 0                  # nested holds: an experiment's, then each testbed's in it


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
    return _fd is not None and _pid == os.getpid()


def holds() -> int:
    """How many acquires this process has not yet released (0 when it does not hold it)."""
    return _holds if held_here() else 0


def holder(path: str | None = None) -> str | None:
    """Who holds the lock, when a process other than this one does."""
    path = path or LOCK_PATH
    if held_here() or not os.path.exists(path):
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
    """Take the lock for this process (once more, if it holds it already: each acquire is
    undone by one release), or TestbedBusy naming the process that has it."""
    global _fd, _pid, _holds
    if held_here():
        _holds += 1
        return
    path = path or LOCK_PATH
    os.makedirs(os.path.dirname(path) or STATE_DIR, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    for attempt in range(ACQUIRE_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            text = os.pread(fd, 4096, 0).decode(errors="replace")
            if _describe(text) == "another process" and attempt + 1 < ACQUIRE_TRIES:
                time.sleep(0.05)     # no holder named: a check holding it for an instant
                continue
            os.close(fd)
            raise TestbedBusy(f"a testbed is running on this machine ({_describe(text)}); "
                              f"one at a time: wait for it to end, or stop it") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {_command()}\n".encode(), 0)
    _fd, _pid, _holds = fd, os.getpid(), 1


def release() -> None:
    """Undo one acquire; the last lets go of the lock."""
    global _fd, _pid, _holds
    if not held_here():
        return
    _holds -= 1
    if _holds > 0:
        return
    try:
        os.ftruncate(_fd, 0)
    finally:
        os.close(_fd)       # closing the last descriptor lets go of the flock
        _fd, _pid = None, None
