"""The app cache bounds memory, never correctness: running apps are never evicted
nor refused; how many replicas run at once is bounded by
``max_running_replicas``, beyond which a submit waits (cancellably)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import InvalidArgumentError, SchedulerClosedError, SpecError
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import run
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


async def _until_waiting(s: LocalScheduler, count: int) -> None:
    """Until ``count`` submits wait for replica slots (deadline 10 s)."""
    with anyio.fail_after(10):
        while s._slots.waiting < count:
            await anyio.sleep(0.01)


async def test_running_apps_beyond_the_cache_size_all_start(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=1, close_grace=0.2) as s:
        ids = [await s.submit(app_of(sh_role("sleep 30")), cfg) for _ in range(3)]
        for app_id in ids:
            desc = await s.describe(app_id)
            assert desc is not None
            assert desc.state == AppState.RUNNING
        assert {a.app_id for a in await s.list()} >= set(ids)


async def test_concurrent_submits_beyond_the_cache_size_all_start(
    log_dir: Path,
) -> None:
    cfg = {"log_dir": str(log_dir)}
    ids: list[str] = []

    async def submit_one(s: LocalScheduler) -> None:
        ids.append(await s.submit(app_of(sh_role("sleep 30")), cfg))

    async with LocalScheduler("s", cache_size=2, close_grace=0.2) as s:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(submit_one, s)
        assert len(set(ids)) == 3
        assert len(await s.list()) == 3


async def test_submit_waits_until_the_replicas_fit(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler(
        "s", max_running_replicas=2, cancel_grace=1, close_grace=0.2
    ) as s:
        first = await s.submit(app_of(sh_role("sleep 30", replicas=2)), cfg)
        second: list[str] = []

        async def submit_second() -> None:
            second.append(await s.submit(app_of(sh_role("true")), cfg))

        async with anyio.create_task_group() as tg:
            tg.start_soon(submit_second)
            await _until_waiting(s, 1)
            assert not second  # still waiting while `first` holds both slots
            await s.cancel(first)
        desc = await s.describe(first)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        waited = await s.wait(second[0], timeout=30)
        assert waited is not None
        assert waited.state == AppState.SUCCEEDED


async def test_a_cancelled_waiting_submit_takes_nothing(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler(
        "s", max_running_replicas=1, cancel_grace=1, close_grace=0.2
    ) as s:
        first = await s.submit(app_of(sh_role("sleep 30")), cfg)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.submit, app_of(sh_role("sleep 30")), cfg)
                await _until_waiting(s, 1)
                scope.cancel()
        assert s._slots.waiting == 0
        assert [a.app_id for a in await s.list()] == [first]
        await s.cancel(first)
        # the slot of `first` comes back once it has ended; nothing else holds one
        with anyio.fail_after(30):
            third = await s.submit(app_of(sh_role("true")), cfg)
        assert (await s.wait(third, timeout=30)) is not None


async def test_closing_wakes_waiting_submits_with_an_error(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    errors: list[BaseException] = []
    s = LocalScheduler("s", max_running_replicas=1, close_grace=0.2)
    async with s:

        async def submit_waiting() -> None:
            try:
                await s.submit(app_of(sh_role("true")), cfg)
            except SchedulerClosedError as exc:
                errors.append(exc)

        await s.submit(app_of(sh_role("sleep 30")), cfg)
        async with anyio.create_task_group() as tg:
            tg.start_soon(submit_waiting)
            await _until_waiting(s, 1)
            await s.aclose()
    assert len(errors) == 1
    # nothing of the refused app was created: only the running app's dir
    assert len(list((log_dir / "s").iterdir())) == 1


async def test_an_app_with_more_replicas_than_may_run_is_refused(
    log_dir: Path,
) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", max_running_replicas=4) as s:
        with pytest.raises(SpecError, match="max_running_replicas") as info:
            await s.submit(app_of(sh_role("true", replicas=5)), cfg)
        assert info.value.field == "roles[0].num_replicas"
        assert "5 replicas" in str(info.value)
        assert "4" in str(info.value)
        # two roles that fit alone but not together name the app's roles
        two = app_of(
            sh_role("true", name="a", replicas=3), sh_role("true", name="b", replicas=2)
        )
        with pytest.raises(SpecError, match="max_running_replicas") as info:
            await s.submit(two, cfg)
        assert info.value.field == "roles"
        assert await s.list() == []
    assert list(log_dir.iterdir()) == []


async def test_a_million_replicas_are_refused_up_front(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s") as s:
        with anyio.fail_after(10):
            with pytest.raises(SpecError, match="1000000 replicas") as info:
                await s.submit(app_of(sh_role("true", replicas=1_000_000)), cfg)
        assert str(s.max_running_replicas) in str(info.value)
        assert "RLIMIT_NOFILE" in str(info.value)
        with pytest.raises(SpecError):  # the dry run refuses it too
            await s.submit_dryrun(app_of(sh_role("true", replicas=1_000_000)), cfg)
        assert await s.list() == []
    assert list(log_dir.iterdir()) == []


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_max_running_replicas_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="max_running_replicas"):
        LocalScheduler("s", max_running_replicas=bad)  # type: ignore[arg-type]


def test_the_default_bound_follows_the_open_file_limit() -> None:
    from asyncsched.schedulers.local._capacity import (
        MAX_DEFAULT_RUNNING_REPLICAS,
        default_max_running_replicas,
    )

    assert default_max_running_replicas(1024) == 245
    assert default_max_running_replicas(300) == 4
    assert default_max_running_replicas(10) == 1
    assert default_max_running_replicas(10**7) == MAX_DEFAULT_RUNNING_REPLICAS
    assert 1 <= LocalScheduler("s").max_running_replicas <= MAX_DEFAULT_RUNNING_REPLICAS


async def test_eviction_frees_memory_but_the_app_stays_readable(
    log_dir: Path,
) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=2) as s:
        first, _ = await run(s, app_of(sh_role("echo one")), cfg)
        second, _ = await run(s, app_of(sh_role("true")), cfg)
        running = await s.submit(app_of(sh_role("sleep 30")), cfg)  # evicts first
        assert first not in s._table.apps
        desc = await s.describe(first)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        waited = await s.wait(first)
        assert waited is not None
        assert waited.state == AppState.SUCCEEDED
        lines = s.log_iter(first, "worker")
        async with contextlib.aclosing(lines):
            assert [line async for line in lines] == ["one\n"]
        third = await s.submit(app_of(sh_role("sleep 30")), cfg)  # evicts `second`
        assert (await s.describe(second)) is not None
        assert {a.app_id for a in await s.list()} >= {first, second, running, third}
        # both in memory are running: a third running app is kept beside them
        fourth = await s.submit(app_of(sh_role("sleep 30")), cfg)
        assert {running, third, fourth} <= set(s._table.apps)
        for app_id in (running, third, fourth):
            await s.cancel(app_id)
