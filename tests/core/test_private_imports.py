"""No module of the package imports another package's private (``_``) module.

A package's private modules are its own business: the package itself (and its
sub-packages) may import them; everyone else goes through public names, so a
backend can reorganise its insides without breaking the CLI, the sync facade or
another backend.
"""

from __future__ import annotations

import ast
from pathlib import Path

import asyncsched
from tests.core._source_scan import Scan, scan, scan_source

PACKAGE = Path(asyncsched.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(path: Path) -> str:
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (
        PACKAGE / rel / "__init__.py"
    ).is_file()


def _imported_modules(source: str | Scan, package: str) -> list[tuple[int, str]]:
    """``(line, dotted module)`` for every module ``source`` imports, by any form.

    ``package`` is the package the source belongs to (for relative imports);
    ``source`` is code, or the :class:`Scan` of a file.
    """
    scanned = scan_source(source) if isinstance(source, str) else source
    found: list[tuple[int, str]] = []
    for node in scanned.imports:
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if candidate.startswith("asyncsched.") and _is_module(candidate):
                    found.append((node.lineno, candidate))
    for call in scanned.import_module_calls:
        if (
            call.args
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        ):
            found.append((call.lineno, call.args[0].value))
    return found


def _private_owner(dotted: str) -> str | None:
    """The package owning the first ``_``-prefixed module in ``dotted``, if any."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if i and part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _foreign_private_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _package_of(path)
        for line, dotted in _imported_modules(scan(path), importer):
            if not dotted.startswith("asyncsched."):
                continue
            owner = _private_owner(dotted)
            if owner is None or importer == owner or importer.startswith(owner + "."):
                continue
            rel = path.relative_to(PACKAGE.parent)
            found.append(f"{rel}:{line}: imports {dotted}")
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    assert _foreign_private_imports() == []


def test_the_scan_sees_every_import_form() -> None:
    forms = {
        "import asyncsched.schedulers.local._records": True,
        "from asyncsched.schedulers.local._records import read": True,
        "from asyncsched.schedulers.local import _records": True,
        "importlib.import_module('asyncsched.schedulers.local._records')": True,
        "from ..schedulers.local import _records": True,
        "from asyncsched.cli._common import err": False,  # its own package
        "from ._common import err": False,
        "from asyncsched.schedulers.local import LocalScheduler": False,
    }
    for code, private in forms.items():
        imported = _imported_modules(code, "asyncsched.cli")
        foreign = [
            d for _, d in imported if _private_owner(d) not in (None, "asyncsched.cli")
        ]
        assert bool(foreign) is private, code


#: modules whose names a backend gets from ``asyncsched.schedulers.kit``
KIT_MODULES = frozenset(
    {
        "asyncsched.schedulers.api",
        "asyncsched.schedulers.snapshot",
        *(
            f"asyncsched.schedulers.shared.{name}"
            for name in (
                "changes",
                "factory",
                "follow",
                "lifecycle",
                "lines",
                "replica_limits",
                "taskhost",
                "undo",
            )
        ),
    }
)
BACKENDS = ("docker", "kubernetes", "local", "slurm")


def _kit_bypasses(path: Path, source: str | Scan) -> list[str]:
    importer = _package_of(path)
    rel = path.relative_to(PACKAGE.parent)
    return [
        f"{rel}:{line}: imports {dotted}"
        for line, dotted in _imported_modules(source, importer)
        if dotted in KIT_MODULES
    ]


def test_built_in_backends_get_shared_machinery_only_through_the_kit() -> None:
    found = []
    for backend in BACKENDS:
        for path in sorted((PACKAGE / "schedulers" / backend).rglob("*.py")):
            found += _kit_bypasses(path, scan(path))
    assert found == []


def test_the_kit_scan_flags_a_backend_that_bypasses_the_kit() -> None:
    path = PACKAGE / "schedulers" / "docker" / "_scheduler.py"
    bypass = "from asyncsched.schedulers.shared.taskhost import TaskHost\n"
    assert _kit_bypasses(path, bypass)
    assert not _kit_bypasses(path, "from asyncsched.schedulers.kit import TaskHost\n")


def test_the_kit_exports_a_tuple_of_names_that_exist() -> None:
    from asyncsched.schedulers import kit

    assert isinstance(kit.__all__, tuple)
    assert [name for name in kit.__all__ if not hasattr(kit, name)] == []
