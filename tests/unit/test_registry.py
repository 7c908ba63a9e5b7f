"""The registry of experiments and benchmarks (experiments/registry.py) lists every runnable
module, each importable, with a page that exists."""
from __future__ import annotations

import glob
import importlib
import os

import pytest

from experiments.registry import ENTRIES, HELPERS, KINDS, find
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


def _main(package: str):
    """The package's command line, called in this process (python -m <package>)."""
    return importlib.import_module(f"{package}.__main__").main


def test_the_listings_name_every_entry():
    # the real command lines once; the other spellings in process below
    experiments = run_module("experiments", timeout=60)
    benchmarks = run_module("benchmarks", "list", timeout=60)
    assert experiments.returncode == 0 and benchmarks.returncode == 0
    for e in ENTRIES:
        shown = benchmarks.stdout if e.kind == "benchmark" else experiments.stdout
        assert f"python -m {e.module}  ({e.kind})" in shown


@pytest.mark.parametrize("how", [("list",), ("--list",)])
def test_list_and_its_flag_say_the_same(how, capsys):
    for package in ("experiments", "benchmarks"):
        assert _main(package)(list(how)) == 0
        assert _main(package)(["list"]) == 0
        out = capsys.readouterr().out
        half = len(out) // 2
        assert out[:half] == out[half:] and "python -m " in out


@pytest.mark.parametrize("package, name, module", [
    ("experiments", "lb_model", "experiments.lb_model"),
    ("experiments", "experiments.placement_model", "experiments.placement_model"),
    ("experiments", "faults", "experiments.faults"),
    ("benchmarks", "placement", "benchmarks.placement")])
def test_run_hands_the_rest_of_the_line_to_the_named_one(package, name, module, capsys):
    with pytest.raises(SystemExit) as done:
        _main(package)(["run", name, "--help"])
    assert done.value.code == 0
    assert f"usage: python -m {module}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("package, name", [("experiments", "placement"),   # a benchmark
                                           ("benchmarks", "suite"),        # an experiment
                                           ("experiments", "loadgen")])    # a helper
def test_run_of_what_the_package_does_not_list_is_a_usage_error(package, name, capsys):
    with pytest.raises(SystemExit) as done:
        _main(package)(["run", name])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert f"named {name!r}; one of: " in err and "Traceback" not in err


def test_find_takes_the_module_or_its_last_part():
    assert find("suite", ("experiment",)).module == "experiments.suite"
    assert find("experiments.suite", ("experiment",)).module == "experiments.suite"
    assert find("suite", ("benchmark",)) is None


def test_run_gives_the_module_its_own_command_line(monkeypatch):
    """A module that records the command of its results from sys.argv (as the benchmarks
    do with no flags) sees `python -m <module> <its flags>`, not `run <name>`."""
    import sys
    import types

    from experiments import registry
    seen = {}
    module = types.ModuleType("fake_entry_module")

    def main(argv=None):
        seen["argv"], seen["sys.argv"] = argv, list(sys.argv)
        return 0
    module.main = main
    monkeypatch.setitem(sys.modules, "fake_entry_module", module)
    entry = registry.Entry("fake_entry_module", "benchmark", "w", "n", "docs/tests.md")
    monkeypatch.setattr(registry, "ENTRIES", (entry,))
    before = list(sys.argv)
    for flags in ([], ["--seconds", "5"]):
        assert registry.command_line("p", "d", ("benchmark",), lambda: 1,
                                     ["run", "fake_entry_module", *flags]) == 0
        assert seen == {"argv": flags, "sys.argv": ["fake_entry_module", *flags]}
    assert sys.argv == before


def test_run_without_a_name_names_them(capsys):
    with pytest.raises(SystemExit) as done:
        _main("benchmarks")(["run"])
    assert done.value.code == 2 and "name one; one of: controller" in capsys.readouterr().err
