"""Refuse to run a scheduler on an event loop it does not support.

Example:
    >>> check_event_loop("DockerScheduler", "docker", ("asyncio",))  # no loop
"""

from __future__ import annotations

from collections.abc import Sequence

import sniffio

from asyncsched.errors import SchedulerUnavailableError

__all__ = ("check_event_loop",)


def check_event_loop(scheduler: str, backend: str, loops: Sequence[str]) -> None:
    """Raise unless the running async library (if any) is one of ``loops``.

    Raises:
        SchedulerUnavailableError: e.g. the Docker backend under trio.
    """
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    if library not in loops:
        raise SchedulerUnavailableError(
            backend,
            f"{scheduler} runs on {' or '.join(loops)}, not {library}",
            f"run it under {loops[0]}",
        )
