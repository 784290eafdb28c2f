"""TorchX's module path for the local backend (``local_cwd``, ``local_dir``).

The backend's public face is :mod:`asyncsched.schedulers.local`; this module
re-exports it so code written for ``torchx.schedulers.local_scheduler``
keeps its imports. As there, ``make_unique`` is an attribute of this module
that tests may patch to pin app ids.

Example:
    >>> from asyncsched.schedulers.local_scheduler import LocalScheduler
"""

from __future__ import annotations

from asyncsched.schedulers import local as _backend
from asyncsched.schedulers.local import *
from asyncsched.schedulers.shared.ids import make_unique  # noqa: F401 - patchable

__all__ = _backend.__all__
