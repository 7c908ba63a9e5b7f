"""The agent's probes: each instance's requests in flight and recent latency, read on demand
(GET /probes) from its service's GET /latency inside the container's network namespace
(docs/profiler.md, "GET /probes: requests in flight and latency").

- NetnsSockets: TCP sockets made inside another process's network namespace by setns(2),
  without a process per reading;
- read_latency, parse_latency_answer: one reading over such a socket, and its checks;
- Prober, Target: every target read in parallel, each within its own timeout, a failed
  reading reported with its error, never as zeros (the reader passed in: tests give fakes);
- ProbeError: a reading failed, said in one line, and of which kind (KINDS);
- process_stopped: whether a process is stopped (SIGSTOP) or frozen.
"""
from __future__ import annotations

import ctypes
import json
import os
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from collections.abc import Callable

from common.numbers import finite_non_negative

CLONE_NEWNET = 0x40000000
MAX_ANSWER_BYTES = 64 * 1024        # a /latency answer is ~150 bytes
MIN_WINDOW_S, MAX_WINDOW_S = 0.1, 60.0   # what the services' /latency accepts


# what a failed reading says of the service, as /probes reports it (error_kind): it answered
# but not as /latency should; its process is stopped or frozen; its container is not
# running; no answer within the timeout; its port refused; the agent could not read it
# (a namespace it cannot enter, a reading over another window under way): nothing of the
# service
KINDS = ("answer", "stopped", "not-running", "timeout", "refused", "unavailable")


class ProbeError(RuntimeError):
    """A reading failed; the message says why in one line, `kind` which of KINDS."""

    def __init__(self, message: str, kind: str = "answer"):
        super().__init__(message)
        self.kind = kind


def process_stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP: state T, or t when traced); False when it
    cannot be told. A container frozen whole (docker pause) is `paused` in Docker's list."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"State:"):
                    return line.split()[1:2] in ([b"T"], [b"t"])
    except OSError:
        pass
    return False


class NetnsSockets:
    """Sockets in other network namespaces, from the threads that ask (each thread enters
    and leaves on its own: setns(2) changes only the calling thread). The thread enters the
    namespace through ctypes (Python 3.11 has no os.setns), creates the socket and goes back
    before anything else runs on it; a socket keeps the namespace it was made in, so
    connect() after the return reaches the container's 127.0.0.1. nsenter + curl would cost
    a fork and two execs per reading (docs/profiler.md, "GET /probes")."""

    def __init__(self):
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._setns = self._libc.setns
        self._setns.argtypes = (ctypes.c_int, ctypes.c_int)
        self._setns.restype = ctypes.c_int
        # the agent's own namespace, where every thread goes back to
        self._home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self._home_ino = os.fstat(self._home).st_ino

    def _enter(self, fd: int) -> None:
        if self._setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns: {os.strerror(err)}")

    def _at_home(self) -> bool:
        return os.stat("/proc/thread-self/ns/net").st_ino == self._home_ino

    def tcp_socket(self, pid: int) -> socket.socket:
        """A TCP socket in the network namespace of process `pid`."""
        if not self._at_home():
            # an earlier return failed: try again, else refuse to work from the wrong
            # namespace
            self._enter(self._home)
            if not self._at_home():
                raise ProbeError("the probing thread is stuck in another network namespace",
                                 "unavailable")
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise ProbeError(f"its network namespace (pid {pid}): {exc.strerror}",
                             "unavailable") from None
        try:
            self._enter(fd)
            try:
                return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            finally:
                self._enter(self._home)
        finally:
            os.close(fd)

    def close(self) -> None:
        os.close(self._home)


def parse_latency_answer(raw: bytes) -> dict:
    """A service's /latency answer (the raw HTTP response) as {in_flight, count, p50_ms,
    p99_ms}; ProbeError naming what is wrong. A service without `in_flight` (an image from
    before it) is an error: a missing count is not a zero."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ProbeError("incomplete HTTP answer")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ProbeError(f"not an HTTP answer: {status_line[:60]!r}")
    if parts[1] != "200":
        raise ProbeError(f"GET /latency: HTTP {parts[1]} {body[:80].decode('utf-8', 'replace')!r}")
    try:
        doc = json.loads(body)
    except ValueError:
        raise ProbeError("GET /latency: the answer is not JSON") from None
    if not isinstance(doc, dict):
        raise ProbeError("GET /latency: the answer is not a JSON object")
    if "in_flight" not in doc:
        raise ProbeError("GET /latency: no in_flight (a service image from before probes?)")
    out = {}
    for key, optional in (("in_flight", False), ("count", False), ("p50_ms", True),
                          ("p99_ms", True)):
        v = doc.get(key)
        if v is None and optional:
            out[key] = None
            continue
        if not finite_non_negative(v):
            raise ProbeError(f"GET /latency: {key}: expected a number >= 0, got {v!r:.40}")
        out[key] = v
    if out["count"] and (out["p50_ms"] is None or out["p99_ms"] is None):
        raise ProbeError("GET /latency: requests counted but no quantiles")
    return out


def read_latency(sockets: NetnsSockets, pid: int, port: int, window_s: float,
                 timeout_s: float) -> dict:
    """One reading of the service on `port` inside `pid`'s network namespace: the whole
    exchange within timeout_s (ProbeError otherwise)."""
    deadline = time.monotonic() + timeout_s
    sock = sockets.tcp_socket(pid)
    try:
        def left() -> float:
            rest = deadline - time.monotonic()
            if rest <= 0:
                raise ProbeError(f"no answer within {timeout_s:g} s", "timeout")
            return rest
        try:
            sock.settimeout(left())
            sock.connect(("127.0.0.1", port))
            sock.settimeout(left())
            sock.sendall(f"GET /latency?window={window_s:g} HTTP/1.0\r\n"
                         f"Host: 127.0.0.1\r\n\r\n".encode())
            chunks, size = [], 0
            while True:          # HTTP/1.0: the service closes after its answer
                sock.settimeout(left())
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise ProbeError(f"GET /latency: answer over {MAX_ANSWER_BYTES} bytes")
        except TimeoutError:
            raise ProbeError(f"no answer within {timeout_s:g} s", "timeout") from None
        except ConnectionRefusedError as exc:
            raise ProbeError(f"port {port}: {exc.strerror or exc}", "refused") from None
        except OSError as exc:
            raise ProbeError(f"port {port}: {exc.strerror or exc}", "unavailable") from None
    finally:
        sock.close()
    return parse_latency_answer(b"".join(chunks))


@dataclass(frozen=True)
class Target:
    """An instance container to read: pid None when the container is not running (or its
    process is not known yet); `state` says which."""
    container: str
    instance: str
    microservice: str | None
    port: int
    pid: int | None
    state: str


# reader(pid, port, window_s, timeout_s) -> parse_latency_answer's dict, or raises
Reader = Callable[[int, int, float, float], dict]


class Prober:
    """Reads every target at once, each within `timeout_s`. A target whose reading is still
    under way (its service is stuck, or another request asked a moment ago) gets no second
    one: the answer waits for that reading (over the same window) within its own timeout,
    so at most one thread per instance is ever held, however often /probes is asked."""

    def __init__(self, reader: Reader, timeout_s: float, max_parallel: int = 32,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 stopped: Callable[[int], bool] = process_stopped):
        self.reader, self.timeout_s, self.stopped = reader, timeout_s, stopped
        self.clock, self.monotonic = clock, monotonic
        self.pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="probe")
        self._running: dict[str, tuple[Future, float]] = {}   # container -> (reading, window)
        self._lock = threading.Lock()

    def _read(self, t: Target, window_s: float, timeout_s: float) -> dict:
        reading = dict(self.reader(t.pid, t.port, window_s, timeout_s))
        reading["time"] = self.clock()
        return reading

    def _reading(self, t: Target, window_s: float, timeout_s: float
                 ) -> tuple[Future, float] | str:
        """The reading of the target and the timeout it was given: the one under way, or a
        new one; or why none."""
        with self._lock:
            held = self._running.get(t.container)
            if held is not None and not held[0].done():
                if held[1] != window_s:
                    return (f"a reading over another window ({held[1]:g} s) is under way "
                            f"(service stuck?)")
                return held[0], held[2]
            try:
                future = self.pool.submit(self._read, t, window_s, timeout_s)
            except RuntimeError as exc:      # the pool is shut down: the agent is stopping
                return str(exc)
            self._running[t.container] = (future, window_s, timeout_s)
            return future, timeout_s

    def answer(self, server: str, targets: list[Target], window_s: float,
               timeout_s: float | None = None) -> dict:
        """The /probes answer: per instance, in_flight, count, p50_ms and p99_ms over the
        last window_s, the reading's time and its age at the answer, or its error and the
        error's kind (KINDS); and timeout_s, how long the service was given (a reading
        already under way keeps its own timeout). Each new reading within timeout_s (None:
        the agent's)."""
        started = self.monotonic()
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        futures, entries = {}, {}
        for t in targets:
            entry = {"container": t.container, "microservice": t.microservice,
                     "port": t.port, "in_flight": None, "count": None, "p50_ms": None,
                     "p99_ms": None, "time": None, "age_s": None, "error": None,
                     "error_kind": None, "timeout_s": None}
            entries[t.instance] = entry
            if t.pid is None:
                entry["error"], entry["error_kind"] = (
                    (f"container is {t.state}",
                     "stopped" if t.state == "paused" else "not-running")
                    if t.state != "running" else
                    ("container's process not known yet", "unavailable"))
                continue
            if self.stopped(t.pid):
                entry["error"], entry["error_kind"] = "its process is stopped", "stopped"
                continue
            reading = self._reading(t, window_s, timeout_s)
            if isinstance(reading, str):
                entry["error"], entry["error_kind"] = reading, "unavailable"
            else:
                reading, entry["timeout_s"] = reading
                futures[reading] = t.instance
        with self._lock:        # containers gone since: their finished readings go
            names = {t.container for t in targets}
            for name in [c for c, (f, *_) in self._running.items()
                         if c not in names and f.done()]:
                del self._running[name]
        done, _ = wait(futures, timeout=timeout_s + 0.05) if futures else (set(), set())
        now = self.clock()
        for future, instance in futures.items():
            entry = entries[instance]
            if future not in done:        # this answer waited timeout_s for it
                entry["error"] = f"no answer within {timeout_s:g} s"
                entry["error_kind"], entry["timeout_s"] = "timeout", timeout_s
                continue
            try:
                reading = future.result()
            except ProbeError as exc:
                entry["error"], entry["error_kind"] = str(exc), exc.kind
                continue
            except Exception as exc:      # noqa: BLE001 -- a bug or an unexpected OS error: say which
                entry["error"] = f"{type(exc).__name__}: {exc}"
                entry["error_kind"] = "unavailable"
                continue
            entry.update(reading)
            entry["age_s"] = round(max(0.0, now - reading["time"]), 4)
        return {"server": server, "time": now, "window_s": window_s,
                "timeout_s": timeout_s,
                "took_ms": round(1000.0 * (self.monotonic() - started), 3),
                "instances": entries,
                "failed": sum(1 for e in entries.values() if e["error"] is not None)}

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
