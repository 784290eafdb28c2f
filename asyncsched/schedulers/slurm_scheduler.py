"""TorchX's module path for the Slurm backend (``slurm``).

The backend's public face is :mod:`asyncsched.schedulers.slurm`; this module
re-exports it so code written for ``torchx.schedulers.slurm_scheduler`` keeps
its imports. It needs no extra: the backend shells out to Slurm's commands.

Example:
    >>> from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
    >>> SlurmScheduler("demo").backend
    'slurm'
"""

from __future__ import annotations

from asyncsched.schedulers import slurm as _backend
from asyncsched.schedulers.slurm import *

__all__ = _backend.__all__
