"""The caches' expiry sweep runs in steps and never undoes a change made between them."""

from __future__ import annotations

import time
from typing import Any, cast

from asyncsched.schedulers.kubernetes._caches import Caches
from asyncsched.schedulers.shared.changes import ChangeNotifier
from asyncsched.specs import AppState


def _finished_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def _caches_with_finished_jobs(n: int) -> Caches:
    caches = Caches(cast(Any, None), "ns", changes=ChangeNotifier(), live=False)
    for i in range(n):
        caches.batch.put(f"job-{i}", _finished_job(f"job-{i}"))
    return caches


def test_sweep_of_many_apps_runs_in_steps_of_the_batch_size() -> None:
    caches = _caches_with_finished_jobs(600)
    steps = list(
        caches.sweep_steps(
            0.0, lambda kind, jobs: AppState.SUCCEEDED, now=time.monotonic(), batch=100
        )
    )
    assert steps[:6] == [100] * 6  # the caller may yield to the loop between them
    assert sum(steps) == 600
    assert all(caches.is_expired(f"ns:job-{i}") for i in range(600))


def test_a_job_deleted_between_sweep_steps_is_not_brought_back() -> None:
    caches = _caches_with_finished_jobs(600)
    steps = caches.sweep_steps(
        0.0, lambda kind, jobs: AppState.SUCCEEDED, now=time.monotonic(), batch=100
    )
    assert next(steps) == 100
    # meanwhile the watch reports every job not swept yet as deleted
    for name, job in list(caches.batch.objects.items()):
        if not caches.is_expired(caches.key(job)):
            caches.batch.discard(name)
    assert sum(steps) == 0
    assert len(caches.batch.objects) == 100  # only the stubs of the swept apps
    assert all(caches.is_expired(caches.key(j)) for j in caches.batch.objects.values())
