"""No module of ours imports, directly or through others, a module that imports it back,
counting imports inside functions (a deferred import hides a cycle, it does not break it);
only imports under `if TYPE_CHECKING:` are left out, as they never run. The cycles not yet
broken are listed here by name, so that a new one fails and a broken one must leave the list.
"""
from __future__ import annotations

import ast
import pathlib

from tests.conftest import ROOT as ROOT_DIR

ROOT = pathlib.Path(ROOT_DIR)

PACKAGES = ("agents", "benchmarks", "common", "deploy", "examples", "experiments",
            "placement", "profiler", "ryu_apps", "scripts", "services", "slo", "topologies")
# each a set of modules (or packages) that import each other round a cycle
KNOWN_CYCLES: set[frozenset[str]] = set()
KNOWN_PACKAGE_CYCLES: set[frozenset[str]] = set()


def module_name(path: pathlib.Path) -> str:
    """The dotted name of one of our source files."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def runtime_imports(tree: ast.AST, name: str, is_package: bool,
                    modules: set[str] = frozenset()) -> set[str]:
    """Every module name the source imports, absolute, outside `if TYPE_CHECKING:`: for
    `from x import y`, x.y when that is one of `modules`, else x."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                  "typing.TYPE_CHECKING"):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                anchor = here[:len(here) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return out


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for package in PACKAGES
             for p in (ROOT / package).rglob("*.py")}
    graph = {}
    for name, path in files.items():
        imported = runtime_imports(ast.parse(path.read_text()), name,
                                   path.name == "__init__.py", set(files))
        graph[name] = {m for m in imported if m in files and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_finder_sees_a_cycle_through_an_import_inside_a_function():
    source = "def f():\n    from a import b, c\n"
    assert runtime_imports(ast.parse(source), "a.d", False, {"a.b"}) == {"a", "a.b"}
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.b\n"
    assert runtime_imports(ast.parse(typed), "a.c", False) == {"typing"}
    assert runtime_imports(ast.parse("from . import x\n"), "p.q", False, {"p.x"}) == {"p.x"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {
        frozenset({"a", "b", "c"})}


def packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between top-level packages: one imports another when a module does."""
    out: dict[str, set[str]] = {}
    for module, imported in graph.items():
        top = module.split(".")[0]
        out.setdefault(top, set()).update(m.split(".")[0] for m in imported)
        out[top].discard(top)
    return out


def assert_only_known(found: set[frozenset[str]], known: set[frozenset[str]]) -> None:
    new = [sorted(c) for c in found - known]
    gone = [sorted(c) for c in known - found]
    assert not new, f"import cycles: {new}"
    assert not gone, f"no longer cycles (take them off the known list): {gone}"


def test_no_import_cycle_between_modules_but_those_still_listed():
    assert_only_known(cycles(import_graph()), KNOWN_CYCLES)


def test_no_import_cycle_between_packages_but_those_still_listed():
    assert_only_known(cycles(packages(import_graph())), KNOWN_PACKAGE_CYCLES)
