"""Which OpenFlow framework the controller runs on (ryu_apps/framework.py) and the command
that starts it (common/procs.py's controller_argv); the os-ken launcher itself runs in the
controller's integration tests (`make test`), ryu-manager in `make test-e2e` and
`make test-ryu`."""
import os
import sys
import types
from importlib.metadata import version
from importlib.util import find_spec

import pytest

from common.procs import RYU_PYTHON, controller_argv, framework_app
from ryu_apps import framework, launcher


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


def test_otherwise_the_environment_where_installed_then_os_ken(modules, monkeypatch):
    monkeypatch.setenv("MALB_FRAMEWORK", "os-ken")
    assert framework.choose() == "os-ken"
    monkeypatch.delenv("MALB_FRAMEWORK")
    assert framework.choose() == "os-ken"        # this virtualenv has os-ken
    # the tests beside a controller under Ryu: this process runs on what it has
    monkeypatch.setenv("MALB_FRAMEWORK", "ryu")
    assert framework.choose() == ("ryu" if find_spec("ryu") else "os-ken")


def test_an_unknown_framework_is_one_line_and_exit_2(modules, monkeypatch, capsys):
    monkeypatch.setenv("MALB_FRAMEWORK", "nox")
    with pytest.raises(SystemExit) as exc:
        framework.choose()
    assert exc.value.code == 2
    assert capsys.readouterr().err == "MALB_FRAMEWORK='nox': expected one of ryu, os-ken\n"


def test_the_framework_of_this_process_is_os_ken_on_its_eventlet_hub():
    assert framework.NAME == "os-ken" and framework.VERSION == version("os-ken")
    assert framework.App.__name__ == "OSKenApp"
    assert framework.ofproto_v1_3.OFP_VERSION == 4
    assert framework.module("lib.packet.tcp").__name__ == "os_ken.lib.packet.tcp"
    assert os.environ["OSKEN_HUB_TYPE"] == "eventlet"


def test_the_controller_command_under_each_framework(monkeypatch):
    monkeypatch.delenv("MALB_FRAMEWORK", raising=False)
    osken = controller_argv()
    assert osken[:3] == [sys.executable, "-m", "ryu_apps.osken_manager"]
    assert osken[3] == "--user-flags" and osken[-1].endswith("ryu_apps/malb.py")
    monkeypatch.setenv("MALB_FRAMEWORK", "ryu")
    ryu = controller_argv()
    assert ryu[0] == os.path.join(os.path.dirname(RYU_PYTHON), "ryu-manager")
    assert ryu[1:] == osken[3:]
    assert controller_argv("os-ken") == osken
    assert controller_argv("ryu", apps=["x.py"], python="/v/bin/python") == \
        ["/v/bin/ryu-manager", "x.py"]
    assert framework_app("app.simple_switch_13") == "ryu.app.simple_switch_13"
    assert framework_app("app.simple_switch_13", "os-ken") == "os_ken.app.simple_switch_13"
    with pytest.raises(ValueError, match="MALB_FRAMEWORK: expected one of ryu, os-ken, got "
                                         "'nox'"):
        controller_argv("nox")


def test_the_launcher_says_in_one_line_what_it_cannot_start(monkeypatch, capsys):
    monkeypatch.setenv("MALB_FRAMEWORK", "nox")
    assert launcher.main([]) == 2
    assert capsys.readouterr().err == "MALB_FRAMEWORK: expected one of ryu, os-ken, got 'nox'\n"
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "ryu-manager")):
        monkeypatch.setenv("MALB_FRAMEWORK", "ryu")
        assert launcher.main([]) == 2
        assert "no ryu-manager beside" in capsys.readouterr().err
