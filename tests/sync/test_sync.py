"""The blocking facades: plain threads, a running loop, many threads, Ctrl-C, parity."""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any

import pytest

from asyncsched import EventKind
from asyncsched.errors import (
    BlockingCallWarning,
    InvalidArgumentError,
    SchedulerClosedError,
    UnknownAppException,
    UnknownSchedulerException,
    WaitTimeoutError,
)
from asyncsched.runner import Runner
from asyncsched.schedulers.api import AppSnapshot, DescribeAppResponse, Scheduler
from asyncsched.specs import AppState
from asyncsched.sync import SyncRunner, SyncScheduler, get_runner, get_scheduler
from asyncsched.testing import InMemoryScheduler, create_scheduler
from tests.runner.helpers import CountingFactory, sh_app


@pytest.fixture
def runner() -> Iterator[SyncRunner]:
    with SyncRunner("sync", {"inmemory": create_scheduler}) as r:
        yield r


def _loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "asyncsched-loop"]


def test_runner_from_a_plain_thread(runner: SyncRunner) -> None:
    handle = runner.run(sh_app("echo one; echo two", replicas=2), "inmemory")
    assert handle.startswith("inmemory://sync/")
    status = runner.wait(handle, timeout=10)
    assert status is not None
    assert status.state == AppState.SUCCEEDED
    lines = runner.log_lines(handle, "worker", 1)
    assert isinstance(lines, Iterator)
    assert list(lines) == ["one\n", "two\n"]
    described = runner.describe(handle)
    assert described is not None
    assert described.name == "app"
    assert [a.app_handle for a in runner.list("inmemory")] == [handle]
    assert runner.name() == "sync"
    assert runner.cfg_from_str("inmemory", "fail_fast=False") == {"fail_fast": False}


def test_generators_of_apps_and_handles_are_read_in_the_calling_thread(
    runner: SyncRunner,
) -> None:
    readers: set[str] = set()

    def read(items: list[str]) -> Iterator[str]:
        for item in items:
            readers.add(threading.current_thread().name)
            yield item

    handles = runner.run_many((sh_app(f"exit {i}") for i in range(3)), "inmemory")
    assert len(handles) == 3
    finals = runner.wait_all(read(handles), timeout=30)
    assert list(finals) == handles
    assert dict(runner.as_completed(read(handles))).keys() == set(handles)
    assert readers == {threading.current_thread().name}


def test_errors_pass_through_unchanged(runner: SyncRunner) -> None:
    with pytest.raises(UnknownSchedulerException):
        runner.run(sh_app("exit 0"), "nope")
    with pytest.raises(UnknownAppException):
        list(runner.log_lines("inmemory://sync/nope", "worker"))
    handle = runner.run(sh_app("sleep 60"), "inmemory")
    with pytest.raises(WaitTimeoutError):
        runner.wait(handle, timeout=0.05)


def test_fan_out_iterators(runner: SyncRunner) -> None:
    handles = runner.run_many(
        [sh_app(f"sleep 0.0{i}; exit {i % 2}") for i in range(6)], "inmemory"
    )
    finals = dict(runner.as_completed(handles))
    assert set(finals) == set(handles)
    watched = [h for h, s in runner.watch(handles) if s is not None and s.is_terminal()]
    assert sorted(watched) == sorted(handles)
    results = runner.wait_all(handles)
    states = [s.state for s in results.values() if s is not None]
    assert states.count(AppState.FAILED) == 3


def test_running_context_manager_cancels_on_error(runner: SyncRunner) -> None:
    kept = ""
    with pytest.raises(ValueError, match="boom"):  # noqa: PT012
        with runner.running(sh_app("sleep 60"), "inmemory") as handle:
            kept = handle
            raise ValueError("boom")
    final = runner.wait(kept, timeout=5)
    assert final is not None
    assert final.state == AppState.CANCELLED


def test_running_keeps_the_app_when_detached_or_when_the_block_ends(
    runner: SyncRunner,
) -> None:
    kept = []
    with pytest.raises(ValueError, match="boom"):  # noqa: PT012
        with runner.running(sh_app("sleep 60"), "inmemory", detach=True) as handle:
            kept.append(handle)
            raise ValueError("boom")
    with runner.running(sh_app("sleep 60"), "inmemory") as handle:
        kept.append(handle)
    for handle in kept:
        status = runner.status(handle)
        assert status is not None
        assert not status.is_terminal()


def test_running_cancels_the_app_on_ctrl_c_in_the_block(runner: SyncRunner) -> None:
    kept = ""
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012
        with runner.running(sh_app("sleep 60"), "inmemory") as handle:
            kept = handle
            raise KeyboardInterrupt
    final = runner.wait(kept, timeout=5)
    assert final is not None
    assert final.state == AppState.CANCELLED


def test_stop_warns(runner: SyncRunner) -> None:
    handle = runner.run(sh_app("sleep 60"), "inmemory")
    with pytest.warns(PendingDeprecationWarning):
        runner.stop(handle)
    status = runner.wait(handle, timeout=5)
    assert status is not None
    assert status.state == AppState.CANCELLED


def test_close_is_idempotent_and_calls_after_close_fail() -> None:
    factory = CountingFactory()
    runner = SyncRunner("s", {"inmemory": factory})
    runner.run(sh_app("sleep 60"), "inmemory")
    runner.close()
    runner.close()
    assert runner.closed
    assert factory.built[0].closed
    assert _loop_threads() == []
    with pytest.raises(SchedulerClosedError, match="closed"):
        runner.status("inmemory://s/x")


def test_exception_in_with_closes_and_propagates() -> None:
    factory = CountingFactory()
    with pytest.raises(KeyError):  # noqa: PT012
        with SyncRunner("s", {"inmemory": factory}) as runner:
            runner.run(sh_app("sleep 60"), "inmemory")
            raise KeyError("x")
    assert factory.built[0].closed
    assert _loop_threads() == []


def test_called_from_a_running_event_loop_warns_once_and_works() -> None:
    async def notebook_cell() -> AppState | None:
        with SyncRunner("nb", {"inmemory": create_scheduler}) as runner:
            with warnings.catch_warnings(record=True) as record:
                warnings.simplefilter("always")
                handle = runner.run(sh_app("exit 0"), "inmemory")
                status = runner.wait(handle)
            assert [w.category for w in record] == [BlockingCallWarning]
            assert record[0].filename == __file__
            return status.state if status else None

    assert asyncio.run(notebook_cell()) == AppState.SUCCEEDED


def test_one_facade_shared_by_many_threads(runner: SyncRunner) -> None:
    def work(i: int) -> list[AppState | None]:
        states = []
        for j in range(5):
            handle = runner.run(sh_app(f"exit {(i + j) % 2}"), "inmemory")
            status = runner.wait(handle)
            states.append(status.state if status else None)
        return states

    with ThreadPoolExecutor(8) as pool:
        results = [s for states in pool.map(work, range(8)) for s in states]
    assert results.count(AppState.SUCCEEDED) == 20
    assert results.count(AppState.FAILED) == 20


class _WaitSignalling:
    """A factory of in-memory schedulers that set ``waiting`` once a wait blocks."""

    def __init__(self) -> None:
        self.waiting = threading.Event()

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        sched = InMemoryScheduler(session_name)
        real_wait = sched._wait

        async def wait(
            app_id: str,
            ended: list[AppSnapshot] | None = None,
            latest: list[AppSnapshot] | None = None,
        ) -> DescribeAppResponse | None:
            self.waiting.set()
            return await real_wait(app_id, ended, latest)

        sched._wait = wait  # type: ignore[method-assign]
        return sched


def test_close_cancels_calls_blocked_in_other_threads() -> None:
    factory = _WaitSignalling()
    runner = SyncRunner("s", {"inmemory": factory})
    handle = runner.run(sh_app("sleep 60"), "inmemory")
    with ThreadPoolExecutor(1) as pool:
        blocked = pool.submit(runner.wait, handle)
        assert factory.waiting.wait(timeout=10)
        started = time.monotonic()
        runner.close()
        assert time.monotonic() - started < 5
        # cancelled, or ended by the scheduler closing under it
        with pytest.raises((CancelledError, SchedulerClosedError)):
            blocked.result(timeout=5)


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here even if the test run started with it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("default_sigint")
def test_ctrl_c_during_a_blocking_call_cancels_it_and_with_cleans_up() -> None:
    factory = CountingFactory()
    main = threading.get_ident()
    timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012
        with SyncRunner("s", {"inmemory": factory}) as runner:
            handle = runner.run(sh_app("sleep 60"), "inmemory")
            timer.start()
            runner.wait(handle)
    timer.join()
    assert time.monotonic() - started < 10
    assert factory.built[0].closed
    assert _loop_threads() == []


def test_sync_scheduler_by_factory() -> None:
    with SyncScheduler("inmemory", "sess", factory=create_scheduler) as sched:
        assert sched.session_name == "sess"
        assert sched.backend == "inmemory"
        app_id = sched.submit(sh_app("echo hi >&2; exit 2"))
        assert sched.exists(app_id)
        final = sched.wait(app_id, timeout=10)
        assert final is not None
        assert final.state == AppState.FAILED
        assert list(sched.log_iter(app_id, "worker", streams="stderr")) == ["hi\n"]
        assert [a.app_id for a in sched.list()] == [app_id]
        sched.cancel(app_id)
        assert sched.describe("nope") is None
        assert sched.run_opts().get("fail_fast") is not None
        info = sched.submit_dryrun(sh_app("exit 0"))
        assert sched.schedule(info)
        assert sched.resolve_cfg({}) == {"fail_fast": True}
    assert sched.closed


def test_get_scheduler_and_get_runner() -> None:
    with pytest.raises(UnknownSchedulerException):
        get_scheduler("nope")
    with get_runner() as runner:
        assert runner.name() == "asyncsched"
        assert "local_cwd" in runner.scheduler_backends()
    with get_scheduler("local_cwd", session_name="s") as sched:
        assert sched.session_name == "s"


def test_unclosed_facade_warns() -> None:
    runner = SyncRunner("s", {"inmemory": create_scheduler})
    with pytest.warns(ResourceWarning, match="unclosed SyncRunner"):
        runner.__del__()
    assert runner.closed


# -- parity ---------------------------------------------------------------------------------


def _public(cls: type, keep: Callable[[Any], bool]) -> dict[str, list[tuple[Any, ...]]]:
    """Public method -> its parameters as (name, kind, default); types may differ."""
    out = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or name in ("aclose",) or not keep(member):
            continue
        params = inspect.signature(member).parameters.values()
        out[name] = [(p.name, p.kind, p.default) for p in params]
    return out


def _is_async_api(member: Any) -> bool:
    return inspect.iscoroutinefunction(member) or getattr(member, "__name__", "") in (
        "log_iter",
        "log_lines",
        "watch",
        "as_completed",
        "running",
        "events",
    )


@pytest.mark.parametrize(
    ("async_cls", "sync_cls"), [(Scheduler, SyncScheduler), (Runner, SyncRunner)]
)
def test_facade_has_every_async_method_with_the_same_parameters(
    async_cls: type, sync_cls: type
) -> None:
    expected = _public(async_cls, _is_async_api)
    assert expected, "nothing compared"
    actual = _public(sync_cls, callable)
    for name, sig in expected.items():
        assert name in actual, f"{sync_cls.__name__} lacks {name}"
        assert actual[name] == sig, name


# -- events ---------------------------------------------------------------------------


def test_scheduler_events_block_until_each_change_and_close() -> None:
    with SyncScheduler("inmemory", "s", factory=create_scheduler) as sched:
        app_id = sched.submit(sh_app("sleep 0.1; exit 3"))
        seen = []
        with sched.events([app_id]) as events:
            assert isinstance(events, Iterator)
            for event in events:
                seen.append(event)
                if event.terminal:
                    break
        assert seen[0].kind is EventKind.CURRENT
        assert seen[-1].state is AppState.FAILED
        assert seen[-1].handle == f"inmemory://s/{app_id}"
        # resume within the same scheduler: nothing after the last event yet
        with sched.events(since=seen[-1].cursor) as again:
            other = sched.submit(sh_app("exit 0"))
            resumed = []
            for event in again:
                resumed.append(event)
                if event.app_id == other:
                    break
        assert resumed[-1].kind is EventKind.SUBMITTED
        assert not {e.cursor for e in resumed} & {e.cursor for e in seen}
        with pytest.raises(InvalidArgumentError):
            sched.events(since="not-a-cursor")


def test_runner_events_end_when_another_thread_closes_the_facade(
    runner: SyncRunner,
) -> None:
    handle = runner.run(sh_app("sleep 30"), "inmemory")
    events = runner.events(["inmemory"])
    first = next(events)
    assert (first.handle, first.kind) == (handle, EventKind.CURRENT)
    closer = threading.Timer(0.2, runner.close)
    closer.start()
    try:
        rest = list(events)  # blocks until the facade closes, then ends
    finally:
        closer.join()
    assert all(e.handle == handle for e in rest)
    assert runner.closed
