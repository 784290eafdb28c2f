"""Slurm's shared status poller: a describe never outlives the wait it joined.

No cluster: the poller's query is a function of the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from asyncsched.schedulers.kit import ChangeNotifier, TaskHost
from asyncsched.schedulers.slurm._state import AppView
from asyncsched.schedulers.slurm._status import StatusBatcher, StatusTracker

pytestmark = pytest.mark.anyio


class _Slurm:
    """Answers each status query with a view of every id asked for; counts them."""

    def __init__(self) -> None:
        self.queries: list[frozenset[str]] = []

    async def fetch(self, ids: frozenset[str]) -> dict[str, AppView]:
        self.queries.append(ids)
        return {i: AppView(i) for i in ids}


@pytest.fixture
async def tracker() -> AsyncIterator[tuple[StatusTracker, _Slurm]]:
    slurm = _Slurm()
    tasks = TaskHost("test")
    await tasks.enter()
    try:
        yield (
            StatusTracker(StatusBatcher(slurm.fetch), tasks, ChangeNotifier()),
            slurm,
        )
    finally:
        await tasks.aclose()


async def test_a_describe_waiting_on_a_wait_that_ends_first_gets_its_answer(
    tracker: tuple[StatusTracker, _Slurm],
) -> None:
    # a wait and a describe of the same app wake at the same tick; the wait
    # (woken first) ends and stops watching the app before the describe reads
    # the tick's view: the describe must still answer (it waited forever)
    poller, slurm = tracker
    watching = anyio.Event()
    answers: list[AppView | None] = []

    async def wait() -> None:
        async with poller.watching("7"):
            changed = poller.changes.changed("7")  # before the describe's
            watching.set()
            await changed.wait()

    async def describe() -> None:
        answers.append(await poller.view("7"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await watching.wait()
            tg.start_soon(describe)
    [answer] = answers
    assert answer is not None
    assert answer.app_id == "7"
    assert slurm.queries[0] == frozenset({"7"})


async def test_a_describe_of_a_watched_app_shares_the_pollers_query(
    tracker: tuple[StatusTracker, _Slurm],
) -> None:
    poller, slurm = tracker
    async with poller.watching("7"):
        with anyio.fail_after(10):
            first, second = await poller.view("7"), await poller.view("7")
    assert first is second is not None
    assert slurm.queries == [frozenset({"7"})]
