"""The observing half of a :class:`~asyncsched.runner.Runner`: status, wait,
describe, list, logs, cancel, and the fan-outs (events, watch, as_completed,
wait_all) over many handles.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import (
    AsyncIterator,
    Iterable,
)

from asyncsched.errors import (
    UnknownAppException,
    WaitTimeoutError,
)
from asyncsched.runner._core import RunnerCore
from asyncsched.runner._events import record_event
from asyncsched.runner._fanout import StatusEvent
from asyncsched.runner._gc import fanout_heap
from asyncsched.runner._stream import RunnerEventStream, select
from asyncsched.runner._watch import watch
from asyncsched.schedulers.api import ListAppResponse
from asyncsched.schedulers.log_request import LogRequest, takes_log_request
from asyncsched.schedulers.shared.closing_iterator import aclose_iterator
from asyncsched.specs import (
    AppDef,
    AppHandle,
    AppStatus,
    make_app_handle,
    parse_app_handle,
)

__all__ = ("Observing",)


async def _nothing() -> AsyncIterator[StatusEvent]:
    return
    yield  # an async generator that yields nothing


class Observing(RunnerCore):
    """Observe and control apps by handle (a base of :class:`~asyncsched.runner.Runner`)."""

    async def status(self, app_handle: AppHandle) -> AppStatus | None:
        """Return the app's status, or None if its scheduler does not know it.

        Raises:
            MalformedAppHandleException: not ``scheduler://session/app_id``.
            UnknownSchedulerException: the handle's scheduler is not registered.
        """
        sched, name, app_id = await self._resolve(app_handle)
        with record_event(self._event_hook, "status", name, app_id):
            return await self._status(sched, app_handle, app_id)

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

    @takes_log_request
    def log_lines(
        self, app_handle: AppHandle, request: LogRequest
    ) -> AsyncIterator[str]:
        """Iterate over the log lines of replica ``k`` of ``role_name``.

        The arguments after ``app_handle`` are those of
        :meth:`Scheduler.log_iter <asyncsched.schedulers.api.Scheduler.log_iter>`
        (:class:`~asyncsched.schedulers.log_request.LogRequest`).
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
        return self._log_lines(app_handle, request)

    async def _log_lines(
        self, app_handle: AppHandle, request: LogRequest
    ) -> AsyncIterator[str]:
        sched, name, app_id = await self._resolve(app_handle)
        with record_event(self._event_hook, "log_lines", name, app_id):
            if await self._status(sched, app_handle, app_id) is None:
                raise UnknownAppException(app_handle)
            lines = sched.log_iter(app_id, **request.keywords())
        try:
            async for line in lines:
                yield line
        finally:
            # closing releases a file or a response: bounded all the same
            await aclose_iterator(lines, within=10)

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

        While it waits, the objects that existed before it are kept out of
        full garbage collections (see ``docs/async.md``).

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed first.
            ExceptionGroup: a scheduler failed while waiting.
        """
        handles = await self._validate_handles_in_steps(app_handles)
        # full collections meanwhile walk only what the wait makes
        with fanout_heap():
            return await self._fan.wait_all(handles, timeout)
