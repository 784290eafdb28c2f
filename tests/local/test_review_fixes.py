"""Regression tests of the local backend review: terminal states, cache, aclose races."""

from __future__ import annotations

import calendar
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from asyncsched.errors import SchedulerClosedError, SpecError
from asyncsched.schedulers.local._logs import _as_epoch
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, Role

from .conftest import PY, app_of, py_role, sh_role

IGNORES_TERM = "trap '' TERM; sleep 30"


def record(app_dir: Path) -> dict[str, Any]:
    return dict(json.loads((app_dir / "app.json").read_text()))


async def finished_record(app_dir: Path, timeout: float = 10) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while True:
            with_record = (app_dir / "app.json").exists()
            if with_record and (rec := record(app_dir))["finished"]:
                return rec
            await anyio.sleep(0.05)


def nfds() -> int:
    return len(os.listdir("/proc/self/fd"))


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def exists(pid: int) -> bool:
    """True while ``pid`` exists at all (a zombie too: it was not reaped)."""
    return psutil.pid_exists(pid)


# 1. a terminal state never changes
async def test_cancel_of_failed_app_keeps_failed(log_dir: Path) -> None:
    async with LocalScheduler("s", cancel_grace=0.5) as s:
        app = app_of(
            sh_role("sleep 0.2; exit 1", name="bad"),
            sh_role(IGNORES_TERM, name="stub"),
        )
        app_id = await s.submit(app, {"log_dir": str(log_dir)})
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


# 2. wait() returns on a terminal state: such an app can make room at once
async def test_submit_right_after_wait_with_full_cache(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=1, cancel_grace=0.5) as s:
        first = await s.submit(app_of(sh_role(IGNORES_TERM)), cfg)
        pid = (await s.describe(first)).roles_statuses[0].replicas[0].pid  # type: ignore[union-attr]
        assert pid is not None
        await s.cancel(first)
        desc = await s.wait(first)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        assert running(pid)  # still in its grace
        second = await s.submit(app_of(sh_role("echo b")), cfg)  # evicts `first`
        assert await s.describe(first) is None
        # the evicted app is still supervised: killed after its grace, recorded
        rec = await finished_record(log_dir / "s" / first)
        assert rec["state"] == "CANCELLED"
        assert not exists(pid)
        desc = await s.wait(second, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED


async def test_aclose_stops_an_evicted_app_in_its_grace(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=1, cancel_grace=30, close_grace=0.2) as s:
        first = await s.submit(app_of(sh_role(IGNORES_TERM)), cfg)
        pid = (await s.describe(first)).roles_statuses[0].replicas[0].pid  # type: ignore[union-attr]
        assert pid is not None
        await s.cancel(first)
        await s.wait(first)
        await s.submit(app_of(sh_role("echo b")), cfg)  # evicts `first`
    assert not exists(pid)
    rec = record(log_dir / "s" / first)
    assert rec["finished"]
    assert rec["state"] == "CANCELLED"


# 3. aclose while submits are in flight
@pytest.mark.parametrize("delay", [0.0, 0.003, 0.01, 0.03])
async def test_aclose_during_concurrent_submits(log_dir: Path, delay: float) -> None:
    cfg = {"log_dir": str(log_dir)}
    fds = nfds()
    s = LocalScheduler("s", close_grace=0.5)
    ok: list[tuple[str, bool]] = []
    errors: list[BaseException] = []

    async def submit(i: int) -> None:
        try:
            ok.append((await s.submit(app_of(sh_role(IGNORES_TERM)), cfg), s.closed))
        except Exception as exc:  # noqa: BLE001 -- any other error is the bug
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(submit, i)
        await anyio.sleep(delay)
        await s.aclose()
    assert all(isinstance(e, SchedulerClosedError) for e in errors), errors
    assert len(ok) + len(errors) == 12
    app_dir = log_dir / "s"
    dirs = sorted(os.listdir(app_dir)) if app_dir.exists() else []
    assert dirs == sorted(app_id for app_id, _ in ok)  # no dir without its app
    for app_id in dirs:
        rec = record(app_dir / app_id)
        assert rec["finished"], rec
        assert rec["state"] == "CANCELLED", rec
        for r in rec["roles"]["worker"]:
            assert not exists(r["pid"])
            # the replica ignores SIGTERM: it was killed after close_grace
            assert r["exit_code"] == -9
    assert nfds() == fds


async def test_aclose_while_spawning_undoes_the_submit(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fds = nfds()
    s = LocalScheduler("s", close_grace=0.5)
    spawned: list[int] = []

    async with anyio.create_task_group() as tg:
        orig_run = s._spawner.run

        async def run(*args: Any, **kwargs: Any) -> Any:
            result = await orig_run(*args, **kwargs)
            spawned.extend(st.child.pid for st in result[1])
            tg.start_soon(s.aclose)  # closes while this submit is in flight
            await anyio.sleep(0.05)
            assert s.closed
            return result

        monkeypatch.setattr(s._spawner, "run", run)
        with pytest.raises(SchedulerClosedError):
            await s.submit(
                app_of(sh_role("sleep 30", replicas=2)), {"log_dir": str(log_dir)}
            )
    assert len(spawned) == 2
    assert not any(exists(pid) for pid in spawned)  # killed and reaped
    assert os.listdir(log_dir / "s") == []
    assert nfds() == fds


# 4. a cancel from another process of the session
async def test_remote_cancel_of_replica_exiting_0_on_sigterm(log_dir: Path) -> None:
    script = "trap 'exit 0' TERM; echo up; while true; do sleep 0.05; done"
    async with (
        LocalScheduler("s", cancel_grace=2) as s,
        LocalScheduler("s", cancel_grace=2) as other,
    ):
        app_id = await s.submit(app_of(sh_role(script)), {"log_dir": str(log_dir)})
        with anyio.fail_after(5):
            async for _ in s.log_iter(app_id, "worker", should_tail=True):
                break
        await other.cancel(app_id)
        desc = await s.wait(app_id, timeout=5)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        assert desc.roles_statuses[0].replicas[0].exit_code == 0


# 5. naive since/until are UTC, whatever the local time zone
@pytest.fixture
def new_york_tz() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.usefixtures("new_york_tz")
def test_naive_datetime_is_utc_epoch() -> None:
    naive = datetime(2024, 1, 2, 3, 4, 5)
    assert _as_epoch(naive) == calendar.timegm(naive.timetuple())
    assert _as_epoch(naive.replace(tzinfo=UTC)) == _as_epoch(naive)


@pytest.mark.usefixtures("new_york_tz")
async def test_naive_since_until_under_non_utc_tz(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import time\nprint('early', flush=True)\ntime.sleep(0.6)\nprint('late', flush=True)"
    app_id = await sched.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
    await sched.wait(app_id, timeout=30)
    started = record(log_dir / "test" / app_id)["roles"]["worker"][0]["attempts"][0][
        "started"
    ]
    middle = datetime.fromtimestamp(started + 0.3, tz=UTC).replace(tzinfo=None)

    async def lines(**kw: Any) -> list[str]:
        return [line async for line in sched.log_iter(app_id, "worker", **kw)]

    assert await lines(since=middle) == ["late\n"]
    assert await lines(until=middle) == ["early\n"]


# minor: error message, temp base dir, eviction order
async def test_directory_entrypoint_says_so(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(SpecError, match="is a directory"):
        await sched.submit(
            app_of(Role("r", "/", entrypoint=str(tmp_path))), {"log_dir": str(log_dir)}
        )


async def test_rejected_submit_leaves_no_temp_dir() -> None:
    async with LocalScheduler("s") as s:
        with pytest.raises(SpecError):
            await s.submit(app_of(Role("r", "/", entrypoint="no-such-binary-xyz")), {})
        assert s._tmp_log_dirs
        assert not os.path.exists(s._tmp_log_dirs[0])
        assert s._created_tmp_log_dir is False
        app_id = await s.submit(app_of(Role("r", "/", entrypoint=PY, args=["-V"])), {})
        await s.wait(app_id, timeout=10)
        tmp_base = s._tmp_log_dirs[0]
        assert os.path.isdir(os.path.join(tmp_base, "s", app_id))
        assert os.stat(tmp_base).st_mode & 0o777 == 0o700
    assert not os.path.exists(tmp_base)


async def test_rejected_submit_evicts_nothing(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=1) as s:
        first = await s.submit(app_of(sh_role("true")), cfg)
        await s.wait(first, timeout=10)
        with pytest.raises(SpecError):
            await s.submit(app_of(Role("r", "/", entrypoint="nope-xyz")), cfg)
        assert await s.describe(first) is not None
