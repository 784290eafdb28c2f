"""A 32 MiB line: capped pieces, nothing lost, and the loop keeps running meanwhile."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest
from anyio.abc import TaskStatus

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers import get_scheduler
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, py_role

pytestmark = pytest.mark.anyio

MiB = 1 << 20
# 32 MiB without a newline, then one short line
FLOOD = (
    "import sys\n"
    "chunk = b'x' * (1 << 20)\n"
    "for _ in range(32): sys.stdout.buffer.write(chunk)\n"
    "sys.stdout.buffer.write(b'\\nend\\n')\n"
)


@pytest.fixture
async def flooded(sched: LocalScheduler) -> str:
    app_id = await sched.submit(app_of(py_role(FLOOD)), {})
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    return app_id


class _Ticker:
    """Records the longest lateness of a task sleeping 5 ms at a time."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._due = 0.0

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        self._due = anyio.current_time() + 0.005
        task_status.started()
        while True:
            await anyio.sleep(max(0.0, self._due - anyio.current_time()))
            self.worst = max(self.worst, anyio.current_time() - self._due)
            self._due = anyio.current_time() + 0.005

    def stop(self) -> float:
        """The worst lateness, counting the wake-up still pending now."""
        return max(self.worst, anyio.current_time() - self._due)


async def test_a_32_mib_line_comes_back_in_1_mib_pieces_with_every_byte(
    sched: LocalScheduler, flooded: str
) -> None:
    sizes = []
    newlines = 0
    async for piece in sched.log_iter(flooded, "worker"):
        sizes.append(len(piece))
        newlines += piece.count("\n")
        if piece != "end\n":
            assert piece.strip("x\n") == ""
    assert max(sizes) == MiB
    assert sum(sizes) == 32 * MiB + 5
    assert newlines == 2  # the two the replica wrote: none invented
    assert sizes[-1] == 4  # "end\n"


async def test_max_line_bytes_reaches_the_local_scheduler_through_get_scheduler(
    flooded: str,
) -> None:
    async with get_scheduler("local_cwd", "test", max_line_bytes=4 * MiB) as other:
        sizes = [len(p) async for p in other.log_iter(flooded, "worker")]
    assert sizes == [4 * MiB] * 8 + [1, 4]


def test_an_invalid_max_line_bytes_is_rejected_by_the_constructor() -> None:
    with pytest.raises(InvalidRunConfigException, match="max_line_bytes"):
        LocalScheduler("test", max_line_bytes=0)


@pytest.mark.parametrize("timed", [False, True], ids=["all", "since-until"])
async def test_reading_a_32_mib_log_never_blocks_the_loop(
    sched: LocalScheduler, flooded: str, timed: bool
) -> None:
    now = datetime.now(UTC)
    since = now - timedelta(hours=1) if timed else None
    until = now + timedelta(hours=1) if timed else None
    ticker = _Ticker()
    total = 0
    async with anyio.create_task_group() as tg:
        await tg.start(ticker.run)
        async for piece in sched.log_iter(flooded, "worker", since=since, until=until):
            total += len(piece)
        worst = ticker.stop()
        tg.cancel_scope.cancel()
    assert total == 32 * MiB + 5
    # a behaviour bound, not a benchmark: the old reader stalled for seconds
    assert worst < 0.5
