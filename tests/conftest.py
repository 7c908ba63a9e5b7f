"""Shared fixtures. Integration tests need root and the services `make setup` starts."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from common.procs import ROOT
from tests.lib import fuzzing
from topologies.backend import containernet_available

PY = sys.executable
REQUIRE_CONTAINERNET = "MALB_REQUIRE_CONTAINERNET"


def pytest_report_header(config):
    return [f"controller framework: {os.environ.get('MALB_FRAMEWORK') or 'ryu'} "
            f"($MALB_FRAMEWORK; common/procs.py's controller_argv)",
            f"fuzz budget: {fuzzing.PROFILE} ($MALB_FUZZ; tests/lib/fuzzing.py)",
            f"Containernet: {'importable' if containernet_available() else 'not importable'}"
            f"{'; its tests must run' if os.environ.get(REQUIRE_CONTAINERNET) else ''} "
            f"(${REQUIRE_CONTAINERNET})"]


# last, after `-m` and `-k` have deselected: a unit tier run as root with `-m "not integration"`
# beside a testbed must not be stopped by the integration tests it leaves out
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    # the e2e tier runs for an hour: only when asked for by name (`make test-e2e`)
    if "e2e" not in (config.option.markexpr or ""):
        skip = pytest.mark.skip(reason="an end-to-end run: `make test-e2e` runs it")
        for item in items:
            if "e2e" in item.keywords:
                item.add_marker(skip)
    # a test that needs Containernet skips where it is not importable, but fails in the
    # Containernet check (scripts/check-containernet.sh), which must not pass by skipping
    if not containernet_available() and not os.environ.get(REQUIRE_CONTAINERNET):
        skip = pytest.mark.skip(reason="real Containernet is not importable here (Debian's "
                                       "Mininet only)")
        for item in items:
            if "containernet" in item.keywords:
                item.add_marker(skip)
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests need root (run `make test` as root)")
        for item in items:
            if "integration" in item.keywords:
                item.add_marker(skip)
    # integration tests start controllers, bridges, containers and load beside whatever runs
    # here, and not all of them need the testbed lock: none starts while another process
    # holds it (an experiment, an evaluation's cell: docs/evaluation.md, "Comparisons")
    from common import testbed_lock
    running = [i for i in items if "integration" in i.keywords
               and not any(m.name == "skip" for m in i.iter_markers())]
    holder = testbed_lock.holder() if running else None
    if holder:
        pytest.exit(f"a testbed runs here ({holder}): the integration tier starts nothing "
                    f"beside it; run it when that has ended", returncode=2)


def run_module(*args, timeout=120, user=None, **kwargs) -> subprocess.CompletedProcess:
    """Run `python -m <args>` from the repository root, as another user if asked."""
    cmd = [PY, "-m", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          **kwargs)


@pytest.fixture(autouse=True)
def _testbed_lock_given_back():
    """A command's main() keeps the testbed lock to its process's end (require_testbed);
    called in-process by a test, it would keep it for the whole session, and every later
    testbed in another process (and the lock's own tests) would find the machine busy."""
    from common import testbed_lock
    before = testbed_lock.holds()       # a module's fixture may hold it across its tests
    yield
    while testbed_lock.holds() > before:
        testbed_lock.release()


@pytest.fixture
def config_file(tmp_path):
    """Write a YAML configuration and return its path."""

    def write(data: dict, name: str = "malb.yaml") -> str:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data))
        return str(path)
    return write
