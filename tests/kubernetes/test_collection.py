"""Tests that need the fake API server's hooks are not collected for a real one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _collected(*files: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--co"]
        + [f"tests/kubernetes/{name}" for name in files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_fake_api_tests_get_no_real_cluster_variant() -> None:
    # a marked module, marked tests, and the unmarked tests next to them
    items = _collected("test_fakeapi_crud.py", "test_timeouts.py", "test_cli.py")
    marked = [i for i in items if "test_cli.py" not in i]
    assert marked
    # each test of a server runs on the fake one only (others, e.g. argument
    # checks parametrised by value, have no server in their id)
    ids = [i.rsplit("[", 1)[1].rstrip("]") for i in marked if i.endswith("]")]
    assert "fake" in ids
    assert not [i for i in ids if "real" in i.split("-")], ids
    cli = [i for i in items if "test_cli.py::test_run_status_log_list_cancel" in i]
    assert sorted(i.rsplit("[", 1)[1] for i in cli) == ["fake]", "real]"]
