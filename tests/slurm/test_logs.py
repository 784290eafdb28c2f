"""Replica logs on a real cluster: follow, finished, streams, regex, errors."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest

from asyncsched.errors import (
    InvalidArgumentError,
    UnknownAppException,
    UnknownReplicaError,
    UnsupportedOperationError,
)
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role

from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


def _app(script: str, replicas: int = 1) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef("logs", roles=[role])


async def test_follow_yields_lines_as_written_until_the_job_ends(
    slurm: SlurmScheduler,
) -> None:
    app_id = await slurm.submit(
        _app("echo a; sleep 1; echo b >&2; echo c; sleep 1; echo d")
    )
    seen: list[str] = []
    with anyio.fail_after(SETTLE):
        async for line in slurm.log_iter(app_id, "worker", should_tail=True):
            seen.append(line)
            if line == "a\n":
                # the job is still running when its first line arrives
                desc = await slurm.describe(app_id)
                assert desc is not None
                assert desc.state == AppState.RUNNING
    # the default stream is the combined one, as on every backend
    assert seen == ["a\n", "b\n", "c\n", "d\n"]


async def test_default_stream_interleaves_stdout_and_stderr_as_written(
    slurm: SlurmScheduler,
) -> None:
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done"
    app_id = await slurm.submit(_app(script))
    await slurm.wait(app_id, timeout=SETTLE)
    want = ["out1\n", "err1\n", "out2\n", "err2\n", "out3\n", "err3\n"]
    assert [line async for line in slurm.log_iter(app_id, "worker")] == want
    combined = slurm.log_iter(app_id, "worker", streams="combined")
    assert [line async for line in combined] == want
    with pytest.raises(InvalidArgumentError, match="not supported"):
        slurm.log_iter(app_id, "worker", streams="stdout")


async def test_since_is_refused_at_the_call_not_ignored(slurm: SlurmScheduler) -> None:
    app_id = await slurm.submit(_app("echo a"))
    assert not slurm.capabilities.log_since_until
    with pytest.raises(UnsupportedOperationError, match="since/until"):
        slurm.log_iter(app_id, "worker", since=datetime.now(UTC))


async def test_finished_logs_per_replica_with_regex(slurm: SlurmScheduler) -> None:
    app_id = await slurm.submit(_app("echo rank=$ASYNCSCHED_REPLICA_ID; echo other", 2))
    await slurm.wait(app_id, timeout=SETTLE)
    for k in range(2):
        lines = [
            line async for line in slurm.log_iter(app_id, "worker", k, regex="^rank")
        ]
        assert lines == [f"rank={k}\n"]


async def test_unknown_replica_and_app_are_named(slurm: SlurmScheduler) -> None:
    app_id = await slurm.submit(_app("true"))
    await slurm.wait(app_id, timeout=SETTLE)
    with pytest.raises(UnknownReplicaError) as info:
        [line async for line in slurm.log_iter(app_id, "worker", 1)]
    assert info.value.roles == ["worker"]
    with pytest.raises(UnknownReplicaError):
        [line async for line in slurm.log_iter(app_id, "nope", 0)]
    with pytest.raises(UnknownAppException):
        [line async for line in slurm.log_iter("999999", "worker", 0)]
