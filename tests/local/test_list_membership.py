"""``ListAppResponse(app_id=..., state=...) in await sched.list()`` works as in TorchX."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.schedulers.api import ListAppResponse
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


async def test_listed_app_is_found_by_id_and_state_alone(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id = await sched.submit(
        app_of(sh_role("true"), name="listed"), {"log_dir": str(log_dir)}
    )
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    listed = await sched.list()
    assert ListAppResponse(app_id=app_id, state=AppState.SUCCEEDED) in listed
    assert ListAppResponse(app_id=app_id, state=AppState.FAILED) not in listed
    row = next(r for r in listed if r.app_id == app_id)
    assert row.name == "listed"  # still reported, only not compared


def test_name_takes_no_part_in_equality_or_hash() -> None:
    a = ListAppResponse(app_id="x-1", state=AppState.RUNNING, name="x")
    b = ListAppResponse(app_id="x-1", state=AppState.RUNNING)
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1


def test_app_id_state_and_handle_still_distinguish_rows() -> None:
    base = ListAppResponse(app_id="x-1", state=AppState.RUNNING)
    assert base != ListAppResponse(app_id="x-2", state=AppState.RUNNING)
    assert base != ListAppResponse(app_id="x-1", state=AppState.SUCCEEDED)
    assert base != ListAppResponse(
        app_id="x-1", state=AppState.RUNNING, app_handle="local_cwd://s/x-1"
    )
