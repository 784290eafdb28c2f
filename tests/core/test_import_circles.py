"""No backend package's modules import each other in a circle.

Type-only imports (under ``TYPE_CHECKING``) count too: a circle held together
by them still means two modules that cannot be read, or moved, one without
the other. A lower module that needs the shape of a higher one's object
declares a Protocol for what it reads.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.core.test_private_imports import (
    PACKAGE,
    _imported_modules,
    _module_name,
    _package_of,
)

BACKENDS = ("docker", "kubernetes", "local", "slurm")


def _graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (any form)."""
    folder = PACKAGE.joinpath(*package.split(".")[1:])
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        name = _module_name(path)
        imported = _imported_modules(path.read_text(), _package_of(path))
        graph[name] = {
            dotted
            for _, dotted in imported
            if dotted.rpartition(".")[0] == package and dotted != name
        }
    return graph


def _circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_backend_module_imports_its_importers(backend: str) -> None:
    assert _circles(_graph(f"asyncsched.schedulers.{backend}")) == []


def test_the_circle_scan_finds_a_type_only_circle() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from asyncsched.schedulers.local._local_app import LocalApp\n"
    )
    imported = {d for _, d in _imported_modules(source, "asyncsched.schedulers.local")}
    assert "asyncsched.schedulers.local._local_app" in imported
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
