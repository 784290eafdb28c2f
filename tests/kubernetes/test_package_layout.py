"""The Kubernetes backend stays one idea per file: small, no import circle.

Each module of ``asyncsched/schedulers/kubernetes`` is read as source (no
import runs): no file is over 650 lines, imports sit at the top of a module
(an ``if TYPE_CHECKING:`` block aside; the extra is loaded by name in
``_gate``), and the modules' imports of each other form no circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import asyncsched.schedulers.kubernetes as backend

PACKAGE = Path(backend.__file__).parent
PREFIX = "asyncsched.schedulers.kubernetes."
MAX_LINES = 650


def _modules() -> dict[str, ast.Module]:
    return {
        path.stem: ast.parse(path.read_text(), filename=str(path))
        for path in sorted(PACKAGE.glob("*.py"))
    }


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nested_imports(tree: ast.Module) -> list[int]:
    """Lines of imports that are not at the module's top level."""
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            top.add(id(node))
        elif isinstance(node, ast.If) and _is_type_checking(node):
            top.update(id(inner) for inner in ast.walk(node))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top
    ]


def _siblings_imported(tree: ast.Module) -> set[str]:
    """The package's modules that ``tree`` imports (TYPE_CHECKING ones too)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PREFIX):
                names.add(node.module.removeprefix(PREFIX).split(".")[0])
            elif node.module == PREFIX.rstrip("."):
                names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    names.add(alias.name.removeprefix(PREFIX).split(".")[0])
    return names


def test_no_kubernetes_module_is_over_650_lines() -> None:
    long = {
        path.name: n
        for path in PACKAGE.glob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_kubernetes_modules_import_only_at_their_top() -> None:
    nested = {
        name: lines
        for name, tree in _modules().items()
        if (lines := _nested_imports(tree))
    }
    assert nested == {}


def test_kubernetes_modules_import_each_other_without_a_circle() -> None:
    modules = _modules()
    graph = {
        name: _siblings_imported(tree) & modules.keys() - {name, "__init__"}
        for name, tree in modules.items()
        if name != "__init__"
    }
    # depth-first search: a module met again while still on the path is a circle
    state: dict[str, str] = {}
    circles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []
