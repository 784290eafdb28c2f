"""Runner behaviour (TorchX's and asyncsched's additions), on the in-memory scheduler."""

from __future__ import annotations

import copy
import inspect
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from asyncsched.errors import (
    InvalidArgumentError,
    InvalidRunConfigException,
    MalformedAppHandleException,
    SpecError,
    UnknownAppException,
    UnknownSchedulerException,
    UnsupportedOperationError,
    WaitTimeoutError,
)
from asyncsched.runner import (
    KEPT_APP_DEFINITIONS,
    Runner,
    RunnerEvent,
    get_runner,
    get_session_id,
)
from asyncsched.schedulers.api import DescribeAppResponse, Scheduler
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    parse_app_handle,
)
from asyncsched.testing import InMemoryScheduler, create_scheduler
from tests.runner.helpers import (
    CountingFactory,
    GatedScheduler,
    fixed,
    inmemory_runner,
    sh_app,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def runner() -> AsyncIterator[Runner]:
    async with inmemory_runner() as r:
        yield r


# -- run, wait, handles --------------------------------------------------


async def test_app_without_roles_or_replicas_is_rejected(runner: Runner) -> None:
    with pytest.raises(ValueError, match="roles"):
        await runner.run(AppDef("empty"), "inmemory")
    app = sh_app("exit 0")
    app.roles[0].num_replicas = 0
    with pytest.raises(SpecError, match="num_replicas"):
        await runner.run(app, "inmemory")


async def test_run_then_wait_succeeds_and_events_carry_the_session_id() -> None:
    events: list[RunnerEvent] = []
    async with inmemory_runner(event_hook=events.append) as runner:
        handle = await runner.run(sh_app("echo hi"), "inmemory")
        status = await runner.wait(handle)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
        assert runner.scheduler_backends() == ["inmemory"]
    assert {e.api for e in events} >= {"dryrun", "schedule", "wait"}
    assert all(e.session == get_session_id() for e in events)
    assert all(e.exception_type is None for e in events)


async def test_event_records_exceptions_and_a_failing_hook_is_harmless() -> None:
    events: list[RunnerEvent] = []

    def hook(event: RunnerEvent) -> None:
        events.append(event)
        raise RuntimeError("hook broke")

    async with inmemory_runner(event_hook=hook) as runner:
        with pytest.raises(UnknownSchedulerException):
            await runner.run(sh_app("exit 0"), "nope")
        handle = await runner.run(sh_app("exit 0"), "inmemory")
        assert handle.startswith("inmemory://")
    failed = [e for e in events if e.exception_type]
    assert failed[0].exception_type == "UnknownSchedulerException"


async def test_empty_session_gives_triple_slash_handles() -> None:
    async with inmemory_runner("") as runner:
        handle = await runner.run(sh_app("exit 0"), "inmemory")
    assert handle.startswith("inmemory:///")
    parsed = parse_app_handle(handle)
    assert parsed.scheduler_backend == "inmemory"
    assert parsed.session_name == ""
    assert handle.endswith(parsed.app_id)


# -- dryrun ------------------------------------------------------------------


class _Spy:
    """Wraps a scheduler instance's pipeline steps to count how often each runs."""

    def __init__(self) -> None:
        self.resolves: list[Mapping[str, CfgVal]] = []
        self.validates = 0
        self.renders = 0

    def factory(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        sched = InMemoryScheduler(session_name)
        real_resolve = sched.resolve_cfg
        real_validate = sched._validate
        real_render = sched._submit_dryrun

        def resolve_cfg(cfg: Mapping[str, CfgVal] | None) -> Any:
            self.resolves.append(dict(cfg or {}))
            return real_resolve(cfg)

        def validate(app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
            self.validates += 1
            real_validate(app, scheduler, cfg)

        async def render(app: AppDef, cfg: Any) -> AppDryRunInfo[Any]:
            self.renders += 1
            return await real_render(app, cfg)

        sched.resolve_cfg = resolve_cfg  # type: ignore[method-assign]
        sched._validate = validate  # type: ignore[method-assign]
        sched._submit_dryrun = render  # type: ignore[method-assign]
        return sched


async def test_dryrun_resolves_cfg_once_and_validates_once() -> None:
    spy = _Spy()
    async with Runner("s", {"spy": spy.factory}) as runner:
        info = await runner.dryrun(sh_app("exit 0"), "spy", {"fail_fast": False})
    assert spy.resolves == [{"fail_fast": False}]
    assert spy.validates == 1
    assert spy.renders == 1
    assert info.scheduler == "spy"
    assert info.cfg == {"fail_fast": False}


async def test_run_goes_through_the_scheduler_pipeline_once() -> None:
    spy = _Spy()
    async with Runner("s", {"spy": spy.factory}) as runner:
        await runner.run(sh_app("exit 0"), "spy", {"fail_fast": False})
    assert (len(spy.resolves), spy.validates, spy.renders) == (1, 1, 1)


async def test_workspace_on_a_scheduler_without_workspaces_is_rejected(
    runner: Runner,
) -> None:
    with pytest.raises(UnsupportedOperationError, match="does not support workspaces"):
        await runner.run(sh_app("exit 0"), "inmemory", workspace="/tmp")
    assert await runner.list("inmemory") == []


async def test_dryrun_fills_defaults_and_rejects_bad_cfg(runner: Runner) -> None:
    info = await runner.dryrun(sh_app("exit 0"), "inmemory")
    assert info._cfg == {"fail_fast": True}
    with pytest.raises(InvalidRunConfigException):
        await runner.dryrun(sh_app("exit 0"), "inmemory", {"fail_fast": "yes"})


async def test_dryrun_injects_job_id_and_parent_run_id_without_mutating_the_app(
    runner: Runner,
) -> None:
    app = sh_app("exit 0", replicas=2)
    app.roles.append(copy.deepcopy(app.roles[0]))
    app.roles[1].name = "second"
    original = copy.deepcopy(app)
    info = await runner.dryrun(app, "inmemory", parent_run_id="parent-1")
    assert info._app is not None
    for role in info._app.roles:
        assert role.env["TORCHX_JOB_ID"] == "inmemory://test/${app_id}"
        assert role.env["TORCHX_PARENT_RUN_ID"] == "parent-1"
        assert role.env["TORCHX_INTERNAL_SESSION_ID"] == get_session_id()
    assert app == original


# -- query and control -------------------------------------------------------


async def test_describe_returns_the_submitted_app_and_none_when_unknown(
    runner: Runner,
) -> None:
    app = sh_app("exit 0")
    handle = await runner.run(app, "inmemory")
    described = await runner.describe(handle)
    assert described is not None
    assert described.name == app.name
    assert described.metadata == app.metadata
    assert described.roles[0].args == app.roles[0].args
    assert await runner.describe("inmemory://test/unknown-app") is None


async def test_describe_of_an_app_run_by_another_runner_is_rebuilt() -> None:
    shared = InMemoryScheduler("shared")
    factories = {"inmemory": fixed(shared)}
    async with Runner("one", factories) as first:
        handle = await first.run(sh_app("exit 0"), "inmemory")
        second = Runner("two", factories)
        second._schedulers["inmemory"] = shared  # same backend state, no cache
        described = await second.describe(handle)
        assert described is not None
        assert described.name == parse_app_handle(handle).app_id
        assert described.roles[0].name == "worker"


async def test_describe_keeps_only_the_latest_submitted_definitions() -> None:
    kept = 16  # the default is KEPT_APP_DEFINITIONS (1,024): the same code
    assert (
        inspect.signature(Runner).parameters["kept_app_definitions"].default
        == KEPT_APP_DEFINITIONS
    )
    count = kept + 2
    async with inmemory_runner(kept_app_definitions=kept) as runner:
        # one at a time: the kept ones are exactly the last `kept`
        handles = [
            await runner.run(sh_app(f"exit {i}"), "inmemory") for i in range(count)
        ]
        # memory does not grow with every app run
        assert len(runner._apps) == kept
        latest = await runner.describe(handles[-1])
        assert latest is not None
        assert latest.name == sh_app("exit 0").name  # the submitted copy
        oldest = await runner.describe(handles[0])
        assert oldest is not None  # still described, from the scheduler
        assert oldest.name == parse_app_handle(handles[0]).app_id
        assert oldest.roles[0].args == sh_app("exit 0").roles[0].args


def test_kept_app_definitions_below_1_is_refused() -> None:
    for bad in (0, -1):
        with pytest.raises(InvalidArgumentError, match="kept_app_definitions"):
            inmemory_runner(kept_app_definitions=bad)


async def test_status_running_then_cancelled(runner: Runner) -> None:
    handle = await runner.run(sh_app("sleep 60"), "inmemory")
    status = await runner.status(handle)
    assert status is not None
    assert status.state in (AppState.PENDING, AppState.RUNNING)
    await runner.cancel(handle)
    final = await runner.wait(handle, timeout=5)
    assert final is not None
    assert final.state == AppState.CANCELLED


async def test_unknown_apps_give_none(runner: Runner) -> None:
    assert await runner.status("inmemory://test/nope") is None
    assert await runner.wait("inmemory://other_session/nope") is None
    await runner.cancel("inmemory://test/nope")  # no error


async def test_stop_is_a_deprecated_cancel(runner: Runner) -> None:
    handle = await runner.run(sh_app("sleep 60"), "inmemory")
    with pytest.warns(PendingDeprecationWarning):
        await runner.stop(handle)
    final = await runner.wait(handle, timeout=5)
    assert final is not None
    assert final.state == AppState.CANCELLED


async def test_status_copies_ui_url_and_structured_error() -> None:
    sched = InMemoryScheduler("s")

    async def describe(app_id: str) -> DescribeAppResponse | None:
        return DescribeAppResponse(
            app_id=app_id,
            state=AppState.FAILED,
            ui_url="https://ui/app",
            structured_error_msg='{"message": "boom"}',
            msg="it failed",
            num_restarts=2,
        )

    sched.describe = describe  # type: ignore[method-assign]
    async with Runner("s", {"x": fixed(sched)}) as runner:
        status = await runner.status("x://s/anything")
    assert status is not None
    assert (status.state, status.num_restarts) == (AppState.FAILED, 2)
    assert status.ui_url == "https://ui/app"
    assert status.structured_error_msg == '{"message": "boom"}'
    assert status.msg == "it failed"


async def test_log_lines(runner: Runner) -> None:
    with pytest.raises(UnknownAppException):
        async for _ in runner.log_lines("inmemory://test/nope", "worker"):
            pass
    handle = await runner.run(sh_app("echo a1; echo b2; echo a3 >&2"), "inmemory")
    await runner.wait(handle)
    lines = [line async for line in runner.log_lines(handle, "worker", 0, regex="^a")]
    assert lines == ["a1\n", "a3\n"]
    stderr = [
        line async for line in runner.log_lines(handle, "worker", streams="stderr")
    ]
    assert stderr == ["a3\n"]


async def test_log_lines_can_be_closed_early(runner: Runner) -> None:
    handle = await runner.run(sh_app("echo 1; echo 2; sleep 60"), "inmemory")
    async with aclosing(runner.log_lines(handle, "worker", should_tail=True)) as lines:  # type: ignore[type-var]
        async for line in lines:
            assert line == "1\n"
            break


async def test_list_fills_in_handles() -> None:
    async with inmemory_runner("listing") as runner:
        handle = await runner.run(sh_app("exit 0", name="listed"), "inmemory")
        apps = await runner.list("inmemory")
    assert [a.app_handle for a in apps] == [handle]
    assert apps[0].app_handle == f"inmemory://listing/{apps[0].app_id}"
    assert apps[0].name == "listed"


async def test_run_goes_to_the_named_scheduler_and_creates_schedulers_lazily() -> None:
    a, b = CountingFactory(), CountingFactory()
    async with Runner("s", {"a": a, "b": b}) as runner:
        handle = await runner.run(sh_app("exit 0"), "b")
        await runner.status(handle)
        await runner.run(sh_app("exit 0"), "b")
        assert handle.startswith("b://s/")
        assert a.built == []
        assert len(b.built) == 1
        assert not b.built[0].closed
    assert b.built[0].closed


async def test_bad_handles_and_unknown_schedulers(runner: Runner) -> None:
    with pytest.raises(MalformedAppHandleException):
        await runner.status("no-scheduler/app")
    with pytest.raises(UnknownSchedulerException, match="Use one of"):
        await runner.status("kubernetes://test/app")
    with pytest.raises(UnknownSchedulerException):
        await runner.run(sh_app("exit 0"), "kubernetes")
    with pytest.raises(MalformedAppHandleException):
        runner.log_lines("inmemory://test/", "worker")
    with pytest.raises(UnknownSchedulerException):
        runner.watch(["nope://s/app"])


# -- lifecycle, get_runner, cfg_from_str -----------------------------------------


async def test_context_manager_closes_schedulers_and_propagates_errors() -> None:
    factory = CountingFactory()
    runner = Runner("s", {"inmemory": factory})
    with pytest.raises(KeyError, match="boom"):  # noqa: PT012
        async with runner:
            await runner.run(sh_app("sleep 60"), "inmemory")
            raise KeyError("boom")
    assert runner.closed
    assert factory.built[0].closed
    await runner.aclose()  # twice is fine
    from asyncsched.errors import SchedulerClosedError

    with pytest.raises(SchedulerClosedError):
        await runner.run(sh_app("exit 0"), "inmemory")


async def test_runner_works_without_async_with() -> None:
    runner = inmemory_runner()
    handle = await runner.run(sh_app("exit 0"), "inmemory")
    status = await runner.wait(handle)
    assert status is not None
    assert status.state == AppState.SUCCEEDED
    await runner.aclose()


async def test_get_runner_defaults() -> None:
    runner = get_runner()
    assert runner.name() == "asyncsched"
    assert "local_cwd" in runner.scheduler_backends()
    await runner.aclose()


async def test_get_runner_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCSCHED_CACHE_SIZE", "5")
    monkeypatch.setenv("TORCHX_CACHE_SIZE", "5")
    seen: list[dict[str, Any]] = []

    def factory(session_name: str, **kwargs: Any) -> Scheduler[Any]:
        seen.append(kwargs)
        return create_scheduler(session_name)

    async with Runner("s", {"x": factory}, {"explicit": 1}) as runner:
        await runner.run(sh_app("exit 0"), "x")
    assert seen == [{"explicit": 1}]


async def test_cfg_from_str_merges_typed_values(runner: Runner) -> None:
    cfg = await runner.cfg_from_str("inmemory", "fail_fast=True", "fail_fast=False")
    assert cfg == {"fail_fast": False}
    opts = await runner.scheduler_run_opts("inmemory")
    assert opts.get("fail_fast") is not None


# -- waiting, fan-out and helpers --------------------------------------------------------


async def test_wait_timeout_names_the_handle(runner: Runner) -> None:
    handle = await runner.run(sh_app("sleep 60"), "inmemory")
    with pytest.raises(WaitTimeoutError) as info:
        await runner.wait(handle, timeout=0.05)
    assert info.value.app_id == handle
    assert isinstance(info.value, TimeoutError)


async def test_wait_accepts_torchx_wait_interval_positionally(runner: Runner) -> None:
    handle = await runner.run(sh_app("sleep 0.05"), "inmemory")
    status = await runner.wait(handle, 0.001)  # TorchX's poll interval: ignored
    assert status is not None
    assert status.state == AppState.SUCCEEDED


async def test_max_concurrent_submits_applies_backpressure() -> None:
    slow = GatedScheduler("s")
    async with Runner("s", {"slow": fixed(slow)}, max_concurrent_submits=3) as runner:
        handles: list[str] = []

        async def submit() -> None:
            handles.append(await runner.run(sh_app("exit 0"), "slow"))

        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(submit)
            await anyio.wait_all_tasks_blocked()
            assert slow.active == 3
            slow.release.set()
        assert slow.peak == 3
        assert len(set(handles)) == 12


@pytest.mark.parametrize("streaming", [False, True], ids=["run_many", "iter"])
async def test_run_many_keeps_twice_what_the_backend_works_on_in_flight(
    streaming: bool,
) -> None:
    # the others would only wait, each holding its dry-run copy of the app

    class Paced(GatedScheduler):  # type: ignore[misc]
        submits_at_once = 2

    paced = Paced("s")
    async with Runner("s", {"paced": fixed(paced)}) as runner:

        async def submit_all() -> None:
            apps = [sh_app("exit 0")] * 12
            if not streaming:
                await runner.run_many(apps, "paced")
                return
            async with aclosing(runner.run_many_iter(apps, "paced")) as handles:
                async for _ in handles:
                    pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(submit_all)
            await anyio.wait_all_tasks_blocked()
            assert paced.active == 4
            paced.release.set()
        assert paced.peak == 4
        assert runner.progress().submitted == 12


async def test_run_many_keeps_the_order(runner: Runner) -> None:
    apps = [sh_app(f"sleep 0.0{i % 3}", name=f"app{i}") for i in range(20)]
    handles = await runner.run_many(apps, "inmemory")
    assert [parse_app_handle(h).app_id.rsplit("-", 1)[0] for h in handles] == [
        f"app{i}" for i in range(20)
    ]


async def test_watch_reports_each_state_change_once(runner: Runner) -> None:
    slow = await runner.run(sh_app("sleep 0.3"), "inmemory")
    fast = await runner.run(sh_app("exit 3"), "inmemory")
    unknown = "inmemory://test/never-existed"
    seen: dict[str, list[AppState | None]] = {}
    async for handle, status in runner.watch([slow, fast, unknown], poll_interval=0.05):
        seen.setdefault(handle, []).append(status.state if status else None)
    assert seen[unknown] == [None]
    assert seen[fast][-1] == AppState.FAILED
    assert seen[slow][-1] == AppState.SUCCEEDED
    assert AppState.RUNNING in seen[slow]
    for states in seen.values():
        assert len(states) == len(set(states))  # no repeats


async def test_watch_abandoned_early_stops_its_tasks(runner: Runner) -> None:
    handles = [await runner.run(sh_app("sleep 60"), "inmemory") for _ in range(5)]
    async with aclosing(runner.watch(handles)) as events:  # type: ignore[type-var]
        async for _handle, status in events:
            assert status is not None
            break
    with anyio.fail_after(2):
        await runner.aclose()  # nothing left hanging


async def test_as_completed_yields_in_completion_order(runner: Runner) -> None:
    slow = await runner.run(sh_app("sleep 0.3"), "inmemory")
    fast = await runner.run(sh_app("sleep 0.01"), "inmemory")
    order = [h async for h, _ in runner.as_completed([slow, fast])]
    assert order == [fast, slow]


async def test_wait_all_returns_input_order_and_times_out(runner: Runner) -> None:
    handles = [await runner.run(sh_app(f"exit {i % 2}"), "inmemory") for i in range(10)]
    results = await runner.wait_all([*handles, "inmemory://test/unknown"])
    assert list(results)[:10] == handles
    assert results["inmemory://test/unknown"] is None
    states = [s.state for s in results.values() if s is not None]
    assert states.count(AppState.FAILED) == 5
    stuck = await runner.run(sh_app("sleep 60"), "inmemory")
    with pytest.raises(WaitTimeoutError) as info:
        await runner.wait_all([handles[0], stuck], timeout=0.2)
    assert info.value.app_id == stuck
    assert await runner.wait_all([]) == {}


async def test_wait_all_says_so_when_the_runner_closes_mid_wait(runner: Runner) -> None:
    from asyncsched.errors import SchedulerClosedError

    handles = [await runner.run(sh_app("sleep 60"), "inmemory") for _ in range(3)]
    outcome: list[BaseException] = []

    async def waiter() -> None:
        try:
            await runner.wait_all(handles)
        except SchedulerClosedError as exc:  # anything else fails the test
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await wait_all_tasks_blocked()  # the waiter is inside wait_all
        await runner.aclose()
    assert len(outcome) == 1
    assert isinstance(outcome[0], SchedulerClosedError)


async def test_running_cancels_on_error_unless_detached(runner: Runner) -> None:
    kept = ""
    with pytest.raises(RuntimeError):  # noqa: PT012
        async with runner.running(sh_app("sleep 60"), "inmemory") as handle:
            kept = handle
            raise RuntimeError("boom")
    final = await runner.wait(kept, timeout=5)
    assert final is not None
    assert final.state == AppState.CANCELLED

    with pytest.raises(RuntimeError):  # noqa: PT012
        async with runner.running(
            sh_app("sleep 60"), "inmemory", detach=True
        ) as handle:
            kept = handle
            raise RuntimeError("boom")
    status = await runner.status(kept)
    assert status is not None
    assert not status.is_terminal()

    async with runner.running(sh_app("sleep 60"), "inmemory") as handle:
        kept = handle
    status = await runner.status(kept)
    assert status is not None
    assert not status.is_terminal()


async def test_running_cancels_when_the_block_is_cancelled(runner: Runner) -> None:
    kept = ""
    with anyio.move_on_after(0.1):
        async with runner.running(sh_app("sleep 60"), "inmemory") as handle:
            kept = handle
            await anyio.sleep_forever()
    final = await runner.wait(kept, timeout=5)
    assert final is not None
    assert final.state == AppState.CANCELLED
