"""The backend kit: everything needed to write a scheduler backend.

A backend subclasses :class:`Scheduler` and implements its hooks
(``_submit_dryrun``, ``_schedule``, ``_describe``/``_list`` returning
:class:`AppSnapshot`\\ s, ``_cancel``, ``_log_iter``; optionally ``_aenter``,
``_aclose``, ``_watching``, ``_poll_interval``). The base class owns argument
checks, ``wait``, the lifecycle and the change signal
(:meth:`Scheduler.notify_changed` / :meth:`Scheduler.changed`). The building
blocks below are the ones the built-in backends use:

* :class:`TaskHost`: background tasks owned by the scheduler, opened in
  ``_aenter`` and closed in ``_aclose`` (a task group left open by
  ``_aenter`` is refused with :class:`~asyncsched.errors.SchedulerError`);
* :func:`all_or_nothing`: a submit that creates several things and undoes
  them all (shielded, bounded) if it fails or is cancelled;
* :func:`follow_file`: read a file someone is still writing, off the loop;
* :class:`LineAssembler`: bytes into capped, UTF-8-safe lines for ``log_iter``;
* :func:`aclose_iterator`: close an inner iterator in a ``finally`` (shielded
  and bounded when asked);
* :func:`keyword_params`: the keyword arguments a registry factory passes on;
* :func:`make_unique`: a fresh app id from an app name;
* :func:`render_off_loop`: render a big app in a worker thread;
* :func:`failed_replica_message`, :func:`app_failure_message` and
  :func:`replica_exit_message`: the app message naming the replica that
  failed it, and a failed replica's own message (one shape on every backend);
* events (see ``docs/events.md``): :class:`AppEvent`/:class:`EventKind`,
  :func:`encode_cursor`/:func:`decode_cursor` for a source's cursors,
  :class:`SnapshotDiffer` (states into change events, for re-lists and
  polls), :class:`EventHistory` (an in-process resumable log) and
  :class:`PolledEvents` (the fallback ``_events`` hook built from both);
  :func:`stamp_burst` gives a CURRENT burst its cursors (all but the last
  restart the burst: ``Scheduler.events`` sends it whole again, see
  :func:`burst_restart`, :func:`restart_cursor`).

Every built-in backend imports these names from here (or from its own
package); ``docs/scheduler-contract.md`` walks through a complete plugin.

Example:
    >>> from asyncsched.schedulers.kit import Scheduler, TaskHost, all_or_nothing
"""

from __future__ import annotations

from asyncsched.schedulers.api import (
    CLOSE_TIMEOUT,
    DAYS_IN_2_WEEKS,
    SETTLE_TIMEOUT,
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    LogQuery,
    Scheduler,
    Stream,
    final_if_settled,
)
from asyncsched.schedulers.events import AppEvent, EventKind
from asyncsched.schedulers.shared.changes import ChangeNotifier, ChangeSignal
from asyncsched.schedulers.shared.closing_iterator import (
    ClosingIterator,
    aclose_iterator,
)
from asyncsched.schedulers.shared.current_burst import (
    burst_restart,
    restart_cursor,
    stamp_burst,
)
from asyncsched.schedulers.shared.cursor import (
    cursor_source,
    decode_cursor,
    encode_cursor,
)
from asyncsched.schedulers.shared.event_diff import SnapshotDiffer, replica_key
from asyncsched.schedulers.shared.event_history import EventHistory
from asyncsched.schedulers.shared.factory import keyword_params
from asyncsched.schedulers.shared.follow import FOLLOW_CHUNK, Follow, follow_file
from asyncsched.schedulers.shared.ids import make_unique
from asyncsched.schedulers.shared.lifecycle import AsyncClosable
from asyncsched.schedulers.shared.lines import (
    DEFAULT_MAX_LINE_BYTES,
    LineAssembler,
    LineSplitter,
    assemble_lines,
    check_max_line_bytes,
    filter_regex,
    split_lines,
    split_lines_iterator,
)
from asyncsched.schedulers.shared.messages import (
    app_failure_message,
    failed_replica_message,
    replica_exit_message,
)
from asyncsched.schedulers.shared.poll_events import PolledEvents
from asyncsched.schedulers.shared.replica_limits import ReplicaLimits, render_off_loop
from asyncsched.schedulers.shared.taskhost import TaskHost, describe_error
from asyncsched.schedulers.shared.undo import (
    UNDO_TIMEOUT,
    Undo,
    UndoSteps,
    all_or_nothing,
)
from asyncsched.schedulers.snapshot import AppSnapshot, ReplicaSnapshot

__all__ = (
    "AppEvent",
    "AppSnapshot",
    "AsyncClosable",
    "CLOSE_TIMEOUT",
    "Capabilities",
    "ChangeNotifier",
    "ChangeSignal",
    "ClosingIterator",
    "DAYS_IN_2_WEEKS",
    "DEFAULT_MAX_LINE_BYTES",
    "DescribeAppResponse",
    "EventHistory",
    "EventKind",
    "FOLLOW_CHUNK",
    "Follow",
    "LineAssembler",
    "LineSplitter",
    "ListAppResponse",
    "LogQuery",
    "PolledEvents",
    "ReplicaLimits",
    "ReplicaSnapshot",
    "SETTLE_TIMEOUT",
    "Scheduler",
    "SnapshotDiffer",
    "Stream",
    "TaskHost",
    "UNDO_TIMEOUT",
    "Undo",
    "UndoSteps",
    "aclose_iterator",
    "all_or_nothing",
    "app_failure_message",
    "assemble_lines",
    "burst_restart",
    "check_max_line_bytes",
    "cursor_source",
    "decode_cursor",
    "describe_error",
    "encode_cursor",
    "failed_replica_message",
    "filter_regex",
    "final_if_settled",
    "follow_file",
    "keyword_params",
    "make_unique",
    "render_off_loop",
    "replica_exit_message",
    "replica_key",
    "restart_cursor",
    "split_lines",
    "split_lines_iterator",
    "stamp_burst",
)
