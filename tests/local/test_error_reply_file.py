"""The error-reply file of a failed replica (TorchX's ``TORCHELASTIC_ERROR_FILE``):
read bounded, never through a symlink, never moved from outside the replica's dir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio

from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.schedulers.local._exit_facts import MAX_REPLY_BYTES
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, py_role, sh_role


async def _run(
    sched: LocalScheduler, code: str, log_dir: Path, env: dict[str, str] | None = None
) -> DescribeAppResponse:
    role = py_role(code, env=env)
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    with anyio.fail_after(60):
        desc = await sched.wait(app_id)
    assert desc is not None
    assert desc.state == AppState.FAILED
    return desc


def _replica_error(desc: DescribeAppResponse) -> str:
    return desc.roles_statuses[0].replicas[0].structured_error_msg


async def test_a_reply_file_elsewhere_is_read_but_never_moved(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "mine" / "reply.json"
    elsewhere.parent.mkdir()
    code = (
        "import json, os, sys\n"
        "json.dump({'message': 'boom'}, open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w'))\n"
        "sys.exit(1)"
    )
    desc = await _run(
        sched, code, log_dir, env={"TORCHELASTIC_ERROR_FILE": str(elsewhere)}
    )
    assert json.loads(_replica_error(desc)) == {"message": "boom"}
    assert json.loads(desc.structured_error_msg) == {"message": "boom"}
    assert elsewhere.is_file()
    assert os.listdir(elsewhere.parent) == ["reply.json"]


async def test_a_file_the_error_file_names_is_neither_moved_nor_reported_when_stale(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me where I am")
    old = precious.stat().st_mtime - 3600
    os.utime(precious, (old, old))
    desc = await _run(
        sched,
        "raise SystemExit(3)",
        log_dir,
        {"TORCHELASTIC_ERROR_FILE": str(precious)},
    )
    assert precious.read_text() == "keep me where I am"
    assert not (tmp_path / "precious.txt.0").exists()
    assert "keep me" not in _replica_error(desc)
    assert "keep me" not in desc.structured_error_msg


async def test_a_huge_reply_file_is_cut_at_64_kib(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = (
        "import os, sys\n"
        "with open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w') as f:\n"
        "    f.write('x' * (20 << 20))\n"
        "sys.exit(1)"
    )
    desc = await _run(sched, code, log_dir)
    text = _replica_error(desc)
    assert text.startswith("x" * MAX_REPLY_BYTES)
    assert len(text) < MAX_REPLY_BYTES + 1024
    assert "truncated" in text
    (record,) = log_dir.rglob("app.json")
    assert record.stat().st_size < 4 * MAX_REPLY_BYTES


async def test_a_symlinked_reply_file_is_not_followed(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t-token")
    code = (
        "import os, sys\n"
        f"os.symlink({str(secret)!r}, os.environ['TORCHELASTIC_ERROR_FILE'])\n"
        "sys.exit(1)"
    )
    desc = await _run(sched, code, log_dir)
    assert "s3cr3t" not in _replica_error(desc)
    assert "s3cr3t" not in desc.structured_error_msg
    assert secret.read_text() == "s3cr3t-token"
    for path in log_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert b"s3cr3t" not in path.read_bytes(), path


async def test_a_fifo_as_reply_file_does_not_hang_the_supervisor(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = (
        "import os, sys\nos.mkfifo(os.environ['TORCHELASTIC_ERROR_FILE'])\nsys.exit(1)"
    )
    desc = await _run(sched, code, log_dir)
    assert _replica_error(desc) == "<NONE>"


async def test_the_reply_file_in_the_replica_dir_is_kept_per_attempt(
    sched: LocalScheduler, log_dir: Path
) -> None:
    # the default location: moved aside (error.json.0) for the next attempt
    code = (
        "import os, sys\n"
        "open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w').write('{\"a\": 1}')\n"
        "sys.exit(1)"
    )
    desc = await _run(sched, code, log_dir)
    assert json.loads(_replica_error(desc)) == {"a": 1}
    (kept,) = log_dir.rglob("error.json.0")
    assert not kept.with_name("error.json").exists()


async def test_sh_role_without_reply_file_reports_none(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id = await sched.submit(app_of(sh_role("exit 2")), {"log_dir": str(log_dir)})
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.structured_error_msg == "<NONE>"
