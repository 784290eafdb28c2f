"""Each engine's tests run in one pytest-xdist worker (tests/engine_groups.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.engine_groups import ENGINE_GROUPS, engine_group

TESTS = Path(__file__).parents[1]


def test_each_engine_directory_is_one_group_and_other_tests_are_not() -> None:
    for group in ENGINE_GROUPS:
        assert engine_group(f"tests/{group}/test_x.py::test_y[a/b-real]") == group
        assert (TESTS / group / "conftest.py").exists()
    assert engine_group("tests/docker/test_x.py::test_y") == "docker"
    assert engine_group("tests/local/test_x.py::test_y") is None
    assert engine_group("tests/docker.py::test_y") is None
    assert engine_group("tests/core/test_x.py::test_y[tests/docker/]") is None


def test_only_the_real_cluster_runs_of_kubernetes_tests_are_grouped() -> None:
    """The fake API server is started by each test, on a free port."""
    real = ("[real]", "[real-indexed]", "[asyncio-volcano-real]", "[real-a/b-volcano]")
    for params in real:
        assert engine_group(f"tests/kubernetes/t.py::test_y{params}") == "kubernetes"
    fake = ("", "[fake]", "[asyncio-volcano-fake]", "[fake-unreal]", "[1.20]")
    for params in fake:
        assert engine_group(f"tests/kubernetes/t.py::test_y{params}") is None


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            package = ".".join(path.relative_to(TESTS.parent).parts[:-1])
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join([*base, node.module or ""]))
            else:
                found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_test_outside_an_engine_directory_imports_its_engine_helpers() -> None:
    """A test elsewhere that started an engine would start it in a second
    worker, beside the one running that engine's directory."""
    engines = tuple(f"tests.{group}" for group in ENGINE_GROUPS)
    for path in TESTS.rglob("*.py"):
        relative = path.relative_to(TESTS)
        if relative.parts[0] in ENGINE_GROUPS:
            continue
        wrong = {name for name in _imports(path) if name.startswith(engines)}
        assert not wrong, f"{relative} imports {sorted(wrong)}"
