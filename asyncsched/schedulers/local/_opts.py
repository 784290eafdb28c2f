"""The local backend's run options as a TypedDict (TorchX's ``LocalOpts``).

Keys and types mirror ``LocalScheduler.run_opts()``; ``fail_fast`` (TorchX
never stops surviving replicas), ``time_limit`` and ``enforce_memory`` are
asyncsched additions.

Example:
    >>> cfg: LocalOpts = {"log_dir": "/tmp/logs", "prepend_cwd": True}
    >>> local_run_opts().get("fail_fast").default
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypedDict

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.local._retention import managed_logs_dir
from asyncsched.schedulers.shared.run_options import add_fail_fast
from asyncsched.specs import CfgVal, runopts

__all__ = ["LocalOpts", "base_log_dir", "local_run_opts"]


class LocalOpts(TypedDict, total=False):
    """Run options of the ``local_cwd``/``local_dir`` schedulers."""

    log_dir: str | None
    prepend_cwd: bool
    auto_set_cuda_visible_devices: bool
    fail_fast: bool
    time_limit: int | None
    enforce_memory: bool
    detach: bool


def local_run_opts() -> runopts:
    """The run options of the local schedulers, as ``run_opts()`` lists them."""
    opts = runopts()
    opts.add(
        "log_dir",
        type_=str,
        default=None,
        help="dir to write stdout/stderr logs of replicas (default: a temp dir"
        " removed when the scheduler closes)",
    )
    opts.add(
        "prepend_cwd",
        type_=bool,
        default=False,
        help="if set, prepends CWD to replica's PATH env var making any binaries"
        " in CWD take precedence over those in PATH",
    )
    opts.add(
        "auto_set_cuda_visible_devices",
        type_=bool,
        default=False,
        help="sets CUDA_VISIBLE_DEVICES for roles that request GPU resources;"
        " each replica gets its own GPUs (all or nothing)",
    )
    add_fail_fast(opts)
    opts.add(
        "time_limit",
        type_=int,
        default=None,
        help="seconds the app may run, counted from its start (restarts"
        " included); then its replicas are stopped (SIGTERM, SIGKILL after"
        " cancel_grace) and the app FAILS with reason TIME_LIMIT",
    )
    opts.add(
        "enforce_memory",
        type_=bool,
        default=True,
        help="limit each replica's memory to its role's resource.memMB"
        " (RLIMIT_DATA, an approximation: see docs/backends/local.md); a"
        " replica that runs out FAILS with reason OOM_KILLED",
    )
    opts.add(
        "detach",
        type_=bool,
        default=False,
        help="supervise the app from a process of its own, so that its replicas"
        " keep running when the submitting process exits or is killed; any"
        " process of the same user can then describe, wait, read the logs of,"
        " follow the events of and cancel it (default: the replicas end with"
        " the submitting process)",
    )
    return opts


def base_log_dir(cfg: Mapping[str, CfgVal], state_dir: str) -> str:
    """Where an app's logs go: the ``log_dir`` run option, else the state dir's
    ``logs`` folder.

    Raises:
        InvalidRunConfigException: ``log_dir`` is not a writable directory.
    """
    log_dir = cfg.get("log_dir")
    if isinstance(log_dir, str) and log_dir:
        path = os.path.abspath(os.path.expanduser(log_dir))
        probe = path
        while not os.path.exists(probe):
            probe = os.path.dirname(probe)
        if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
            raise InvalidRunConfigException(
                f"Run option: log_dir, {path!r} is not a writable directory"
                f" ({probe!r} is not writable)",
                "log_dir",
                dict(cfg),
            )
        return path
    return managed_logs_dir(state_dir)
