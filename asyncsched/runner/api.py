"""The asynchronous :class:`Runner`: submit apps to schedulers by name, by handle.

A runner owns one scheduler per registry name, created on first use and closed
with the runner. Apps are addressed by handles of the form
``{scheduler}://{session}/{app_id}``, where ``scheduler`` is the registry key
(e.g. ``local_cwd``) and ``session`` is the runner's name.
"""

from __future__ import annotations

import builtins
import copy
import logging
import math
import warnings
from collections import OrderedDict
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
)
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

from asyncsched.errors import (
    InvalidArgumentError,
    RunManyError,
    SchedulerClosedError,
    SpecError,
    UnknownAppException,
    UnknownSchedulerException,
    WaitTimeoutError,
)
from asyncsched.runner._events import EventHook, get_session_id, record_event
from asyncsched.runner._fanout import FanOut, StatusEvent
from asyncsched.runner._progress import Progress, ProgressCounter
from asyncsched.runner._stream import RunnerEventStream, select
from asyncsched.runner._watch import watch
from asyncsched.schedulers import SchedulerFactory, get_scheduler_factories
from asyncsched.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
)
from asyncsched.schedulers.shared.lifecycle import AsyncClosable
from asyncsched.schedulers.shared.taskhost import TaskHost
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppStatus,
    CfgVal,
    Workspace,
    deciding_reason,
    make_app_handle,
    parse_app_handle,
    runopts,
    validate_session_name,
)

__all__ = [
    "CANCEL_TIMEOUT",
    "CLOSE_TIMEOUT",
    "DEFAULT_SESSION_NAME",
    "JOB_ID_ENV",
    "KEPT_APP_DEFINITIONS",
    "PARENT_RUN_ID_ENV",
    "Runner",
    "SESSION_ID_ENV",
    "get_runner",
]

logger = logging.getLogger(__name__)

#: seconds a shielded cancel (``running`` exiting on an error, ``run_many``
#: undoing a partial failure) may take before it is abandoned and logged
CANCEL_TIMEOUT = 30.0
#: seconds the runner's aclose may take (closing its schedulers included)
CLOSE_TIMEOUT = 120.0

DEFAULT_SESSION_NAME = "asyncsched"
"""Session name of :func:`get_runner` when none is given."""

KEPT_APP_DEFINITIONS = 1024
"""How many submitted app definitions a runner keeps for :meth:`Runner.describe`.

The most recent ones are kept; an older app is described from what its
scheduler reports, so a runner's memory does not grow with every app it ever
ran (a web app submitting jobs for weeks, a sweep of 10,000 apps).
"""

JOB_ID_ENV = "TORCHX_JOB_ID"
SESSION_ID_ENV = "TORCHX_INTERNAL_SESSION_ID"
PARENT_RUN_ID_ENV = "TORCHX_PARENT_RUN_ID"


def _to_status(desc: DescribeAppResponse) -> AppStatus:
    reason = desc.reason
    if reason is None:
        reason, _ = deciding_reason(desc.state, desc.roles_statuses)
    return AppStatus(
        state=desc.state,
        num_restarts=desc.num_restarts,
        msg=desc.msg,
        structured_error_msg=desc.structured_error_msg,
        ui_url=desc.ui_url,
        roles=desc.roles_statuses,
        reason=reason,
    )


class Runner(AsyncClosable):
    """Run, observe and control apps on any registered scheduler, by handle.

    Schedulers are created lazily, once per name, and closed with the runner;
    use it as ``async with`` (or call :meth:`aclose`). Unlike TorchX, the
    runner reads no environment variables: scheduler parameters are exactly
    ``scheduler_params``, and ``wait`` is event-driven instead of polling.

    Args:
        name: Session name, the middle part of every handle this runner makes
            (letters, digits, ``_.-``, or empty: see
            :func:`~asyncsched.specs.validate_session_name`).
        scheduler_factories: Registry name -> factory; defaults to
            :func:`asyncsched.schedulers.get_scheduler_factories`.
        scheduler_params: Keyword arguments given to every scheduler factory.
        max_concurrent_submits: At most this many ``run``/``schedule`` calls
            talk to schedulers at once; further calls wait their turn
            (backpressure) instead of failing.
        max_concurrent_queries: At most this many status queries at once in
            :meth:`watch` (its first look at each app).
        event_hook: Called with a :class:`~asyncsched.runner.RunnerEvent` after
            every API call.
        track_progress: Follow every app this runner submits in the
            background (one waiting task per unfinished app), so that
            :meth:`progress` counts apps as they end; without it, an app is
            counted done when the runner sees it final (``wait``,
            ``wait_all``, ``as_completed``, ``watch``, ``status``).

    Example:
        >>> from asyncsched.runner import Runner
        >>> from asyncsched.specs import AppDef, Role
        >>> async def main() -> None:
        ...     app = AppDef("hi", roles=[Role("hi", image=".", entrypoint="echo", args=["hi"])])
        ...     async with Runner("demo") as runner:
        ...         handle = await runner.run(app, "local_cwd")
        ...         status = await runner.wait(handle, timeout=60)
        ...         async for line in runner.log_lines(handle, "hi"):
        ...             print(line, end="")
    """

    def __init__(
        self,
        name: str = DEFAULT_SESSION_NAME,
        scheduler_factories: Mapping[str, SchedulerFactory] | None = None,
        scheduler_params: Mapping[str, Any] | None = None,
        *,
        max_concurrent_submits: int = 64,
        max_concurrent_queries: int = 64,
        event_hook: EventHook | None = None,
        track_progress: bool = False,
    ) -> None:
        if max_concurrent_submits < 1 or max_concurrent_queries < 1:
            raise InvalidArgumentError("max_concurrent_submits/queries must be >= 1")
        validate_session_name(name)  # the session of every scheduler it creates
        self._name = name
        self._factories: dict[str, SchedulerFactory] = dict(
            get_scheduler_factories()
            if scheduler_factories is None
            else scheduler_factories
        )
        self._params: dict[str, Any] = dict(scheduler_params or {})
        self._schedulers: dict[str, Scheduler[Any]] = {}
        #: the submitted copies, most recent last (at most KEPT_APP_DEFINITIONS)
        self._apps: OrderedDict[AppHandle, AppDef] = OrderedDict()
        self._host = TaskHost(f"Runner({name!r})")
        self._event_hook = event_hook
        self._max_submits = max_concurrent_submits
        self._submit_limiter: anyio.CapacityLimiter | None = None
        self._fan = FanOut(
            self._host,
            final=self._final_status,
            final_now=self._final_status_now,
        )
        self._max_queries = max_concurrent_queries
        self._query_limiter: anyio.CapacityLimiter | None = None
        #: told each scheduler name when it is opened (event streams join it)
        self._on_open: builtins.list[Callable[[str], None]] = []
        self._lock: anyio.Lock | None = None
        self._closed = False
        self._progress = ProgressCounter()
        self._track_progress = track_progress

    # -- lifecycle -------------------------------------------------------------

    def __repr__(self) -> str:
        return f"Runner({self._name!r})"

    async def aclose(self) -> None:
        """Close every scheduler this runner created; idempotent, never raises."""
        await super().aclose()

    def _close_timeout(self) -> float:
        return CLOSE_TIMEOUT

    async def _aenter(self) -> None:
        await self._host.enter()

    async def _aclose(self) -> None:
        # cancelling the host exits each scheduler's ``async with``
        await self._host.aclose()
        for sched in self._schedulers.values():
            await sched.aclose()

    def name(self) -> str:
        """The session name used in handles."""
        return self._name

    def progress(self) -> Progress:
        """Counts of the apps this runner submitted: submitting, submitted,
        running, done (succeeded / failed / cancelled / unknown).

        A cheap snapshot, for a progress display (see ``docs/async.md``).
        ``running`` counts the apps not seen final yet: with
        ``track_progress=True`` the runner follows each app itself, otherwise
        it sees them end through ``wait``, ``wait_all``, ``as_completed``,
        ``watch`` and ``status``.

        Example:
            >>> async def show(runner: Runner) -> None:
            ...     while True:
            ...         print(runner.progress(), end="\r")
            ...         await anyio.sleep(0.5)
        """
        return self._progress.snapshot()

    def scheduler_backends(self) -> builtins.list[str]:
        """The scheduler names this runner can use."""
        return builtins.list(self._factories)

    # -- schedulers --------------------------------------------------------------

    def _check_scheduler_name(self, scheduler: str) -> None:
        if scheduler not in self._factories:
            raise UnknownSchedulerException(scheduler, builtins.list(self._factories))

    async def _scheduler(self, scheduler: str) -> Scheduler[Any]:
        """The scheduler registered as ``scheduler``, created and opened on first use.

        Raises:
            UnknownSchedulerException: no factory by that name.
        """
        self._check_open()
        sched = self._schedulers.get(scheduler)
        if sched is not None:
            return sched
        self._check_scheduler_name(scheduler)
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            sched = self._schedulers.get(scheduler)
            if sched is None:
                factory = self._factories[scheduler]
                preload = getattr(factory, "preload", None)
                if callable(preload):  # its imports (aiohttp: 0.3 s) off the loop
                    factory = await anyio.to_thread.run_sync(preload)
                sched = factory(self._name, **self._params)
                sched.handle_name = scheduler  # errors name the user's handles
                # each scheduler lives in its own task of the runner's group, so
                # its ``async with`` is entered and exited by the same task
                await self._host.start(
                    self._host_scheduler, sched, name=f"{scheduler}-host"
                )
                self._schedulers[scheduler] = sched
                for tell in builtins.list(self._on_open):
                    tell(scheduler)
        return sched

    def _subscribe_opened(self, tell: Callable[[str], None]) -> Callable[[], None]:
        """Call ``tell(name)`` for each scheduler opened from now on; returns
        the function that stops it."""
        self._on_open.append(tell)

        def unsubscribe() -> None:
            with suppress(ValueError):
                self._on_open.remove(tell)

        return unsubscribe

    @staticmethod
    async def _host_scheduler(
        sched: Scheduler[Any], *, task_status: TaskStatus[None]
    ) -> None:
        async with sched:
            task_status.started()
            await anyio.sleep_forever()

    async def _resolve(self, app_handle: AppHandle) -> tuple[Scheduler[Any], str, str]:
        """Return (scheduler, scheduler name, app id) of a handle.

        Raises:
            MalformedAppHandleException: not ``scheduler://session/app_id``.
            UnknownSchedulerException: the handle's scheduler is not registered.
        """
        parsed = parse_app_handle(app_handle)
        sched = await self._scheduler(parsed.scheduler_backend)
        return sched, parsed.scheduler_backend, parsed.app_id

    async def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The run options ``scheduler`` accepts."""
        return (await self._scheduler(scheduler)).run_opts()

    async def cfg_from_str(
        self, scheduler: str, *cfg_literals: str
    ) -> dict[str, CfgVal]:
        """Parse ``k=v,...`` literals against ``scheduler``'s run options.

        Later literals win. Defaults are not filled in (the run does that).
        """
        opts = await self.scheduler_run_opts(scheduler)
        cfg: dict[str, CfgVal] = {}
        for literal in cfg_literals:
            cfg.update(opts.cfg_from_str(literal))
        return cfg

    # -- submission --------------------------------------------------------------

    def _limiter(self) -> anyio.CapacityLimiter:
        if self._submit_limiter is None:
            self._submit_limiter = anyio.CapacityLimiter(self._max_submits)
        return self._submit_limiter

    async def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """Return what ``run`` would submit, without submitting it.

        The caller's AppDef is not modified: the runner works on a copy, into
        whose roles it injects ``TORCHX_JOB_ID`` (the future handle, with the
        ``${app_id}`` macro), ``TORCHX_INTERNAL_SESSION_ID`` and, if given,
        ``TORCHX_PARENT_RUN_ID``.

        The rest is :meth:`Scheduler.submit_dryrun`, the one pipeline every
        submission goes through (cfg resolved and app validated once each).

        Raises:
            SpecError: the app is invalid (no roles, bad replica count...).
            UnknownSchedulerException: ``scheduler`` is not registered.
            InvalidRunConfigException: ``cfg`` does not fit the scheduler.
            UnsupportedOperationError: a workspace on a scheduler that cannot
                build one.
        """
        with record_event(
            self._event_hook, "dryrun", scheduler, runcfg=cfg, workspace=workspace
        ) as ev:
            self._check_open()
            if not app.roles:
                raise SpecError(
                    "roles",
                    f"No roles for app: {app.name}; an app needs at least one role",
                )
            self._check_scheduler_name(scheduler)
            await app.resolve_overrides()
            app = copy.deepcopy(app)
            ev.app_image = app.roles[0].image
            ev.app_metadata = dict(app.metadata)
            for role in app.roles:
                role.env[JOB_ID_ENV] = make_app_handle(
                    scheduler, self._name, "${app_id}"
                )
                role.env[SESSION_ID_ENV] = get_session_id()
                if parent_run_id:
                    role.env[PARENT_RUN_ID_ENV] = parent_run_id
            sched = await self._scheduler(scheduler)
            # ``app`` is the runner's own copy: the scheduler need not copy it
            info = await sched._dryrun_copy(app, cfg, workspace)
            info.scheduler = scheduler
            return info

    async def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Launch what ``dryrun_info`` (from :meth:`dryrun`) describes; return its handle.

        Waits for a free slot when ``max_concurrent_submits`` calls are in flight.
        """
        scheduler = dryrun_info.scheduler
        if scheduler is None:
            raise InvalidArgumentError(
                "dryrun_info has no scheduler; create it with Runner.dryrun()"
            )

        async def prepared() -> AppDryRunInfo[Any]:
            return dryrun_info

        return await self._submit(scheduler, prepared)

    async def _submit(
        self, scheduler: str, prepare: Callable[[], Awaitable[AppDryRunInfo[Any]]]
    ) -> AppHandle:
        """Prepare and launch an app within a submit slot, counted for :meth:`progress`."""
        self._progress.submit_started()
        handle: AppHandle | None = None
        try:
            async with self._limiter():
                handle = await self._launch(scheduler, await prepare())
            return handle
        finally:
            self._submit_ended(handle)

    def _submit_ended(self, handle: AppHandle | None) -> None:
        self._progress.submit_ended(handle)
        if handle is not None and self._track_progress and not self._closed:
            self._host.spawn(self._follow, handle, name="runner-progress")

    async def _follow(self, handle: AppHandle) -> None:
        """Wait for ``handle`` to end, for :meth:`progress` (``track_progress``)."""
        with suppress(SchedulerClosedError, UnknownAppException):
            await self._final_status(handle)

    async def _launch(self, scheduler: str, info: AppDryRunInfo[Any]) -> AppHandle:
        """Schedule ``info`` on ``scheduler``; the caller holds a submit slot."""
        with record_event(
            self._event_hook, "schedule", scheduler, runcfg=info.cfg
        ) as ev:
            sched = await self._scheduler(scheduler)
            app_id = await sched.schedule(info)
            ev.app_id = app_id
            handle = make_app_handle(scheduler, self._name, app_id)
            if info.app is not None:
                self._keep_app(handle, info.app)
            return handle

    def _keep_app(self, handle: AppHandle, app: AppDef) -> None:
        self._apps[handle] = app
        if len(self._apps) > KEPT_APP_DEFINITIONS:
            self._apps.popitem(last=False)

    async def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppHandle:
        """Submit ``app`` to ``scheduler``; return its handle ``scheduler://session/app_id``.

        Waits for a free slot when ``max_concurrent_submits`` submissions are
        in flight, so ``run`` can be started for thousands of apps at once.

        Raises:
            SpecError: the app is invalid.
            UnknownSchedulerException: ``scheduler`` is not registered.
            InvalidRunConfigException: ``cfg`` does not fit the scheduler.
        """
        prepare = partial(self.dryrun, app, scheduler, cfg, workspace, parent_run_id)
        return await self._submit(scheduler, prepare)

    async def run_many(
        self,
        apps: Iterable[AppDef],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        *,
        cancel_on_error: bool = False,
    ) -> builtins.list[AppHandle]:
        """Submit every app concurrently (within ``max_concurrent_submits``).

        Returns the handles in the order of ``apps``. One failing submission
        neither stops nor cancels the others: every submission runs to its
        end, so no handle of a started app is ever lost.

        Raises:
            RunManyError: some apps could not be submitted (an
                ``ExceptionGroup`` of their errors, also a ``SubmitError``).
                ``.handles[i]`` is the handle of ``apps[i]`` or None; the
                apps that started keep running, unless ``cancel_on_error``,
                in which case they were cancelled (``.cancelled`` is True).

        Example:
            >>> async def main(runner: Runner, apps: list[AppDef]) -> None:
            ...     try:
            ...         handles = await runner.run_many(apps, "local_cwd")
            ...     except RunManyError as err:
            ...         handles = err.started  # still running: wait or cancel
        """
        apps = builtins.list(apps)
        handles: builtins.list[AppHandle | None] = [None] * len(apps)
        errors: dict[int, Exception] = {}
        # as many workers as submissions may run at once, each taking the next
        # app: 10,000 apps cost 64 tasks, not 10,000
        todo = iter(enumerate(apps))

        async def worker() -> None:
            for i, app in todo:
                try:
                    handles[i] = await self.run(app, scheduler, cfg)
                except Exception as exc:  # noqa: BLE001 - collected into RunManyError
                    errors[i] = exc

        try:
            async with anyio.create_task_group() as tg:
                for _ in range(min(len(apps), self._max_submits)):
                    tg.start_soon(worker)
        except BaseException:  # cancelled: no caller will get the handles
            if cancel_on_error:
                await self._cancel_quietly([h for h in handles if h is not None])
            raise
        if not errors:
            return [h for h in handles if h is not None]
        started = [h for h in handles if h is not None]
        if cancel_on_error:
            await self._cancel_quietly(started)
        outcome = "cancelled" if cancel_on_error else "still running"
        raise RunManyError(
            f"{len(errors)} of {len(apps)} apps could not be submitted"
            f" ({len(started)} started, {outcome})",
            [errors[i] for i in sorted(errors)],
            handles,
            cancelled=cancel_on_error,
        )

    def run_many_iter(
        self,
        apps: Iterable[AppDef],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
    ) -> AsyncGenerator[tuple[int, AppHandle], None]:
        """Submit every app concurrently; yield ``(index, handle)`` as each is accepted.

        The streaming form of :meth:`run_many`: the caller can watch, use or
        cancel an app as soon as it is submitted, instead of once every
        submission has ended (on the local backend, submissions beyond
        ``max_running_replicas`` wait for running apps to end, so the last
        handle may come long after the first). Handles arrive in submission
        order of completion; ``index`` is the app's position in ``apps``.

        Stopping early (``break``, an exception or a cancel in the loop body)
        submits no further app; apps whose submission was in flight are
        cancelled as soon as they are submitted, since nobody holds their
        handle. Apps already yielded are the caller's: they keep running.
        Close the iterator at once with ``contextlib.aclosing``.

        Raises:
            RunManyError: after the last handle, when some apps could not be
                submitted (``.handles[i]`` as in :meth:`run_many`; the others
                keep running).

        Example:
            >>> async def sweep(runner: Runner, apps: list[AppDef]) -> None:
            ...     submitted = runner.run_many_iter(apps, "local_cwd")
            ...     async with contextlib.aclosing(submitted) as handles:
            ...         async for index, handle in handles:
            ...             print(index, handle)
        """
        return self._run_many_iter(builtins.list(apps), scheduler, cfg)

    async def _run_many_iter(
        self,
        apps: builtins.list[AppDef],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None,
    ) -> AsyncGenerator[tuple[int, AppHandle], None]:
        if not apps:
            return
        self._check_open()
        send, recv = anyio.create_memory_object_stream[
            tuple[int, AppHandle | Exception]
        ](math.inf)
        todo = iter(enumerate(apps))
        abandoned = anyio.Event()  # set once the consumer is gone

        async def worker() -> None:
            for i, app in todo:
                if abandoned.is_set():
                    return
                result: AppHandle | Exception
                try:
                    result = await self.run(app, scheduler, cfg)
                except Exception as exc:  # noqa: BLE001 - collected into RunManyError
                    result = exc
                if not abandoned.is_set():
                    send.send_nowait((i, result))
                elif not isinstance(result, Exception):
                    await self._cancel_quietly([result])  # nobody has its handle

        async def run_all() -> None:
            with send:  # closed however this ends: the consumer sees the end
                async with anyio.create_task_group() as tg:
                    for _ in range(min(len(apps), self._max_submits)):
                        tg.start_soon(worker)

        await self._host.start_soon(run_all, name="runner-run-many-iter")
        handles: builtins.list[AppHandle | None] = [None] * len(apps)
        errors: dict[int, Exception] = {}
        done = 0
        try:
            async for i, result in recv:
                done += 1
                if isinstance(result, Exception):
                    errors[i] = result
                    continue
                handles[i] = result
                yield i, result
        finally:
            abandoned.set()
            unclaimed = _drain(recv)
            recv.close()
            if unclaimed and not self._closed:
                self._host.spawn(
                    self._cancel_quietly, unclaimed, name="runner-unclaimed"
                )
        if done < len(apps):
            raise SchedulerClosedError(
                f"the runner closed while {len(apps) - done} apps were being submitted"
            )
        if errors:
            started = [h for h in handles if h is not None]
            raise RunManyError(
                f"{len(errors)} of {len(apps)} apps could not be submitted"
                f" ({len(started)} started, still running)",
                [errors[i] for i in sorted(errors)],
                handles,
            )

    async def _cancel_quietly(self, handles: builtins.list[AppHandle]) -> None:
        """Cancel ``handles`` (shielded, at most ``CANCEL_TIMEOUT`` s); log failures."""

        async def cancel(handle: AppHandle) -> None:
            try:
                await self.cancel(handle)
            except Exception:
                logger.exception("could not cancel %s", handle)

        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT):
            async with anyio.create_task_group() as tg:
                for handle in handles:
                    tg.start_soon(cancel, handle)

    @asynccontextmanager
    async def running(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        *,
        detach: bool = False,
    ) -> AsyncIterator[AppHandle]:
        """Run ``app`` for the duration of the block; yield its handle.

        If the block exits with an exception (cancellation included), the app
        is cancelled, unless ``detach`` is true. A block that finishes normally
        leaves the app as it is.

        Example:
            >>> async def main(runner: Runner, app: AppDef) -> None:
            ...     async with runner.running(app, "local_cwd") as handle:
            ...         status = await runner.wait(handle, timeout=60)
        """
        handle = await self.run(app, scheduler, cfg, workspace)
        try:
            yield handle
        except BaseException:
            if not detach and not self._closed:
                await self._cancel_quietly([handle])
            raise

    # -- observation ------------------------------------------------------------

    async def status(self, app_handle: AppHandle) -> AppStatus | None:
        """Return the app's status, or None if its scheduler does not know it.

        Raises:
            MalformedAppHandleException: not ``scheduler://session/app_id``.
            UnknownSchedulerException: the handle's scheduler is not registered.
        """
        sched, name, app_id = await self._resolve(app_handle)
        with record_event(self._event_hook, "status", name, app_id):
            return await self._status(sched, app_handle, app_id)

    async def _status(
        self, sched: Scheduler[Any], app_handle: AppHandle, app_id: str
    ) -> AppStatus | None:
        return self._saw(app_handle, await sched.describe(app_id))

    def _saw(
        self, app_handle: AppHandle, desc: DescribeAppResponse | None
    ) -> AppStatus | None:
        """The status of ``desc``, counted for :meth:`progress`; None forgets the app."""
        if desc is None:
            self._apps.pop(app_handle, None)
            self._progress.saw(app_handle, None)
            return None
        status = _to_status(desc)
        self._progress.saw(app_handle, status)
        return status

    async def wait(
        self,
        app_handle: AppHandle,
        wait_interval: float | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 -- TorchX-style signature
    ) -> AppStatus | None:
        """Wait until the app is terminal; return its final status (None if unknown).

        Waiting is event-driven through the scheduler's ``wait``; there is no
        fixed poll. ``wait_interval`` is accepted for TorchX compatibility
        (``runner.wait(handle, 10)``) and ignored.

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed first (a TimeoutError).
        """
        del wait_interval  # TorchX's polling interval; waiting is event-driven here
        sched, name, app_id = await self._resolve(app_handle)
        with record_event(self._event_hook, "wait", name, app_id):
            try:
                desc = await sched.wait(app_id, timeout)
            except WaitTimeoutError as exc:
                raise WaitTimeoutError(app_handle, exc.timeout) from None
            return self._saw(app_handle, desc)

    async def describe(self, app_handle: AppHandle) -> AppDef | None:
        """Return the AppDef of the app (None if unknown).

        For the last :data:`KEPT_APP_DEFINITIONS` apps run by this runner it is
        the submitted copy (with the injected env); otherwise it is rebuilt
        from what the scheduler reports.
        """
        sched, name, app_id = await self._resolve(app_handle)
        with record_event(self._event_hook, "describe", name, app_id):
            app = self._apps.get(app_handle)
            if app is not None:
                return app
            desc = await sched.describe(app_id)
            if desc is None:
                return None
            return AppDef(name=app_id, roles=desc.roles, metadata=desc.metadata)

    async def list(self, scheduler: str) -> builtins.list[ListAppResponse]:
        """List the apps ``scheduler`` can see, with their handles filled in."""
        with record_event(self._event_hook, "list", scheduler):
            sched = await self._scheduler(scheduler)
            apps = await sched.list()
            for app in apps:
                app.app_handle = make_app_handle(scheduler, self._name, app.app_id)
            return apps

    def log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        should_tail: bool = False,
        streams: Stream | str | None = None,
    ) -> AsyncIterator[str]:
        """Iterate over the log lines of replica ``k`` of ``role_name``.

        Lines keep their ``\\n``; print them with ``end=""``. The handle is
        checked now; the app is looked up when iteration starts. Close the
        iterator early with ``contextlib.aclosing``.

        Raises:
            MalformedAppHandleException: not ``scheduler://session/app_id``.
            UnknownSchedulerException: the handle's scheduler is not registered.
            UnknownAppException: (when iterated) the scheduler does not know the app.
        """
        parsed = parse_app_handle(app_handle)
        self._check_open()
        self._check_scheduler_name(parsed.scheduler_backend)
        return self._log_lines(
            app_handle, role_name, k, regex, since, until, should_tail, streams
        )

    async def _log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int,
        regex: str | None,
        since: datetime | float | None,
        until: datetime | float | None,
        should_tail: bool,
        streams: Stream | str | None,
    ) -> AsyncIterator[str]:
        sched, name, app_id = await self._resolve(app_handle)
        with record_event(self._event_hook, "log_lines", name, app_id):
            if await self._status(sched, app_handle, app_id) is None:
                raise UnknownAppException(app_handle)
            lines = sched.log_iter(
                app_id, role_name, k, regex, since, until, should_tail, streams=streams
            )
        try:
            async for line in lines:
                yield line
        finally:
            aclose = getattr(lines, "aclose", None)
            if aclose is not None:
                # closing releases a file or a response: bounded all the same
                with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                    await aclose()

    # -- control ---------------------------------------------------------------

    async def cancel(self, app_handle: AppHandle) -> None:
        """Ask the scheduler to stop the app; unknown or finished apps are a no-op."""
        sched, name, app_id = await self._resolve(app_handle)
        with record_event(self._event_hook, "cancel", name, app_id):
            status = await self._status(sched, app_handle, app_id)
            if status is not None and not status.is_terminal():
                await sched.cancel(app_id)

    async def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of :meth:`cancel`."""
        warnings.warn(
            "Runner.stop() is deprecated, use Runner.cancel()",
            PendingDeprecationWarning,
            stacklevel=2,
        )
        await self.cancel(app_handle)

    # -- fan-out over many handles ----------------------------------------------

    def _validate_handles(
        self, app_handles: Iterable[AppHandle]
    ) -> builtins.list[AppHandle]:
        self._check_open()
        handles = builtins.list(dict.fromkeys(app_handles))
        for handle in handles:
            self._check_scheduler_name(parse_app_handle(handle).scheduler_backend)
        return handles

    async def _current_status(self, app_handle: AppHandle) -> AppStatus | None:
        sched, _, app_id = await self._resolve(app_handle)
        return await self._status(sched, app_handle, app_id)

    async def _final_status(self, app_handle: AppHandle) -> AppStatus | None:
        sched, _, app_id = await self._resolve(app_handle)
        return self._saw(app_handle, await sched.wait(app_id))

    async def _final_status_now(
        self, app_handle: AppHandle
    ) -> tuple[bool, AppStatus | None]:
        sched, _, app_id = await self._resolve(app_handle)
        final, desc = await sched._final_now(app_id)
        return final, self._saw(app_handle, desc) if final else None

    def events(
        self,
        schedulers_or_handles: Iterable[str] | None = None,
        *,
        since: str | None = None,
    ) -> RunnerEventStream:
        """Yield every change of the apps of several schedulers, with one cursor.

        ``schedulers_or_handles`` picks what to read: a scheduler name (e.g.
        ``"local_cwd"``) reads every app of that scheduler, a handle reads
        that app. None reads every scheduler this runner has opened, those it
        opens later, and those ``since`` names. Each event is the scheduler's
        :class:`~asyncsched.schedulers.events.AppEvent` with ``handle`` the
        runner's handle of the app (``local_cwd://session/app_id``; for
        RESYNC, the handle prefix ``local_cwd://session/`` of the scheduler
        that starts over) and ``cursor`` a composite cursor holding every
        scheduler's position: ``events(since=cursor)``, in this process or
        another, resumes each of them where it stopped (a scheduler the
        cursor does not name starts with its apps' CURRENT events). Events of
        one app keep their order; schedulers interleave. The stream ends
        when the runner closes; use it as ``async with`` to stop its tasks
        as soon as you stop reading. See ``docs/events.md``.

        Example:
            >>> async def follow(runner: Runner, saved: str | None) -> None:
            ...     async with runner.events(["local_cwd"], since=saved) as stream:
            ...         async for event in stream:
            ...             print(event.handle, event.kind, event.state)
            ...             saved = event.cursor  # store it somewhere durable

        Raises:
            InvalidArgumentError: ``since`` is not a runner cursor (malformed,
                another source's, or naming a scheduler this runner does not
                have), at the call. A scheduler's part of the cursor that is
                not that backend's raises it at the first ``anext``.
            MalformedAppHandleException: a malformed handle.
            UnknownSchedulerException: an unregistered scheduler.
        """
        self._check_open()
        selection = select(
            schedulers_or_handles, since, self._factories, self._schedulers
        )
        return RunnerEventStream(
            self._host,
            self._name,
            selection,
            self._scheduler,
            lambda: builtins.list(self._schedulers),
            self._subscribe_opened,
        )

    def watch(
        self, app_handles: Iterable[AppHandle], *, poll_interval: float = 1.0
    ) -> AsyncIterator[StatusEvent]:
        """Yield ``(handle, status)`` whenever an app or one of its replicas changes.

        Each app is reported once at first (its current state), then on every
        change of its state, its restart count or a replica's state, exit
        code, reason or restart count (a replica failing and being restarted
        under ``max_retries`` shows), the last time in a terminal state.
        ``status`` is None (and final) for an app the scheduler does not
        know. The iterator ends when every app is final.

        A view over :meth:`events`: the changes come from the schedulers'
        event streams, nothing is polled. Each app is looked up once at the
        start (at most ``max_concurrent_queries`` at once) to report the
        unknown ones. ``poll_interval`` is accepted for compatibility and
        ignored.

        Raises:
            MalformedAppHandleException: a malformed handle (before anything runs).
            UnknownSchedulerException: a handle names an unknown scheduler.
            SchedulerClosedError: the runner closed before every app was final.
        """
        del poll_interval  # every change is delivered by the event streams
        handles = self._validate_handles(app_handles)
        stream = self.events(handles) if handles else None
        if stream is None:
            return _nothing()
        return watch(
            handles,
            self._name,
            stream,
            self._current_status,
            self._queries(),
            self._progress.saw,
        )

    def _queries(self) -> anyio.CapacityLimiter:
        if self._query_limiter is None:
            self._query_limiter = anyio.CapacityLimiter(self._max_queries)
        return self._query_limiter

    def as_completed(
        self, app_handles: Iterable[AppHandle], *, timeout: float | None = None
    ) -> AsyncIterator[StatusEvent]:
        """Yield ``(handle, final_status)`` for each app, in completion order.

        ``final_status`` is None for an app the scheduler does not know.

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed before every app
                finished (``.app_id`` names the first unfinished handle).
            ExceptionGroup: a scheduler failed while waiting.
        """
        return self._fan.as_completed(self._validate_handles(app_handles), timeout)

    async def wait_all(
        self,
        app_handles: Iterable[AppHandle],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 -- one deadline for all
    ) -> dict[AppHandle, AppStatus | None]:
        """Wait for every app; return handle -> final status, in the input order.

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed first.
            ExceptionGroup: a scheduler failed while waiting.
        """
        handles = self._validate_handles(app_handles)
        return await self._fan.wait_all(handles, timeout)


async def _nothing() -> AsyncIterator[StatusEvent]:
    return
    yield  # an async generator that yields nothing


def _drain(
    recv: MemoryObjectReceiveStream[tuple[int, AppHandle | Exception]],
) -> builtins.list[AppHandle]:
    """The handles still buffered in ``recv`` (submitted, never yielded)."""
    found: builtins.list[AppHandle] = []
    with suppress(anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
        while True:
            _, result = recv.receive_nowait()
            if not isinstance(result, Exception):
                found.append(result)
    return found


def get_runner(
    name: str | None = None,
    *,
    max_concurrent_submits: int = 64,
    event_hook: EventHook | None = None,
    **scheduler_params: Any,
) -> Runner:
    """Create a :class:`Runner` over every registered scheduler.

    Args:
        name: Session name; ``"asyncsched"`` when not given.
        max_concurrent_submits: See :class:`Runner`.
        event_hook: See :class:`Runner`.
        **scheduler_params: Passed to every scheduler factory (nothing is read
            from the environment).

    Example:
        >>> async def main() -> None:
        ...     async with get_runner() as runner:
        ...         print(runner.name())
    """
    return Runner(
        name or DEFAULT_SESSION_NAME,
        scheduler_params=scheduler_params,
        max_concurrent_submits=max_concurrent_submits,
        event_hook=event_hook,
    )
