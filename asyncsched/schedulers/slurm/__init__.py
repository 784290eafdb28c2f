"""The Slurm backend (``slurm``); import it from :mod:`asyncsched.schedulers.slurm_scheduler`."""

from __future__ import annotations

__all__: list[str] = []
