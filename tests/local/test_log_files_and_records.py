"""Where a finished app's logs and records live, and what they say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import lines, run
from .conftest import app_of, py_role, sh_role

pytestmark = pytest.mark.anyio


async def test_given_log_dir_survives_close(log_dir: Path) -> None:
    async with LocalScheduler("s") as s:
        app_id, _ = await run(s, app_of(sh_role("echo hi")), {"log_dir": str(log_dir)})
    assert (
        log_dir / "s" / app_id / "worker" / "0" / "stdout.log"
    ).read_text() == "hi\n"


async def test_default_logs_live_in_the_state_dir_and_outlive_the_scheduler(
    log_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    async with LocalScheduler("s", state_dir=str(state)) as s:
        app_id, _ = await run(s, app_of(sh_role("echo hi")), {})
        assert await lines(s, app_id) == ["hi\n"]
    app_dir = state / "logs" / "s" / app_id
    assert (app_dir / "worker" / "0" / "stdout.log").read_text() == "hi\n"
    assert (app_dir / "SUCCESS").exists()
    async with LocalScheduler("s", state_dir=str(state)) as later:
        desc = await later.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert await lines(later, app_id) == ["hi\n"]


async def test_success_file(sched: LocalScheduler, log_dir: Path) -> None:
    app_id, _ = await run(
        sched,
        app_of(sh_role("echo hello_world; echo hello_world >&2", replicas=2)),
        {"log_dir": str(log_dir)},
    )
    app_dir = log_dir / "test" / app_id
    success = json.loads((app_dir / "SUCCESS").read_text())
    assert success["app_id"] == app_id
    assert success["log_dir"] == str(app_dir)
    assert success["final_state"] == "SUCCEEDED"
    for i, replica in enumerate(success["roles"]["worker"]):
        assert replica["replica_id"] == i
        assert replica["exitcode"] == 0
        assert Path(replica["stdout"]).read_text() == "hello_world\n"
        assert Path(replica["stderr"]).read_text() == "hello_world\n"


async def test_structured_error_from_error_file(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = (
        "import json, os, sys\n"
        "json.dump({'message': {'message': 'boom', 'errorCode': 7}}, open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w'))\n"
        "sys.exit(1)"
    )
    app_id, _ = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    desc = await sched.describe(app_id)
    assert desc is not None
    assert json.loads(desc.structured_error_msg)["message"]["message"] == "boom"
    assert (
        json.loads(desc.roles_statuses[0].replicas[0].structured_error_msg)["message"][
            "errorCode"
        ]
        == 7
    )
