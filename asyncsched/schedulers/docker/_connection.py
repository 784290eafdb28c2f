"""The scheduler's one aiodocker client, made on first use, and its API slots.

Every part of the backend (submit, lookups, cancels, stops, event readers)
reaches the daemon through one :class:`DockerConnection`: :meth:`docker`
gives the client (refused once the scheduler closed, or off asyncio), and
:meth:`slot` bounds the Engine API calls in flight (``max_concurrency``),
shared by all of them.

Example:
    >>> async def main() -> None:
    ...     conn = DockerConnection(host="unix:///var/run/docker.sock",
    ...         check_open=lambda: None)
    ...     async with conn.slot():
    ...         print(await conn.docker().version())
    ...     await conn.aclose()
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiodocker
import anyio
import sniffio

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.shared.docker_errors import BACKEND

from ._client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, client_timeout

__all__ = ("DockerConnection", "bind", "check_asyncio")

T = TypeVar("T")


def check_asyncio() -> None:
    """Refuse any event loop but asyncio's (aiodocker's only one).

    Raises:
        SchedulerUnavailableError: another async library runs this code.
    """
    library = sniffio.current_async_library()
    if library != "asyncio":
        raise SchedulerUnavailableError(
            BACKEND,
            f"aiodocker runs on asyncio only, not {library}",
            "use asyncio, or the local scheduler",
        )


def bind(func: Callable[..., Awaitable[T]], *args: Any) -> Callable[[], Awaitable[T]]:
    """``func(*args)`` as a call without arguments (for :meth:`run_all`)."""

    async def call() -> T:
        return await func(*args)

    return call


@dataclass(slots=True, kw_only=True)
class DockerConnection:
    """How the backend talks to one daemon (see :class:`DockerScheduler`).

    ``client``, when given, is used as it is and never closed here.
    """

    host: str
    #: raises once the scheduler is closed
    check_open: Callable[[], None]
    client: aiodocker.Docker | None = None
    max_concurrency: int = 8
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    _owns_client: bool = field(init=False, default=True)
    _limiter: anyio.CapacityLimiter | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._owns_client = self.client is None

    def docker(self) -> aiodocker.Docker:
        """The client (made now if need be)."""
        self.check_open()
        if self.client is None:
            check_asyncio()
            self.client = aiodocker.Docker(
                url=self.host,
                timeout=client_timeout(self.connect_timeout, self.read_timeout),
            )
        return self.client

    def slot(self) -> anyio.CapacityLimiter:
        """The limiter of Engine API calls (``max_concurrency``)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        return self._limiter

    async def run_all(
        self,
        funcs: builtins.list[Callable[[], Awaitable[object]]],
        *,
        fail_fast: bool = True,
    ) -> None:
        """Run ``funcs`` concurrently, each in a slot; raise the first error.

        After a failure no new call starts (in-flight ones finish) when
        ``fail_fast``; the error is raised, plainly, once all have settled.
        """
        limiter = self.slot()
        errors: builtins.list[Exception] = []

        async def one(func: Callable[[], Awaitable[object]]) -> None:
            async with limiter:
                if errors and fail_fast:
                    return
                try:
                    await func()
                except Exception as exc:  # noqa: BLE001 - collected, re-raised below
                    errors.append(exc)

        async with anyio.create_task_group() as tg:
            for func in funcs:
                tg.start_soon(one, func)
        if errors:
            raise errors[0]

    async def aclose(self) -> None:
        """Close the client if it was made here."""
        if self.client is not None and self._owns_client:
            await self.client.close()
        self.client = None
