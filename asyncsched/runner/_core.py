"""What every part of a :class:`~asyncsched.runner.Runner` stands on: its
schedulers (created on first use, one task each, closed with the runner),
handle resolution, limits and the status lookups the fan-outs use.
"""

from __future__ import annotations

import builtins
from collections import OrderedDict
from collections.abc import (
    Callable,
    Iterable,
    Mapping,
)
from contextlib import suppress
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskStatus

from asyncsched.errors import (
    InvalidArgumentError,
    UnknownSchedulerException,
)
from asyncsched.runner._events import EventHook
from asyncsched.runner._fanout import FanOut
from asyncsched.runner._progress import Progress, ProgressCounter
from asyncsched.schedulers import SchedulerFactory, get_scheduler_factories
from asyncsched.schedulers.api import (
    DescribeAppResponse,
    Scheduler,
)
from asyncsched.schedulers.shared.lifecycle import AsyncClosable
from asyncsched.schedulers.shared.taskhost import TaskHost
from asyncsched.specs import (
    AppDef,
    AppHandle,
    AppStatus,
    CfgVal,
    deciding_reason,
    parse_app_handle,
    runopts,
    validate_session_name,
)

# (its constants are exported by asyncsched.runner.api)
__all__ = ("RunnerCore",)


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

#: handles checked per loop turn by a fan-out over thousands of them
_VALIDATE_STEP = 1000

JOB_ID_ENV = "TORCHX_JOB_ID"
SESSION_ID_ENV = "TORCHX_INTERNAL_SESSION_ID"
PARENT_RUN_ID_ENV = "TORCHX_PARENT_RUN_ID"


#: what an AppStatus takes from a DescribeAppResponse as it is
_STATUS_FIELDS = ("state", "num_restarts", "msg", "structured_error_msg", "ui_url")


def _to_status(desc: DescribeAppResponse) -> AppStatus:
    reason = desc.reason
    if reason is None:
        reason, _ = deciding_reason(desc.state, desc.roles_statuses)
    shared = {name: getattr(desc, name) for name in _STATUS_FIELDS}
    return AppStatus(roles=desc.roles_statuses, reason=reason, **shared)


class RunnerCore(AsyncClosable):
    """The runner's schedulers and lookups (see :class:`~asyncsched.runner.Runner`)."""

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
        kept_app_definitions: int = KEPT_APP_DEFINITIONS,
    ) -> None:
        if max_concurrent_submits < 1 or max_concurrent_queries < 1:
            raise InvalidArgumentError("max_concurrent_submits/queries must be >= 1")
        if kept_app_definitions < 1:
            raise InvalidArgumentError(
                f"kept_app_definitions must be >= 1, not {kept_app_definitions!r}"
            )
        self._kept_apps = kept_app_definitions
        validate_session_name(name)  # the session of every scheduler it creates
        self._name = name
        self._factories: dict[str, SchedulerFactory] = dict(
            get_scheduler_factories()
            if scheduler_factories is None
            else scheduler_factories
        )
        self._params: dict[str, Any] = dict(scheduler_params or {})
        self._schedulers: dict[str, Scheduler[Any]] = {}
        #: the submitted copies, most recent last (at most kept_app_definitions)
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

    async def _submit_workers(self, scheduler: str, apps: int) -> int:
        """How many submissions a fan-out of ``apps`` apps to ``scheduler``
        keeps in flight: ``max_concurrent_submits``, or twice what the backend
        works on at once if that is fewer (the others would only wait, each
        holding its dry-run copy of the app)."""
        workers = min(apps, self._max_submits)
        if workers == 0:
            return 0
        try:
            sched = await self._scheduler(scheduler)
        except Exception:  # noqa: BLE001 -- each submission raises it again
            return workers
        if sched.submits_at_once is not None:
            workers = min(workers, max(1, 2 * sched.submits_at_once))
        return workers

    def _limiter(self) -> anyio.CapacityLimiter:
        if self._submit_limiter is None:
            self._submit_limiter = anyio.CapacityLimiter(self._max_submits)
        return self._submit_limiter

    def _validate_handles(
        self, app_handles: Iterable[AppHandle]
    ) -> builtins.list[AppHandle]:
        self._check_open()
        handles = builtins.list(dict.fromkeys(app_handles))
        for handle in handles:
            self._check_scheduler_name(parse_app_handle(handle).scheduler_backend)
        return handles

    async def _validate_handles_in_steps(
        self, app_handles: Iterable[AppHandle]
    ) -> builtins.list[AppHandle]:
        """:meth:`_validate_handles`, letting the loop run between steps of
        ``_VALIDATE_STEP`` handles (10,000 handles take about 15 ms)."""
        self._check_open()
        handles = builtins.list(dict.fromkeys(app_handles))
        for start in range(0, len(handles), _VALIDATE_STEP):
            if start:
                await anyio.lowlevel.checkpoint()
            for handle in handles[start : start + _VALIDATE_STEP]:
                self._check_scheduler_name(parse_app_handle(handle).scheduler_backend)
        return handles

    def _queries(self) -> anyio.CapacityLimiter:
        if self._query_limiter is None:
            self._query_limiter = anyio.CapacityLimiter(self._max_queries)
        return self._query_limiter

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
