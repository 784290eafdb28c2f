"""Helpers of the local backend tests: running apps, reading logs, app records, fds, process liveness."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import aclosing, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psutil

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, AppState, CfgVal

from .conftest import app_of, py_role

IGNORES_TERM = "trap '' TERM; echo ready; sleep 30"
"""A replica that ignores SIGTERM once it printed ``ready`` (see :func:`until_ready`)."""


def record(app_dir: Path) -> dict[str, Any]:
    return dict(json.loads((app_dir / "app.json").read_text()))


async def finished_record(app_dir: Path, timeout: float = 10) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while True:
            with_record = (app_dir / "app.json").exists()
            if with_record and (rec := record(app_dir))["finished"]:
                return rec
            await anyio.sleep(0.05)


def nfds() -> int:
    return len(os.listdir("/proc/self/fd"))


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def until_gone(pids: Iterable[int], timeout: float = 10) -> None:
    """Wait until no process of ``pids`` runs (a zombie counts as gone)."""
    with anyio.fail_after(timeout):
        while any(running(pid) for pid in pids):
            await anyio.sleep(0.05)


ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def killed_owner(
    module: str, *args: str
) -> AsyncIterator[tuple[subprocess.Popen[bytes], bytes]]:
    """Run ``python -m tests.local.<module> ARGS``; yield it with the first line
    it prints (within 60 s); SIGKILL it on leaving: no cleanup of any kind."""
    with subprocess.Popen(
        [sys.executable, "-m", f"tests.local.{module}", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
    ) as owner:
        try:
            assert owner.stdout is not None
            with anyio.fail_after(60):
                line = await anyio.to_thread.run_sync(owner.stdout.readline)
            yield owner, line
        finally:
            owner.kill()
            owner.wait()


def exists(pid: int) -> bool:
    """True while ``pid`` exists at all (a zombie too: it was not reaped)."""
    return psutil.pid_exists(pid)


async def lines(
    sched: LocalScheduler, app_id: str, role: str = "worker", k: int = 0, **kw: Any
) -> list[str]:
    return [line async for line in sched.log_iter(app_id, role, k, **kw)]


async def run(
    sched: LocalScheduler, app: AppDef, cfg: dict[str, Any]
) -> tuple[str, AppState]:
    app_id = await sched.submit(app, cfg)
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    return app_id, desc.state


async def until_ready(
    sched: LocalScheduler, app_id: str, role: str = "worker", timeout: float = 10
) -> None:
    """Wait for replica 0 of ``role`` to print its first line (its traps are set)."""
    with anyio.fail_after(timeout):
        async with aclosing(sched.log_iter(app_id, role, should_tail=True)) as it:
            await anext(it)


def child_pids() -> set[int]:
    """The pids of this process's children (replicas are; their shells' forks
    are not). By parent pid: a child just spawned may not show its new
    command line yet."""
    return {proc.pid for proc in psutil.Process().children()}


async def objects_per_finished_app(
    sched: LocalScheduler,
    make_app: Callable[[str], AppDef],
    cfg: Mapping[str, CfgVal],
    apps: int,
) -> float:
    """How many more objects the garbage collector tracks, per app, once
    ``apps`` more apps (``make_app(name)``) ran one after the other to success."""
    gc.collect()
    before = len(gc.get_objects())
    for i in range(apps):
        app_id = await sched.submit(make_app(f"a{i}"), cfg)
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
    gc.collect()
    return (len(gc.get_objects()) - before) / apps


async def early_then_late(
    sched: LocalScheduler, log_dir: Path, go: Path, *, then: str = ""
) -> tuple[str, datetime]:
    """Submits a replica that prints ``early``, waits for ``go`` to exist,
    prints ``late`` and runs ``then``; returns its app id and a time after
    ``early`` arrived (read by a follower) and before ``late`` is printed."""
    code = (
        "import os, time\nprint('early', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        f"print('late', flush=True)\n{then}"
    )
    app_id = await sched.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
    async with aclosing(sched.log_iter(app_id, "worker", should_tail=True)) as it:
        with anyio.fail_after(30):
            assert await anext(it) == "early\n"
    return app_id, datetime.now(UTC)
