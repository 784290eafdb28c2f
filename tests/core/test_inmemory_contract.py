"""The Scheduler contract suite, run against the in-memory test scheduler.

On asyncio and on trio (``@pytest.mark.anyio``), as its capabilities claim.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncsched.testing import ContractTarget, InMemoryScheduler, SchedulerContract


class TestInMemoryContract(SchedulerContract):
    @pytest.fixture
    async def target(self) -> AsyncIterator[ContractTarget]:
        async with InMemoryScheduler("contract") as sched:
            yield ContractTarget(sched, quick_timeout=10, posix_shell=False)
