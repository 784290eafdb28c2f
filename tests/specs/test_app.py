from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from asyncsched.specs import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    SpecError,
    VolumeMount,
    Workspace,
    validate_app,
)


def test_sentinels() -> None:
    assert (MISSING, NONE, ALL) == ("<MISSING>", "<NONE>", "all")


def test_retry_policy_members() -> None:
    assert set(RetryPolicy) == {
        RetryPolicy.APPLICATION,
        RetryPolicy.REPLICA,
        RetryPolicy.ROLE,
    }
    assert all(p.value == p.name for p in RetryPolicy)


# -- Role ---------------------------------------------------------------------


def test_role_defaults() -> None:
    role = Role("foobar", "torch")
    assert (role.name, role.image) == ("foobar", "torch")
    assert role.entrypoint == MISSING
    assert role.env == {}
    assert role.args == []
    assert role.resource is NULL_RESOURCE
    assert role.num_replicas == 1
    assert role.min_replicas is None
    assert role.base_image is None
    assert role.max_retries == 0
    assert role.retry_policy == RetryPolicy.APPLICATION
    assert role.port_map == {}
    assert role.metadata == {}
    assert role.mounts == []
    assert role.overrides == {}
    assert role.workspace is None


def test_role_default_containers_are_not_shared() -> None:
    a, b = Role("a", "i"), Role("b", "i")
    a.args.append("x")
    a.env["K"] = "V"
    assert (b.args, b.env) == ([], {})


def test_role_stores_every_field_unchanged() -> None:
    resource = Resource(cpu=1, gpu=2, memMB=3)
    mounts: list[BindMount | VolumeMount | DeviceMount] = [
        BindMount(src_path="/a", dst_path="/b")
    ]
    workspace = Workspace({"/src": ""})
    role = Role(
        "trainer",
        "img",
        2,
        "base",
        "python",
        ["-m", "x"],
        {"A": "B"},
        4,
        5,
        RetryPolicy.REPLICA,
        resource,
        {"tb": 6006},
        {"local.x": 1},
        mounts,
        {},
        workspace,
    )
    assert role.min_replicas == 2
    assert role.base_image == "base"
    assert role.entrypoint == "python"
    assert role.args == ["-m", "x"]
    assert role.env == {"A": "B"}
    assert role.num_replicas == 4
    assert role.max_retries == 5
    assert role.retry_policy == RetryPolicy.REPLICA
    assert role.resource is resource
    assert role.port_map == {"tb": 6006}
    assert role.metadata == {"local.x": 1}
    assert role.mounts is mounts
    assert role.workspace is workspace


def test_role_pre_proc_returns_input() -> None:
    info = AppDryRunInfo({"x": 1}, str)
    assert Role("r", "i").pre_proc("local_cwd", info) is info


# -- overrides ----------------------------------------------------------------


def counted(calls: list[int], value: str) -> Callable[[], str]:
    def factory() -> str:
        calls.append(1)
        return value

    return factory


def test_callable_overrides_replace_attributes_once() -> None:
    calls: list[str] = []

    def image() -> str:
        calls.append("image")
        return "base"

    given: dict[str, Any] = {"image": image, "entrypoint": lambda: "nentry"}
    role = Role("foobar", image="torch", overrides=given)
    assert role.image == "base"
    assert role.image == "base"
    assert role.entrypoint == "nentry"
    assert calls == ["image"]
    assert role.overrides == {}
    assert set(given) == {"image", "entrypoint"}  # the caller's dict is untouched


def test_plain_value_override() -> None:
    assert Role("r", image="torch", overrides={"image": "other"}).image == "other"


def test_assignment_after_resolution_wins() -> None:
    role = Role("r", image="torch", overrides={"image": lambda: "base"})
    assert role.image == "base"
    role.image = "mine"
    assert role.image == "mine"


def test_coroutine_overrides_run_to_completion_outside_a_loop() -> None:
    async def image() -> str:
        await asyncio.sleep(0)
        return "base"

    async def entrypoint() -> str:
        return "nentry"

    # a coroutine object, and an async function (called, then awaited)
    role = Role(
        "foobar", image="torch", overrides={"image": image(), "entrypoint": entrypoint}
    )
    assert role.image == "base"
    assert role.entrypoint == "nentry"


def test_future_backed_overrides() -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        image_future = pool.submit(lambda: "base")
        entry_future = pool.submit(lambda: "nentry")
        role = Role(
            "foobar",
            image="torch",
            overrides={
                "image": image_future,
                "entrypoint": lambda: entry_future.result(),
            },
        )
        assert role.image == "base"
        assert role.entrypoint == "nentry"


async def test_coroutine_override_inside_loop_needs_resolve_overrides() -> None:
    calls: list[int] = []

    async def image() -> str:
        calls.append(1)
        return "base"

    role = Role("foobar", image="torch", overrides={"image": image})
    app = AppDef("app", roles=[role])
    with pytest.raises(SpecError) as exc_info:
        _ = role.image
    assert exc_info.value.field == "overrides['image']"
    assert "await app.resolve_overrides()" in str(exc_info.value)
    await app.resolve_overrides()
    assert role.image == "base"
    assert calls == [1]  # the async function was called only once
    assert role.overrides == {}


async def test_resolve_overrides_handles_every_kind() -> None:
    async def coro_value() -> str:
        return "c"

    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(lambda: ["x"])
        role = Role(
            "r",
            image="torch",
            overrides={
                "image": coro_value(),
                "entrypoint": lambda: "e",
                "args": future,
                "env": {"K": "V"},
                "num_replicas": coro_value,
            },
        )
        await role.resolve_overrides()
    assert role.overrides == {}
    assert (role.image, role.entrypoint, role.args, role.env) == (
        "c",
        "e",
        ["x"],
        {"K": "V"},
    )
    replicas: object = role.num_replicas
    assert replicas == "c"


async def test_repr_does_not_resolve_overrides() -> None:
    calls: list[int] = []
    role = Role("r", image="torch", overrides={"image": counted(calls, "x")})
    text = repr(role)
    assert text.startswith("Role(name='r', image='torch', min_replicas=None")
    assert calls == []
    assert "image" in role.overrides


# -- AppDef -------------------------------------------------------------------


def test_appdef_stores_fields_and_defaults() -> None:
    roles = [Role("a", "i"), Role("b", "i")]
    app = AppDef("test_app", roles=roles, metadata={"k": "v"})
    assert app.name == "test_app"
    assert app.roles is roles
    assert app.metadata["k"] == "v"
    assert app.metadata.get("missing") is None
    bare = AppDef("bare")
    assert (bare.roles, bare.metadata) == ([], {})


# -- Workspace ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "projects", "unmapped"),
    [
        ("/home/me/proj", {"/home/me/proj": ""}, True),
        ("{/a: sub, /b: }", {"/a": "sub", "/b": ""}, False),
        ("/a: sub", {"/a": "sub"}, False),
        ("/a:", {"/a": ""}, True),
        ("", {}, False),
    ],
)
def test_workspace_from_str(
    text: str, projects: dict[str, str], unmapped: bool
) -> None:
    workspace = Workspace.from_str(text)
    assert workspace.projects == projects
    assert workspace.is_unmapped_single_project() is unmapped


def test_workspace_from_str_rejects_lists() -> None:
    with pytest.raises(ValueError, match="workspace"):
        Workspace.from_str("[a, b]")


# -- validate_app -------------------------------------------------------------


def good_role(**kwargs: Any) -> Role:
    values: dict[str, Any] = {"name": "trainer", "image": "img", "entrypoint": "python"}
    values.update(kwargs)
    return Role(**values)


def test_valid_app_passes_and_is_not_mutated() -> None:
    app = AppDef(
        "app",
        roles=[
            good_role(),
            good_role(
                name="ps-0.v2",
                num_replicas=3,
                min_replicas=2,
                resource=Resource(cpu=0, gpu=0, memMB=0),
                args=["a"],
                env={"K": "V"},
            ),
        ],
    )
    before = copy.deepcopy(app)
    validate_app(app)
    assert app == before


def test_null_resource_is_valid() -> None:
    validate_app(AppDef("app", roles=[good_role(resource=NULL_RESOURCE)]))


Mutator = Callable[[AppDef], None]
HALF_CPU: Any = 0.5


def set_role(attr: str, value: Any, index: int = 0) -> Mutator:
    def mutate(app: AppDef) -> None:
        setattr(app.roles[index], attr, value)

    return mutate


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda app: setattr(app, "name", ""), "name"),
        (lambda app: setattr(app, "name", None), "name"),
        (lambda app: setattr(app, "roles", []), "roles"),
        (lambda app: app.roles.append("not a role"), "roles[2]"),
        (set_role("name", "trainer", index=1), "roles[1].name"),
        (set_role("name", ""), "roles[0].name"),
        (set_role("name", "a/b"), "roles[0].name"),
        (set_role("name", "a b"), "roles[0].name"),
        (set_role("name", ".hidden"), "roles[0].name"),
        (set_role("num_replicas", 0), "roles[0].num_replicas"),
        (set_role("num_replicas", "2"), "roles[0].num_replicas"),
        (set_role("num_replicas", True), "roles[0].num_replicas"),
        (set_role("min_replicas", 0), "roles[0].min_replicas"),
        (set_role("min_replicas", 2), "roles[0].min_replicas"),
        (set_role("min_replicas", 1.0), "roles[0].min_replicas"),
        (set_role("max_retries", -1), "roles[0].max_retries"),
        (set_role("max_retries", "3"), "roles[0].max_retries"),
        (set_role("retry_policy", "SOMETIMES"), "roles[0].retry_policy"),
        (
            set_role("resource", Resource(cpu=-1, gpu=0, memMB=1)),
            "roles[0].resource.cpu",
        ),
        (
            set_role("resource", Resource(cpu=1, gpu=-2, memMB=1)),
            "roles[0].resource.gpu",
        ),
        (
            set_role("resource", Resource(cpu=1, gpu=0, memMB=-1)),
            "roles[0].resource.memMB",
        ),
        (
            set_role("resource", Resource(cpu=HALF_CPU, gpu=0, memMB=1)),
            "roles[0].resource.cpu",
        ),
        (set_role("resource", None), "roles[0].resource"),
        (set_role("entrypoint", MISSING), "roles[0].entrypoint"),
        (set_role("entrypoint", ""), "roles[0].entrypoint"),
        (set_role("image", MISSING), "roles[0].image"),
        (set_role("image", None), "roles[0].image"),
        (set_role("args", ["a", 1]), "roles[0].args"),
        (set_role("args", "a b"), "roles[0].args"),
        (set_role("env", {"K": 1}), "roles[0].env"),
        (set_role("env", ["K=V"]), "roles[0].env"),
    ],
)
def test_validate_app_reports_field(mutate: Mutator, field: str) -> None:
    app = AppDef("app", roles=[good_role(), good_role(name="worker")])
    mutate(app)
    with pytest.raises(SpecError) as exc_info:
        validate_app(app)
    assert exc_info.value.field == field
    assert str(exc_info.value).startswith(f"{field}: ")


def test_validate_app_skips_unresolved_overrides_without_resolving() -> None:
    calls: list[int] = []
    role = good_role(image="", overrides={"image": counted(calls, "img")})
    validate_app(AppDef("app", roles=[role]))
    assert calls == []
    assert "image" in role.overrides


def test_spec_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="roles: "):
        validate_app(AppDef("app"))


def test_validate_app_accepts_an_empty_image() -> None:
    # local_cwd ignores images; backends needing one reject "" themselves
    validate_app(AppDef("app", roles=[Role("r", image="", entrypoint="echo")]))
