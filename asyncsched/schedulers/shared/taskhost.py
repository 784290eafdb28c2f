"""A task group owned by a long-lived object (a scheduler), not by one call.

Schedulers run background tasks (process reapers, event streams) that must live
from the first submit until ``aclose()``. On asyncio the group is hosted by one
task of its own, which ``aclose()`` -- or the event loop's shutdown -- cancels,
so nothing outlives the loop; the owner may be entered and closed from
different tasks. On trio the owner must be used as ``async with`` and the group
opens in the entering task.

Example:
    >>> async def main() -> None:
    ...     host = TaskHost("demo")
    ...     await host.start_soon(anyio.sleep, 0)
    ...     await host.aclose()
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import anyio
import sniffio
from anyio.abc import TaskGroup

from asyncsched.errors import SchedulerClosedError, SchedulerError

__all__ = ["TaskHost"]

T = TypeVar("T")


class TaskHost:
    """Own one anyio task group from first use until :meth:`aclose`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tg: TaskGroup | None = None
        self._stack: AsyncExitStack | None = None
        self._host_task: asyncio.Task[None] | None = None
        self._stop: anyio.Event | None = None
        self._lock: anyio.Lock | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` has run."""
        return self._closed

    async def enter(self) -> None:
        """Open the group for an ``async with`` owner.

        On asyncio the group is hosted by its own task even then, because
        frameworks (pytest fixtures, ASGI lifespans) may enter and exit the
        owner from different tasks. Elsewhere (trio) it opens in this task.
        """
        self._check_open()
        if self._tg is not None:
            return
        if sniffio.current_async_library() == "asyncio":
            await self.group()
            return
        stack = AsyncExitStack()
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack

    async def group(self) -> TaskGroup:
        """Return the open task group, starting a hosted one on first use."""
        self._check_open()
        if self._tg is not None:
            return self._tg
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            current = self._current()
            return current if current is not None else await self._start_hosted()

    def _current(self) -> TaskGroup | None:
        return self._tg

    async def start_soon(
        self,
        func: Callable[..., Coroutine[Any, Any, Any]],
        *args: object,
        name: str | None = None,
    ) -> None:
        """Run ``func(*args)`` in the group; it must handle its own errors."""
        (await self.group()).start_soon(func, *args, name=name or self._name)

    async def start(
        self,
        func: Callable[..., Coroutine[Any, Any, Any]],
        *args: object,
        name: str | None = None,
    ) -> Any:
        """Run ``func(*args, task_status=...)`` and return what it reports as started."""
        return await (await self.group()).start(func, *args, name=name or self._name)

    async def aclose(self) -> None:
        """Cancel every task of the group and wait for them; idempotent."""
        if self._closed:
            return
        self._closed = True
        tg, stack, host, stop = self._tg, self._stack, self._host_task, self._stop
        if tg is not None:
            tg.cancel_scope.cancel()
        if stack is not None:
            await stack.aclose()
        if host is not None and stop is not None:
            stop.set()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([host])
        self._tg = None

    def _check_open(self) -> None:
        if self._closed:
            raise SchedulerClosedError(f"{self._name} is closed")

    async def _start_hosted(self) -> TaskGroup:
        if sniffio.current_async_library() != "asyncio":
            raise SchedulerError(
                f"{self._name}: outside asyncio, use it as 'async with ...:' so that "
                "its background tasks have a task group to live in"
            )
        ready = anyio.Event()
        self._stop = stop = anyio.Event()

        groups: list[TaskGroup] = []

        async def host() -> None:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                groups.append(tg)
                ready.set()
                await stop.wait()
                tg.cancel_scope.cancel()

        self._host_task = asyncio.get_running_loop().create_task(
            host(), name=f"{self._name}-taskhost"
        )
        await ready.wait()
        return groups[0]
