"""No class of ours over MAX_CLASS_LINES lines (issue 65: a class that long holds more than
one thing); one let through for a while is listed by name, so that a new one fails and a
split one must leave the list."""
from __future__ import annotations

import ast
import pathlib

from tests.conftest import ROOT as ROOT_DIR
from tests.unit.test_import_cycles import PACKAGES, module_name

ROOT = pathlib.Path(ROOT_DIR)
MAX_CLASS_LINES = 320
KNOWN_LARGE: set[str] = set()      # none now


def large_classes() -> dict[str, int]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_CLASS_LINES:
                        out[f"{module_name(path)}.{node.name}"] = lines
    return out


def test_no_class_over_the_limit_but_those_still_listed():
    found = large_classes()
    assert not set(found) - KNOWN_LARGE, {k: v for k, v in found.items() if k not in KNOWN_LARGE}
    assert not KNOWN_LARGE - set(found), f"now within the limit (take off the list): " \
        f"{sorted(KNOWN_LARGE - set(found))}"
