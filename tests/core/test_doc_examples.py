"""Every Python example in README.md and docs/ runs as written (on the local backend).

Convention for the ```` ```python ```` blocks of README.md, ``docs/*.md`` and
``docs/backends/*.md``: a block runs as written, in a fresh interpreter, in an
empty directory, with its own ``ASYNCSCHED_STATE_DIR``; it must exit 0.
Top-level ``await`` / ``async with`` is allowed (the block is then run on
asyncio, as ``python -m asyncio`` would). A block whose comments say it also
runs with ``backend="trio"`` also runs with ``anyio.run(main, backend="trio")``.

An HTML comment on the line right before the fence (invisible in the rendered
docs) says when a block is not run as written:

* ``<!-- example: fragment -->``: a piece of a program (names defined
  elsewhere); only compiled.
* ``<!-- example: needs docker -->`` (or ``kubernetes``, ``slurm``): a whole
  program that needs that engine; compiled, and reported as skipped.
* ``<!-- example: scaled OLD=NEW -->``: run with the text ``OLD`` replaced by
  ``NEW`` (e.g. 10,000 apps scaled down to 20 on a shared test machine).

Any other marker is an error, so a typo cannot silently skip a block.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCS += sorted((ROOT / "docs" / "backends").glob("*.md"))

_BLOCK = re.compile(
    r"(?:^<!-- example: (?P<marker>[^>]*?) -->\n)?^```python\n(?P<code>.*?)^```",
    re.MULTILINE | re.DOTALL,
)
_ENGINES = ("docker", "kubernetes", "slurm")
_TRIO_RUN = 'anyio.run(main, backend="trio")'

#: runs a block; top-level await makes ``eval`` return a coroutine to drive
_HARNESS = """\
import ast, asyncio, sys
path = sys.argv[1]
code = compile(open(path).read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__", "__file__": path})
if result is not None:
    asyncio.run(result)
"""


@dataclass(frozen=True)
class Example:
    doc: str
    index: int
    marker: str | None
    code: str

    @property
    def id(self) -> str:
        return f"{self.doc}#{self.index}"


def _examples() -> list[Example]:
    found = []
    for doc in DOCS:
        for index, match in enumerate(_BLOCK.finditer(doc.read_text())):
            name = str(doc.relative_to(ROOT))
            found.append(Example(name, index, match["marker"], match["code"]))
    return found


EXAMPLES = _examples()


def _compile(example: Example) -> None:
    compile(example.code, example.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _runs(example: Example) -> list[tuple[str, str]]:
    """(id, code) of every run of a block meant to run."""
    code = example.code
    if example.marker and example.marker.startswith("scaled "):
        old, new = example.marker.removeprefix("scaled ").split("=")
        assert old in code, f"{example.id}: {old!r} is not in the block"
        code = code.replace(old, new)
    runs = [(example.id, code)]
    if 'backend="trio"' in code and "anyio.run(main)" in code:
        runs.append((f"{example.id}-trio", code.replace("anyio.run(main)", _TRIO_RUN)))
    return runs


def _cases() -> list[object]:
    cases: list[object] = []
    for example in EXAMPLES:
        marker = example.marker
        if marker == "fragment":
            continue
        if marker in {f"needs {e}" for e in _ENGINES}:
            cases.append(
                pytest.param(
                    example.code,
                    id=example.id,
                    marks=pytest.mark.skip(reason=f"{example.id} {marker}"),
                )
            )
            continue
        cases.extend(pytest.param(code, id=run_id) for run_id, code in _runs(example))
    return cases


def test_every_marker_is_known_and_every_block_compiles() -> None:
    assert len(EXAMPLES) >= 20  # the pattern still finds the blocks
    for example in EXAMPLES:
        marker = example.marker
        assert (
            marker is None
            or marker == "fragment"
            or marker in {f"needs {e}" for e in _ENGINES}
            or re.fullmatch(r"scaled \S+=\S+", marker)
        ), f"{example.id}: unknown marker {marker!r}"
        _compile(example)


def test_readme_has_an_async_and_a_sync_example_that_run() -> None:
    readme = [e for e in EXAMPLES if e.doc == "README.md" and e.marker is None]
    assert any("async def main" in e.code for e in readme)
    assert any("asyncsched.sync" in e.code for e in readme)
    # the async example names trio, so it is also run under trio
    assert any(len(_runs(e)) == 2 for e in readme)


@pytest.mark.parametrize("code", _cases())
def test_doc_example_runs(code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        [sys.executable, "-c", _HARNESS, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if re.search(r"print\(.*\.state\)", code):  # it prints a final state
        assert "SUCCEEDED" in proc.stdout, proc.stdout


# -- what the examples need is installed by the extras the docs name ---------


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return extras


def test_the_all_extra_installs_every_backend_and_event_loop_extra() -> None:
    extras = _extras()
    everything = set(extras["all"])
    for name, requirements in extras.items():
        if name not in {"all", "test"}:
            assert set(requirements) <= everything, name


def test_the_trio_the_readme_names_comes_with_the_trio_extra() -> None:
    extras = _extras()
    assert any(r.startswith("trio") for r in extras["trio"])
    assert any(r.startswith("trio") for r in extras["all"])
    readme = (ROOT / "README.md").read_text()
    assert "pip install 'asyncsched[trio]'" in readme
