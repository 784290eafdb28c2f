"""Container names: unique within an app and always accepted by Docker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asyncsched.errors import SpecError
from asyncsched.schedulers.docker._render import container_name, render_job
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, Resource, Role

from .conftest import TEST_IMAGE

DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
PREFIX = "preprocessing_stage_for_shard_"  # 30 characters
assert len(PREFIX) == 30


def _role(name: str, script: str = "true", replicas: int = 1) -> Role:
    return Role(
        name,
        image=TEST_IMAGE,
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )


def _names(app: AppDef, app_id: str = "app-bq4fzx7kd2") -> list[str]:
    job = render_job(app, app_id, {}, session="s", version="v", environ={})
    return [c.name for c in job.containers]


def test_roles_sharing_a_30_character_prefix_get_distinct_valid_names() -> None:
    app = AppDef("app", roles=[_role(PREFIX + "a"), _role(PREFIX + "b"), _role(PREFIX)])
    names = _names(app, "x" * 40)
    assert len(set(names)) == 3
    for name in names:
        assert DOCKER_NAME.match(name), name
        assert len(name) <= 63, name


def test_short_names_keep_torchx_format() -> None:
    app_id = "a-much-longer-application-name-bq4fzx7kd2"
    app = AppDef("a", roles=[_role("trainer", replicas=2), _role("ps")])
    assert _names(app, app_id) == [
        f"{app_id[-30:]}-trainer-0",
        f"{app_id[-30:]}-trainer-1",
        f"{app_id[-30:]}-ps-0",
    ]


def test_names_fit_a_hostname_with_many_replicas() -> None:
    # a name is also the hostname; Linux refuses hostnames over 64 bytes
    app = AppDef("a", roles=[_role("r" * 30, replicas=120)])
    names = _names(app, "y" * 40)
    assert len(set(names)) == 120
    assert max(len(n) for n in names) <= 63
    assert names[0] == f"{'y' * 30}-{'r' * 30}-0"


def test_a_role_named_like_another_roles_shortened_name_is_a_spec_error() -> None:
    long_role = PREFIX + "_and_more"
    shortened = container_name("app-1", long_role, 0).removeprefix("app-1-")[:-2]
    app = AppDef("app", roles=[_role(long_role), _role(shortened)])
    with pytest.raises(SpecError) as info:
        _names(app, "app-1")
    assert info.value.field == "roles[1].name"


def test_a_role_name_docker_rejects_is_a_spec_error_naming_the_role() -> None:
    # validate_app rejects such role names earlier; the render checks on its own
    app = AppDef("app", roles=[_role("ok"), _role("bad role")])
    with pytest.raises(SpecError, match="bad role") as info:
        _names(app)
    assert info.value.field == "roles[1].name"


@pytest.mark.parametrize("app_name", ["my app", "a/b", "tab\there", "naïve"])
async def test_dry_run_refuses_an_app_name_docker_rejects(
    app_name: str, tmp_path: Path
) -> None:
    # no daemon behind this socket: the dry run must not need one to refuse
    async with DockerScheduler(
        "names", docker_host=f"unix://{tmp_path / 'none.sock'}"
    ) as sched:
        with pytest.raises(SpecError) as info:
            await sched.submit_dryrun(AppDef(app_name, roles=[_role("worker")]))
        assert info.value.field == "name"
        # with a workspace, the name is refused before anything is built
        (tmp_path / "ws").mkdir()
        with pytest.raises(SpecError, match="name"):
            await sched.submit_dryrun(
                AppDef(app_name, roles=[_role("worker")]),
                workspace=str(tmp_path / "ws"),
            )


@pytest.mark.docker
async def test_roles_sharing_a_long_prefix_both_run(sched: DockerScheduler) -> None:
    app = AppDef(
        "prefix",
        roles=[_role(PREFIX + "one", "hostname"), _role(PREFIX + "two", "hostname")],
    )
    app_id = await sched.submit(app)
    status = await sched.wait(app_id, timeout=60)
    assert status is not None
    assert status.state.name == "SUCCEEDED"
    hosts = set()
    for role in (PREFIX + "one", PREFIX + "two"):
        out = [line async for line in sched.log_iter(app_id, role)]
        assert len(out) == 1
        hosts.add(out[0])
    assert len(hosts) == 2
