"""Built-in backends take the kit's building blocks through the kit.

A name :mod:`asyncsched.schedulers.kit` re-exports is imported by a built-in
backend from the kit (or not at all), never from the module behind it: the
kit is the one door a plugin author uses too, so the built-in backends prove
it is enough.
"""

from __future__ import annotations

import ast
from pathlib import Path

from asyncsched import schedulers
from asyncsched.schedulers import kit
from tests.core._source_scan import scan

SCHEDULERS = Path(schedulers.__file__).parent
BACKENDS = ("local", "docker", "kubernetes", "slurm")


def _kit_sources() -> dict[str, set[str]]:
    """Module -> the names the kit re-exports from it."""
    tree = ast.parse(Path(kit.__file__).read_text())
    sources: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {a.asname or a.name for a in node.names}
            sources.setdefault(node.module, set()).update(names & set(kit.__all__))
    return sources


def _bypasses(path: Path, sources: dict[str, set[str]]) -> list[str]:
    found = []
    for node in scan(path).imports:
        if isinstance(node, ast.ImportFrom) and node.module in sources:
            names = {a.name for a in node.names} & sources[node.module]
            if names:
                found.append(
                    f"{path.name}:{node.lineno} {node.module}: {sorted(names)}"
                )
    return found


def test_the_kit_re_exports_names_from_several_modules() -> None:
    # the check below has something to check
    assert len(_kit_sources()) >= 10


def test_no_built_in_backend_imports_a_kit_name_from_behind_the_kit() -> None:
    sources = _kit_sources()
    bypasses = [
        line
        for backend in BACKENDS
        for path in sorted((SCHEDULERS / backend).glob("*.py"))
        for line in _bypasses(path, sources)
    ]
    assert bypasses == []
