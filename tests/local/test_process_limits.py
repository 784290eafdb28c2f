"""Local limits: the open-file limit, ``resource.memMB`` and the ``time_limit`` run
option, on real processes."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import AsyncschedWarning, InvalidRunConfigException
from asyncsched.schedulers.local._capacity import default_max_running_replicas
from asyncsched.schedulers.local._oom import has_oom_marker
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, CfgVal, Resource, StatusReason

from ._helpers import IGNORES_TERM, finished_record, lines, running, until_ready
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
        async with LocalScheduler("limits", raise_nofile=sys.argv[1] == "1") as sched:
            role = Role("n", image="/", entrypoint="sh", args=["-c", "ulimit -Sn"])
            app_id = await sched.submit(AppDef("n", roles=[role]), {})
            await sched.wait(app_id, timeout=60)
            child = [line async for line in sched.log_iter(app_id, "n")]
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            print(json.dumps({
                "soft": soft,
                "hard": hard,
                "max_running_replicas": sched.max_running_replicas,
                "child": child,
            }))

    anyio.run(main)
    """
)


def _probe_under(
    soft: int, hard: int, *, raise_nofile: bool, path: str | None = None
) -> dict[str, object]:
    """Run the probe in a fresh interpreter started with these limits (and PATH)."""
    prlimit = shutil.which("prlimit")
    assert prlimit is not None
    env = dict(os.environ, PATH=path) if path is not None else None
    result = subprocess.run(
        [
            prlimit,
            f"--nofile={soft}:{hard}",
            "--",
            sys.executable,
            "-c",
            _NOFILE_PROBE,
            "1" if raise_nofile else "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    return dict(json.loads(result.stdout.splitlines()[-1]))


@needs_prlimit
async def test_soft_open_file_limit_is_raised_and_replicas_get_the_original() -> None:
    probe = await anyio.to_thread.run_sync(
        functools.partial(_probe_under, 1024, 4096, raise_nofile=True)
    )
    assert (probe["soft"], probe["hard"]) == (4096, 4096)
    assert probe["max_running_replicas"] == default_max_running_replicas(4096)
    assert probe["max_running_replicas"] == 1269  # not 245
    assert probe["child"] == ["1024\n"]


@needs_prlimit
async def test_without_prlimit_replicas_inherit_the_raised_limit(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with sh but without prlimit
    bin_dir.mkdir()
    sh = shutil.which("sh")
    assert sh is not None
    (bin_dir / "sh").symlink_to(sh)
    probe = await anyio.to_thread.run_sync(
        functools.partial(
            _probe_under, 1024, 4096, raise_nofile=True, path=str(bin_dir)
        )
    )
    assert probe["soft"] == 4096
    assert probe["child"] == ["4096\n"]


def _soft_nofile_after(code: str) -> int:
    """The soft open-file limit after ``code`` ran in a fresh interpreter (1024:4096)."""
    prlimit = shutil.which("prlimit")
    assert prlimit is not None
    script = (
        f"import resource\n{code}\nprint(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    result = subprocess.run(
        [prlimit, "--nofile=1024:4096", "--", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(result.stdout.split()[-1])


@needs_prlimit
async def test_open_file_limit_is_raised_with_an_explicit_max_running_replicas() -> (
    None
):
    code = (
        "from asyncsched.schedulers.local_scheduler import LocalScheduler\n"
        "LocalScheduler('limits', max_running_replicas=5)"
    )
    assert await anyio.to_thread.run_sync(_soft_nofile_after, code) == 4096


@needs_prlimit
async def test_raise_nofile_false_leaves_the_open_file_limit_alone() -> None:
    probe = await anyio.to_thread.run_sync(
        functools.partial(_probe_under, 1024, 4096, raise_nofile=False)
    )
    assert (probe["soft"], probe["hard"]) == (1024, 4096)
    assert probe["max_running_replicas"] == 245
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
async def test_mem_mb_is_the_replicas_data_limit_in_mib(
    sched: LocalScheduler, log_dir: Path
) -> None:
    role = sh_role("ulimit -S -d; ulimit -H -d")  # in KiB
    role.resource = Resource(cpu=1, gpu=0, memMB=64)
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    assert (await _final(sched, app_id))[0] == AppState.SUCCEEDED
    assert await lines(sched, app_id) == ["65536\n", "65536\n"]


@needs_prlimit
async def test_out_of_memory_is_retried_like_any_failure(
    sched: LocalScheduler, log_dir: Path
) -> None:
    role = py_role(_ALLOCATE, max_retries=1)
    role.resource = Resource(cpu=1, gpu=0, memMB=64)
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    state, replicas = await _final(sched, app_id)
    assert (state, replicas) == (
        AppState.FAILED,
        [(AppState.FAILED, StatusReason.OOM_KILLED)],
    )
    status = await sched.describe(app_id)
    assert status is not None
    assert status.roles_statuses[0].replicas[0].num_restarts == 1


@needs_prlimit
async def test_a_caught_memory_error_is_reported_by_its_exit_code(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = f"try:\n    {_ALLOCATE}\nexcept MemoryError:\n    raise SystemExit(3)"
    role = py_role(code)
    role.resource = Resource(cpu=1, gpu=0, memMB=64)
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    assert await _final(sched, app_id) == (
        AppState.FAILED,
        [(AppState.FAILED, StatusReason.EXIT_CODE)],
    )


@pytest.mark.parametrize(
    "words",
    [
        b"Traceback (most recent call last):\nMemoryError\n",
        b"fatal error: runtime: out of memory\n",
        b"bash: fork: Cannot allocate memory\n",
        b"terminate called after throwing an instance of 'std::bad_alloc'\n",
        b"memory allocation of 1048576 bytes failed\n",
        b'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n',
    ],
)
def test_out_of_memory_words_of_each_runtime_are_recognised(words: bytes) -> None:
    assert has_oom_marker(words)
    assert not has_oom_marker(b"ValueError: bad input\n")


async def test_dry_run_warns_when_mem_mb_cannot_be_enforced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with sh but without prlimit
    bin_dir.mkdir()
    sh = shutil.which("sh")
    assert sh is not None
    (bin_dir / "sh").symlink_to(sh)
    monkeypatch.setenv("PATH", str(bin_dir))
    role = sh_role("true")
    role.resource = Resource(cpu=1, gpu=0, memMB=64)
    async with LocalScheduler("test") as sched:
        with pytest.warns(AsyncschedWarning, match="memMB is not enforced"):
            await sched.submit_dryrun(app_of(role), {})


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
        cfg: dict[str, CfgVal] = {"log_dir": str(log_dir), "time_limit": 2}
        app_id = await sched.submit(app, cfg)
        await until_ready(sched, app_id)  # SIGTERM is ignored from now on
        desc = await sched.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.RUNNING  # the limit has not passed yet
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
        assert "time limit of 2 s" in status.msg
        assert status.roles_statuses[0].replicas[0].exit_code == 137
    async with LocalScheduler("test") as other:
        assert await _final(other, app_id) == (state, replicas)


async def test_cancel_before_the_time_limit_wins(
    sched: LocalScheduler, log_dir: Path
) -> None:
    # the replica ignores SIGTERM: the limit passes during the cancel's grace
    cfg: dict[str, CfgVal] = {"log_dir": str(log_dir), "time_limit": 1}
    app_id = await sched.submit(app_of(sh_role(IGNORES_TERM)), cfg)
    await until_ready(sched, app_id)
    await sched.cancel(app_id)
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.ui_url is not None
    rec = await finished_record(Path(desc.ui_url.removeprefix("file://")))
    assert [r["state"] for r in rec["roles"]["worker"]] == ["CANCELLED"]
    assert await _final(sched, app_id) == (
        AppState.CANCELLED,
        [(AppState.CANCELLED, StatusReason.CANCELLED)],
    )


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
