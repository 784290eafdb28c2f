"""App, role and session names name files and directories: nothing that
leaves a directory, hides in it or cannot be a file name is accepted."""

from __future__ import annotations

import pytest

from asyncsched.errors import InvalidArgumentError, SpecError
from asyncsched.runner import Runner
from asyncsched.specs import (
    MAX_NAME_LENGTH,
    AppDef,
    Role,
    validate_app,
    validate_session_name,
)
from asyncsched.testing import InMemoryScheduler

HOSTILE = [
    "../",
    "../../../x/y",
    "a/b",
    "/",
    "/etc/passwd",
    ".",
    "..",
    ".hidden",
    "-rf",
    "a\nb",
    "trailing\n",
    "a\tb",
    "a\x1bb",
    "a\x7fb",
    "a\0b",
    "a b",
    "x" * (MAX_NAME_LENGTH + 1),
    "é" * 10,
]


def _role(name: str = "worker") -> Role:
    return Role(name, image="/", entrypoint="echo", args=["hi"])


@pytest.mark.parametrize("name", [*HOSTILE, ""], ids=repr)
def test_app_names_that_are_not_one_plain_path_component_are_rejected(
    name: str,
) -> None:
    with pytest.raises(SpecError) as caught:
        validate_app(AppDef(name, roles=[_role()]))
    assert caught.value.field == "name"


@pytest.mark.parametrize("name", [*HOSTILE, ""], ids=repr)
def test_role_names_follow_the_same_rules(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        validate_app(AppDef("app", roles=[_role(name)]))
    assert caught.value.field == "roles[0].name"


@pytest.mark.parametrize(
    "name", ["a", "trainer_v2.1-rc", "_private", "0", "x" * MAX_NAME_LENGTH]
)
def test_plain_names_are_accepted(name: str) -> None:
    validate_app(AppDef(name, roles=[_role(name)]))
    validate_session_name(name)


@pytest.mark.parametrize("name", HOSTILE, ids=repr)
def test_session_names_that_are_not_one_plain_path_component_are_rejected(
    name: str,
) -> None:
    with pytest.raises(InvalidArgumentError, match="session_name"):
        validate_session_name(name)
    with pytest.raises(InvalidArgumentError, match="session_name"):
        InMemoryScheduler(name)
    with pytest.raises(InvalidArgumentError, match="session_name"):
        Runner(name)


def test_the_empty_session_stays_allowed_as_in_torchx() -> None:
    validate_session_name("")
    InMemoryScheduler("")


def test_a_non_string_session_name_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="session_name"):
        validate_session_name(None)


@pytest.mark.parametrize("name", ["../../../x/y", "/tmp/abs", "..", "x" * 300])
async def test_submit_rejects_a_hostile_app_name_before_anything_runs(
    name: str,
) -> None:
    async with InMemoryScheduler("s") as sched:
        with pytest.raises(SpecError) as caught:
            await sched.submit(AppDef(name, roles=[_role()]))
        assert caught.value.field == "name"
        assert await sched.list() == []
