"""The project as a package (pyproject.toml, locks/, common/paths.py): its console scripts
resolve, the files it ships outside the packages are found, and the locks setup installs
hold what pyproject.toml asks for, no known-flawed eventlet or dnspython by default, and no
test tool in the runtime lock. `pip install .` itself runs in a fresh virtualenv in
tests/integration/test_package_install.py."""
from __future__ import annotations

import glob
import importlib
import os
import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from common import paths
from common.cli import as_invoked

with open(os.path.join(paths.ROOT, "pyproject.toml"), "rb") as _fh:
    PROJECT = tomllib.load(_fh)


def lock(name: str) -> dict[str, Version]:
    """{normalised name: version} of locks/<name>.txt."""
    pins = {}
    with open(os.path.join(paths.ROOT, "locks", f"{name}.txt"), encoding="utf-8") as fh:
        for line in fh:
            m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line)
            if m:
                pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = Version(m.group(2))
    return pins


def norm(req: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(req).name).lower()


@pytest.mark.parametrize("script", sorted(PROJECT["project"]["scripts"]))
def test_every_console_script_names_a_main_that_exists(script):
    module, _, func = PROJECT["project"]["scripts"][script].partition(":")
    assert callable(getattr(importlib.import_module(module), func))


def test_a_python_m_program_is_named_as_the_console_script_that_runs_it():
    assert as_invoked("python -m agents", "/v/bin/malb-agent") == "malb-agent"
    assert as_invoked("python -m experiments run x", "/v/bin/malb-experiments") == \
        "malb-experiments run x"
    assert as_invoked("python -m agents", "/v/lib/agents/__main__.py") == "python -m agents"
    assert as_invoked(None, "malb-agent") is None


def test_shipped_files_are_the_checkouts_and_the_wheel_takes_every_one():
    assert paths.IN_CHECKOUT and paths.WORK == paths.ROOT
    assert paths.shipped("configs", "paper.yaml") == \
        os.path.realpath(os.path.join(paths.ROOT, "configs", "paper.yaml"))
    assert os.path.isfile(paths.shipped("api", "controller.yaml"))
    patterns = PROJECT["tool"]["setuptools"]["package-data"]["common"]
    taken = {os.path.realpath(f) for p in patterns
             for f in glob.glob(os.path.join(paths.ROOT, "common", p))}
    wanted = {os.path.realpath(f) for f in
              glob.glob(os.path.join(paths.ROOT, "configs", "*")) +
              glob.glob(os.path.join(paths.ROOT, "docs", "api", "*.yaml"))}
    assert wanted and wanted == taken, wanted ^ taken


def test_the_locks_hold_what_pyproject_asks_for():
    project = PROJECT["project"]
    extras = project["optional-dependencies"]
    main, ryu, runtime = lock("main"), lock("ryu"), lock("runtime")
    for req in project["dependencies"]:
        name = norm(req)
        assert name in main and name in ryu and name in runtime, name
        assert Requirement(req).specifier.contains(main[name]), (req, main[name])
    for extra in ("plots", "test", "dev"):
        for req in extras[extra]:
            assert norm(req) in main, (extra, req)
    assert {norm(r) for r in extras["ryu"]} <= set(ryu)


def test_the_default_install_has_no_eventlet_or_dnspython_of_cve_2023_29483():
    # dnspython before 2.6.1 and eventlet before 0.35.2 (their TuDoor fix); the Ryu lock
    # keeps older ones, and says so (docs/setup.md, "Frameworks")
    for name in ("main", "runtime"):
        pins = lock(name)
        assert pins["dnspython"] >= Version("2.6.1") and pins["eventlet"] >= Version("0.35.2")


def test_the_runtime_lock_holds_no_test_or_check_tool():
    tools = {norm(r) for extra in ("test", "dev") for r in
             PROJECT["project"]["optional-dependencies"][extra]}
    assert not tools & set(lock("runtime")), tools & set(lock("runtime"))
