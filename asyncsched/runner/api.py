"""The asynchronous :class:`Runner`: submit apps to schedulers by name, by handle.

A runner owns one scheduler per registry name, created on first use and closed
with the runner. Apps are addressed by handles of the form
``{scheduler}://{session}/{app_id}``, where ``scheduler`` is the registry key
(e.g. ``local_cwd``) and ``session`` is the runner's name.
"""

from __future__ import annotations

import builtins
import copy
import inspect
import logging
import math
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
)
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from asyncsched.errors import (
    InvalidArgumentError,
    RunManyError,
    SchedulerClosedError,
    SpecError,
    UnknownAppException,
)
from asyncsched.runner._core import (
    CANCEL_TIMEOUT,
    CLOSE_TIMEOUT,
    DEFAULT_SESSION_NAME,
    JOB_ID_ENV,
    KEPT_APP_DEFINITIONS,
    PARENT_RUN_ID_ENV,
    SESSION_ID_ENV,
)
from asyncsched.runner._events import EventHook, get_session_id, record_event
from asyncsched.runner._gc import fanout_heap, make_attribute_dicts
from asyncsched.runner._observing import Observing
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    CfgVal,
    Workspace,
    make_app_handle,
)

logger = logging.getLogger(__name__)

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


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _arguments_of(
    spec: Callable[Concatenate[Any, _P], Awaitable[Any]],
) -> Callable[
    [Callable[..., Coroutine[Any, Any, _R]]],
    Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]],
]:
    """Give the decorated coroutine method the parameters of ``spec`` (for
    type checkers, ``inspect.signature`` and the docs); it passes them on."""

    def decorate(
        method: Callable[..., Coroutine[Any, Any, _R]],
    ) -> Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]]:
        returns = inspect.signature(method).return_annotation
        method.__signature__ = inspect.signature(spec).replace(  # type: ignore[attr-defined]
            return_annotation=returns
        )
        return method

    return decorate


def _scheduler_of(info: AppDryRunInfo[Any]) -> str:
    """The scheduler a dry-run info was made for.

    Raises:
        InvalidArgumentError: it was not made by :meth:`Runner.dryrun`.
    """
    if info.scheduler is None:
        raise InvalidArgumentError(
            "dryrun_info has no scheduler; create it with Runner.dryrun()"
        )
    return info.scheduler


class Runner(Observing):
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
        kept_app_definitions: How many submitted app definitions
            :meth:`describe` answers from (the most recent ones; default
            :data:`KEPT_APP_DEFINITIONS`, 1,024); an older app is described
            from what its scheduler reports.

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

    # -- submission --------------------------------------------------------------

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
        _scheduler_of(dryrun_info)  # refused before it counts as a submission

        async def prepared() -> AppDryRunInfo[Any]:
            return dryrun_info

        return await self._submit(prepared)

    async def _submit(
        self, prepare: Callable[[], Awaitable[AppDryRunInfo[Any]]]
    ) -> AppHandle:
        """Prepare and launch an app within a submit slot, counted for :meth:`progress`."""
        self._progress.submit_started()
        handle: AppHandle | None = None
        try:
            async with self._limiter():
                handle = await self._launch(await prepare())
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

    async def _launch(self, info: AppDryRunInfo[Any]) -> AppHandle:
        """Schedule ``info`` on its scheduler; the caller holds a submit slot."""
        scheduler = _scheduler_of(info)
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
        if len(self._apps) > self._kept_apps:
            self._apps.popitem(last=False)

    @_arguments_of(dryrun)
    async def run(self, *args: Any, **kwargs: Any) -> AppHandle:
        """Submit ``app`` to ``scheduler``; return its handle ``scheduler://session/app_id``.

        Takes the arguments of :meth:`dryrun` (``app, scheduler, cfg=None,
        workspace=None, parent_run_id=None``): ``run`` is ``dryrun`` then
        ``schedule``.

        Waits for a free slot when ``max_concurrent_submits`` submissions are
        in flight, so ``run`` can be started for thousands of apps at once.

        Raises:
            SpecError: the app is invalid.
            UnknownSchedulerException: ``scheduler`` is not registered.
            InvalidRunConfigException: ``cfg`` does not fit the scheduler.
        """
        return await self._submit(partial(self.dryrun, *args, **kwargs))

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
        end, so no handle of a started app is ever lost. While it runs, the
        objects that existed before it are kept out of full garbage
        collections (see ``docs/async.md``).

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
        # as many workers as submissions may usefully run at once, each taking
        # the next app: 10,000 apps cost 64 tasks (or fewer), not 10,000
        todo = iter(enumerate(apps))
        workers = await self._submit_workers(scheduler, len(apps))

        async def worker() -> None:
            for i, app in todo:
                try:
                    handles[i] = await self.run(app, scheduler, cfg)
                except Exception as exc:  # noqa: BLE001 - collected into RunManyError
                    errors[i] = exc

        try:
            # full collections meanwhile walk only what the fan-out makes
            await make_attribute_dicts(apps)  # frozen with the apps, below
            with fanout_heap():
                async with anyio.create_task_group() as tg:
                    for _ in range(workers):
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

        workers = await self._submit_workers(scheduler, len(apps))

        async def run_all() -> None:
            with send:  # closed however this ends: the consumer sees the end
                async with anyio.create_task_group() as tg:
                    for _ in range(workers):
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
