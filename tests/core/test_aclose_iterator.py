"""``aclose_iterator``: an inner iterator is closed in a ``finally``, even
while the relaying generator is being cancelled, and never for longer than
asked."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

import anyio
import pytest

from asyncsched.schedulers.kit import aclose_iterator

pytestmark = pytest.mark.anyio


async def _relay(lines: AsyncIterator[str], within: float) -> AsyncGenerator[str, None]:
    try:
        async for line in lines:
            yield line
    finally:
        await aclose_iterator(lines, within=within)


async def test_a_cancelled_relay_still_closes_its_inner_generator() -> None:
    closed = anyio.Event()
    reading = anyio.Event()

    async def lines() -> AsyncGenerator[str, None]:
        try:
            yield "first\n"
            yield "never\n"
        finally:
            await anyio.lowlevel.checkpoint()  # closing awaits: needs the shield
            closed.set()

    async def consume() -> None:
        async with aclosing(_relay(lines(), within=10)) as relay:
            async for _ in relay:
                reading.set()
                await anyio.sleep_forever()  # cancelled here, both generators paused

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await reading.wait()
        tg.cancel_scope.cancel()
    assert closed.is_set()


async def test_a_close_that_hangs_is_given_up_after_the_bound() -> None:
    class Hanging:
        def __aiter__(self) -> Hanging:
            return self

        async def __anext__(self) -> str:
            raise StopAsyncIteration

        async def aclose(self) -> None:
            await anyio.sleep_forever()

    with anyio.fail_after(10):
        assert [x async for x in _relay(Hanging(), within=0.05)] == []


async def test_an_iterator_without_aclose_is_left_alone() -> None:
    class Plain:
        def __aiter__(self) -> Plain:
            return self

        async def __anext__(self) -> str:
            raise StopAsyncIteration

    await aclose_iterator(Plain())
