"""Statements of the package's source files, for the tests that check its imports
and raises.

A source file is parsed once per test process (several checks read the
same 200 files), and a check looks only at statements: an ``import``,
``from ... import`` or ``raise`` is always a statement, nested in a function,
class, ``if``, ``try``, ``with``, loop or ``match`` case, never inside an
expression, so the expressions (nine nodes in ten) are not walked.

Example:
    >>> import ast
    >>> tree = ast.parse("def f():\\n    try:\\n        import os\\n    finally:\\n        raise X")
    >>> [type(s).__name__ for s in statements(tree)]
    ['FunctionDef', 'Try', 'Import', 'Raise']
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

__all__ = ("parsed", "statements")

#: the fields of a statement that hold statements (or handlers / cases of them)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@cache
def parsed(path: Path) -> ast.Module:
    """``path`` parsed (once per process: the files do not change in a run)."""
    return ast.parse(path.read_text(), str(path))


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
