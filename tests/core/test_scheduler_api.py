"""The Scheduler base class: the invariants its template methods keep for every backend."""

from __future__ import annotations

import builtins
import dataclasses
import inspect
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from asyncsched.errors import (
    InvalidRunConfigException,
    SchedulerClosedError,
    SpecError,
    UnsupportedOperationError,
    WaitTimeoutError,
)
from asyncsched.runner import Runner
from asyncsched.schedulers.api import (
    AppSnapshot,
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    ReplicaSnapshot,
    Scheduler,
    Stream,
)
from asyncsched.specs import (
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Resource,
    Role,
    Workspace,
    runopts,
)


class RecordingScheduler(Scheduler[dict[str, CfgVal]]):
    """A minimal backend that records which hooks ran."""

    capabilities = Capabilities(
        logs=True, log_streams=frozenset({Stream.STDOUT}), workspaces=True
    )

    def __init__(self) -> None:
        super().__init__("recording", "test_session")
        self.scheduled: builtins.list[AppDryRunInfo[Any]] = []
        self.cancelled: builtins.list[str] = []
        self.states: dict[str, AppState] = {}
        self.describes = 0
        self.closes = 0

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("foo", type_=str, required=True, help="required option")
        opts.add("n", type_=int, default=1, help="a number")
        return opts

    async def _submit_dryrun(
        self, app: AppDef, cfg: dict[str, CfgVal]
    ) -> AppDryRunInfo[dict[str, Any]]:
        return AppDryRunInfo({"app": app.name, "cfg": cfg}, repr)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        self.scheduled.append(dryrun_info)
        app_id = f"app-{len(self.scheduled)}"
        self.states[app_id] = AppState.RUNNING
        return app_id

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        self.describes += 1
        state = self.states.get(app_id)
        if state is None:
            return None
        return AppSnapshot(app_id, [ReplicaSnapshot("trainer", 0, state)])

    async def _list(self) -> builtins.list[AppSnapshot]:
        return [
            AppSnapshot(a, [ReplicaSnapshot("trainer", 0, s)])
            for a, s in self.states.items()
        ]

    async def _cancel(self, app: AppSnapshot) -> None:
        self.cancelled.append(app.app_id)

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str | Workspace, cfg: dict[str, CfgVal]
    ) -> None:
        role.image = str(workspace)

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        for line in ["alpha\n", "beta\n", "gamma"]:
            yield line

    async def _aclose(self) -> None:
        self.closes += 1


SMALL = Resource(cpu=1, gpu=0, memMB=64)


def _app(**role_kwargs: Any) -> AppDef:
    role_kwargs.setdefault("resource", SMALL)
    role = Role("trainer", image="img", entrypoint="run.sh", **role_kwargs)
    return AppDef("test", roles=[role])


async def test_submit_with_missing_required_option_raises_before_scheduling() -> None:
    sched = RecordingScheduler()
    with pytest.raises(InvalidRunConfigException) as info:
        await sched.submit(_app(), {})
    assert info.value.cfg_key == "foo"
    with pytest.raises(InvalidRunConfigException):
        await sched.submit(_app(), {"foo": 100})  # wrong type
    with pytest.raises(InvalidRunConfigException):
        await sched.submit_dryrun(_app(), {})
    assert sched.scheduled == []


async def test_submit_resolves_defaults_and_never_mutates_cfg() -> None:
    sched = RecordingScheduler()
    cfg: dict[str, CfgVal] = {"foo": "bar"}
    app_id = await sched.submit(_app(), cfg)
    assert app_id == "app-1"
    assert cfg == {"foo": "bar"}
    assert sched.scheduled[0].request["cfg"] == {"foo": "bar", "n": 1}
    assert sched.scheduled[0]._cfg == {"foo": "bar", "n": 1}


async def test_invalid_app_is_rejected_before_scheduling() -> None:
    sched = RecordingScheduler()
    with pytest.raises(SpecError) as info:
        await sched.submit(_app(num_replicas=0), {"foo": "x"})
    assert info.value.field == "roles[0].num_replicas"
    assert sched.scheduled == []


async def test_workspace_changes_only_role0_of_a_copy() -> None:
    sched = RecordingScheduler()
    app = AppDef(
        "test",
        roles=[
            Role("a", image="img", entrypoint="x", resource=SMALL),
            Role("b", image="img", entrypoint="y", resource=SMALL),
        ],
    )
    await sched.submit(app, {"foo": "x"}, workspace="some_workspace")
    submitted = sched.scheduled[0].app
    assert submitted is not None
    assert [r.image for r in submitted.roles] == ["some_workspace", "img"]
    assert [r.image for r in app.roles] == ["img", "img"]


async def test_pre_proc_called_once_per_role_in_order() -> None:
    calls: list[str] = []

    class TracingRole(Role):
        def pre_proc(
            self, scheduler: str, dryrun_info: AppDryRunInfo[Any]
        ) -> AppDryRunInfo[Any]:
            calls.append(f"{self.name}@{scheduler}")
            return dryrun_info

    app = AppDef(
        "test",
        roles=[
            TracingRole("r1", image="i", entrypoint="e", resource=SMALL),
            TracingRole("r2", image="i", entrypoint="e", resource=SMALL),
        ],
    )
    info = await RecordingScheduler().submit_dryrun(app, {"foo": "x"})
    assert calls == ["r1@recording", "r2@recording"]
    # the scheduler works on its own copy: pre_proc may change it, the caller's stays
    assert info.app is not app
    assert info.app == app


def test_validate_rejects_null_resource() -> None:
    sched = RecordingScheduler()
    with pytest.raises(ValueError, match="No resource for role"):
        sched._validate(_app(resource=NULL_RESOURCE), "recording", {})
    sched._validate(_app(resource=Resource(cpu=1, gpu=0, memMB=64)), "recording", {})


async def test_cancel_only_for_existing_apps() -> None:
    sched = RecordingScheduler()
    await sched.cancel("unknown")
    assert sched.cancelled == []
    app_id = await sched.submit(_app(), {"foo": "x"})
    await sched.cancel(app_id)
    assert sched.cancelled == [app_id]


async def test_aclose_is_idempotent_and_closes_the_door() -> None:
    sched = RecordingScheduler()
    async with sched:
        pass
    await sched.aclose()
    assert sched.closes == 1
    assert sched.closed
    with pytest.raises(SchedulerClosedError):
        await sched.submit(_app(), {"foo": "x"})
    with pytest.raises(SchedulerClosedError):
        sched.log_iter("a", "b")


async def test_default_wait_polls_until_terminal_or_unknown() -> None:
    sched = RecordingScheduler()
    app_id = await sched.submit(_app(), {"foo": "x"})

    async def finish_later() -> None:
        with anyio.fail_after(10):
            while sched.describes < 2:  # wait() has polled at least twice
                await anyio.sleep(0.01)
        sched.states[app_id] = AppState.SUCCEEDED

    async with anyio.create_task_group() as tg:
        tg.start_soon(finish_later)
        desc = await sched.wait(app_id, timeout=10)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert sched.describes >= 2
    assert await sched.wait("unknown") is None


async def test_wait_timeout() -> None:
    sched = RecordingScheduler()
    app_id = await sched.submit(_app(), {"foo": "x"})
    with pytest.raises(WaitTimeoutError):
        await sched.wait(app_id, timeout=0.1)


async def test_log_iter_checks_arguments_eagerly_and_filters() -> None:
    sched = RecordingScheduler()
    with pytest.raises(ValueError, match="stderr"):
        sched.log_iter("a", "r", streams="stderr")
    with pytest.raises(ValueError, match="unknown stream"):
        sched.log_iter("a", "r", streams="both")
    with pytest.raises(ValueError, match="invalid regex"):
        sched.log_iter("a", "r", regex="(")
    with pytest.raises(ValueError, match="cannot tail"):
        sched.log_iter("a", "r", should_tail=True)
    app_id = await sched.submit(_app(), {"foo": "x"})
    lines = [x async for x in sched.log_iter(app_id, "trainer")]
    assert lines == ["alpha\n", "beta\n", "gamma"]
    assert [x async for x in sched.log_iter(app_id, "trainer", regex="^.a")] == [
        "gamma"
    ]
    with pytest.raises(UnsupportedOperationError, match="since/until"):
        sched.log_iter("a", "r", since=datetime(2020, 1, 1))


async def test_log_iter_yields_a_batching_backends_lines_one_by_one_and_closes_it() -> (
    None
):
    closed = anyio.Event()

    class BatchedLogs(RecordingScheduler):
        async def _log_batches(
            self, app: AppSnapshot, query: LogQuery
        ) -> AsyncIterator[builtins.list[str]]:
            try:
                yield ["alpha\n", "beta\n"]
                yield ["gamma\n", "delta"]
                await anyio.sleep_forever()  # a followed log with nothing new
            finally:
                closed.set()

    sched = BatchedLogs()
    app_id = await sched.submit(_app(), {"foo": "x"})
    lines = sched.log_iter(app_id, "trainer", regex="^.e")
    assert [await anext(lines), await anext(lines)] == ["beta\n", "delta"]
    await lines.aclose()
    assert closed.is_set()
    lines = sched.log_iter(app_id, "trainer")
    assert [await anext(lines) for _ in range(4)] == [
        "alpha\n",
        "beta\n",
        "gamma\n",
        "delta",
    ]
    await lines.aclose()


async def test_log_iter_and_log_lines_take_torchx_keyword_arguments() -> None:
    sched = RecordingScheduler()
    app_id = await sched.submit(_app(), {"foo": "x"})
    # the app by keyword works at run time; type checkers see it positional
    lines = sched.log_iter(  # type: ignore[call-arg]
        app_id=app_id, role_name="trainer", k=0, regex="^.e", should_tail=False
    )
    assert [x async for x in lines] == ["beta\n"]
    torchx_names = [
        "self",
        "role_name",
        "k",
        "regex",
        "since",
        "until",
        "should_tail",
        "streams",
    ]
    for method in (Scheduler.log_iter, Runner.log_lines):
        params = inspect.signature(method).parameters
        assert [p for p in params if p not in ("app_id", "app_handle")] == torchx_names
        assert params["k"].default == 0
        assert params["streams"].default is None
    with pytest.raises(TypeError):
        sched.log_iter(app_id, "trainer", tail=True)  # type: ignore[call-arg]


async def test_scheduler_without_logs_says_so() -> None:
    class NoLogs(RecordingScheduler):
        capabilities = Capabilities()

    with pytest.raises(NotImplementedError, match="NoLogs does not support"):
        NoLogs().log_iter("a", "r")


def test_list_response_hash_and_capabilities_dict() -> None:
    a = ListAppResponse(app_id="x", state=AppState.RUNNING, app_handle="h", name="n1")
    b = ListAppResponse(app_id="x", state=AppState.RUNNING, app_handle="h", name="n2")
    assert hash(a) == hash(b)
    assert a == b  # name is informational, as TorchX 0.7 has no such field
    caps = RecordingScheduler.capabilities.as_dict()
    assert caps["log_streams"] == ["stdout"]
    assert caps["workspaces"] is True
    assert DescribeAppResponse().app_id == "<NOT_SET>"
    assert DescribeAppResponse().num_restarts == -1


async def test_wait_with_zero_timeout_returns_a_finished_app() -> None:
    sched = RecordingScheduler()
    app_id = await sched.submit(_app(), {"foo": "x"})
    sched.states[app_id] = AppState.SUCCEEDED
    desc = await sched.wait(app_id, timeout=0)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert await sched.wait("unknown", timeout=0) is None


async def test_log_iter_hands_backends_naive_datetimes_as_utc() -> None:
    seen: list[datetime | None] = []

    class TimedLogs(RecordingScheduler):
        capabilities = Capabilities(
            logs=True, log_streams=frozenset({Stream.STDOUT}), log_since_until=True
        )

        async def _log_iter(
            self, app: AppSnapshot, query: LogQuery
        ) -> AsyncIterator[str]:
            seen.extend([query.since, query.until])
            yield "x\n"

    naive = datetime(2024, 1, 1, 12, 0)
    sched = TimedLogs()
    app_id = await sched.submit(_app(), {"foo": "x"})
    assert [x async for x in sched.log_iter(app_id, "trainer", since=naive)] == ["x\n"]
    assert seen == [naive.replace(tzinfo=UTC), None]


class SettlingScheduler(RecordingScheduler):
    """An ended app's last details (its message) land a moment after its end."""

    def __init__(self) -> None:
        super().__init__()
        self.details_landed = False
        #: set once a reader has been given the end without its details
        self.unsettled_end_read = anyio.Event()

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        snapshot = await super()._describe(app_id)
        if snapshot is None or not snapshot.terminal:
            return snapshot
        if self.details_landed:
            return dataclasses.replace(snapshot, msg="exit code 3")
        self.unsettled_end_read.set()
        return dataclasses.replace(snapshot, settled=False)


async def test_wait_with_a_timeout_waits_for_an_ended_apps_last_details() -> None:
    sched = SettlingScheduler()
    app_id = await sched.submit(_app(), {"foo": "x"})
    sched.states[app_id] = AppState.FAILED

    async def land_details() -> None:
        with anyio.fail_after(10):
            await sched.unsettled_end_read.wait()  # wait() has seen the bare end
        sched.details_landed = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(land_details)
        desc = await sched.wait(app_id, timeout=10)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.msg == "exit code 3"  # as wait() without a timeout returns it


async def test_wait_timeout_on_an_ended_app_returns_it_without_its_last_details() -> (
    None
):
    sched = SettlingScheduler()
    app_id = await sched.submit(_app(), {"foo": "x"})
    sched.states[app_id] = AppState.FAILED
    desc = await sched.wait(app_id, timeout=0)  # ended: no WaitTimeoutError
    assert desc is not None
    assert desc.state == AppState.FAILED
