"""The fault seam of the local backend: hooks that make its own steps fail.

Tests use it to show that a failing step fails only what it should (one
replica start, one app), instead of patching the backend's internals.

Example:
    >>> import errno
    >>> def disk_full(path: str) -> None:
    ...     raise OSError(errno.ENOSPC, "No space left on device")
    >>> faults = LocalFaults(before_record=disk_full)
    >>> faults.before_spawn is None
    True
    >>> faults.detach_ack_timeout
    30.0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.local._detach import ACK_TIMEOUT

__all__ = ("LocalFaults",)


@dataclass(frozen=True)
class LocalFaults:
    """Hooks called just before some steps of a :class:`LocalScheduler`.

    Each is called with what names the step; what it raises fails that step
    as a real failure there would. Hooks must be quick and must not touch the
    scheduler. None (the default) is no hook.

    Attributes:
        before_spawn: ``(role, replica_id)``, before each replica process (or
            retry attempt) starts, in the thread that starts it. At submit any
            exception makes ``submit`` raise ``SubmitError`` (every replica
            already started is stopped); on a retry an ``OSError`` fails the
            replica and its app.
        before_log: ``(log_path)``, in the event loop, before a replica
            attempt's output starts flowing into ``log_path`` (its
            ``stdout.log`` or ``stderr.log``). An exception fails the app (its
            replicas are stopped), as an unwritable log would.
        before_exit: ``(app_id, role, replica_id)``, in the event loop, when
            the exit of a replica attempt is handled. An exception fails the
            app, as a crashing reaper would; other apps are not affected.
        before_record: ``(record_path)``, in a worker thread, before an app's
            record (and SUCCESS file, and pointer) is written. An exception
            fails that app while it runs, as a full disk would.
        before_journal: ``(journal_dir)``, in a worker thread, before a batch
            of events is appended to the session's event journal. An exception
            loses that batch, as a full disk would: the apps and their records
            are not affected, and event readers get a RESYNC.
        before_dispatch: ``()``, each time the spawner's dispatcher task
            starts handing finished spawns back to their submits. An
            exception crashes that task, which is then restarted.
        before_reaper_turn: ``()``, each time the reaper wakes up to serve
            the replicas' exits and output. An exception crashes the reaper
            task, which is then restarted (nothing it watches is lost).
        before_detach_ack: ``(app_id)``, in the event loop, once the
            supervisor of a ``detach`` submit has said the app runs, just
            before the submit acknowledges it. An exception makes ``submit``
            raise ``SubmitError`` (as a cancellation meanwhile cancels it);
            the supervisor, never acknowledged, cancels the app.
        detach_ack_timeout: seconds the supervisor of a ``detach`` submit
            waits for the submit's acknowledgement before it cancels the app
            (:data:`~asyncsched.schedulers.local._detach.ACK_TIMEOUT`, 30 s,
            unless a test shortens it); more than 0.
    """

    before_spawn: Callable[[str, int], None] | None = None
    before_log: Callable[[str], None] | None = None
    before_exit: Callable[[str, str, int], None] | None = None
    before_record: Callable[[str], None] | None = None
    before_dispatch: Callable[[], None] | None = None
    before_journal: Callable[[str], None] | None = None
    before_detach_ack: Callable[[str], None] | None = None
    before_reaper_turn: Callable[[], None] | None = None
    detach_ack_timeout: float = ACK_TIMEOUT

    def __post_init__(self) -> None:
        if not self.detach_ack_timeout > 0:
            raise InvalidArgumentError(
                "LocalFaults.detach_ack_timeout must be more than 0 seconds,"
                f" not {self.detach_ack_timeout!r}"
            )
