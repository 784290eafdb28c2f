"""A field of the wrong type gets an error from the asyncsched tree that names
it (never a raw ValueError/AttributeError from deep inside a backend)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncsched.errors import (
    InvalidArgumentError,
    InvalidMountError,
    InvalidRunConfigException,
    SpecError,
)
from asyncsched.schedulers.local._retention import Retention
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, Resource, Role, parse_mounts, runopts, validate_app
from asyncsched.testing import InMemoryScheduler


def _role(**fields: Any) -> Role:
    return Role(
        "r",
        image="/",
        entrypoint="echo",
        resource=Resource(cpu=1, gpu=0, memMB=64),
        **fields,
    )


BAD_ROLES = [
    ({"port_map": "x"}, "roles[0].port_map"),
    ({"port_map": [8080]}, "roles[0].port_map"),
    ({"port_map": {"http": "8080"}}, "roles[0].port_map['http']"),
    ({"port_map": {"http": 70000}}, "roles[0].port_map['http']"),
    ({"port_map": {"http": True}}, "roles[0].port_map['http']"),
    ({"metadata": [1]}, "roles[0].metadata"),
    ({"metadata": {1: "x"}}, "roles[0].metadata"),
    ({"mounts": "type=bind"}, "roles[0].mounts"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_ROLES)
async def test_a_role_field_of_the_wrong_type_is_a_spec_error_naming_it(
    fields: dict[str, Any], field: str
) -> None:
    app = AppDef("app", roles=[_role(**fields)])
    with pytest.raises(SpecError) as caught:
        validate_app(app)
    assert caught.value.field == field
    for sched in (InMemoryScheduler("s"), LocalScheduler("s")):
        async with sched:
            with pytest.raises(SpecError) as caught:
                await sched.submit_dryrun(app)
            assert caught.value.field == field


def test_app_metadata_must_be_a_dict() -> None:
    with pytest.raises(SpecError) as caught:
        validate_app(AppDef("app", roles=[_role()], metadata=[1]))  # type: ignore[arg-type]
    assert caught.value.field == "metadata"


@pytest.mark.parametrize("cfg", [[1], "x", [("log_dir", "/tmp")], 5, {1: 2}])
async def test_a_cfg_that_is_not_a_mapping_of_names_is_an_invalid_run_config(
    cfg: Any,
) -> None:
    with pytest.raises(InvalidRunConfigException):
        runopts().resolve(cfg)
    for sched in (InMemoryScheduler("s"), LocalScheduler("s")):
        async with sched:
            with pytest.raises(InvalidRunConfigException) as caught:
                await sched.submit_dryrun(AppDef("app", roles=[_role()]), cfg)
            if not isinstance(cfg, dict):
                assert caught.value.cfg_key == "cfg"
                assert "mapping" in str(caught.value)


def test_a_mount_missing_keys_names_them_all_and_the_expected_form() -> None:
    with pytest.raises(InvalidMountError) as caught:
        parse_mounts(["type=bind"])
    assert "src= and dst=" in caught.value.message
    assert "type=bind,src=HOST_PATH,dst=CONTAINER_PATH" in caught.value.message
    assert caught.value.args == ("src",)  # TorchX's KeyError(key)
    with pytest.raises(InvalidMountError, match="type=volume,src=VOLUME_NAME"):
        parse_mounts(["type=volume", "src=data"])


@pytest.mark.parametrize("days", [math.nan, math.inf, -1.0, "7"])
def test_retention_rejects_an_age_that_is_not_a_finite_number(days: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="max_age_days"):
        Retention(max_age_days=days)


@pytest.mark.parametrize("keep", [-1, 1.5, "3"])
def test_retention_rejects_a_count_that_is_not_a_natural_number(keep: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="max_apps"):
        Retention(max_apps=keep)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "asyncsched", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_cli_says_which_mount_keys_are_missing(tmp_path: Path) -> None:
    result = _cli(tmp_path, "run", "--mounts", "type=bind", "--", "true")
    assert result.returncode == 2, result.stderr
    assert "--mounts: bind mount needs src= and dst=" in result.stderr
    assert "type=bind,src=HOST_PATH,dst=CONTAINER_PATH" in result.stderr
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--max-age-days", "nan"],
        ["--max-age-days", "inf"],
        ["--max-age-days", "-1"],
        ["--max-age-days", "soon"],
        ["--keep", "-1"],
    ],
)
def test_prune_rejects_a_bound_that_is_not_a_finite_natural_amount(
    tmp_path: Path, args: list[str]
) -> None:
    result = _cli(tmp_path, "prune", *args)
    assert result.returncode == 2, result.stderr
    assert args[0] in result.stderr
    assert "removed" not in result.stdout
