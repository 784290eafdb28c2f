"""Records and logs are private: an app's environment (tokens...) is readable
by its user only, whatever the umask."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, RetryPolicy

from .conftest import app_of, py_role, sh_role


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask: every mode bit asked for is granted."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _tree(root: Path) -> Iterator[Path]:
    yield root
    yield from root.rglob("*")


async def test_every_dir_is_0700_and_every_file_0600_whatever_the_umask(
    open_umask: None, tmp_path: Path, state_dir: Path
) -> None:
    secret = f"tok-{secrets.token_hex(8)}"
    user_logs = tmp_path / "user-logs"
    # prints the secret, leaves an error reply, fails, is retried once
    code = (
        "import os, sys\n"
        "print('token', os.environ['SECRET'])\n"
        "print('token', os.environ['SECRET'], file=sys.stderr)\n"
        "open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w').write(os.environ['SECRET'])\n"
        "sys.exit(1)"
    )
    role = py_role(
        code,
        env={"SECRET": secret},
        replicas=2,
        max_retries=1,
        retry_policy=RetryPolicy.REPLICA,
    )
    assert not state_dir.exists()
    async with LocalScheduler("s", cancel_grace=2.0) as sched:
        managed = await sched.submit(app_of(role, name="managed"), {})
        chosen = await sched.submit(
            app_of(role, name="chosen"), {"log_dir": str(user_logs)}
        )
        sleeper = await sched.submit(app_of(sh_role("sleep 30"), name="sleeper"), {})
        for app_id in (managed, chosen):
            desc = await sched.wait(app_id, timeout=60)
            assert desc is not None
            assert desc.state == AppState.FAILED
        # a cancel from another scheduler goes through the files (cancel marker)
        async with LocalScheduler("s") as other:
            await other.cancel(sleeper)
        with anyio.fail_after(30):
            desc = await sched.wait(sleeper)
        assert desc is not None
        assert desc.state == AppState.CANCELLED

    files = 0
    for root in (state_dir, user_logs):
        for path in _tree(root):
            mode = stat.S_IMODE(path.lstat().st_mode)
            if path.is_dir():
                assert mode == 0o700, f"{path}: {mode:o}"
            else:
                files += 1
                assert mode == 0o600, f"{path}: {mode:o}"
    assert files > 20
    names = {p.name for root in (state_dir, user_logs) for p in root.rglob("*")}
    assert {"app.json", "SUCCESS", "CANCEL_REQUESTED", "stdout.log"} <= names
    assert {"stderr.idx", "combined.log", "error.json.0", "error.json.1"} <= names
    # the secret is in records and logs: all of them private
    holders = [
        p
        for root in (state_dir, user_logs)
        for p in root.rglob("*")
        if p.is_file() and secret.encode() in p.read_bytes()
    ]
    assert {p.name for p in holders} >= {"app.json", "stdout.log", "error.json.0"}
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in holders)


async def test_an_old_world_readable_state_dir_is_closed_on_first_use(
    tmp_path: Path, state_dir: Path
) -> None:
    for sub in ("local", "logs"):
        (state_dir / sub).mkdir(parents=True)
        (state_dir / sub).chmod(0o755)
    async with LocalScheduler("s") as sched:
        app_id = await sched.submit(app_of(sh_role("true")), {})
        await sched.wait(app_id, timeout=60)
    for sub in ("local", "logs"):
        assert stat.S_IMODE((state_dir / sub).stat().st_mode) == 0o700
