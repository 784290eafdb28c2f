"""Restarting failed replicas by retry policy, until retries run out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, RetryPolicy, Role

from ._helpers import lines, run
from .conftest import app_of, py_role

pytestmark = pytest.mark.anyio


FLAKY = (
    "import os, sys\n"
    "p = os.path.join(sys.argv[1], os.environ['ASYNCSCHED_ROLE_NAME'] + os.environ['ASYNCSCHED_REPLICA_ID'])\n"
    "n = int(open(p).read()) if os.path.exists(p) else 0\n"
    # atomic: a replica SIGTERMed by a restart must not leave an empty file
    "t = sys.argv[1] + '-' + os.path.basename(p) + '.tmp'\n"
    "open(t, 'w').write(str(n + 1))\n"
    "os.replace(t, p)\n"
    "print('attempt', n)\n"
    "fail = os.environ['ASYNCSCHED_REPLICA_ID'] == '0' and n < int(sys.argv[2])\n"
    "sys.exit(1 if fail else 0)\n"
)


def flaky(
    tmp: Path, fails: int, policy: RetryPolicy, retries: int, replicas: int = 2
) -> Role:
    role = py_role(FLAKY, replicas=replicas, max_retries=retries, retry_policy=policy)
    role.args += [str(tmp), str(fails)]
    return role


def counts(tmp: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in tmp.iterdir()}


@pytest.mark.parametrize(
    ("policy", "expected_runs"),
    [
        (RetryPolicy.REPLICA, {"worker0": 2, "worker1": 0}),
        (RetryPolicy.ROLE, {"worker0": 2, "worker1": 2}),
        (RetryPolicy.APPLICATION, {"worker0": 2, "worker1": 2, "other0": 2}),
    ],
)
async def test_retry_policies(
    sched: LocalScheduler,
    log_dir: Path,
    tmp_path: Path,
    policy: RetryPolicy,
    expected_runs: dict[str, int],
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    other = py_role(FLAKY, name="other")
    other.args += [str(marks), "0"]
    roles = [flaky(marks, 2, policy, 2)]
    if policy == RetryPolicy.APPLICATION:
        roles.append(other)
    app_id, state = await run(sched, app_of(*roles), {"log_dir": str(log_dir)})
    assert state == AppState.SUCCEEDED
    assert counts(marks)["worker0"] == 3
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.num_restarts == 2
    restarts = {
        f"{rs.role}{r.id}": r.num_restarts
        for rs in desc.roles_statuses
        for r in rs.replicas
    }
    assert restarts == expected_runs
    assert await lines(sched, app_id) == ["attempt 0\n", "attempt 1\n", "attempt 2\n"]
    record = json.loads((log_dir / "test" / app_id / "app.json").read_text())
    assert len(record["roles"]["worker"][0]["attempts"]) == 3
    assert [a["exit_code"] for a in record["roles"]["worker"][0]["attempts"]] == [
        1,
        1,
        0,
    ]


async def test_retries_exhausted_fail(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    role = flaky(marks, 5, RetryPolicy.REPLICA, 1, replicas=1)
    _, state = await run(sched, app_of(role), {"log_dir": str(log_dir)})
    assert state == AppState.FAILED
    assert counts(marks)["worker0"] == 2
