"""If any replica of any role fails to start, submit raises and nothing keeps running."""

from __future__ import annotations

from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.errors import SubmitError
from asyncsched.schedulers.local_scheduler import LocalScheduler
from tests.local._helpers import child_pids
from tests.local.conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("error", [OSError("exec failed"), ValueError("bad value")])
async def test_a_replica_failing_to_start_stops_every_started_one(
    anyio_backend: str,
    error: Exception,
    log_dir: Path,
) -> None:
    others: set[int] = set()
    started: set[int] = set()

    def before_spawn(role: str, replica_id: int) -> None:
        if role == "first" and replica_id == 0:
            others.update(child_pids())
        if role == "second" and replica_id == 1:
            # the three replicas started so far are our new children
            started.update(child_pids() - others)
            raise error

    app = app_of(
        sh_role("sleep 30", name="first", replicas=2),
        sh_role("sleep 30", name="second", replicas=2),
    )
    async with LocalScheduler(
        "aon", close_grace=0.5, before_spawn=before_spawn
    ) as sched:
        with pytest.raises(SubmitError, match=str(error)):
            await sched.submit(app, {"log_dir": str(log_dir)})
        assert len(started) == 3
        # killed and reaped before submit returned
        assert not any(psutil.pid_exists(pid) for pid in started)
        assert await sched.list() == []
        assert list((log_dir / "aon").iterdir()) == []
        # the scheduler is still usable
        app_id = await sched.submit(
            app_of(sh_role("exit 0")), {"log_dir": str(log_dir)}
        )
        with anyio.fail_after(10):
            desc = await sched.wait(app_id)
        assert desc is not None
        assert desc.state.name == "SUCCEEDED"
