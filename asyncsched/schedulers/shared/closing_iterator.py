"""An async iterator that is also an async context manager closing it, and
:func:`aclose_iterator` for one that may be closable.

Example:
    >>> class Countdown(ClosingIterator[int]):
    ...     def __init__(self) -> None:
    ...         self.left = 2
    ...     async def __anext__(self) -> int:
    ...         if not self.left:
    ...             raise StopAsyncIteration
    ...         self.left -= 1
    ...         return self.left
    ...     async def aclose(self) -> None:
    ...         self.left = 0
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterable, AsyncIterator
from typing import Self, TypeVar

import anyio

__all__ = ("ClosingIterator", "aclose_iterator")

T = TypeVar("T")


class ClosingIterator(AsyncIterator[T], abc.ABC):
    """``async with it: async for x in it`` closes ``it`` on leaving."""

    def __aiter__(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Stop and release what the iterator holds; idempotent."""


async def aclose_iterator(
    items: AsyncIterable[object], within: float | None = None
) -> None:
    """Close ``items`` if it can be closed (an async generator, a stream).

    With ``within``, the close is shielded from cancellation and given at
    most that many seconds: for a ``finally`` that must release a file or a
    connection even while being cancelled, without hanging on it.

    Example:
        >>> async def relay(lines: AsyncIterator[str]) -> AsyncIterator[str]:
        ...     try:
        ...         async for line in lines:
        ...             yield line
        ...     finally:
        ...         await aclose_iterator(lines, within=10)
    """
    aclose = getattr(items, "aclose", None)
    if aclose is None:
        return
    if within is None:
        await aclose()
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(within):
        await aclose()
