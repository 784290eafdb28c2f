"""Coalescer: concurrent lookups share fetches; errors reach who they should."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from asyncsched.errors import AsyncschedError
from asyncsched.schedulers.shared.coalesce import Coalescer

pytestmark = pytest.mark.anyio


async def test_concurrent_lookups_share_one_or_two_fetches() -> None:
    fetched: list[frozenset[str]] = []
    release = anyio.Event()

    async def fetch(keys: frozenset[str]) -> dict[str, int]:
        fetched.append(keys)
        await release.wait()
        return {k: int(k) for k in keys if k != "404"}

    coalescer = Coalescer(fetch)
    results: dict[str, int | None] = {}

    async def lookup(key: str) -> None:
        results[key] = (await coalescer.get([key]))[key]

    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(lookup, str(i))
        tg.start_soon(lookup, "404")
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert results == {**{str(i): i for i in range(100)}, "404": None}
    # the first lookup fetched alone; every later one joined a single second fetch
    assert len(fetched) <= 2
    assert coalescer.fetches == len(fetched)
    assert set().union(*fetched) == {*map(str, range(100)), "404"}


async def test_a_shared_error_reaches_every_lookup_of_the_fetch() -> None:
    async def fetch(keys: frozenset[str]) -> dict[str, int]:
        await anyio.lowlevel.checkpoint()
        raise AsyncschedError("backend down")

    coalescer: Coalescer[str, int] = Coalescer(fetch, shared_errors=(AsyncschedError,))
    errors: list[str] = []

    async def lookup(key: str) -> None:
        try:
            await coalescer.get([key])
        except AsyncschedError as exc:
            errors.append(str(exc))

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(lookup, str(i))
    assert errors == ["backend down"] * 5


async def test_another_error_reaches_only_the_fetching_caller() -> None:
    calls = 0

    async def fetch(keys: frozenset[str]) -> dict[str, int]:
        nonlocal calls
        calls += 1
        await anyio.lowlevel.checkpoint()
        if calls == 1:
            raise ValueError("first fetch breaks")
        return dict.fromkeys(keys, 1)

    coalescer: Coalescer[str, int] = Coalescer(fetch, shared_errors=())
    outcomes: dict[str, object] = {}

    async def lookup(key: str) -> None:
        try:
            outcomes[key] = (await coalescer.get([key]))[key]
        except ValueError as exc:
            outcomes[key] = exc

    async with anyio.create_task_group() as tg:
        for key in ("a", "b", "c"):
            tg.start_soon(lookup, key)
    # whoever ran the broken fetch got its error; the others joined it and
    # fetched again
    broken = [k for k, v in outcomes.items() if isinstance(v, ValueError)]
    assert len(broken) == 1
    assert all(v == 1 for k, v in outcomes.items() if k not in broken)
