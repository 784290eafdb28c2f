"""An async iterator that is also an async context manager closing it.

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
from collections.abc import AsyncIterator
from typing import Self, TypeVar

__all__ = ("ClosingIterator",)

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
