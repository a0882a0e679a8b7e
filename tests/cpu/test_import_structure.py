"""The import structure of ``dgboost/``: no import cycles, no imports of other modules' private names.

Every module is parsed with :mod:`ast` (nothing is imported). Imports inside functions count
as much as top-level ones: a lazy import hides a cycle from Python but not from a reader.
An import of ``a.b.c`` also imports the packages ``a`` and ``a.b`` (their ``__init__`` runs
first), except for a module inside that package, which does not go through its own
package's ``__init__`` for a sibling: ``from . import sibling`` imports the sibling (the
package is necessarily imported already), ``from . import name`` a name of the package's
``__init__``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dgboost"


def _modules(root: Path) -> dict[str, tuple[Path, list[str]]]:
    """Every module of the package: name -> (file, the package its relative imports start from)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = parts
        else:
            package = parts[:-1]
        modules[".".join(parts)] = (path, package)
    return modules


def _imports(tree: ast.AST, package: list[str]):
    """(module imported, names imported from it) for every import statement of ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def _graph(root: Path) -> dict[str, set[str]]:
    """Module -> the dgboost modules it imports (parent packages included, see the module docstring)."""
    modules = _modules(root)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        for target, names in _imports(ast.parse(path.read_text(encoding="utf-8")), package):
            # ``from p import m`` imports the module p.m when there is one, else a name of p itself
            imported = {f"{target}.{n}" if f"{target}.{n}" in modules else target for n in names} or {target}
            for candidate in imported:
                if candidate in modules and candidate != name:
                    edges[name].add(candidate)
                parts = candidate.split(".")
                for i in range(1, len(parts)):
                    parent = ".".join(parts[:i])
                    if parent in modules and parent != name and not name.startswith(parent + "."):
                        edges[name].add(parent)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _a_cycle_path(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One cycle through the first module of ``component``: ``[a, b, ..., a]`` (breadth-first)."""
    members = set(component)
    start = component[0]
    previous = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node] & members):
                if child == start:
                    path = [node]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return component


def test_the_graph_sees_lazy_imports_relative_imports_and_parent_packages(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from .sub import leaf\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "leaf.py").write_text("def f():\n    from ..top import g\n")
    (root / "sub" / "sibling.py").write_text("from pkg.sub import leaf\nfrom . import leaf as again\n")
    (root / "sub" / "user.py").write_text("from . import name_of_the_package\n")
    (root / "top.py").write_text("from pkg.sub.leaf import f\n")
    edges = _graph(root)
    assert edges["pkg.sub.leaf"] == {"pkg.top"}  # lazy and relative; leaf is inside pkg, so not via pkg
    assert edges["pkg.top"] == {"pkg.sub.leaf", "pkg.sub"}  # through pkg.sub's __init__
    assert edges["pkg.sub.sibling"] == {"pkg.sub.leaf"}  # a sibling does not go through pkg.sub
    assert edges["pkg.sub.user"] == {"pkg.sub"}  # a name of the package's __init__
    assert edges["pkg"] == {"pkg.sub.leaf", "pkg.sub"}
    assert _cycles(edges) == [["pkg.sub.leaf", "pkg.top"]]


def test_dgboost_has_no_import_cycle():
    edges = _graph(PACKAGE)
    cycles = _cycles(edges)
    described = [f"{' -> '.join(_a_cycle_path(c, edges))} (component: {', '.join(c)})" for c in cycles]
    assert not cycles, "import cycles in dgboost/:\n" + "\n".join(described)


def _private_imports(root: Path) -> list[str]:
    """``module: from target import _name`` for every private name imported from another dgboost module."""
    modules = _modules(root)
    bad = []
    for name, (path, package) in modules.items():
        for target, names in _imports(ast.parse(path.read_text(encoding="utf-8")), package):
            if target.split(".")[0] != root.name or target == name:
                continue
            for imported in names:
                is_module = f"{target}.{imported}" in modules
                if imported.startswith("_") and not imported.startswith("__") and not is_module:
                    bad.append(f"{name}: from {target} import {imported}")
    return bad


def test_a_private_name_imported_from_another_module_is_found_but_a_private_module_is_not(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("from . import _records\nfrom ._records import keep, _hidden\n")
    (root / "_records.py").write_text("import os\nfrom os import _exit\n")
    assert _private_imports(root) == ["pkg: from pkg._records import _hidden"]


def test_no_dgboost_module_imports_another_modules_private_names():
    bad = _private_imports(PACKAGE)
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "module",
    [
        "dgboost.cli",
        "dgboost.explain",
        "dgboost.dask",
        "dgboost.backend.cpu",
        "dgboost.model_io",
        "dgboost.xgboost_json",
        "dgboost.explain.interventional",
    ],
)
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    # the order in which a cycle would fail (ImportError on a partly initialised module)
    # depends on which module is imported first: each is imported first here, on its own
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=PACKAGE.parent, timeout=300
    )
    assert done.returncode == 0, done.stderr
