"""The Scheduler contract suite, run against the in-memory test scheduler.

On asyncio and on trio (``@pytest.mark.anyio``), as its capabilities claim.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncsched.specs import AppState, StatusReason
from asyncsched.testing import ContractTarget, InMemoryScheduler, SchedulerContract


class TestInMemoryContract(SchedulerContract):
    capabilities = InMemoryScheduler.capabilities
    posix_shell = False

    @pytest.fixture
    async def target(self) -> AsyncIterator[ContractTarget]:
        async with InMemoryScheduler("contract") as sched:
            # its log times are exact and its reader sees a line at once
            yield ContractTarget(
                sched, quick_timeout=10, posix_shell=False, log_time_step=0.5
            )


@pytest.mark.anyio
async def test_a_replica_the_in_memory_scheduler_stops_reads_143_cancelled() -> None:
    async with InMemoryScheduler("stops") as sched:
        app = ContractTarget(sched).roles_app(
            {"bad": "sleep 0.2; exit 3", "long": "sleep 60"}
        )
        app_id = await sched.submit(app)
        desc = await sched.wait(app_id, timeout=10)
    assert desc is not None
    assert desc.state == AppState.FAILED
    long = {r.role: r.replicas[0] for r in desc.roles_statuses}["long"]
    assert (long.state, long.exit_code, long.reason) == (
        AppState.CANCELLED,
        143,
        StatusReason.CANCELLED,
    )
