"""Public Scheduler methods live once, in the base class; backends fill hooks."""

from __future__ import annotations

import pytest

from asyncsched.schedulers.api import Scheduler
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.testing import InMemoryScheduler

BACKENDS = [
    DockerScheduler,
    InMemoryScheduler,
    KubernetesScheduler,
    LocalScheduler,
    SlurmScheduler,
]
PUBLIC = [
    "aclose",
    "cancel",
    "describe",
    "exists",
    "list",
    "log_iter",
    "schedule",
    "submit",
    "submit_dryrun",
    "wait",
]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda c: c.__name__)
def test_no_backend_overrides_a_public_method(backend: type[Scheduler[object]]) -> None:
    overridden = [
        name
        for name in PUBLIC
        if getattr(backend, name) is not getattr(Scheduler, name)
    ]
    assert overridden == []


def test_wait_and_state_rollup_are_not_backend_hooks() -> None:
    for backend in BACKENDS:
        assert "_wait" not in vars(backend), backend.__name__
