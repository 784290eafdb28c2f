"""A running replica costs the scheduler process three file descriptors (two
pipe read ends and a pidfd); its log and index files share a bounded set of
open files with the other replicas, so many replicas run at once even at an
open-file limit of 1024."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local._capacity import LOG_FILES_KEPT_OPEN
from asyncsched.schedulers.local._open_files import FileId, OpenFiles
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import nfds
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio

#: writes a line to each stream, then stays running until cancelled
CHATTY = "echo out; echo err >&2; exec sleep 120"


async def _both_streams_written(
    sched: LocalScheduler, app_id: str, replicas: int
) -> None:
    """Wait until every replica's two lines are in its combined log."""
    for k in range(replicas):
        it = sched.log_iter(app_id, "worker", k, should_tail=True)
        async with aclosing(it):
            assert sorted([await anext(it), await anext(it)]) == ["err\n", "out\n"]


@pytest.mark.timeout(120)
async def test_a_running_replica_writing_both_streams_holds_three_descriptors() -> None:
    replicas = 24
    async with LocalScheduler("fds", cancel_grace=2.0, close_grace=0.5) as sched:
        # a first app starts what every scheduler keeps (spawner, guardian...)
        warm = await sched.submit(app_of(sh_role("echo out; echo err >&2")), {})
        await sched.wait(warm, timeout=60)
        before = nfds()
        app_id = await sched.submit(app_of(sh_role(CHATTY, replicas=replicas)), {})
        try:
            await _both_streams_written(sched, app_id, replicas)
            grown = nfds() - before
        finally:
            await sched.cancel(app_id)
            await sched.wait(app_id, timeout=60)
    # 3 per replica (pipes, pidfd), the log files kept open for all replicas
    # and a few of the scheduler's own; 9 per replica before
    bound = 3 * replicas + LOG_FILES_KEPT_OPEN + 8
    assert grown <= bound, f"{grown} descriptors for {replicas} replicas"


_PROBE = textwrap.dedent(
    """
    import json, os
    from contextlib import aclosing
    import anyio
    from asyncsched.schedulers.local_scheduler import LocalScheduler
    from asyncsched.specs import AppDef, Role

    REPLICAS = 245
    SCRIPT = "echo out; echo err >&2; exec sleep 120"

    async def main():
        async with LocalScheduler("limits", cancel_grace=2.0) as sched:
            role = Role("worker", image="/", entrypoint="sh", args=["-c", SCRIPT],
                        num_replicas=REPLICAS)
            app_id = await sched.submit(AppDef("many", roles=[role]), {})
            written = 0
            for k in range(REPLICAS):
                it = sched.log_iter(app_id, "worker", k, should_tail=True)
                async with aclosing(it):
                    got = sorted([await anext(it), await anext(it)])
                written += got == ["err\\n", "out\\n"]
            fds = len(os.listdir("/proc/self/fd"))
            await sched.cancel(app_id)
            desc = await sched.wait(app_id, timeout=60)
            print(json.dumps({
                "max_running_replicas": sched.max_running_replicas,
                "written": written,
                "fds": fds,
                "state": desc.state.name,
            }))

    anyio.run(main)
    """
)


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")
@pytest.mark.timeout(300)
async def test_245_replicas_run_at_once_at_an_open_file_limit_of_1024() -> None:
    prlimit = shutil.which("prlimit")
    assert prlimit is not None

    def probe() -> dict[str, object]:
        result = subprocess.run(
            [prlimit, "--nofile=1024:1024", "--", sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=240,
            check=True,
        )
        return dict(json.loads(result.stdout.splitlines()[-1]))

    got = await anyio.to_thread.run_sync(probe)
    assert got["max_running_replicas"] == 245  # 85 when a replica held 9
    assert got["written"] == 245  # every replica ran and was logged, all at once
    assert isinstance(got["fds"], int)
    assert got["fds"] < 1024
    assert got["state"] == AppState.CANCELLED.name


def test_log_files_kept_open_are_bounded_and_the_least_recent_is_closed(
    tmp_path: Path,
) -> None:
    ids: dict[str, FileId] = {}
    for name in ("a", "b", "c"):
        path = tmp_path / name
        path.write_bytes(b"")
        st = path.stat()
        ids[str(path)] = (st.st_dev, st.st_ino)
    a, b, c = ids
    files = OpenFiles(2)
    before = nfds()
    fd_a = files.get(a, ids[a])
    assert files.get(a, ids[a]) == fd_a  # kept open: no reopen
    files.get(b, ids[b])
    files.get(a, ids[a])  # a is now the most recent
    files.get(c, ids[c])  # ... so b is closed
    assert len(files) == 2
    assert nfds() - before == 2
    assert files.get(a, ids[a]) == fd_a
    os.write(files.get(b, ids[b]), b"reopened\n")  # b is reopened, c closed
    assert (tmp_path / "b").read_bytes() == b"reopened\n"
    files.close()
    assert nfds() == before
