"""Which OpenFlow framework the controller runs on (ryu_apps/framework.py) and the command
that starts it (common/procs.py's controller_argv); the os-ken launcher itself runs in the
controller's integration tests under MALB_FRAMEWORK=os-ken (`make test-osken`)."""
import sys
import types

import pytest

from common.procs import OSKEN_PYTHON, controller_argv
from ryu_apps import framework


@pytest.fixture
def modules(monkeypatch):
    """sys.modules without either framework; a test adds the one it pretends is loaded."""
    for package in framework.PACKAGES.values():
        monkeypatch.delitem(sys.modules, package, raising=False)
    monkeypatch.delenv("MALB_FRAMEWORK", raising=False)
    return lambda package: monkeypatch.setitem(sys.modules, package,
                                                types.ModuleType(package))


def test_the_framework_already_loaded_wins_over_the_environment(modules, monkeypatch):
    monkeypatch.setenv("MALB_FRAMEWORK", "ryu")
    modules("os_ken")
    assert framework.choose() == "os-ken"


def test_otherwise_the_environment_then_ryu_when_installed(modules, monkeypatch):
    monkeypatch.setenv("MALB_FRAMEWORK", "os-ken")
    assert framework.choose() == "os-ken"
    monkeypatch.delenv("MALB_FRAMEWORK")
    assert framework.choose() == "ryu"           # this virtualenv has Ryu (now loaded again)


def test_an_unknown_framework_is_one_line_and_exit_2(modules, monkeypatch, capsys):
    monkeypatch.setenv("MALB_FRAMEWORK", "nox")
    with pytest.raises(SystemExit) as exc:
        framework.choose()
    assert exc.value.code == 2
    assert capsys.readouterr().err == "MALB_FRAMEWORK='nox': expected one of ryu, os-ken\n"


def test_the_framework_of_this_process_is_ryu_with_its_version():
    assert framework.NAME == "ryu" and framework.VERSION == "4.37.0.dev3357"
    assert framework.App.__name__ == "RyuApp"
    assert framework.ofproto_v1_3.OFP_VERSION == 4


def test_the_controller_command_under_each_framework(monkeypatch):
    monkeypatch.delenv("MALB_FRAMEWORK", raising=False)
    ryu = controller_argv()
    assert ryu[0].endswith("/ryu-manager") and ryu[1] == "--user-flags"
    assert ryu[-1].endswith("ryu_apps/malb.py")
    monkeypatch.setenv("MALB_FRAMEWORK", "os-ken")
    osken = controller_argv()
    assert osken[:3] == [OSKEN_PYTHON, "-m", "ryu_apps.osken_manager"] and osken[3:] == ryu[1:]
    assert controller_argv("ryu") == ryu
    with pytest.raises(ValueError, match="MALB_FRAMEWORK: expected one of ryu, os-ken, got "
                                         "'nox'"):
        controller_argv("nox")
