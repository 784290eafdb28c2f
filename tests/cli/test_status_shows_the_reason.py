"""`asyncsched status` says why an app did not succeed, in text and in JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .process import Cli

pytest.importorskip("asyncsched.schedulers.local_scheduler")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp_path / "state")}
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "asyncsched", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )


def test_status_of_a_failed_local_app_names_the_reason(tmp_path: Path) -> None:
    run = _cli(tmp_path, "run", "--wait", "--name", "bad", "--", "sh", "-c", "exit 3")
    assert run.returncode == 1, run.stderr
    handle = run.stdout.strip()
    assert handle.startswith("local_cwd://")

    status, text = Cli(tmp_path).each(("status", "--json", handle), ("status", handle))
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["state"] == "FAILED"
    assert data["reason"] == "EXIT_CODE"
    [replica] = data["roles"][0]["replicas"]
    assert (replica["state"], replica["exit_code"]) == ("FAILED", 3)
    assert replica["reason"] == "EXIT_CODE"
    assert replica["message"]

    assert text.returncode == 0, text.stderr
    assert "State: FAILED" in text.stdout
    assert "Reason: EXIT_CODE" in text.stdout
    assert "reason: EXIT_CODE (exit code 3)" in text.stdout


def test_status_of_a_succeeded_local_app_has_no_reason(tmp_path: Path) -> None:
    run = _cli(tmp_path, "run", "--wait", "--name", "good", "--", "true")
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip()
    status, text = Cli(tmp_path).each(("status", "--json", handle), ("status", handle))
    data = json.loads(status.stdout)
    assert (data["state"], data["reason"]) == ("SUCCEEDED", None)
    assert "Reason:" not in text.stdout
