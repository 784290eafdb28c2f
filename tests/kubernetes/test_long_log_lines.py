"""A pod log line longer than ``max_line_bytes`` comes in pieces, nothing lost."""

from __future__ import annotations

import pytest

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


async def test_long_pod_log_line_comes_in_capped_pieces(kube_env: KubeEnv) -> None:
    if not kube_env.logs_available:
        pytest.skip("pods cannot run on this API server (no fake kubelet)")
    long_word = "x" * 2500
    async with scheduler(kube_env, max_line_bytes=1024) as sched:
        app_id = await sched.submit(
            make_app(f"echo {long_word}; echo short"), cfg_for(kube_env, "volcano")
        )
        await sched.wait(app_id, timeout=20)
        lines = [line async for line in sched.log_iter(app_id, "worker")]
    # the first piece also carried the line's timestamp on the wire
    assert len(lines) == 4
    assert all(len(line) <= 1024 for line in lines)
    assert [line.endswith("\n") for line in lines] == [False, False, True, True]
    assert "".join(lines) == f"{long_word}\nshort\n"
