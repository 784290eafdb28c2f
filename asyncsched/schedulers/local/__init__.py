"""The local backend (``local_cwd``, ``local_dir``): replicas as supervised processes.

Public names are re-exported by :mod:`asyncsched.schedulers.local_scheduler`
(TorchX's module path). Private modules: ``_scheduler`` (the thin
``Scheduler`` class), ``_env`` (environment and PATH), ``_gpus`` (GPU count and
the CUDA split), ``_process`` (spawn, reap, kill, parent-death protection),
``_logs`` (pipe readers, line-time index, reading and tailing), ``_records``
(on-disk app records for other processes), ``_remote`` (apps of other
processes), ``_state`` (replica/app state rules and retries) and
``_supervisor`` (one running app).
"""

from __future__ import annotations

__all__: list[str] = []
