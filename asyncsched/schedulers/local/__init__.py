"""The local backend (``local_cwd``, ``local_dir``): replicas as supervised processes.

This package is the backend's public face; :mod:`asyncsched.schedulers.local_scheduler`
(TorchX's module path) re-exports it. Private modules:
``_scheduler`` (the thin ``Scheduler`` class), ``_opts`` (run options),
``_env`` (environment and PATH), ``_gpus`` (GPU count and the CUDA split),
``_process`` (spawn, reap, kill, parent-death protection), ``_logs`` (pipe
readers, line-time index, reading and tailing), ``_records`` (on-disk app
records for other processes), ``_remote`` (apps of other processes),
``_retention`` (pruning finished apps), ``_state`` (replica/app state rules and
retries) and ``_local_app`` (one running app).

Example:
    >>> from asyncsched.schedulers.local import LocalScheduler, Retention
    >>> sched = LocalScheduler("demo", retention=Retention(max_apps=10))
"""

from __future__ import annotations

from asyncsched.schedulers.local._faults import LocalFaults
from asyncsched.schedulers.local._opts import LocalOpts
from asyncsched.schedulers.local._retention import PruneReport, Retention, prune
from asyncsched.schedulers.local._scheduler import (
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    LocalScheduler,
    PopenRequest,
    ReplicaParam,
    create_cwd_scheduler,
    create_dir_scheduler,
    create_scheduler,
    join_PATH,
)

__all__ = [
    "CWDImageProvider",
    "ImageProvider",
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
