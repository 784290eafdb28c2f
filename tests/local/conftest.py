"""Fixtures of the local backend tests: isolated state dir, schedulers, app builders."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, RetryPolicy, Role

PY = sys.executable


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own state dir, so nothing leaks into ~/.local/state."""
    path = tmp_path / "state"
    monkeypatch.setenv("ASYNCSCHED_STATE_DIR", str(path))
    return path


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    path = tmp_path / "logs"
    path.mkdir()
    return path


@pytest.fixture
async def sched() -> AsyncIterator[LocalScheduler]:
    async with LocalScheduler("test", cancel_grace=2.0, close_grace=0.5) as s:
        yield s


def py_role(
    code: str,
    *,
    name: str = "worker",
    replicas: int = 1,
    env: dict[str, str] | None = None,
    max_retries: int = 0,
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION,
    image: str = "/",
) -> Role:
    """A role running ``python -c code``."""
    return Role(
        name=name,
        image=image,
        entrypoint=PY,
        args=["-c", code],
        num_replicas=replicas,
        env=dict(env or {}),
        max_retries=max_retries,
        retry_policy=retry_policy,
    )


def sh_role(script: str, *, name: str = "worker", replicas: int = 1) -> Role:
    return Role(
        name=name,
        image="/",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
    )


def app_of(*roles: Role, name: str = "app") -> AppDef:
    return AppDef(name=name, roles=list(roles))


def group_pids(pid: int) -> set[int]:
    """Every live process in process group ``pid`` (the replica and its children)."""
    found = set()
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pid:
                found.add(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def alive(pids: set[int]) -> set[int]:
    """The pids of ``pids`` still running (zombies count as dead)."""
    result = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                result.add(pid)
        except psutil.NoSuchProcess:
            continue
    return result
