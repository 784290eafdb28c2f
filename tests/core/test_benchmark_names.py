"""The README names exactly the benchmarks ``nox -s bench -- NAME`` runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _bench_names() -> dict[str, str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "BENCHMARKS" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError("noxfile.py defines no BENCHMARKS")


def test_every_bench_name_runs_a_script_that_exists() -> None:
    for name, script in _bench_names().items():
        assert (ROOT / "benchmarks" / script).is_file(), (name, script)


def test_the_readme_lists_exactly_the_bench_names() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    listed = readme.split("nox -s bench -- NAME`:", 1)[1].split(";", 1)[0]
    assert set(re.findall(r"`([\w-]+)`", listed)) == set(_bench_names())


def test_every_benchmark_script_has_a_bench_name() -> None:
    scripts = {p.name for p in (ROOT / "benchmarks").glob("[!_]*.py")}
    assert scripts == set(_bench_names().values())
