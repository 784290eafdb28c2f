"""The README's test command, ``bash .ci/run``: which nox sessions run when.

The script runs against a stand-in ``python3`` on ``PATH`` whose venv's
``nox`` records its sessions instead of running them.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

#: the stand-in ``python3 -m venv DIR``: a venv whose pip does nothing and
#: whose nox logs "start SESSIONS", waits (30 s at most) for the other nox run
#: to have started (the tests) or ended (lint, typecheck and docs, which so
#: run beside the tests), logs "end SESSIONS" and exits with the code in the
#: file ``fail-SESSIONS`` (0 without one)
FAKE_PYTHON = r"""#!/usr/bin/env bash
set -eu
venv=$3
mkdir -p "$venv/bin"
printf '#!/bin/sh\nexit 0\n' >"$venv/bin/pip"
cat >"$venv/bin/nox" <<'NOX'
#!/usr/bin/env bash
shift
name="$*"
echo "start $name" >>log
if [ "$name" = tests ]; then awaited="end lint typecheck docs"; else awaited="start tests"; fi
for _ in $(seq 600); do
    grep -q "$awaited" log && break
    sleep 0.05
done
echo "end $name" >>log
code=0
[ -e "fail-$name" ] && code=$(cat "fail-$name")
exit "$code"
NOX
chmod +x "$venv/bin/pip" "$venv/bin/nox"
"""


def _run_ci(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``bash .ci/run`` in a copy holding only the script; its sessions' log."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    ran = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")],
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return ran, (tmp_path / "log").read_text().splitlines()


def test_the_ci_command_runs_lint_typecheck_and_docs_beside_the_tests(
    tmp_path: Path,
) -> None:
    ran, log = _run_ci(tmp_path)
    assert ran.returncode == 0, ran.stderr
    # each waited for the other: the tests ended after the others, which
    # started before the tests had
    assert log.index("start tests") < log.index("end lint typecheck docs")
    assert log.index("end lint typecheck docs") < log.index("end tests")
    assert log.index("start lint typecheck docs") < log.index("end tests")


@pytest.mark.parametrize("failed", ["tests", "lint typecheck docs"])
def test_the_ci_command_fails_when_any_session_fails(
    tmp_path: Path, failed: str
) -> None:
    (tmp_path / f"fail-{failed}").write_text("3")
    ran, log = _run_ci(tmp_path)
    assert ran.returncode == 3
    assert "end tests" in log  # the tests ran to their end either way


def test_the_tests_session_lets_its_processes_cache_bytecode() -> None:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    [env] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "TEST_ENV"
    ]
    assert env is not None
    assert ast.literal_eval(env) == {"PYTHONDONTWRITEBYTECODE": None}
    [tests] = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "tests"
    ]
    pytest_runs = [
        call
        for call in ast.walk(tests)
        if isinstance(call, ast.Call)
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and call.args[0].value == "pytest"
    ]
    assert pytest_runs
    for call in pytest_runs:
        [env_arg] = [kw.value for kw in call.keywords if kw.arg == "env"]
        assert isinstance(env_arg, ast.Name)
        assert env_arg.id == "TEST_ENV"
