"""The Scheduler conformance suite, run against the local backend.

Every test runs on asyncio and on trio, as the backend's capabilities
declare.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.testing import ContractTarget, SchedulerContract


def _live_children(since: float) -> list[int]:
    pids = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.create_time() >= since and child.status() != psutil.STATUS_ZOMBIE:
                pids.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return pids


def replica_processes_since(since: float) -> Callable[[], Awaitable[list[int]]]:
    """This test process's live descendants started since ``since`` (epoch
    seconds): the target's replicas. Processes older than the target (left
    by earlier tests of the same worker, still ending) are not its own."""

    async def replica_processes() -> list[int]:
        return await anyio.to_thread.run_sync(_live_children, since)

    return replica_processes


class TestLocalContract(SchedulerContract):
    capabilities = LocalScheduler.capabilities

    @pytest.fixture
    async def target(self, tmp_path: Path) -> AsyncIterator[ContractTarget]:
        # psutil's start times are rounded to clock ticks: a little slack
        since = time.time() - 0.05
        async with LocalScheduler(
            "contract", cancel_grace=2.0, close_grace=0.5
        ) as sched:
            yield ContractTarget(
                sched,
                cfg={"log_dir": str(tmp_path)},
                image="/",
                quick_timeout=15,
                registry_name="local_cwd",
                replica_processes=replica_processes_since(since),
            )
