"""Blocking facades over the asynchronous API: :class:`SyncRunner` and :class:`SyncScheduler`.

Each facade object owns one background thread running one event loop (an anyio
``BlockingPortal``). The wrapped runner or scheduler is created inside that
loop and lives there until :meth:`close` (or the end of the ``with`` block);
every method hands its call to the loop and blocks until it is done. There is
no ``asyncio.run`` per call, so apps, processes and log streams stay
observable between calls.

Rules:

- A facade may be shared by many threads; their calls run concurrently on the
  facade's loop.
- Calling from a thread that runs an event loop (a notebook) works but blocks
  that loop; a :class:`~asyncsched.errors.BlockingCallWarning` is emitted once
  per facade. Prefer the async API there.
- Calling from the facade's own loop thread (e.g. from an ``event_hook``)
  raises ``RuntimeError``.
- Exceptions are the same objects the async API raises.
- ``KeyboardInterrupt`` during a call cancels that call; leaving the ``with``
  block (normally or not) closes the runner or scheduler, which stops the apps
  it still supervises (local processes), then stops the loop.
- The facades install no signal handlers.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import (
    Mapping,
)
from functools import partial
from typing import Any, final

from asyncsched._facade import (
    EventLoopName,
    SyncEventStream,
    _blocking,
    _blocking_context,
    _blocking_events,
    _blocking_iter,
    _Facade,
    _in_loop,
)
from asyncsched.errors import (
    UnknownSchedulerException,
)
from asyncsched.runner import DEFAULT_SESSION_NAME, EventHook, Runner
from asyncsched.schedulers import SchedulerFactory, get_scheduler_factories
from asyncsched.schedulers.api import (
    Capabilities,
    Scheduler,
)
from asyncsched.specs import (
    AppHandle,
)

__all__ = [
    "EventLoopName",
    "SyncEventStream",
    "SyncRunner",
    "SyncScheduler",
    "get_runner",
    "get_scheduler",
]


@final
class SyncScheduler(_Facade):
    """A blocking scheduler: any registered scheduler, driven from plain threads.

    The scheduler is created in the facade's own event-loop thread and closed
    with the facade (use ``with``, or call :meth:`close`). Method names and
    parameters are those of :class:`asyncsched.schedulers.api.Scheduler`;
    ``log_iter`` returns a plain iterator.

    Args:
        scheduler: Registry name, e.g. ``"local_cwd"``.
        session_name: Session of the scheduler.
        event_loop: ``"asyncio"`` (default) or ``"trio"``, where the scheduler
            supports it.
        factory: Build the scheduler with this factory instead of looking
            ``scheduler`` up in the registry (e.g. ``asyncsched.testing.create_scheduler``).
        **params: Keyword arguments for the scheduler factory.

    Example:
        >>> from asyncsched.sync import SyncScheduler
        >>> from asyncsched.specs import AppDef, Role
        >>> app = AppDef("hi", roles=[Role("hi", image=".", entrypoint="echo", args=["hi"])])
        >>> with SyncScheduler("local_cwd", session_name="demo") as sched:  # doctest: +SKIP
        ...     app_id = sched.submit(app)
        ...     print(sched.wait(app_id, timeout=60).state)
        ...     print("".join(sched.log_iter(app_id, "hi")), end="")
        SUCCEEDED
        hi
    """

    _kind = "sched"

    def __init__(
        self,
        scheduler: str = "local_cwd",
        /,
        session_name: str = "default",
        *,
        event_loop: EventLoopName = "asyncio",
        factory: SchedulerFactory | None = None,
        **params: Any,
    ) -> None:
        if factory is None:
            factories = get_scheduler_factories()
            if scheduler not in factories:
                raise UnknownSchedulerException(scheduler, builtins.list(factories))
            factory = factories[scheduler]
        super().__init__(partial(factory, session_name, **params), event_loop)
        self._sched: Scheduler[Any] = self._target
        self._name = scheduler

    @property
    def scheduler(self) -> Scheduler[Any]:
        """The wrapped async scheduler (use it only from its loop thread)."""
        return self._sched

    @property
    def backend(self) -> str:
        """The scheduler's backend name."""
        return self._sched.backend

    @property
    def session_name(self) -> str:
        """The scheduler's session name."""
        return self._sched.session_name

    @property
    def capabilities(self) -> Capabilities:
        """What the scheduler supports."""
        return self._sched.capabilities

    run_opts = _in_loop(Scheduler.run_opts)
    resolve_cfg = _in_loop(Scheduler.resolve_cfg)
    submit = _blocking(Scheduler.submit)
    submit_dryrun = _blocking(Scheduler.submit_dryrun)
    schedule = _blocking(Scheduler.schedule)
    build_workspace_and_update_role = _blocking(
        Scheduler.build_workspace_and_update_role
    )
    describe = _blocking(Scheduler.describe)
    list = _blocking(Scheduler.list)
    exists = _blocking(Scheduler.exists)
    wait = _blocking(Scheduler.wait)
    cancel = _blocking(Scheduler.cancel)
    log_iter = _blocking_iter(Scheduler.log_iter)

    events = _blocking_events(Scheduler.events)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"SyncScheduler({self._name!r}, {state})"


@final
class SyncRunner(_Facade):
    """A blocking :class:`~asyncsched.runner.Runner` with TorchX's method signatures.

    The runner (and each scheduler it creates) lives in the facade's own
    event-loop thread until :meth:`close`; use ``with``. ``log_lines``,
    ``watch`` and ``as_completed`` return plain iterators.

    Args:
        name: Session name used in handles.
        scheduler_factories: Registry name -> factory (default: all registered).
        scheduler_params: Keyword arguments for every scheduler factory.
        event_loop: ``"asyncio"`` (default) or ``"trio"``.
        max_concurrent_submits: See :class:`~asyncsched.runner.Runner`.
        max_concurrent_queries: See :class:`~asyncsched.runner.Runner`.
        event_hook: Called on the loop thread after every runner call; it
            must not call back into this facade.

    Example:
        >>> from asyncsched.sync import get_runner
        >>> from asyncsched.specs import AppDef, Role
        >>> app = AppDef("hi", roles=[Role("hi", image=".", entrypoint="echo", args=["hi"])])
        >>> with get_runner() as runner:  # doctest: +SKIP
        ...     handle = runner.run(app, "local_cwd")
        ...     print(runner.wait(handle).state)
        ...     for line in runner.log_lines(handle, "hi"):
        ...         print(line, end="")
        SUCCEEDED
        hi
    """

    _kind = "runner"

    def __init__(
        self,
        name: str = DEFAULT_SESSION_NAME,
        scheduler_factories: Mapping[str, SchedulerFactory] | None = None,
        scheduler_params: Mapping[str, Any] | None = None,
        *,
        event_loop: EventLoopName = "asyncio",
        max_concurrent_submits: int = 64,
        max_concurrent_queries: int = 64,
        event_hook: EventHook | None = None,
    ) -> None:
        build = partial(
            Runner,
            name,
            scheduler_factories,
            scheduler_params,
            max_concurrent_submits=max_concurrent_submits,
            max_concurrent_queries=max_concurrent_queries,
            event_hook=event_hook,
        )
        super().__init__(build, event_loop)
        self._runner: Runner = self._target

    @property
    def runner(self) -> Runner:
        """The wrapped async runner (use it only from its loop thread)."""
        return self._runner

    def name(self) -> str:
        """The session name used in handles."""
        return self._runner.name()

    def scheduler_backends(self) -> builtins.list[str]:
        """The scheduler names this runner can use."""
        return self._runner.scheduler_backends()

    scheduler_run_opts = _blocking(Runner.scheduler_run_opts)
    cfg_from_str = _blocking(Runner.cfg_from_str)
    dryrun = _blocking(Runner.dryrun)
    schedule = _blocking(Runner.schedule)
    run = _blocking(Runner.run)

    run_many = _blocking(Runner.run_many)
    run_many_iter = _blocking_iter(
        Runner.run_many_iter, "Iterator[tuple[int, AppHandle]]"
    )

    running = _blocking_context(Runner.running, "AbstractContextManager[AppHandle]")

    status = _blocking(Runner.status)
    wait = _blocking(Runner.wait)
    describe = _blocking(Runner.describe)
    list = _blocking(Runner.list)
    log_lines = _blocking_iter(Runner.log_lines)
    cancel = _blocking(Runner.cancel)

    def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of :meth:`cancel`."""
        warnings.warn(
            "SyncRunner.stop() is deprecated, use SyncRunner.cancel()",
            PendingDeprecationWarning,
            stacklevel=2,
        )
        self.cancel(app_handle)

    watch = _blocking_iter(Runner.watch, "Iterator[StatusEvent]")
    events = _blocking_events(Runner.events)
    as_completed = _blocking_iter(Runner.as_completed, "Iterator[StatusEvent]")
    wait_all = _blocking(Runner.wait_all)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"SyncRunner({self._runner.name()!r}, {state})"


def get_runner(
    name: str | None = None,
    *,
    event_loop: EventLoopName = "asyncio",
    max_concurrent_submits: int = 64,
    event_hook: EventHook | None = None,
    **scheduler_params: Any,
) -> SyncRunner:
    """Create a :class:`SyncRunner` over every registered scheduler.

    Example:
        >>> with get_runner() as runner:  # doctest: +SKIP
        ...     print(runner.name())
        asyncsched
    """
    return SyncRunner(
        name or DEFAULT_SESSION_NAME,
        scheduler_params=scheduler_params,
        event_loop=event_loop,
        max_concurrent_submits=max_concurrent_submits,
        event_hook=event_hook,
    )


def get_scheduler(
    name: str,
    session_name: str = "default",
    *,
    event_loop: EventLoopName = "asyncio",
    **params: Any,
) -> SyncScheduler:
    """Create a :class:`SyncScheduler` for the scheduler registered as ``name``.

    Raises:
        UnknownSchedulerException: no such scheduler.

    Example:
        >>> with get_scheduler("local_cwd", session_name="s") as sched:  # doctest: +SKIP
        ...     print(sched.session_name)
        s
    """
    return SyncScheduler(name, session_name, event_loop=event_loop, **params)
