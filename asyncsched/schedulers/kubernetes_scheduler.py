"""TorchX's module path for the Kubernetes backend (``kubernetes``).

The backend's public face is :mod:`asyncsched.schedulers.kubernetes`; this
module re-exports it. Importing it and calling ``run_opts()`` work without the
``kubernetes`` extra; ``submit_dryrun`` and ``describe`` then raise
:class:`~asyncsched.errors.SchedulerUnavailableError` naming
``pip install 'asyncsched[kubernetes]'``.

Example:
    >>> from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
    >>> KubernetesScheduler("demo").run_opts().get("queue") is not None
    True
"""

from __future__ import annotations

from asyncsched.schedulers import kubernetes as _backend
from asyncsched.schedulers.kubernetes import *

__all__ = _backend.__all__
