"""The Slurm backend (``slurm``): batch jobs through Slurm's commands.

This package is the backend's public face;
:mod:`asyncsched.schedulers.slurm_scheduler` (TorchX's module path) re-exports
it. It needs no extra: the backend shells out to ``sbatch``, ``squeue``,
``sacct`` and ``scancel``.

Example:
    >>> from asyncsched.schedulers.slurm import SlurmScheduler
    >>> SlurmScheduler("demo").backend
    'slurm'
"""

from __future__ import annotations

from asyncsched.schedulers.slurm._opts import SlurmOpts
from asyncsched.schedulers.slurm._render import SlurmBatchRequest, SlurmReplicaRequest
from asyncsched.schedulers.slurm._scheduler import SlurmScheduler, create_scheduler

__all__ = [
    "SlurmBatchRequest",
    "SlurmOpts",
    "SlurmReplicaRequest",
    "SlurmScheduler",
    "create_scheduler",
]
