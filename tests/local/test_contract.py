"""The Scheduler conformance suite, run against the local backend.

Every test runs on asyncio and on trio (``@pytest.mark.anyio``, see
``tests/conftest.py``): the local backend supports both event loops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.testing import ContractTarget, SchedulerContract


class TestLocalContract(SchedulerContract):
    capabilities = LocalScheduler.capabilities

    @pytest.fixture
    async def target(self, tmp_path: Path) -> AsyncIterator[ContractTarget]:
        async with LocalScheduler(
            "contract", cancel_grace=2.0, close_grace=0.5
        ) as sched:
            yield ContractTarget(
                sched, cfg={"log_dir": str(tmp_path)}, image="/", quick_timeout=15
            )
