"""``wait_all`` over thousands of handles checks them in steps: the event
loop keeps running meanwhile."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import pytest

from asyncsched.errors import MalformedAppHandleException
from asyncsched.runner import Runner
from tests.runner.helpers import inmemory_runner

pytestmark = pytest.mark.anyio


@pytest.fixture
async def runner() -> AsyncIterator[Runner]:
    async with inmemory_runner() as r:
        yield r


async def test_wait_all_lets_other_tasks_run_while_it_checks_thousands_of_handles(
    runner: Runner,
) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.lowlevel.checkpoint()
            ticks += 1

    # a malformed handle at the end is still refused before anything is waited for
    handles = [f"inmemory://test/app{i}" for i in range(4999)] + ["no-handle"]
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        before = ticks
        with pytest.raises(MalformedAppHandleException):
            await runner.wait_all(handles)
        assert ticks - before >= 2  # checked in steps, the loop ran between them
        tg.cancel_scope.cancel()
