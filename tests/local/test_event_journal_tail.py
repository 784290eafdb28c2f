"""A reader of the supervising process gets its lines from memory and the
lines other processes append between them from the file: one ordered stream."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.kit import AppEvent, EventKind, decode_cursor
from asyncsched.schedulers.local_scheduler import LocalScheduler

from .conftest import PY, app_of, sh_role

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

OTHER_PROCESS = (
    "import anyio\n"
    "from asyncsched.schedulers.local import LocalScheduler\n"
    "from asyncsched.specs import AppDef, Role\n"
    "async def main():\n"
    "    async with LocalScheduler('test') as s:\n"
    "        role = Role('w', image='/', entrypoint='sh', args=['-c', 'exit 0'])\n"
    "        app_id = await s.submit(AppDef('other', roles=[role]), {})\n"
    "        await s.wait(app_id, timeout=30)\n"
    "        print(app_id)\n"
    "anyio.run(main)\n"
)


async def test_lines_of_another_process_between_this_ones_arrive_in_number_order(
    sched: LocalScheduler,
) -> None:
    got: list[AppEvent] = []
    with anyio.fail_after(90):
        zeroth = await sched.submit(app_of(sh_role("exit 0")), {})
        await sched.wait(zeroth, timeout=30)
        async with sched.events() as stream:
            saved = (await anext(stream)).cursor  # CURRENT of the only app
        first = await sched.submit(app_of(sh_role("exit 0")), {})
        await sched.wait(first, timeout=30)
        out = await anyio.run_process(
            [PY, "-c", OTHER_PROCESS],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        other = out.stdout.decode().strip()
        last = await sched.submit(app_of(sh_role("exit 0")), {})
        await sched.wait(last, timeout=30)
        async with sched.events(since=saved) as stream:
            async for event in stream:
                got.append(event)
                if event.app_id == last and event.terminal and event.kind == "app":
                    break
    assert EventKind.RESYNC not in [e.kind for e in got]
    numbers = [decode_cursor(e.cursor, "local")["s"] for e in got]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    ended = {e.app_id for e in got if e.terminal and e.kind == EventKind.APP}
    assert ended == {first, other, last}
