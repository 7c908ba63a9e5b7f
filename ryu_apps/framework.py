"""The OpenFlow framework the controller runs on: Ryu (`ryu-manager`) or os-ken, OpenStack's
maintained fork of Ryu (`python -m ryu_apps.osken_manager`). Both have the same modules
under a different package name; everything of the framework the controller's shell uses is
imported here, once, so that the rest of ryu_apps names no framework (docs/setup.md,
"Frameworks").

Chosen as: the framework already loaded (each launcher loads its own before the app), else
$MALB_FRAMEWORK (ryu or os-ken), else Ryu when installed, else os-ken.

- NAME, VERSION: which framework, and its version;
- cfg, app_manager, App, ofp_event, set_ev_cls, CONFIG_DISPATCHER, MAIN_DISPATCHER,
  DEAD_DISPATCHER, hub, ofproto_v1_3, ofproto_v1_3_parser, stringify, round_up: the
  framework's own objects.
"""
from __future__ import annotations

import os
import sys
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

PACKAGES = {"ryu": "ryu", "os-ken": "os_ken"}
DISTRIBUTIONS = {"ryu": ("csle-ryu-fork", "ryu"), "os-ken": ("os-ken",)}


def choose() -> str:
    """The framework's name: the one loaded, else $MALB_FRAMEWORK, else Ryu if installed."""
    loaded = [name for name, package in PACKAGES.items() if package in sys.modules]
    if len(loaded) == 1:
        return loaded[0]
    wanted = os.environ.get("MALB_FRAMEWORK")
    if wanted:
        if wanted not in PACKAGES:
            print(f"MALB_FRAMEWORK={wanted!r}: expected one of {', '.join(PACKAGES)}",
                  file=sys.stderr)
            raise SystemExit(2)
        return wanted
    try:
        import_module("ryu")
        return "ryu"
    except ImportError:
        return "os-ken"


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
