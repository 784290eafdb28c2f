"""The asynchronous ``Scheduler`` contract every backend implements.

Public methods are concrete template methods: they check the scheduler is
open, validate their arguments (config resolved and validated before any I/O;
the app, role and replica of ``log_iter``, its ``regex``) with one error text,
then call one protected hook. Backends implement the hooks: ``_submit_dryrun``,
``_schedule``, ``_describe`` and ``_list`` (an :class:`AppSnapshot` per app),
``_cancel``, ``_log_iter``, and optionally ``_watching``, ``_poll_interval``
and ``_aclose``. The base class owns ``wait``: it re-reads an app whenever the
backend signals a change (``self.notify_changed(app_id)``).

Example:
    >>> async def main() -> None:
    ...     async with get_scheduler("local_cwd", session_name="demo") as sched:
    ...         app = AppDef("hi", roles=[Role("hi", image="", entrypoint="echo", args=["hi"])])
    ...         app_id = await sched.submit(app, {})
    ...         final = await sched.wait(app_id, timeout=30)
    ...         async for line in sched.log_iter(app_id, "hi"):
    ...             print(line, end="")
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import copy
import logging
import math
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

import anyio

from asyncsched.errors import (
    InvalidArgumentError,
    SchedulerClosedError,
    SpecError,
    UnknownAppException,
    UnknownReplicaError,
    UnsupportedOperationError,
    WaitTimeoutError,
)
from asyncsched.schedulers.capabilities import Capabilities, LogQuery, Stream
from asyncsched.schedulers.change_feed import ChangeFeed
from asyncsched.schedulers.log_request import LogRequest, takes_log_request
from asyncsched.schedulers.responses import (
    DescribeAppResponse,
    ListAppResponse,
    final_if_settled,
    response_of,
    still_stopping,
)
from asyncsched.schedulers.shared.arguments import (
    as_utc,
    compile_regex,
    parse_stream,
)
from asyncsched.schedulers.shared.closing_iterator import aclose_iterator
from asyncsched.schedulers.shared.event_loop_check import check_event_loop
from asyncsched.schedulers.shared.lifecycle import AsyncClosable
from asyncsched.schedulers.shared.lines import (
    DEFAULT_MAX_LINE_BYTES,
    check_max_line_bytes,
    filter_regex,
    split_lines,
    split_lines_iterator,
)
from asyncsched.schedulers.shared.replica_limits import ReplicaLimits
from asyncsched.schedulers.snapshot import AppSnapshot, ReplicaSnapshot
from asyncsched.specs import (
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    CfgVal,
    Role,
    Workspace,
    make_app_handle,
    runopts,
    validate_app,
    validate_session_name,
)

__all__ = [
    "AppSnapshot",
    "CLOSE_TIMEOUT",
    "Capabilities",
    "DAYS_IN_2_WEEKS",
    "DescribeAppResponse",
    "ListAppResponse",
    "LogQuery",
    "ReplicaLimits",
    "ReplicaSnapshot",
    "SETTLE_TIMEOUT",
    "Scheduler",
    "Stream",
    "filter_regex",
    "final_if_settled",
    "split_lines",
    "split_lines_iterator",
]

DAYS_IN_2_WEEKS = 14

#: seconds ``aclose()`` may take by default (a backend may allow more, see
#: ``Scheduler._close_timeout``); past it the rest is abandoned and logged
CLOSE_TIMEOUT = 60.0

#: seconds ``wait`` gives a terminal app's last details to land (see
#: ``AppSnapshot.settled``) before it returns what it has
SETTLE_TIMEOUT = 5.0

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Scheduler(ChangeFeed, AsyncClosable, abc.ABC, Generic[T]):
    """Submit, observe, cancel and read the logs of apps on one backend.

    ``T`` is the backend's resolved run-config type (usually a TypedDict).
    Every operation is a coroutine; ``log_iter`` returns an async iterator.
    Use the scheduler as ``async with`` (or call :meth:`aclose`): it owns
    background tasks and, for local backends, processes.
    """

    capabilities: ClassVar[Capabilities] = Capabilities()
    #: the most replicas per role and per app this backend accepts (None: no
    #: bound), checked before anything is built or rendered; see
    #: :meth:`_replica_limits` for limits that depend on a run option
    replica_limits: ClassVar[ReplicaLimits | None] = None
    #: how many submissions this backend works on at once (None: no bound of
    #: its own); ``Runner.run_many`` keeps at most twice as many in flight
    #: (within ``max_concurrent_submits``), so apps waiting for their turn
    #: hold no dry-run state meanwhile
    submits_at_once: ClassVar[int | None] = None

    def __init__(
        self,
        backend: str,
        session_name: str,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        # it names directories (local logs and records) and goes into handles
        validate_session_name(session_name)
        self.backend = backend
        #: the name the scheduler is registered under (``local_cwd``,
        #: ``local_docker``, ``kubernetes``...): the scheme of the handles
        #: users are given and errors name, so that a handle pasted from an
        #: error works in the CLI. The registry sets it; a backend family
        #: with one registry name sets its own
        self.handle_name = backend
        self.session_name = session_name
        #: the longest log line ``log_iter`` yields in one piece
        self.max_line_bytes = check_max_line_bytes(max_line_bytes)
        self._closed = False
        ChangeFeed.__init__(self)

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if not self._closed:  # a closed scheduler says so first
            self._check_event_loop()
        return await super().__aenter__()

    async def aclose(self) -> None:
        """Release everything the scheduler holds; idempotent, never raises.

        Shielded from cancellation, and bounded: after ``_close_timeout()``
        seconds (60 by default) whatever is left is abandoned and logged.
        """
        await super().aclose()
        self._change_source.notify_all()  # pending waits see the scheduler closed

    def _close_timeout(self) -> float:
        """Hook: how many seconds :meth:`aclose` may take."""
        return CLOSE_TIMEOUT

    def _check_open(self) -> None:
        if self._closed:
            raise SchedulerClosedError(
                f"{type(self).__name__}({self.session_name!r}) is closed"
            )

    def _check_event_loop(self) -> None:
        """Refuse to run on an event loop not in ``capabilities.event_loops``."""
        check_event_loop(
            type(self).__name__, self.backend, self.capabilities.event_loops
        )

    # -- run options -----------------------------------------------------------

    def run_opts(self) -> runopts:
        """The run options this scheduler accepts (plus workspace options)."""
        opts = self._run_opts()
        if self.capabilities.workspaces:
            opts.update(self.workspace_opts())
        return opts

    def _run_opts(self) -> runopts:
        return runopts()

    def workspace_opts(self) -> runopts:
        """Extra options of workspace-capable schedulers."""
        return runopts()

    def resolve_cfg(self, cfg: Mapping[str, CfgVal] | None) -> T:
        """Fill defaults and type-check ``cfg``; unknown keys are an error.

        Raises:
            InvalidRunConfigException: a required option is missing, an option
                has the wrong type or the key is unknown.
        """
        return cast(T, self.run_opts().resolve({} if cfg is None else cfg, strict=True))

    # -- submission ------------------------------------------------------------

    async def submit(
        self,
        app: AppDef,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
    ) -> str:
        """Validate, dry-run and schedule ``app``; return its app id.

        The one submit pipeline (``Runner.run`` uses it too):
        :meth:`submit_dryrun`, then :meth:`schedule`. The caller's AppDef is
        never mutated. Nothing is launched when the app, the config or the
        workspace is invalid.
        """
        return await self.schedule(await self.submit_dryrun(app, cfg, workspace))

    async def submit_dryrun(
        self,
        app: AppDef,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
    ) -> AppDryRunInfo[Any]:
        """Return the request that ``schedule`` would launch, without launching it.

        Steps, each once: resolve ``cfg`` (defaults, types, unknown keys);
        validate ``app`` (generic rules, the backend's replica limits, then
        the backend's ``_validate``);
        with a ``workspace``, build it into the first role (schedulers that
        cannot are an error, never silently ignored); render the backend
        request; apply each role's ``pre_proc``. ``info.app`` is the
        scheduler's copy of ``app``, ``info.cfg`` the resolved config.

        Raises:
            SpecError: the app is invalid, or asks for more replicas than
                :attr:`replica_limits` allows.
            InvalidRunConfigException: ``cfg`` does not fit the scheduler.
            UnsupportedOperationError: a workspace on a scheduler without
                workspace support.
        """
        return await self._dryrun_copy(copy.deepcopy(app), cfg, workspace)

    async def _dryrun_copy(
        self,
        app: AppDef,
        cfg: Mapping[str, CfgVal] | None,
        workspace: str | Workspace | None,
    ) -> AppDryRunInfo[Any]:
        """:meth:`submit_dryrun` of an ``app`` the caller gives up (its own
        private copy, e.g. the runner's): used as is, not copied again."""
        self._check_open()
        self._check_event_loop()
        resolved = self.resolve_cfg(cfg)
        validate_app(app)
        limits = self._replica_limits(resolved)
        if limits is not None:
            limits.check(app, self.backend)
        plain_cfg = cast(Mapping[str, CfgVal], resolved)
        if workspace:
            if not self.capabilities.workspaces:
                raise UnsupportedOperationError(
                    f"{type(self).__name__} does not support workspaces; submit"
                    " without one, or use a scheduler that builds images"
                    " (e.g. local_docker)"
                )
            self._pre_build_validate(app, self.backend, plain_cfg)
            await self.build_workspace_and_update_role(
                app.roles[0], workspace, resolved
            )
        self._validate(app, self.backend, plain_cfg)
        info: AppDryRunInfo[Any] = await self._submit_dryrun(app, resolved)
        for role in app.roles:
            info = role.pre_proc(self.backend, info)
        info.app = app
        info.cfg = plain_cfg
        return info

    @abc.abstractmethod
    async def _submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[Any]:
        """Hook: build the backend request for ``app`` (no I/O that launches).

        Render big apps with
        :func:`~asyncsched.schedulers.shared.replica_limits.render_off_loop`.
        """

    def _replica_limits(self, cfg: T) -> ReplicaLimits | None:
        """Hook: the replica limits for an app submitted with ``cfg``
        (:attr:`replica_limits` by default)."""
        return self.replica_limits

    async def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Launch what ``dryrun_info`` describes (it may be edited first); return the app id.

        Raises:
            SchedulerClosedError: the scheduler is closed.
            SubmitError: the backend refused or could not launch the app.
        """
        self._check_open()
        return await self._schedule(dryrun_info)

    @abc.abstractmethod
    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Hook: launch ``dryrun_info.request``; return the app id."""

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str | Workspace, cfg: T
    ) -> None:
        """Hook of workspace-capable schedulers: build and point ``role`` at it."""
        raise UnsupportedOperationError(
            f"{type(self).__name__} does not support workspaces"
        )

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Backend-specific checks run by the runner before dry-run (TorchX's)."""
        for index, role in enumerate(app.roles):
            if role.resource == NULL_RESOURCE:
                raise SpecError(
                    f"roles[{index}].resource",
                    f"No resource for role: {role.image}. Did you forget to attach "
                    "resource to the role",
                )

    def _pre_build_validate(
        self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Checks run before a workspace build; no-op by default."""

    # -- observation -----------------------------------------------------------

    @abc.abstractmethod
    async def _describe(self, app_id: str) -> AppSnapshot | None:
        """Hook: the app as the backend sees it now, or None when unknown.

        No argument checks needed (the public methods made them). Signal
        later changes with ``self.notify_changed(key)`` (``key`` is
        ``snapshot.change_key``, the app id by default).
        """

    @abc.abstractmethod
    async def _list(self) -> builtins.list[AppSnapshot]:
        """Hook: every app the backend can see."""

    def _watching(self, app_id: str) -> AbstractAsyncContextManager[object]:
        """Hook: held by every ``wait`` on ``app_id``; a backend that learns of
        changes only while asked (e.g. by polling) watches the app meanwhile."""
        return contextlib.nullcontext()

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        """Hook: ``wait`` re-reads an app at least this often (the pause grows
        from 50 ms up to it). Default 2 s; a backend that signals every change
        of this app returns None."""
        return 2.0

    def _handle(self, app_id: str) -> str:
        """The full handle ``handle_name://session/app_id`` errors name."""
        return make_app_handle(self.handle_name, self.session_name, app_id)

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Return the app's state, or None if the scheduler does not know it.

        The app state is its replicas' states rolled up by
        :func:`~asyncsched.specs.rollup_state` (the same rule on every backend).
        """
        self._check_open()
        snapshot = await self._describe(app_id)
        return None if snapshot is None else response_of(snapshot)

    async def list(self) -> builtins.list[ListAppResponse]:
        """Return the apps this scheduler can see."""
        self._check_open()
        return [
            ListAppResponse(app_id=s.app_id, state=s.state, name=s.name)
            for s in await self._list()
        ]

    async def exists(self, app_id: str) -> bool:
        """True when ``describe(app_id)`` is not None."""
        return await self.describe(app_id) is not None

    async def wait(
        self,
        app_id: str,
        timeout: float | None = None,  # noqa: ASYNC109 -- TorchX's signature
    ) -> DescribeAppResponse | None:
        """Wait until the app is over and return its description.

        Over means terminal with every replica ended: after ``cancel`` (or
        a fail-fast failure) the app reads CANCELLED (FAILED) at once, but
        ``wait`` returns only once each replica's process, container or pod
        has stopped (its SIGTERM grace included), every replica in a
        terminal state. Returns None for an unknown app.

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed first (also a TimeoutError).
            SchedulerClosedError: the scheduler closed before the app ended.
        """
        self._check_open()
        async with self._watching(app_id):
            if timeout is None:
                return await self._wait(app_id)
            # an app that is already done (or unknown) is returned even for
            # timeout=0
            snapshot = await self._describe(app_id)
            if snapshot is None:
                return None
            if snapshot.stopped and snapshot.settled:
                return response_of(snapshot)
            ended = [snapshot] if snapshot.stopped else []
            latest = [snapshot]
            with anyio.move_on_after(timeout):
                return await self._wait(app_id, ended, latest)
            if ended:  # it ended; the timeout cut the wait for its last details
                return response_of(ended[-1])
        raise WaitTimeoutError(app_id, timeout, still_stopping(latest[-1]))

    async def _final_now(self, app_id: str) -> tuple[bool, DescribeAppResponse | None]:
        """Hook: ``(True, final)`` if ``wait`` would return at once (the app
        is stopped and settled, or unknown: ``final`` is None), ``(False,
        None)`` if it would wait or cannot tell cheaply.

        Fan-outs over thousands of apps check each app once this way and keep
        a waiting task only for the unfinished ones. The default tells
        nothing (every app is waited for); a backend whose ``_describe`` is a
        cheap local read returns :func:`final_if_settled` of it.
        """
        del app_id
        return False, None

    async def _wait(
        self,
        app_id: str,
        ended: builtins.list[AppSnapshot] | None = None,
        latest: builtins.list[AppSnapshot] | None = None,
    ) -> DescribeAppResponse | None:
        """Re-read the app at each change signal until it is stopped.

        A terminal app waits for its replicas still running (no bound but
        the caller's timeout: the backend's grace ends them). A stopped app
        whose snapshot is not ``settled`` yet gets up to ``SETTLE_TIMEOUT``
        seconds for its last details to land; meanwhile its latest snapshot
        is kept in ``ended`` (for a caller's timeout), and every snapshot
        read in ``latest``.
        """
        key = app_id
        delay = 0.0
        settle_by: float | None = None
        while True:
            changed = self.changed(key)
            snapshot = await self._describe(app_id)
            if snapshot is None:
                return None
            if latest is not None:
                latest[:] = [snapshot]
            if (snapshot.change_key or snapshot.app_id) != key:
                key = snapshot.change_key or snapshot.app_id
                continue  # take the right event before reading again
            pause = math.inf
            if snapshot.stopped:
                if ended is not None:
                    ended[:] = [snapshot]
                now = anyio.current_time()
                if settle_by is None:
                    settle_by = now + SETTLE_TIMEOUT
                if snapshot.settled or now >= settle_by:
                    return response_of(snapshot)
                pause = settle_by - now
            elif self._closed:
                raise SchedulerClosedError(
                    f"{self!r} was closed during wait({app_id!r})"
                )
            poll = self._poll_interval(snapshot)
            if poll is not None:
                delay = min(delay * 1.5, poll) if delay else min(0.05, poll)
                pause = min(pause, delay)
            with anyio.move_on_after(pause):
                await changed.wait()

    # -- control ---------------------------------------------------------------

    async def cancel(self, app_id: str) -> None:
        """Ask the backend to stop the app; idempotent, does not wait for it.

        A no-op for an unknown app.
        """
        self._check_open()
        snapshot = await self._describe(app_id)
        if snapshot is not None:
            await self._cancel(snapshot)

    @abc.abstractmethod
    async def _cancel(self, app: AppSnapshot) -> None:
        """Hook: stop an app known to exist (it may be terminal already)."""

    # -- logs ------------------------------------------------------------------

    @takes_log_request
    def log_iter(self, app_id: str, request: LogRequest) -> AsyncGenerator[str, None]:
        """Iterate over the log lines of replica ``k`` of ``role_name``.

        The arguments after ``app_id`` are those of
        :class:`~asyncsched.schedulers.log_request.LogRequest`: ``role_name,
        k=0, regex=None, since=None, until=None, should_tail=False,
        streams=None``.

        Lines keep their ``\\n`` (and ``\\r``); print them with ``end=""``.
        A line longer than the scheduler's ``max_line_bytes`` (1 MiB by
        default) comes in pieces of at most that many bytes; joined, they give
        the line back. ``should_tail=False`` yields what exists now and
        stops; ``True`` follows until the app is terminal and the log is
        drained. Each call returns a fresh async generator: ``aclose()`` it
        (or use ``contextlib.aclosing``) to release its file or connection at
        once when you stop early.

        Raises:
            UnsupportedOperationError: the backend has no logs, or ``since``/
                ``until`` on a backend that cannot filter by time
                (``capabilities.log_since_until`` False).
            InvalidArgumentError: an unsupported stream, an invalid ``regex``,
                a ``since``/``until`` that is neither a datetime nor epoch
                seconds, or ``should_tail`` on a backend that cannot tail.
            UnknownAppException: (when iterated) the app is unknown.
            UnknownReplicaError: (when iterated) no such role or replica.
        """
        self._check_open()
        self._check_app_id(app_id)
        caps = self.capabilities
        if not caps.logs:
            raise UnsupportedOperationError(
                f"{type(self).__name__} does not support application log iteration"
            )
        stream = parse_stream(request.streams, caps)
        pattern = compile_regex(request.regex)
        since, until = as_utc(request.since, "since"), as_utc(request.until, "until")
        if (since is not None or until is not None) and not caps.log_since_until:
            raise UnsupportedOperationError(
                f"{type(self).__name__} cannot filter logs by time (its log lines"
                " carry none): call log_iter without since/until"
            )
        if request.should_tail and not caps.log_tail:
            raise InvalidArgumentError(f"{type(self).__name__} cannot tail logs")
        query = LogQuery(
            request.role_name, request.k, since, until, request.should_tail, stream
        )
        return self._replica_log(app_id, query, pattern)

    def _check_app_id(self, app_id: str) -> None:
        """Hook: refuse a malformed ``app_id`` at call time (default: any).

        Called by :meth:`log_iter` before it returns its iterator, so an id
        the backend can never hold is an error at the call, not on iteration.

        Raises:
            InvalidArgumentError: the id cannot name an app of this backend.
        """

    async def _replica_log(
        self, app_id: str, query: LogQuery, pattern: re.Pattern[str] | None
    ) -> AsyncGenerator[str, None]:
        """The checks every backend shares, then the backend's lines.

        The only generator a line passes through on its way to the caller
        (with the ``regex`` filter): a backend that reads lines in batches
        (:meth:`_log_batches`) hands them over a list at a time.
        """
        snapshot = await self._describe(app_id)
        if snapshot is None:
            raise UnknownAppException(self._handle(app_id))
        if self._find_replica(snapshot, query.role_name, query.k) is None:
            raise UnknownReplicaError(
                self._handle(app_id),
                query.role_name,
                query.k,
                snapshot.role_names(),
            )
        batches = self._log_batches(snapshot, query)
        if batches is None:
            lines = self._log_iter(snapshot, query)
            try:
                async for line in lines:
                    if pattern is None or pattern.search(line):
                        yield line
            finally:
                await aclose_iterator(lines)
            return
        try:
            async for batch in batches:
                if pattern is None:
                    for line in batch:
                        yield line
                else:
                    for line in batch:
                        if pattern.search(line):
                            yield line
        finally:
            await aclose_iterator(batches)

    def _find_replica(
        self, app: AppSnapshot, role_name: str, k: int
    ) -> ReplicaSnapshot | None:
        """Hook: the replica ``log_iter`` reads (default: exact role name)."""
        return app.replica(role_name, k)

    def _log_batches(
        self, app: AppSnapshot, query: LogQuery
    ) -> AsyncIterator[builtins.list[str]] | None:
        """Hook: the lines of :meth:`_log_iter` in lists, or None (the default).

        A backend that reads many lines at a time implements this one instead
        of :meth:`_log_iter` (same contract, lines in order, each batch
        non-empty), which spares each line a generator step.
        """
        return None

    def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        """Hook: yield whole lines of a replica known to exist (an async generator).

        ``query.since``/``query.until`` arrive timezone-aware. Cut
        lines with :class:`~asyncsched.schedulers.shared.lines.LineAssembler`
        (linear, capped) and hold no file or connection longer than needed:
        closing the generator must release it at once (``aclosing`` the
        generators you iterate).
        """
        raise UnsupportedOperationError(
            f"{type(self).__name__} does not support application log iteration"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(session_name={self.session_name!r})"
