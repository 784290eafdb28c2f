"""All-or-nothing submit: create step by step, undo every step if one fails.

A submit that makes several things (objects, containers, files) must leave
none behind when it fails or is cancelled half-way. :func:`all_or_nothing`
opens a block whose :class:`UndoSteps` records how to undo each thing made;
if the block raises (any error, cancellation included) the recorded undos run
in reverse order, shielded from cancellation and bounded by ``undo_within``
seconds, then the original error propagates. An undo that fails is logged
and the next one still runs; the first error wins.

Example:
    >>> async def submit(api) -> None:
    ...     async with all_or_nothing("app-1", undo_within=10) as steps:
    ...         for name in ("svc", "job"):
    ...             await steps.create(
    ...                 lambda: api.create(name),
    ...                 undo=lambda: api.delete(name),
    ...                 refusals=(ValueError,),  # a refused create made nothing
    ...             )
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio

__all__ = ["UNDO_TIMEOUT", "Undo", "UndoSteps", "all_or_nothing"]

logger = logging.getLogger(__name__)

R = TypeVar("R")

#: seconds the undo of a failed submit may take by default
UNDO_TIMEOUT = 30.0

Undo = Callable[[], Awaitable[object]]


class UndoSteps:
    """The undos of one :func:`all_or_nothing` block, run last-first on failure."""

    def __init__(self) -> None:
        self._undos: list[tuple[str, Undo]] = []

    def __len__(self) -> int:
        return len(self._undos)

    def add(self, undo: Undo, name: str = "") -> None:
        """Undo ``undo()`` if the block fails (``name`` is for the log)."""
        self._undos.append((name or repr(undo), undo))

    async def create(
        self,
        make: Callable[[], Awaitable[R]],
        undo: Undo,
        *,
        name: str = "",
        refusals: tuple[type[BaseException], ...] = (BaseException,),
    ) -> R:
        """``await make()``, and record ``undo`` for what it made.

        A ``make`` that raises one of ``refusals`` made nothing; any other
        error (e.g. cancellation while the request was in flight, a lost
        connection) leaves it in doubt, so ``undo`` is recorded too. By default
        every error counts as a refusal.
        """
        try:
            made = await make()
        except refusals:
            raise
        except BaseException:
            self.add(undo, name)
            raise
        self.add(undo, name)
        return made

    async def _run(self, what: str, undo_within: float) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(undo_within) as scope:
            while self._undos:
                name, undo = self._undos.pop()
                try:
                    await undo()
                except Exception as exc:  # noqa: BLE001 - the first error wins
                    logger.warning("could not undo %s of %s: %s", name, what, exc)
        if scope.cancelled_caught:
            logger.error(
                "could not undo the failed submit of %s within %ss; left: %s",
                what,
                undo_within,
                [name for name, _ in self._undos] or "the step in progress",
            )


@asynccontextmanager
async def all_or_nothing(
    what: str, *, undo_within: float = UNDO_TIMEOUT
) -> AsyncIterator[UndoSteps]:
    """A block whose recorded steps are undone if it raises (see the module).

    ``what`` names the submit in the log (e.g. the app id). The undo runs
    shielded and takes at most ``undo_within`` seconds; past it the rest is
    abandoned and logged as an error.
    """
    steps = UndoSteps()
    try:
        yield steps
    except BaseException:
        await steps._run(what, undo_within)
        raise
