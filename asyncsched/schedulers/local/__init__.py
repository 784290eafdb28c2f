"""The local backend (``local_cwd``, ``local_dir``): replicas as supervised processes.

This package is the backend's public face;
:mod:`asyncsched.schedulers.local_scheduler` (TorchX's module path)
re-exports it. Private modules, one idea each:

* the scheduler: ``_scheduler`` (``LocalScheduler``: hook wiring),
  ``_factories``, ``_opts`` (run options), ``_faults`` (the fault seam);
* submitting: ``_render`` (dry-run request), ``_env`` (environment and PATH),
  ``_gpus``, ``_limits`` (prlimit), ``_capacity`` (replica slots),
  ``_launch`` (plan, spawn all or nothing, undo), ``_app_start`` (one
  admitted app: its supervisor, spawn, watch), ``_spawn`` (one replica
  start), ``_spawner`` (the spawning threads), ``_process`` (process groups,
  reaping, killing, the guardian), ``_runtime`` (start and close order);
* supervising: ``_local_app`` (``LocalApp``: one running app), ``_attempts``
  (a replica's attempts: start, watch, exit, reap), ``_replica``,
  ``_state`` (state rules and retries), ``_exit_facts`` (reply file, cancel
  marker), ``_oom``, ``_reasons``;
* records and reading: ``_record_writer``, ``_records`` (on-disk layout),
  ``_app_table`` (apps in memory, eviction, records of other processes),
  ``_snapshot``, ``_remote`` (apps of other processes), ``_retention``
  (pruning), ``_logs`` (pipe readers, line-time index), ``_log_lines``
  (``log_iter``), ``_log_follow`` (following a log of this process),
  ``_log_window`` (what its followers take from memory), ``_open_files``;
* events: ``_journal`` (the session's event journal on disk),
  ``_journal_writer`` (changes into journal lines, bounds),
  ``_journal_events`` (``events()``: follow the journal).

Example:
    >>> from asyncsched.schedulers.local import LocalScheduler, Retention
    >>> sched = LocalScheduler("demo", retention=Retention(max_apps=10))
"""

from __future__ import annotations

from asyncsched.schedulers.local._env import join_PATH
from asyncsched.schedulers.local._factories import (
    create_cwd_scheduler,
    create_dir_scheduler,
    create_scheduler,
)
from asyncsched.schedulers.local._faults import LocalFaults
from asyncsched.schedulers.local._journal_writer import JournalBounds
from asyncsched.schedulers.local._opts import LocalOpts
from asyncsched.schedulers.local._render import (
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    PopenRequest,
    ReplicaParam,
)
from asyncsched.schedulers.local._retention import PruneReport, Retention, prune
from asyncsched.schedulers.local._scheduler import LocalScheduler

__all__ = [
    "CWDImageProvider",
    "ImageProvider",
    "JournalBounds",
    "LocalDirectoryImageProvider",
    "LocalFaults",
    "LocalOpts",
    "LocalScheduler",
    "PopenRequest",
    "PruneReport",
    "ReplicaParam",
    "Retention",
    "create_cwd_scheduler",
    "create_dir_scheduler",
    "create_scheduler",
    "join_PATH",
    "prune",
]
