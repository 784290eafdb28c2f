"""What exec() would reject is a SpecError from validation, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.errors import SpecError
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, Role, validate_app

pytestmark = pytest.mark.anyio


def _app(**role: object) -> AppDef:
    fields: dict[str, object] = {"name": "w", "image": "/", "entrypoint": "echo"}
    fields.update(role)
    return AppDef("app", roles=[Role(**fields)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("app", "field"),
    [
        (_app(entrypoint="ec\0ho"), "roles[0].entrypoint"),
        (_app(args=["ok", "b\0d"]), "roles[0].args[1]"),
        (_app(env={"GOOD": "1", "BAD": "x\0y"}), "roles[0].env['BAD']"),
        (_app(env={"B\0D": "1"}), "roles[0].env['B\\x00D']"),
        (_app(env={"A=B": "1"}), "roles[0].env['A=B']"),
        (_app(env={"": "1"}), "roles[0].env"),
        (_app(image="/tm\0p"), "roles[0].image"),
        (AppDef("a\0pp", roles=[Role("w", image="/", entrypoint="echo")]), "name"),
    ],
)
def test_exec_rejected_input_is_a_spec_error(app: AppDef, field: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_app(app)
    assert info.value.field == field


def test_ordinary_values_pass() -> None:
    validate_app(_app(args=["a=b", "", "ünï"], env={"K": "a=b", "E": ""}))


async def test_local_submit_starts_nothing_for_a_nul_in_a_later_role(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    first = Role(
        "first", image="/", entrypoint="sh", args=["-c", f"touch {marker}; sleep 30"]
    )
    second = Role("second", image="/", entrypoint="echo", args=["b\0d"])
    async with LocalScheduler("nul", close_grace=0.5) as sched:
        with pytest.raises(SpecError) as info:
            await sched.submit(
                AppDef("app", roles=[first, second]), {"log_dir": str(tmp_path)}
            )
        assert info.value.field == "roles[1].args[0]"
        assert await sched.list() == []
    assert not marker.exists()
    assert list(tmp_path.iterdir()) == []
