"""Another process can describe, list, read the logs of and cancel local apps."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import alive

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def test_describe_list_logs_and_cancel_from_another_process(
    log_dir: Path,
) -> None:
    script = "echo hello; echo oops >&2; sleep 100"
    with subprocess.Popen(
        [sys.executable, "-m", "tests.local._owner", str(log_dir), script, "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    ) as owner:
        try:
            assert owner.stdout is not None
            info = json.loads(await anyio.to_thread.run_sync(owner.stdout.readline))
            app_id = info["app_id"]
            [pid] = info["pids"]
            async with LocalScheduler("owned", cancel_grace=1.0) as sched:
                with anyio.fail_after(5):
                    while (desc := await sched.describe(app_id)) is None:
                        await anyio.sleep(0.02)
                assert desc.state == AppState.RUNNING
                assert desc.roles_statuses[0].replicas[0].pid == pid
                assert desc.roles[0].entrypoint == "sh"
                listed = {a.app_id: a for a in await sched.list()}
                assert listed[app_id].state == AppState.RUNNING
                assert listed[app_id].name == "owned"
                async with aclosing(
                    sched.log_iter(app_id, "w", should_tail=True)
                ) as follow:
                    got = [await anext(follow), await anext(follow)]
                assert sorted(got) == ["hello\n", "oops\n"]
                assert [
                    x async for x in sched.log_iter(app_id, "w", streams="stderr")
                ] == ["oops\n"]
                await sched.cancel(app_id)
                desc = await sched.wait(app_id, timeout=10)
                assert desc is not None
                assert desc.state == AppState.CANCELLED
                assert alive({pid}) == set()
                # a follower started now ends because the app is over
                with anyio.fail_after(5):
                    tail = [
                        x async for x in sched.log_iter(app_id, "w", should_tail=True)
                    ]
                assert tail == ["hello\n", "oops\n"] or sorted(tail) == [
                    "hello\n",
                    "oops\n",
                ]
        finally:
            owner.kill()
            owner.wait()
