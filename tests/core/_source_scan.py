"""The import and raise statements of the package's source files, for the tests
that check them.

A file is parsed and scanned once per test process (several checks read the
same 200 files), and only what they look at is kept (not the whole tree:
nine nodes in ten are expressions, which would weigh on every garbage
collection of the test process afterwards). An ``import``, ``from ...
import`` or ``raise`` is always a statement, nested in a function, class,
``if``, ``try``, ``with``, loop or ``match`` case, never inside an
expression, so only statements are walked; a call of ``import_module`` names
it in the source, so expressions are walked for such calls only in a file that
does.

Example:
    >>> found = scan_source("def f():\\n    try:\\n        import os\\n    finally:\\n        raise X")
    >>> [type(s).__name__ for s in found.imports], len(found.raises)
    (['Import'], 1)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ("Scan", "scan", "scan_source", "statements")

#: the fields of a statement that hold statements (or handlers / cases of them)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Scan:
    """What the checks look at in one source."""

    imports: tuple[ast.Import | ast.ImportFrom, ...]
    raises: tuple[ast.Raise, ...]
    #: calls of a name or attribute ``import_module``
    import_module_calls: tuple[ast.Call, ...]


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement of ``tree``, however deeply nested, in source order."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.Module | ast.ExceptHandler | ast.match_case):
            yield node
        children: list[ast.AST] = []
        for name in _BLOCKS:
            children += getattr(node, name, None) or ()
        stack.extend(reversed(children))


def scan_source(source: str, filename: str = "<source>") -> Scan:
    """The imports, raises and ``import_module`` calls of ``source``."""
    tree = ast.parse(source, filename)
    imports: list[ast.Import | ast.ImportFrom] = []
    raises: list[ast.Raise] = []
    for node in statements(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(node)
        elif isinstance(node, ast.Raise):
            raises.append(node)
    calls: list[ast.Call] = []
    if "import_module" in source:
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            == "import_module"
        ]
    return Scan(tuple(imports), tuple(raises), tuple(calls))


@cache
def scan(path: Path) -> Scan:
    """:func:`scan_source` of the file at ``path`` (once per process: the
    files do not change during a run)."""
    return scan_source(path.read_text(), str(path))
