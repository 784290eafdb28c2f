"""The kit's all-or-nothing submit: a failed or cancelled block leaves nothing."""

from __future__ import annotations

import functools
import logging

import anyio
import pytest

from asyncsched.schedulers.kit import all_or_nothing

pytestmark = pytest.mark.anyio


class Engine:
    """Things made and removed, with a create that can be held in flight."""

    def __init__(self) -> None:
        self.things: set[str] = set()
        self.in_flight = anyio.Event()

    async def create(self, name: str, *, hold: bool = False) -> str:
        self.things.add(name)  # landed on the engine before the reply
        if hold:
            self.in_flight.set()
            await anyio.sleep_forever()
        return name

    async def refuse(self, name: str) -> str:
        raise ValueError(f"{name} refused")

    async def remove(self, name: str) -> None:
        self.things.discard(name)


async def test_a_successful_block_keeps_everything_it_made() -> None:
    engine = Engine()
    async with all_or_nothing("app") as steps:
        for name in ("a", "b"):
            await steps.create(
                functools.partial(engine.create, name),
                undo=functools.partial(engine.remove, name),
            )
    assert engine.things == {"a", "b"}


async def test_an_error_after_some_creates_removes_them_last_first() -> None:
    engine = Engine()
    order: list[str] = []

    async def remove(name: str) -> None:
        order.append(name)
        await engine.remove(name)

    async def submit() -> None:
        async with all_or_nothing("app") as steps:
            for name in ("a", "b"):
                await steps.create(
                    functools.partial(engine.create, name),
                    undo=functools.partial(remove, name),
                )
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await submit()
    assert engine.things == set()
    assert order == ["b", "a"]


async def test_a_refused_create_is_not_undone_but_the_earlier_ones_are() -> None:
    engine = Engine()
    undone: list[str] = []

    async def remove(name: str) -> None:
        undone.append(name)

    async def submit() -> None:
        async with all_or_nothing("app") as steps:
            await steps.create(lambda: engine.create("a"), undo=lambda: remove("a"))
            await steps.create(
                lambda: engine.refuse("b"),
                undo=lambda: remove("b"),
                refusals=(ValueError,),
            )

    with pytest.raises(ValueError, match="refused"):
        await submit()
    assert undone == ["a"]


async def test_a_create_cancelled_in_flight_is_undone_too() -> None:
    engine = Engine()
    async with anyio.create_task_group() as tg:

        async def submit() -> None:
            async with all_or_nothing("app") as steps:
                await steps.create(
                    lambda: engine.create("a"), undo=lambda: engine.remove("a")
                )
                await steps.create(
                    lambda: engine.create("b", hold=True),
                    undo=lambda: engine.remove("b"),
                    refusals=(ValueError,),  # a cancelled create may have landed
                )

        tg.start_soon(submit)
        await engine.in_flight.wait()
        assert engine.things == {"a", "b"}
        tg.cancel_scope.cancel()
    assert engine.things == set()


async def test_cancelling_the_caller_during_the_undo_does_not_cut_it_short() -> None:
    engine = Engine()
    undo_started = anyio.Event()
    release = anyio.Event()

    async def slow_remove(name: str) -> None:
        undo_started.set()
        await release.wait()
        await engine.remove(name)

    async with anyio.create_task_group() as tg:

        async def submit() -> None:
            async with all_or_nothing("app") as steps:
                await steps.create(
                    lambda: engine.create("a"), undo=lambda: slow_remove("a")
                )
                raise RuntimeError("boom")

        async def run_submit() -> None:
            with pytest.raises(RuntimeError):
                await submit()

        tg.start_soon(run_submit)
        await undo_started.wait()
        tg.cancel_scope.cancel()  # the undo is shielded: it goes on
        release.set()
    assert engine.things == set()


async def test_a_hung_undo_is_abandoned_after_its_bound_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = Engine()

    async def submit() -> None:
        async with all_or_nothing("app-9", undo_within=0.2) as steps:
            await steps.create(lambda: engine.create("a"), undo=anyio.sleep_forever)
            raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR), anyio.fail_after(10):
        with pytest.raises(RuntimeError, match="boom"):
            await submit()
    assert "could not undo the failed submit of app-9 within 0.2s" in caplog.text


async def test_a_failing_undo_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = Engine()

    async def broken() -> None:
        raise OSError("engine gone")

    async def submit() -> None:
        async with all_or_nothing("app") as steps:
            await steps.create(
                lambda: engine.create("a"), undo=lambda: engine.remove("a")
            )
            await steps.create(lambda: engine.create("b"), undo=broken, name="b")
            raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError, match="boom"):
        await submit()
    assert engine.things == {"b"}
    assert "could not undo b of app: engine gone" in caplog.text


def test_the_built_in_undo_bounds_are_the_documented_ones() -> None:
    from asyncsched.schedulers.docker import _submit as docker
    from asyncsched.schedulers.kit import UNDO_TIMEOUT
    from asyncsched.schedulers.kubernetes import _submit as kubernetes
    from asyncsched.schedulers.slurm import _scheduler as slurm

    assert UNDO_TIMEOUT == 30.0
    assert docker.UNDO_TIMEOUT == 60.0
    assert kubernetes.UNDO_TIMEOUT == 60.0
    assert slurm._UNDO_TIMEOUT == 10.0
