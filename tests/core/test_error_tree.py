"""Every exception that leaves the public API is in the AsyncschedError tree."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

import asyncsched
from asyncsched import errors
from asyncsched.errors import (
    AsyncschedError,
    InvalidArgumentError,
    InvalidMountError,
    InvalidRunConfigException,
    UnknownNamedResourceError,
    UnknownReplicaError,
    UnsupportedOperationError,
)
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, Role, named_resources, parse_mounts, runopts
from tests.core._source_scan import scan

pytestmark = pytest.mark.anyio

PACKAGE = Path(asyncsched.__file__).parent
BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
# raised on purpose and never seen by a caller: control flow and protocol rules
# (AttributeError: a module-level __getattr__ must raise it for unknown names)
ALLOWED = {
    "AttributeError",
    "KeyboardInterrupt",
    "StopAsyncIteration",
    "StopIteration",
    "SystemExit",
}


def _builtin_raises() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in scan(path).raises:
            if node.exc is None:
                continue
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if (
                isinstance(target, ast.Name)
                and target.id in BUILTIN_EXCEPTIONS
                and target.id not in ALLOWED
            ):
                rel = path.relative_to(PACKAGE.parent)
                found.append(f"{rel}:{node.lineno}: raise {target.id}")
    return found


def test_package_raises_no_bare_builtin_exception() -> None:
    assert _builtin_raises() == []


def test_every_error_is_exported_and_rooted() -> None:
    for name in errors.__all__:
        value = getattr(errors, name)
        if issubclass(value, Warning):
            assert issubclass(value, errors.AsyncschedWarning)
        else:
            assert issubclass(value, AsyncschedError), name


def test_docstring_tree_names_every_error() -> None:
    doc = errors.__doc__ or ""
    drawn = set(re.findall(r"[├└]── (\w+)", doc))
    assert drawn | {"AsyncschedError", "AsyncschedWarning"} == set(errors.__all__)


@pytest.fixture
async def finished_app(tmp_path: Path) -> tuple[LocalScheduler, str]:
    sched = LocalScheduler("errors")
    role = Role("hello", image="", entrypoint="echo", args=["hi"])
    app_id = await sched.submit(
        AppDef("hello", roles=[role]), {"log_dir": str(tmp_path)}
    )
    await sched.wait(app_id, timeout=30)
    return sched, app_id


async def test_log_iter_on_unknown_role_is_unknown_replica_error(
    finished_app: tuple[LocalScheduler, str],
) -> None:
    sched, app_id = finished_app
    async with sched:
        with pytest.raises(UnknownReplicaError, match="no replica 0 of role 'nope'"):
            [line async for line in sched.log_iter(app_id, "nope")]


async def test_log_iter_on_replica_out_of_range_is_unknown_replica_error(
    finished_app: tuple[LocalScheduler, str],
) -> None:
    sched, app_id = finished_app
    async with sched:
        with pytest.raises(UnknownReplicaError) as info:
            [line async for line in sched.log_iter(app_id, "hello", k=5)]
        assert info.value.roles == ["hello"]
        assert isinstance(info.value, LookupError)


async def test_log_iter_with_invalid_regex_fails_before_iterating(
    finished_app: tuple[LocalScheduler, str],
) -> None:
    sched, app_id = finished_app
    async with sched:
        with pytest.raises(InvalidArgumentError, match="invalid regex"):
            sched.log_iter(app_id, "hello", regex="(unclosed")
        with pytest.raises(InvalidArgumentError, match="unknown stream"):
            sched.log_iter(app_id, "hello", streams="nope")


def test_unknown_named_resource_is_in_tree_and_a_key_error() -> None:
    with pytest.raises(UnknownNamedResourceError) as info:
        named_resources["no-such-resource"]
    assert isinstance(info.value, KeyError)
    with pytest.raises(UnsupportedOperationError):
        iter(named_resources)


def test_bad_mount_is_spec_error_and_key_error() -> None:
    with pytest.raises(InvalidMountError) as info:
        parse_mounts(["type=bind", "src=/a"])
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("mounts: bind mount needs dst= (expected")


def test_run_option_value_that_cannot_be_converted_names_the_option() -> None:
    opts = runopts()
    opts.add("retries", type_=int, default=0, help="")
    with pytest.raises(InvalidRunConfigException, match="retries") as info:
        opts.cfg_from_str("retries=three")
    assert info.value.cfg_key == "retries"
    with pytest.raises(InvalidRunConfigException):
        opts.cfg_from_str("no pairs here")
