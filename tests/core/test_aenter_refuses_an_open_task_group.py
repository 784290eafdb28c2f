"""A task group left open by ``_aenter`` is refused at entry, naming TaskHost.

Closing such a group in ``_aclose`` cannot work (``_aclose`` runs inside
``aclose``'s own cancel scopes); before, every later close failed with
"exit a cancel scope that isn't the current task's". The group is closed
again at once, so the caller's task goes on unharmed. Only asyncio: on trio
the misuse corrupts the run itself, whatever we raise.
"""

from __future__ import annotations

import anyio
import pytest
from anyio.abc import TaskGroup

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.kit import AsyncClosable, TaskHost


class OpensAGroup(AsyncClosable):
    tg: TaskGroup

    async def _aenter(self) -> None:
        self.tg = anyio.create_task_group()
        await self.tg.__aenter__()  # the misuse the docs warn about

    async def _aclose(self) -> None:
        await self.tg.__aexit__(None, None, None)


class UsesATaskHost(AsyncClosable):
    def __init__(self) -> None:
        self.host = TaskHost("demo")
        self.ran = anyio.Event()

    async def _aenter(self) -> None:
        await self.host.enter()
        await self.host.start_soon(self._work)

    async def _work(self) -> None:
        self.ran.set()
        await anyio.sleep_forever()

    async def _aclose(self) -> None:
        await self.host.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_task_group_left_open_by_aenter_is_refused_naming_taskhost(
    anyio_backend: str,
) -> None:
    async def enter() -> None:
        async with OpensAGroup():
            pytest.fail("entered")

    with pytest.raises(SchedulerError, match="_aenter left a task group") as info:
        await enter()
    assert "TaskHost" in str(info.value)
    # the group was closed again: the caller's own cancel scopes still work
    with anyio.move_on_after(0.01) as scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_a_task_host_opened_in_aenter_runs_and_closes() -> None:
    owner = UsesATaskHost()
    with anyio.fail_after(10):
        async with owner:
            await owner.ran.wait()
    assert owner.closed
