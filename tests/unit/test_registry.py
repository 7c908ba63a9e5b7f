"""The registry of experiments and benchmarks (experiments/registry.py) lists every runnable
module, each importable, with a page that exists."""
from __future__ import annotations

import glob
import importlib
import os

import pytest

from experiments.registry import ENTRIES, HELPERS, KINDS
from tests.conftest import ROOT, run_module
from tests.unit.test_docs_links import anchors


def runnable_modules() -> set[str]:
    """Modules under experiments/ and benchmarks/ with a command line: a `__main__` guard,
    or a package's __main__.py (the package's name; its own modules belong to it)."""
    out = set()
    for package in ("experiments", "benchmarks"):
        for path in glob.glob(os.path.join(ROOT, package, "**", "*.py"), recursive=True):
            rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
            parts = rel.split(".")
            if parts[-1] == "__main__":
                if len(parts) > 2:              # a sub-package run as python -m it
                    out.add(".".join(parts[:-1]))
                continue
            inside = os.path.isfile(os.path.join(os.path.dirname(path), "__main__.py")) \
                and len(parts) > 2
            text = open(path, encoding="utf-8").read()
            if '__name__ == "__main__"' in text and not inside:
                out.add(rel)
    return out


def test_every_runnable_module_is_listed_once():
    listed = [e.module for e in ENTRIES] + list(HELPERS)
    assert len(listed) == len(set(listed))
    assert runnable_modules() == set(listed), (
        f"unlisted: {sorted(runnable_modules() - set(listed))}; "
        f"listed but not runnable: {sorted(set(listed) - runnable_modules())}")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.module)
def test_each_entry_imports_has_a_main_and_a_page(entry):
    assert entry.kind in KINDS
    module = importlib.import_module(entry.module)
    if not hasattr(module, "main"):                 # a package: its __main__ runs it
        module = importlib.import_module(entry.module + ".__main__")
    assert callable(module.main)
    page, _, anchor = entry.doc.partition("#")
    assert os.path.isfile(os.path.join(ROOT, page)), entry.doc
    if anchor:
        assert anchor in anchors(os.path.join(ROOT, page)), entry.doc


def test_the_listings_name_every_entry():
    experiments = run_module("experiments", timeout=60)
    benchmarks = run_module("benchmarks", "--list", timeout=60)
    assert experiments.returncode == 0 and benchmarks.returncode == 0
    for e in ENTRIES:
        shown = benchmarks.stdout if e.kind == "benchmark" else experiments.stdout
        assert f"python -m {e.module}  ({e.kind})" in shown
