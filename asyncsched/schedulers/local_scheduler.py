"""TorchX's module path for the local backend (``local_cwd``, ``local_dir``).

The backend's public face is :mod:`asyncsched.schedulers.local`; this module
re-exports its TorchX names so code written for
``torchx.schedulers.local_scheduler`` keeps its imports. As there,
``make_unique`` is an attribute of this module that tests may patch to pin app ids.

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
from asyncsched.schedulers.shared.ids import make_unique  # noqa: F401 - patchable

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
