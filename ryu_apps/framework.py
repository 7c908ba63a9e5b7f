"""The OpenFlow framework the controller runs on: Ryu (`ryu-manager`) or os-ken, OpenStack's
maintained fork of Ryu (`python -m ryu_apps.osken_manager`). Both have the same modules
under a different package name; everything of the framework the controller's shell uses is
imported here, once, so that the rest of ryu_apps names no framework (docs/setup.md,
"Frameworks").

Chosen as: the framework already loaded (each launcher loads its own before the app), else
$MALB_FRAMEWORK (ryu or os-ken) where installed, else os-ken when installed, else Ryu.

- NAME, VERSION: which framework, and its version;
- cfg, app_manager, App, ofp_event, set_ev_cls, CONFIG_DISPATCHER, MAIN_DISPATCHER,
  DEAD_DISPATCHER, hub, ofproto_v1_3, ofproto_v1_3_parser, stringify, round_up: the
  framework's own objects.
"""
from __future__ import annotations

import os
import sys
import warnings
from importlib import import_module
from importlib.util import find_spec
from importlib.metadata import PackageNotFoundError, version

PACKAGES = {"ryu": "ryu", "os-ken": "os_ken"}
DISTRIBUTIONS = {"ryu": ("csle-ryu-fork", "ryu"), "os-ken": ("os-ken",)}


def choose() -> str:
    """The framework's name: the one loaded, else $MALB_FRAMEWORK's where installed, else
    os-ken if installed, else Ryu. ($MALB_FRAMEWORK names the framework of the controllers
    started for you, common/procs.py; a process without it, such as the tests' beside a
    controller under Ryu, runs on the one it has.)"""
    loaded = [name for name, package in PACKAGES.items() if package in sys.modules]
    if len(loaded) == 1:
        return loaded[0]
    wanted = os.environ.get("MALB_FRAMEWORK")
    if wanted and wanted not in PACKAGES:
        print(f"MALB_FRAMEWORK={wanted!r}: expected one of {', '.join(PACKAGES)}",
              file=sys.stderr)
        raise SystemExit(2)
    for name in dict.fromkeys([wanted or "os-ken", "os-ken", "ryu"]):
        if find_spec(PACKAGES[name]) is not None:
            return name
    return "os-ken"      # neither: the import below says so


def _version(name: str) -> str:
    for dist in DISTRIBUTIONS[name]:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


NAME = choose()
VERSION = _version(NAME)
_pkg = PACKAGES[NAME]
if NAME == "os-ken":
    # its eventlet hub, as the launcher (ryu_apps/osken_manager.py) runs it: the same hub
    # in any process that loads the app, tests included; eventlet 0.40 and later say at
    # import that they are in bugfix-only mode, which would open every command's output
    os.environ.setdefault("OSKEN_HUB_TYPE", "eventlet")
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")

cfg = import_module(f"{_pkg}.cfg")
app_manager = import_module(f"{_pkg}.base.app_manager")
App = app_manager.RyuApp if NAME == "ryu" else app_manager.OSKenApp
ofp_event = import_module(f"{_pkg}.controller.ofp_event")
_handler = import_module(f"{_pkg}.controller.handler")
set_ev_cls = _handler.set_ev_cls
CONFIG_DISPATCHER = _handler.CONFIG_DISPATCHER
MAIN_DISPATCHER = _handler.MAIN_DISPATCHER
DEAD_DISPATCHER = _handler.DEAD_DISPATCHER
hub = import_module(f"{_pkg}.lib.hub")
stringify = import_module(f"{_pkg}.lib.stringify")
ofproto_v1_3 = import_module(f"{_pkg}.ofproto.ofproto_v1_3")
ofproto_v1_3_parser = import_module(f"{_pkg}.ofproto.ofproto_v1_3_parser")
round_up = import_module(f"{_pkg}.utils").round_up


def module(name: str):
    """The framework's module `name` ("lib.packet.tcp", "ofproto.nicira_ext"), for code that
    runs under either beyond the controller's shell: tests, benchmarks' baseline apps."""
    return import_module(f"{_pkg}.{name}")
