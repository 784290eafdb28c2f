"""The Scheduler contract, as one suite every backend runs against itself.

A backend's test module (a plugin's too) subclasses :class:`SchedulerContract`
and provides a ``target`` fixture returning a :class:`ContractTarget` (an
open scheduler plus how to build an app that runs a POSIX ``sh -c`` script on
it)::

    from asyncsched.testing import ContractTarget, SchedulerContract

    class TestLocalContract(SchedulerContract):
        @pytest.fixture
        async def target(self, tmp_path):
            async with LocalScheduler("contract") as sched:
                yield ContractTarget(sched, cfg={"log_dir": str(tmp_path)})

The tests are ``@pytest.mark.anyio``: they need pytest and anyio's pytest
plugin (it comes with anyio). They run on the event loops of the
``anyio_backend`` fixture (anyio's default: asyncio only; return ``"trio"``
too, e.g. with ``params=["asyncio", "trio"]``, to run them on both), or on
the loops the subclass names in ``event_loops`` (``("asyncio",)`` for a
backend bound to asyncio: no trio case is collected then).

Scripts stay within ``echo``, ``sleep``, ``exit`` and ``>&2`` so that the
in-memory scheduler of ``asyncsched.testing`` can run them too, except in the
cases that need a real shell (``trap``), skipped for a target made with
``posix_shell=False``.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio
import pytest

from asyncsched.errors import (
    InvalidRunConfigException,
    SchedulerClosedError,
    SpecError,
    UnknownAppException,
    UnknownReplicaError,
    WaitTimeoutError,
)
from asyncsched.schedulers.api import Scheduler, Stream
from asyncsched.specs import (
    AppDef,
    AppState,
    CfgVal,
    Resource,
    Role,
    StatusReason,
    is_terminal,
)

__all__ = ["ContractTarget", "SchedulerContract"]


@dataclass
class ContractTarget:
    """An open scheduler under test and how to make apps for it."""

    scheduler: Scheduler[Any]
    cfg: dict[str, CfgVal] = field(default_factory=dict)
    image: str = "/"
    #: seconds a "quick" app may take end to end on this backend
    quick_timeout: float = 30.0
    #: False when the engine may lose a replica's own outcome (Slurm with only
    #: the job-completion log): that replica may then read UNKNOWN, never a
    #: wrong state
    independent_replicas: bool = True
    #: False when replicas do not run a POSIX shell (the in-memory scheduler):
    #: the cases that need ``trap`` and ``wait`` are skipped
    posix_shell: bool = True
    #: False when the engine may report another exit code than the one a
    #: replica stopped by a cancel exited with (Kubernetes 1.20's kubelet
    #: says 137 ``ContainerStatusUnknown`` for the container of a deleted pod)
    stop_codes_kept: bool = True
    #: False when a cancel may stop a replica without its SIGTERM grace
    #: (Slurm: ``scancel`` also signals ``srun``, which may end a step before
    #: the replica's trap runs; the engine then keeps no exit code or SIGKILL's):
    #: the grace case then checks only the replicas whose trap ran
    cancel_grace_kept: bool = True

    def app(self, script: str, *, name: str = "app", replicas: int = 1) -> AppDef:
        role = Role(
            name="worker",
            image=self.image,
            entrypoint="sh",
            args=["-c", script],
            num_replicas=replicas,
            resource=Resource(cpu=1, gpu=0, memMB=128),
        )
        return AppDef(name=name, roles=[role])

    def roles_app(self, scripts: dict[str, str], *, name: str = "app") -> AppDef:
        """An app of one single-replica role per ``{role name: script}``."""
        app = AppDef(name=name)
        for role_name, script in scripts.items():
            [role] = self.app(script).roles
            role.name = role_name
            app.roles.append(role)
        return app

    async def run(self, script: str, **kwargs: Any) -> str:
        return await self.scheduler.submit(self.app(script, **kwargs), self.cfg)

    def handle(self, app_id: str) -> str:
        """The full handle errors name: ``backend://session/app_id``."""
        sched = self.scheduler
        return f"{sched.backend}://{sched.session_name}/{app_id}"


async def _lines(
    target: ContractTarget, app_id: str, role: str = "worker", **kwargs: Any
) -> builtins.list[str]:
    return [line async for line in target.scheduler.log_iter(app_id, role, **kwargs)]


async def _wait_running(target: ContractTarget, app_id: str, replicas: int) -> None:
    """Wait until each replica of the app's one role has printed ``started``
    (where the backend has logs), else until each one reads RUNNING."""
    sched = target.scheduler
    logs = sched.capabilities.logs
    with anyio.fail_after(target.quick_timeout):
        for k in range(replicas):
            while True:
                desc = await sched.describe(app_id)
                assert desc is not None
                assert not is_terminal(desc.state), desc
                if sched.capabilities.per_replica_status:
                    states = {r.id: r.state for r in desc.roles_statuses[0].replicas}
                    running = states.get(k) == AppState.RUNNING
                else:
                    running = desc.state == AppState.RUNNING
                if running and (
                    not logs or "started\n" in await _lines(target, app_id, k=k)
                ):
                    break
                await anyio.sleep(0.05)


class SchedulerContract:
    """Behaviour every scheduler backend must show.

    Run by pytest's anyio plugin on every event loop of the ``anyio_backend``
    fixture, or, when the subclass sets :attr:`event_loops`, on those loops
    only: a backend bound to asyncio sets ``event_loops = ("asyncio",)`` and
    gets no trio variants collected (not even skipped ones). App states
    follow :func:`asyncsched.specs.rollup_state`.
    """

    pytestmark = pytest.mark.anyio

    #: the event loops the backend runs on (e.g. its
    #: ``capabilities.event_loops``); None: those of the ``anyio_backend``
    #: fixture in scope
    event_loops: ClassVar[tuple[str, ...] | None] = None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Collect each case once per loop of :attr:`event_loops` (if set)."""
        if self.event_loops is not None and "anyio_backend" in metafunc.fixturenames:
            metafunc.parametrize("anyio_backend", self.event_loops)

    async def test_successful_app_is_succeeded(self, target: ContractTarget) -> None:
        app_id = await target.run("echo hello")
        desc = await target.scheduler.wait(app_id, timeout=target.quick_timeout)
        assert desc is not None
        assert desc.app_id == app_id
        assert desc.state == AppState.SUCCEEDED

    async def test_nonzero_exit_is_failed_with_exit_code(
        self, target: ContractTarget
    ) -> None:
        app_id = await target.run("exit 3")
        desc = await target.scheduler.wait(app_id, timeout=target.quick_timeout)
        assert desc is not None
        assert desc.state == AppState.FAILED
        if target.scheduler.capabilities.per_replica_status:
            replica = desc.roles_statuses[0].replicas[0]
            assert replica.exit_code == 3
            assert replica.state == AppState.FAILED

    async def test_every_replica_runs(self, target: ContractTarget) -> None:
        app_id = await target.run("echo replica", replicas=3)
        desc = await target.scheduler.wait(app_id, timeout=target.quick_timeout)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        if target.scheduler.capabilities.per_replica_status:
            [role] = desc.roles_statuses
            assert sorted(r.id for r in role.replicas) == [0, 1, 2]
            assert all(r.state == AppState.SUCCEEDED for r in role.replicas)

    async def test_unknown_app(self, target: ContractTarget) -> None:
        sched = target.scheduler
        assert await sched.describe("no-such-app-bcdfg") is None
        assert await sched.exists("no-such-app-bcdfg") is False
        assert await sched.wait("no-such-app-bcdfg", timeout=5) is None
        await sched.cancel("no-such-app-bcdfg")  # silently nothing

    async def test_cancel_is_idempotent_and_reports_cancelled(
        self, target: ContractTarget
    ) -> None:
        sched = target.scheduler
        app_id = await target.run("sleep 60")
        await sched.cancel(app_id)
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=target.quick_timeout)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        assert await sched.exists(app_id)

    async def test_wait_timeout_raises(self, target: ContractTarget) -> None:
        app_id = await target.run("sleep 60")
        with pytest.raises(WaitTimeoutError) as info:
            await target.scheduler.wait(app_id, timeout=0.2)
        assert isinstance(info.value, TimeoutError)
        assert info.value.app_id == app_id
        await target.scheduler.cancel(app_id)

    async def test_describe_answers_right_after_submit(
        self, target: ContractTarget
    ) -> None:
        """No gap between ``submit`` returning and the app being known.

        Quick and long apps, submitted one after another and all at once:
        the first ``describe`` after each ``submit`` names the app in a known
        state (SUBMITTED, PENDING or later), never ``None`` nor UNKNOWN.
        """
        sched = target.scheduler
        scripts = ["exit 0", "exit 3", "sleep 60"]
        for script in scripts:
            app_id = await target.run(script)
            desc = await sched.describe(app_id)
            assert desc is not None, f"{script!r}: describe right after submit"
            assert desc.app_id == app_id
            assert desc.state != AppState.UNKNOWN, desc
        ids: dict[int, str] = {}

        async def submit_then_describe(index: int) -> None:
            app_id = await target.run(scripts[index % len(scripts)])
            ids[index] = app_id
            desc = await sched.describe(app_id)
            assert desc is not None, f"app {index}: describe right after submit"
            assert desc.state != AppState.UNKNOWN, desc

        async with anyio.create_task_group() as tg:
            for index in range(6):
                tg.start_soon(submit_then_describe, index)
        for app_id in ids.values():
            await sched.cancel(app_id)

    async def test_describe_is_running_while_running(
        self, target: ContractTarget
    ) -> None:
        sched = target.scheduler
        app_id = await target.run("sleep 60")
        with anyio.fail_after(target.quick_timeout):
            while True:
                desc = await sched.describe(app_id)
                assert desc is not None
                assert not is_terminal(desc.state)
                if desc.state == AppState.RUNNING:
                    break
                await anyio.sleep(0.05)
        await sched.cancel(app_id)

    async def test_list_contains_submitted_app(self, target: ContractTarget) -> None:
        if not target.scheduler.capabilities.list:
            pytest.skip("scheduler cannot list")
        app_id = await target.run("echo listed")
        await target.scheduler.wait(app_id, timeout=target.quick_timeout)
        listed = {item.app_id: item for item in await target.scheduler.list()}
        assert app_id in listed
        assert listed[app_id].state == AppState.SUCCEEDED

    async def test_logs_arrive_in_order_with_newlines(
        self, target: ContractTarget
    ) -> None:
        if not target.scheduler.capabilities.logs:
            pytest.skip("scheduler has no logs")
        app_id = await target.run("echo one; echo two; echo three")
        await target.scheduler.wait(app_id, timeout=target.quick_timeout)
        assert await _lines(target, app_id) == ["one\n", "two\n", "three\n"]

    async def test_log_regex_and_streams(self, target: ContractTarget) -> None:
        caps = target.scheduler.capabilities
        if Stream.STDERR not in caps.log_streams:
            pytest.skip("scheduler cannot select stderr")
        app_id = await target.run("echo out1; echo err1 >&2; echo out2")
        await target.scheduler.wait(app_id, timeout=target.quick_timeout)
        assert await _lines(target, app_id, streams="stderr") == ["err1\n"]
        assert await _lines(target, app_id, streams=Stream.STDOUT) == [
            "out1\n",
            "out2\n",
        ]
        assert await _lines(target, app_id, streams="stdout", regex="2$") == ["out2\n"]

    async def test_log_tail_follows_until_terminal(
        self, target: ContractTarget
    ) -> None:
        if not target.scheduler.capabilities.log_tail:
            pytest.skip("scheduler cannot tail")
        app_id = await target.run("echo first; sleep 0.5; echo second")
        with anyio.fail_after(target.quick_timeout):
            lines = await _lines(target, app_id, should_tail=True)
        assert lines == ["first\n", "second\n"]

    async def test_unsupported_stream_is_value_error(
        self, target: ContractTarget
    ) -> None:
        with pytest.raises(ValueError, match="stream"):
            target.scheduler.log_iter("whatever", "worker", streams="bogus")

    async def test_invalid_app_rejected_before_launch(
        self, target: ContractTarget
    ) -> None:
        sched = target.scheduler
        before = (
            {a.app_id for a in await sched.list()} if sched.capabilities.list else set()
        )
        bad = target.app("echo never")
        bad.roles[0].num_replicas = 0
        with pytest.raises(SpecError) as info:
            await sched.submit(bad, target.cfg)
        assert info.value.field == "roles[0].num_replicas"
        with pytest.raises(SpecError):
            await sched.submit(AppDef(name="empty", roles=[]), target.cfg)
        if sched.capabilities.list:
            assert {a.app_id for a in await sched.list()} == before

    async def test_unknown_run_option_rejected(self, target: ContractTarget) -> None:
        with pytest.raises(InvalidRunConfigException) as info:
            await target.scheduler.submit(
                target.app("echo never"), {**target.cfg, "no_such_option_xyz": "1"}
            )
        assert info.value.cfg_key == "no_such_option_xyz"

    async def test_dryrun_launches_nothing_and_formats(
        self, target: ContractTarget
    ) -> None:
        sched = target.scheduler
        info = await sched.submit_dryrun(target.app("echo dry"), target.cfg)
        assert repr(info)
        assert info._app is not None
        if sched.capabilities.list:
            assert all(
                a.name != "app" or is_terminal(a.state) for a in await sched.list()
            )

    async def test_one_failed_replica_fails_the_app(
        self, target: ContractTarget
    ) -> None:
        """One replica succeeds, another fails: FAILED, each replica as it ended."""
        app = target.roles_app({"ok": "echo ok", "bad": "sleep 2; exit 3"})
        app_id = await target.scheduler.submit(app, target.cfg)
        desc = await target.scheduler.wait(app_id, timeout=target.quick_timeout)
        assert desc is not None
        assert desc.state == AppState.FAILED
        if target.scheduler.capabilities.per_replica_status:
            replicas = {r.role: r.replicas[0] for r in desc.roles_statuses}
            if target.independent_replicas:
                assert replicas["ok"].state == AppState.SUCCEEDED
                assert replicas["ok"].exit_code == 0
                assert replicas["bad"].state == AppState.FAILED
                assert replicas["bad"].exit_code == 3
            else:
                assert replicas["ok"].state in (AppState.SUCCEEDED, AppState.UNKNOWN)
                assert (replicas["bad"].state, replicas["bad"].exit_code) in (
                    (AppState.FAILED, 3),
                    (AppState.UNKNOWN, None),
                )

    async def test_cancel_after_a_failure_keeps_the_app_failed(
        self, target: ContractTarget
    ) -> None:
        """A cancel wins only when it comes before any failure."""
        sched = target.scheduler
        if not sched.capabilities.per_replica_status:
            pytest.skip("cannot tell when one replica has failed")
        app = target.roles_app({"bad": "sleep 1; exit 3", "long": "sleep 60"})
        app_id = await sched.submit(app, target.cfg)
        long_ran = False
        with anyio.fail_after(target.quick_timeout):
            while True:
                desc = await sched.describe(app_id)
                assert desc is not None
                states = {r.role: r.replicas[0].state for r in desc.roles_statuses}
                long_ran = long_ran or states.get("long") == AppState.RUNNING
                # (an engine that ends the whole job on a failure may be done)
                if states.get("bad") == AppState.FAILED or is_terminal(desc.state):
                    break
                await anyio.sleep(0.05)
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=target.quick_timeout)
        assert desc is not None
        assert desc.state == AppState.FAILED
        replicas = {r.role: r.replicas[0] for r in desc.roles_statuses}
        lost = () if target.independent_replicas else (AppState.UNKNOWN,)
        assert replicas["bad"].state in (AppState.FAILED, *lost)
        # stopped by the cancel (or by fail-fast), and over: wait returns the
        # app settled, every replica final with what the engine saw
        long = replicas["long"]
        assert long.state in (AppState.CANCELLED, *lost), long
        if long.state != AppState.UNKNOWN:
            assert long.reason == StatusReason.CANCELLED, long
            if long_ran:  # it ran, then was stopped: the engine saw it exit
                assert long.exit_code is not None, long

    async def test_wait_after_cancel_returns_every_replica_stopped(
        self, target: ContractTarget
    ) -> None:
        """``wait`` after ``cancel``: every replica final, with its exit code.

        Users free GPUs, ports and output dirs once ``wait`` returns: the app
        it returns has no replica left running, and each replica stopped by
        the cancel says so (CANCELLED, reason CANCELLED, the exit code the
        engine saw).
        """
        sched = target.scheduler
        app_id = await target.run("echo started; sleep 60", replicas=2)
        await _wait_running(target, app_id, replicas=2)
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=target.quick_timeout)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        if not sched.capabilities.per_replica_status:
            return
        [role] = desc.roles_statuses
        assert len(role.replicas) == 2
        lost = () if target.independent_replicas else (AppState.UNKNOWN,)
        for replica in role.replicas:
            assert replica.state in (AppState.CANCELLED, *lost), replica
            if replica.state == AppState.CANCELLED:
                assert replica.exit_code is not None, replica
                assert replica.reason == StatusReason.CANCELLED, replica

    async def test_wait_after_cancel_waits_out_the_replicas_grace(
        self, target: ContractTarget
    ) -> None:
        """Replicas that handle SIGTERM are waited for until they exit.

        Each replica traps SIGTERM, takes a second to shut down, then exits
        7: ``wait`` returns only after that, so every replica reads the 7
        it exited with (a ``wait`` that returned during the grace would see
        replicas still running, or no exit code).
        """
        if not target.posix_shell:
            pytest.skip("replicas do not run a POSIX shell")
        sched = target.scheduler
        # ``sleep & wait``: a trapped signal interrupts ``wait`` at once,
        # also where only the shell (PID 1 of a container) is signalled
        script = (
            "trap 'echo stopping; sleep 1; echo stopped; exit 7' TERM;"
            " echo started; sleep 60 & wait"
        )
        app_id = await target.run(script, replicas=2)
        await _wait_running(target, app_id, replicas=2)
        cancelled_at = anyio.current_time()
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=target.quick_timeout)
        waited = anyio.current_time() - cancelled_at
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        # which replicas ran their trap to the end: all of them, unless the
        # engine may cut the grace; then their logs say (read only then: a
        # backend may drop a cancelled replica's logs with it)
        graced = {
            k: target.cancel_grace_kept
            or not sched.capabilities.logs
            or "stopped\n" in await _lines(target, app_id, k=k)
            for k in range(2)
        }
        if any(graced.values()):
            # a replica took a second to stop: wait cannot have returned sooner
            assert waited >= 1.0, waited
        if not sched.capabilities.per_replica_status:
            return
        [role] = desc.roles_statuses
        lost = () if target.independent_replicas else (AppState.UNKNOWN,)
        for replica in role.replicas:
            assert replica.state in (AppState.CANCELLED, *lost), replica
            if replica.state == AppState.CANCELLED:
                if not graced[replica.id]:
                    pass  # the engine cut its grace (cancel_grace_kept=False)
                elif target.stop_codes_kept:
                    assert replica.exit_code == 7, replica
                else:
                    assert replica.exit_code is not None, replica
                assert replica.reason == StatusReason.CANCELLED, replica

    async def test_cancel_returns_promptly_while_replicas_ignore_term(
        self, target: ContractTarget
    ) -> None:
        """``cancel`` asks and returns: the SIGTERM grace runs in the background.

        The replicas ignore SIGTERM (where they run a shell), so only the
        backend's SIGKILL at the end of its grace stops them; ``cancel``
        returns within 2 s all the same (``wait`` is what waits).
        """
        sched = target.scheduler
        script = "echo started; sleep 60"
        if target.posix_shell:
            script = f"trap '' TERM; {script} & wait"
        app_id = await target.run(script, replicas=2)
        await _wait_running(target, app_id, replicas=2)
        started = anyio.current_time()
        await sched.cancel(app_id)
        took = anyio.current_time() - started
        assert took < 2.0, f"cancel took {took:.1f}s"

    async def test_unknown_app_role_and_replica_errors_name_the_handle(
        self, target: ContractTarget
    ) -> None:
        sched = target.scheduler
        if not sched.capabilities.logs:
            pytest.skip("scheduler has no logs")
        app_id = await target.run("echo hi")
        await sched.wait(app_id, timeout=target.quick_timeout)
        handle = target.handle(app_id)
        with pytest.raises(UnknownReplicaError) as unknown_role:
            await _lines(target, app_id, role="nobody")
        with pytest.raises(UnknownReplicaError) as out_of_range:
            await _lines(target, app_id, k=5)
        assert str(unknown_role.value) == (
            f"app {handle} has no replica 0 of role 'nobody' (roles: ['worker'])"
        )
        assert str(out_of_range.value) == (
            f"app {handle} has no replica 5 of role 'worker' (roles: ['worker'])"
        )
        missing = "no-such-app-bcdfg"
        with pytest.raises(UnknownAppException) as unknown_app:
            await _lines(target, missing)
        assert unknown_app.value.app_handle == target.handle(missing)

    async def test_closed_scheduler_refuses_work(self, target: ContractTarget) -> None:
        sched = target.scheduler
        info = await sched.submit_dryrun(target.app("echo late"), target.cfg)
        await sched.aclose()
        await sched.aclose()  # idempotent
        with pytest.raises(SchedulerClosedError):
            await sched.submit(target.app("echo late"), target.cfg)
        with pytest.raises(SchedulerClosedError):
            await sched.submit_dryrun(target.app("echo late"), target.cfg)
        with pytest.raises(SchedulerClosedError):
            await sched.schedule(info)
        with pytest.raises(SchedulerClosedError):
            await sched.describe("any-app")
        with pytest.raises(SchedulerClosedError):
            await sched.exists("any-app")
        with pytest.raises(SchedulerClosedError):
            await sched.list()
        with pytest.raises(SchedulerClosedError):
            await sched.wait("any-app")
        with pytest.raises(SchedulerClosedError):
            await sched.wait("any-app", timeout=1)
        with pytest.raises(SchedulerClosedError):
            await sched.cancel("any-app")
        with pytest.raises(SchedulerClosedError):
            sched.log_iter("any-app", "worker")
