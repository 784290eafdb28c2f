"""Helpers for the live Docker tests: apps, a counting client, a droppable proxy."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiodocker
import aiohttp
import anyio
from anyio.abc import SocketStream, TaskGroup

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, Resource, Role

from .conftest import TEST_IMAGE


def sh_app(
    script: str,
    *,
    name: str = "app",
    replicas: int = 1,
    max_retries: int = 0,
    image: str = TEST_IMAGE,
    **role_kwargs: Any,
) -> AppDef:
    """One role ``worker`` running ``sh -c script`` on the test image."""
    role = Role(
        name="worker",
        image=image,
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        max_retries=max_retries,
        resource=Resource(cpu=1, gpu=0, memMB=64),
        **role_kwargs,
    )
    return AppDef(name=name, roles=[role])


async def submit_all(
    sched: DockerScheduler, apps: builtins.list[AppDef]
) -> builtins.list[str]:
    """Submit ``apps`` at once (one by one, each waits out the daemon's
    start-up of the one before); return their app ids in ``apps``' order."""
    ids: dict[int, str] = {}

    async def one(i: int, app: AppDef) -> None:
        ids[i] = await sched.submit(app)

    async with anyio.create_task_group() as tg:
        for i, app in enumerate(apps):
            tg.start_soon(one, i, app)
    return [ids[i] for i in range(len(apps))]


async def lines(
    sched: DockerScheduler, app_id: str, **kwargs: Any
) -> builtins.list[str]:
    """Collect ``log_iter`` of replica 0 of ``worker``."""
    return [line async for line in sched.log_iter(app_id, "worker", **kwargs)]


@dataclass
class Counter:
    """HTTP requests made through a counting client."""

    count: int = 0
    paths: builtins.list[str] = field(default_factory=builtins.list)


@asynccontextmanager
async def counting_client(host: str) -> AsyncIterator[tuple[aiodocker.Docker, Counter]]:
    """An aiodocker client (unix socket) whose requests are counted."""
    assert host.startswith("unix://"), host
    counter = Counter()

    async def on_start(
        session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        counter.count += 1
        counter.paths.append(f"{params.method} {params.url.path}")

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    connector = aiohttp.UnixConnector(host.removeprefix("unix://"))
    session = aiohttp.ClientSession(connector=connector, trace_configs=[trace])
    # with a caller's connector aiodocker keeps the URL as given: use the dummy host
    docker = aiodocker.Docker(
        url="unix://localhost", connector=connector, session=session
    )
    try:
        yield docker, counter
    finally:
        await docker.close()
        await session.close()


class DropProxy:
    """A unix-socket proxy to the daemon that can cut and refuse connections."""

    def __init__(self, target: str, path: Path) -> None:
        self.target = target.removeprefix("unix://")
        self.path = path
        self.refusing = False
        self._conns: set[SocketStream] = set()

    @property
    def url(self) -> str:
        """``unix://`` URL of the proxy."""
        return f"unix://{self.path}"

    async def serve(self, tg: TaskGroup) -> None:
        """Start listening in ``tg``."""
        listener = await anyio.create_unix_listener(self.path)

        async def serve() -> None:
            async with listener:
                await listener.serve(self._handle)

        tg.start_soon(serve)

    async def drop(self) -> None:
        """Close every open connection (the events stream included)."""
        for conn in list(self._conns):
            await conn.aclose()

    async def _handle(self, client: SocketStream) -> None:
        if self.refusing:
            with anyio.CancelScope(shield=True):
                await client.aclose()
            return
        try:
            upstream = await anyio.connect_unix(self.target)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await client.aclose()
            raise
        self._conns.update((client, upstream))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pipe, client, upstream, tg)
                tg.start_soon(self._pipe, upstream, client, tg)
        finally:
            self._conns.difference_update((client, upstream))
            with anyio.CancelScope(shield=True):
                await client.aclose()
                await upstream.aclose()

    async def _pipe(self, src: SocketStream, dst: SocketStream, tg: TaskGroup) -> None:
        try:
            async for chunk in src:
                await dst.send(chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        tg.cancel_scope.cancel()
