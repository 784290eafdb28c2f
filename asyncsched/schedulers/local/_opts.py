"""The local backend's run options as a TypedDict (TorchX's ``LocalOpts``).

Keys and types mirror ``LocalScheduler.run_opts()``; ``fail_fast`` (TorchX
never stops surviving replicas), ``time_limit`` and ``enforce_memory`` are
asyncsched additions.

Example:
    >>> cfg: LocalOpts = {"log_dir": "/tmp/logs", "prepend_cwd": True}
"""

from __future__ import annotations

from typing import TypedDict

__all__ = ["LocalOpts"]


class LocalOpts(TypedDict, total=False):
    """Run options of the ``local_cwd``/``local_dir`` schedulers."""

    log_dir: str | None
    prepend_cwd: bool
    auto_set_cuda_visible_devices: bool
    fail_fast: bool
    time_limit: int | None
    enforce_memory: bool
