"""A terminal state never changes: cancel after failure, remote cancel of a clean exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import IGNORES_TERM, finished_record, until_ready
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


# a terminal state never changes
async def test_cancel_of_failed_app_keeps_failed(log_dir: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    async with LocalScheduler("s", cancel_grace=0.5) as s:
        app = app_of(
            sh_role(f"while [ ! -e {go} ]; do sleep 0.01; done; exit 1", name="bad"),
            sh_role(IGNORES_TERM, name="stub"),
        )
        app_id = await s.submit(app, {"log_dir": str(log_dir)})
        await until_ready(s, app_id, "stub")
        go.touch()
        desc = await s.wait(app_id, timeout=10)
        assert desc is not None
        assert desc.state == AppState.FAILED
        await s.cancel(app_id)  # the stub is still in its SIGTERM grace
        desc = await s.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert "exited with code 1" in desc.msg
        rec = await finished_record(log_dir / "s" / app_id)
        assert rec["state"] == "FAILED"
        desc = await s.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.FAILED
        states = {r.role: r.state for rs in desc.roles_statuses for r in rs.replicas}
        assert states == {"bad": AppState.FAILED, "stub": AppState.CANCELLED}


# a cancel from another process of the session
async def test_remote_cancel_of_replica_exiting_0_on_sigterm(log_dir: Path) -> None:
    script = "trap 'exit 0' TERM; echo up; while true; do sleep 0.05; done"
    async with (
        LocalScheduler("s", cancel_grace=2) as s,
        LocalScheduler("s", cancel_grace=2) as other,
    ):
        app_id = await s.submit(app_of(sh_role(script)), {"log_dir": str(log_dir)})
        await until_ready(s, app_id)
        await other.cancel(app_id)
        desc = await s.wait(app_id, timeout=5)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        assert desc.roles_statuses[0].replicas[0].exit_code == 0
