"""If any replica of any role fails to start, submit raises and nothing keeps running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from asyncsched.errors import SubmitError
from asyncsched.schedulers.local import _scheduler
from asyncsched.schedulers.local_scheduler import LocalScheduler
from tests.local.conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("error", [OSError("exec failed"), ValueError("bad value")])
async def test_a_replica_failing_to_start_stops_every_started_one(
    anyio_backend: str,
    error: Exception,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = _scheduler.spawn_child  # type: ignore[attr-defined]
    started: list[int] = []

    def spawn_child(launch: Any, cfg: Any) -> Any:
        if launch.role == "second" and launch.replica_id == 1:
            raise error
        st = original(launch, cfg)
        started.append(st.child.pid)
        return st

    monkeypatch.setattr(_scheduler, "spawn_child", spawn_child)
    app = app_of(
        sh_role("sleep 30", name="first", replicas=2),
        sh_role("sleep 30", name="second", replicas=2),
    )
    async with LocalScheduler("aon", close_grace=0.5) as sched:
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
