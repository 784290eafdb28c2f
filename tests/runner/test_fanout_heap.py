"""``run_many`` and ``wait_all`` keep the objects that existed before them out
of the collector's scans while they run, and leave nothing frozen after."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from asyncsched.errors import RunManyError
from asyncsched.runner import Runner
from asyncsched.runner._events import RunnerEvent
from asyncsched.runner._gc import fanout_heap
from asyncsched.specs import AppState
from tests.runner.helpers import inmemory_runner, sh_app

pytestmark = pytest.mark.anyio


@pytest.fixture
async def runner() -> AsyncIterator[Runner]:
    async with inmemory_runner() as r:
        yield r


@pytest.fixture(autouse=True)
def _collector_enabled_and_unfrozen() -> Iterator[None]:
    """Each test starts with the collector on and nothing frozen, whatever ran
    before it in this process (the web example's lifespan freezes the heap),
    and this process gets its collector state back afterwards."""
    was_enabled, was_frozen = gc.isenabled(), gc.get_freeze_count() > 0
    gc.enable()
    gc.unfreeze()
    try:
        yield
        assert gc.get_freeze_count() == 0, "a test left the heap frozen"
    finally:
        if was_frozen:
            gc.freeze()
        if not was_enabled:
            gc.disable()


def _scanned(obj: object) -> bool:
    """True when a collection would walk ``obj`` (it is in no frozen set)."""
    return any(o is obj for o in gc.get_objects())


async def test_run_many_keeps_older_objects_out_of_full_collections() -> None:
    apps = [sh_app("true", name=f"a{i}") for i in range(5)]
    seen: list[tuple[bool, int]] = []
    dicts_scanned: list[bool] = []

    def hook(event: RunnerEvent) -> None:
        if event.api == "schedule":
            seen.append((_scanned(apps), gc.get_freeze_count()))
            # copying an app makes its (and its roles') attribute dicts: made
            # before the freeze, they are not walked either
            scanned = {id(o) for o in gc.get_objects()}
            dicts_scanned.extend(
                id(vars(obj)) in scanned for a in apps for obj in (a, *a.roles)
            )

    async with inmemory_runner(event_hook=hook) as runner:
        assert _scanned(apps)
        handles = await runner.run_many(apps, "inmemory")
        assert gc.get_freeze_count() == 0
        assert _scanned(apps)
        results = await runner.wait_all(handles)
    assert len(seen) == 5
    assert all(not scanned and frozen > 0 for scanned, frozen in seen)
    assert dicts_scanned
    assert not any(dicts_scanned)
    assert all(
        s is not None and s.state == AppState.SUCCEEDED for s in results.values()
    )


async def test_wait_all_keeps_older_objects_out_until_it_returns(
    runner: Runner,
) -> None:
    handle = await runner.run(sh_app("sleep 60"), "inmemory")
    older = [object()]
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.wait_all, [handle])
        await anyio.wait_all_tasks_blocked()
        assert gc.get_freeze_count() > 0
        assert not _scanned(older)
        await runner.cancel(handle)
    assert gc.get_freeze_count() == 0
    assert _scanned(older)


async def test_nothing_stays_frozen_after_a_failed_run_many_or_a_cancelled_wait(
    runner: Runner,
) -> None:
    bad = sh_app("true", name="bad")
    bad.roles[0].num_replicas = 0  # refused by the dry run
    with pytest.raises(RunManyError):
        await runner.run_many([sh_app("true"), bad], "inmemory")
    assert gc.get_freeze_count() == 0
    handle = await runner.run(sh_app("sleep 60"), "inmemory")
    with anyio.move_on_after(0.05):
        await runner.wait_all([handle])
    assert gc.get_freeze_count() == 0


async def test_overlapping_waits_unfreeze_when_the_last_one_ends(
    runner: Runner,
) -> None:
    first = await runner.run(sh_app("sleep 60"), "inmemory")
    second = await runner.run(sh_app("sleep 60"), "inmemory")
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.wait_all, [first])
        tg.start_soon(runner.wait_all, [second])
        await anyio.wait_all_tasks_blocked()
        await runner.cancel(first)
        await anyio.wait_all_tasks_blocked()
        assert gc.get_freeze_count() > 0  # the second still waits
        await runner.cancel(second)
    assert gc.get_freeze_count() == 0


async def test_a_freeze_of_your_own_is_left_as_it_is(runner: Runner) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        handles = await runner.run_many([sh_app("true")], "inmemory")
        await runner.wait_all(handles)
        # neither unfrozen nor frozen further (frozen objects freed meanwhile
        # leave the count)
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_the_heap_is_not_frozen_while_the_collector_is_disabled() -> None:
    gc.disable()
    try:
        with fanout_heap():
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_objects_made_inside_the_block_are_scanned_and_nothing_stays_frozen() -> None:
    with fanout_heap():
        made = [object()]
        assert _scanned(made)
        assert gc.get_freeze_count() > 0
        with fanout_heap():  # nested: the inner end keeps the heap frozen
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_during_the_block_is_undone_at_its_end() -> None:
    with fanout_heap():
        gc.freeze()
    assert gc.get_freeze_count() == 0
