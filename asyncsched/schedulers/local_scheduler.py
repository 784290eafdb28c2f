"""TorchX's module path for the local backend (``local_cwd``, ``local_dir``).

The backend's public face is :mod:`asyncsched.schedulers.local`; this module
re-exports its TorchX names so code written for
``torchx.schedulers.local_scheduler`` keeps its imports.

Example:
    >>> from asyncsched.schedulers.local_scheduler import LocalScheduler
"""

from __future__ import annotations

from asyncsched.schedulers.local import (
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    LocalOpts,
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
    "LocalOpts",
    "LocalScheduler",
    "PopenRequest",
    "ReplicaParam",
    "create_cwd_scheduler",
    "create_dir_scheduler",
    "create_scheduler",
    "join_PATH",
]
