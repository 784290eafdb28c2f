"""Local limits: the open-file limit, ``resource.memMB`` and the ``time_limit`` run
option, on real processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.local._capacity import default_max_running_replicas
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, CfgVal, Resource, StatusReason

from ._helpers import IGNORES_TERM, running
from .conftest import app_of, py_role, sh_role

pytestmark = pytest.mark.anyio

needs_prlimit = pytest.mark.skipif(
    shutil.which("prlimit") is None, reason="util-linux prlimit is not installed"
)

_NOFILE_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import anyio
    from asyncsched.schedulers.local_scheduler import LocalScheduler
    from asyncsched.specs import AppDef, Role

    async def main():
        async with LocalScheduler("limits") as sched:
            role = Role("n", image="/", entrypoint="sh", args=["-c", "ulimit -Sn"])
            app_id = await sched.submit(AppDef("n", roles=[role]), {})
            await sched.wait(app_id, timeout=60)
            child = [line async for line in sched.log_iter(app_id, "n")]
            print(json.dumps({
                "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                "max_running_replicas": sched.max_running_replicas,
                "child": child,
            }))

    anyio.run(main)
    """
)


def _probe_under(soft: int, hard: int) -> dict[str, object]:
    """Run the probe in a fresh interpreter started with these limits."""
    result = subprocess.run(
        [
            "prlimit",
            f"--nofile={soft}:{hard}",
            "--",
            sys.executable,
            "-c",
            _NOFILE_PROBE,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(result.stdout.splitlines()[-1]))


@needs_prlimit
async def test_soft_open_file_limit_is_raised_and_replicas_get_the_original() -> None:
    probe = await anyio.to_thread.run_sync(_probe_under, 1024, 4096)
    assert probe["soft"] == 4096
    assert probe["max_running_replicas"] == default_max_running_replicas(4096)
    assert probe["max_running_replicas"] == 426  # not 85
    assert probe["child"] == ["1024\n"]


async def _final(sched: LocalScheduler, app_id: str) -> tuple[AppState, list[object]]:
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    return desc.state, [
        (r.state, r.reason) for role in desc.roles_statuses for r in role.replicas
    ]


_ALLOCATE = "b = bytearray(200 * 2**20); print('allocated')"


@needs_prlimit
async def test_replica_over_its_memory_limit_fails_with_oom_killed(
    sched: LocalScheduler, log_dir: Path
) -> None:
    role = py_role(_ALLOCATE)
    role.resource = Resource(cpu=1, gpu=0, memMB=64)
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    state, replicas = await _final(sched, app_id)
    assert state == AppState.FAILED
    assert replicas == [(AppState.FAILED, StatusReason.OOM_KILLED)]
    status = await sched.describe(app_id)
    assert status is not None
    assert "64 MB" in status.msg
    # another process reads the same reason from the app's record
    async with LocalScheduler("test") as other:
        assert await _final(other, app_id) == (state, replicas)


@needs_prlimit
async def test_replica_within_its_memory_limit_succeeds(
    sched: LocalScheduler, log_dir: Path
) -> None:
    role = py_role(_ALLOCATE)
    role.resource = Resource(cpu=1, gpu=0, memMB=512)
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    assert await _final(sched, app_id) == (
        AppState.SUCCEEDED,
        [(AppState.SUCCEEDED, None)],
    )


async def test_enforce_memory_off_lets_a_replica_exceed_mem_mb(
    sched: LocalScheduler, log_dir: Path
) -> None:
    role = py_role(_ALLOCATE)
    role.resource = Resource(cpu=1, gpu=0, memMB=64)
    cfg: dict[str, CfgVal] = {"log_dir": str(log_dir), "enforce_memory": False}
    app_id = await sched.submit(app_of(role), cfg)
    assert (await _final(sched, app_id))[0] == AppState.SUCCEEDED


async def test_dry_run_shows_memory_and_time_limits(sched: LocalScheduler) -> None:
    role = sh_role("true")
    role.resource = Resource(cpu=1, gpu=0, memMB=64)
    info = await sched.submit_dryrun(app_of(role), {"time_limit": 30})
    assert info.request.memory_mb == {"worker": 64}
    assert info.request.time_limit == 30


async def test_time_limit_stops_the_app_with_time_limit_reason(
    log_dir: Path,
) -> None:
    async with LocalScheduler("test", cancel_grace=0.5) as sched:
        app = app_of(sh_role(IGNORES_TERM), sh_role("exit 0", name="quick"))
        cfg: dict[str, CfgVal] = {"log_dir": str(log_dir), "time_limit": 1}
        app_id = await sched.submit(app, cfg)
        desc = await sched.describe(app_id)
        assert desc is not None
        pid = desc.roles_statuses[0].replicas[0].pid
        assert pid is not None
        state, replicas = await _final(sched, app_id)
        assert state == AppState.FAILED
        assert replicas == [
            (AppState.FAILED, StatusReason.TIME_LIMIT),
            (AppState.SUCCEEDED, None),
        ]
        assert not running(pid)  # SIGKILLed after the grace
        status = await sched.describe(app_id)
        assert status is not None
        assert "time limit of 1 s" in status.msg
    async with LocalScheduler("test") as other:
        assert await _final(other, app_id) == (state, replicas)


async def test_app_ending_within_its_time_limit_is_untouched(
    sched: LocalScheduler, log_dir: Path
) -> None:
    cfg: dict[str, CfgVal] = {"log_dir": str(log_dir), "time_limit": 3600}
    app_id = await sched.submit(app_of(sh_role("exit 3")), cfg)
    assert await _final(sched, app_id) == (
        AppState.FAILED,
        [(AppState.FAILED, StatusReason.EXIT_CODE)],
    )


@pytest.mark.parametrize("value", [0, -5, "10"])
async def test_time_limit_must_be_whole_seconds_above_zero(
    sched: LocalScheduler, value: object
) -> None:
    with pytest.raises(InvalidRunConfigException, match="time_limit"):
        await sched.submit_dryrun(app_of(sh_role("true")), {"time_limit": value})  # type: ignore[dict-item]
