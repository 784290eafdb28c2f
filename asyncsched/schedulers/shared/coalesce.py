"""Coalesce concurrent lookups by key into one fetch at a time.

Every :meth:`Coalescer.get` made while a fetch runs joins the next one, so N
concurrent lookups cost one or two fetches, not N: one ``squeue`` for many
Slurm jobs, one worker-thread hop for many local app records.

Example:
    >>> async def main(fetch) -> None:
    ...     coalescer = Coalescer(fetch)
    ...     views = await coalescer.get(["12", "13"])
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import anyio

__all__ = ["Coalescer"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Batch(Generic[K, V]):
    def __init__(self) -> None:
        self.keys: set[K] = set()
        self.done = anyio.Event()
        self.result: Mapping[K, V] = {}
        self.error: BaseException | None = None


class Coalescer(Generic[K, V]):
    """One ``fetch(keys)`` at a time for every concurrent ``get``.

    Args:
        fetch: Returns the values of the keys it knows (missing: None).
        shared_errors: Errors of a fetch raised to every lookup that joined
            it; any other error reaches only the caller that ran the fetch,
            and the others fetch again.
    """

    def __init__(
        self,
        fetch: Callable[[frozenset[K]], Awaitable[Mapping[K, V]]],
        shared_errors: tuple[type[BaseException], ...] = (Exception,),
    ) -> None:
        self._fetch = fetch
        self._shared_errors = shared_errors
        self._next: _Batch[K, V] | None = None
        self._lock = anyio.Lock()
        #: fetches run so far
        self.fetches = 0

    async def get(self, keys: Iterable[K]) -> dict[K, V | None]:
        """The values of ``keys`` (None for a key the fetch did not return)."""
        wanted = list(keys)
        batch = self._next
        if batch is None:
            batch = self._next = _Batch()
        batch.keys.update(wanted)
        while not batch.done.is_set():
            async with self._lock:
                if batch.done.is_set():
                    break
                if self._next is batch:
                    self._next = None
                self.fetches += 1
                try:
                    batch.result = await self._fetch(frozenset(batch.keys))
                except self._shared_errors as exc:
                    batch.error = exc
                batch.done.set()
        if batch.error is not None:
            raise batch.error
        return {k: batch.result.get(k) for k in wanted}
