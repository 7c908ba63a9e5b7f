"""Background services (controller, agents, profiler) started by experiments and tests.

Each records its PID under /run/malb/pids so `make clean-testbed` can stop what a crashed
run left behind, logs to a file, and counts as started only once it answers on HTTP.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

from common.paths import ROOT
from common.state import PID_DIR, write_pid_file

VENV_BIN = os.path.dirname(sys.executable)


def git_commit(root: str = ROOT) -> str:
    """The checkout's commit (short), for the results a run writes; "unknown" outside git.
    "-dirty" after it when tracked files other than data/ and Markdown differ from it: the
    results then come from code that commit does not hold (committed results do not count)."""
    try:
        res = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                             capture_output=True, text=True)
        commit = res.stdout.strip()
        if commit and subprocess.run(["git", "diff", "--quiet", "HEAD", "--", ".",
                                     ":(exclude)data", ":(exclude)*.md"], cwd=root,
                                     capture_output=True).returncode == 1:
            commit += "-dirty"
    except OSError:
        return "unknown"
    return commit or "unknown"


class ServiceError(RuntimeError):
    pass


class Service:
    def __init__(self, name: str, argv: list[str], ready_url: str | None, log_path: str,
                 env: dict | None = None):
        self.name, self.argv, self.ready_url, self.log_path = name, argv, ready_url, log_path
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    @property
    def pid_file(self) -> str:
        return os.path.join(PID_DIR, f"{self.name}.pid")

    def start(self, timeout_s: float = 30.0) -> Service:
        return self.launch().ready(timeout_s)

    def launch(self) -> Service:
        """The process started, not yet waited for: several launched at once start in
        parallel (each spends about a second importing), then ready() each."""
        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        write_pid_file(self.name, self.proc.pid)
        return self

    def ready(self, timeout_s: float = 30.0) -> Service:
        """Once it answers on its ready URL; a service that never does is stopped."""
        if self.ready_url:
            try:
                self.wait_ready(timeout_s)
            except BaseException:
                self.stop()   # a service that never became ready is not left running
                raise
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError(f"{self.name} exited with {self.proc.returncode} at start; "
                                   f"last lines of {self.log_path}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.ready_url, timeout=1) as r:
                    if r.status < 500:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise ServiceError(f"{self.name} did not answer on {self.ready_url} within "
                           f"{timeout_s:.0f} s; last lines of {self.log_path}:\n{self.tail()}")

    def tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                return b"".join(fh.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.running():
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=10)

    def terminate(self) -> None:
        """SIGTERM sent, not waited for: several told at once come down in parallel (an
        agent waits for its probe readings under way), then stop() each."""
        if self.running():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.running():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        try:
            os.unlink(self.pid_file)
        except OSError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


FRAMEWORKS = ("ryu", "os-ken")
RYU_PYTHON = os.path.join(ROOT, ".venv-ryu", "bin", "python")
MALB_APP = [os.path.join(ROOT, "ryu_apps", "flags.py"), os.path.join(ROOT, "ryu_apps", "malb.py")]


def framework_name(framework: str | None = None) -> str:
    """The controller's framework: the one given, else $MALB_FRAMEWORK, else os-ken."""
    framework = framework or os.environ.get("MALB_FRAMEWORK") or "os-ken"
    if framework not in FRAMEWORKS:
        raise ValueError(f"MALB_FRAMEWORK: expected one of {', '.join(FRAMEWORKS)}, "
                         f"got {framework!r}")
    return framework


def framework_app(name: str, framework: str | None = None) -> str:
    """One of the framework's own apps by module ("app.simple_switch_13"), as the
    framework's launcher names it."""
    package = {"ryu": "ryu", "os-ken": "os_ken"}[framework_name(framework)]
    return f"{package}.{name}"


def controller_argv(framework: str | None = None, apps: list[str] | None = None,
                    python: str | None = None) -> list[str]:
    """The controller's command line under the framework (framework_name): os-ken's launcher
    on this interpreter (or `python`), or ryu-manager from the virtualenv `make setup`
    builds for Ryu (docs/setup.md, "Frameworks"); the same options either way. `apps`: the
    app files in place of MALB's (a benchmark's baseline app)."""
    framework = framework_name(framework)
    apps = ["--user-flags", *MALB_APP] if apps is None else apps
    if framework == "os-ken":
        return [python or sys.executable, "-m", "ryu_apps.osken_manager", *apps]
    return [os.path.join(os.path.dirname(python or RYU_PYTHON), "ryu-manager"), *apps]


def controller_service(config_path: str, policy: str | None = None, log_path: str = "",
                       rest_port: int = 8080, name: str = "controller", *,
                       ofp_port: int | None = None, peer: str | None = None,
                       role: str | None = None) -> Service:
    """The controller on the configuration's ports, or on ofp_port and rest_port when
    ofp_port is given (a second controller beside the first); peer and role: one of a
    standby pair (docs/controller.md, "A standby controller")."""
    # ryu-manager puts no working directory on its path: without this the controller
    # would import whichever checkout the virtualenv's .pth names (another worktree's)
    env = {"MALB_CONFIG": config_path,
           "PYTHONPATH": os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH"))))}
    for key, value in (("MALB_POLICY", policy), ("MALB_PEER", peer), ("MALB_ROLE", role)):
        if value:
            env[key] = value
    ports = [] if ofp_port is None else ["--ofp-tcp-listen-port", str(ofp_port),
                                         "--wsapi-port", str(rest_port)]
    return Service(name, controller_argv() + ports,
                   f"http://127.0.0.1:{rest_port}/malb/status",
                   log_path or f"/var/log/malb/{name}.log", env)


def python_service(name: str, module_args: list[str], ready_url: str | None,
                   log_path: str = "", env: dict | None = None) -> Service:
    return Service(name, [sys.executable, "-m", *module_args], ready_url,
                   log_path or f"/var/log/malb/{name}.log", env)
