"""Deep copies of app specs: independent, overrides left unresolved, sharing kept."""

from __future__ import annotations

import copy
from typing import Any

from asyncsched.specs import AppDef, BindMount, Resource, Role


def _app() -> AppDef:
    nested: dict[str, Any] = {"team": {"name": "infra", "ids": [1, 2]}}
    return AppDef(
        "app",
        roles=[
            Role(
                "trainer",
                image="img",
                entrypoint="python",
                args=["-m", "train", "--lr", "0.1"],
                env={"A": "1", "B": "2"},
                resource=Resource(cpu=2, gpu=0, memMB=1024, capabilities={"k": "v"}),
                port_map={"http": 8080},
                metadata=nested,
                mounts=[BindMount(src_path="/data", dst_path="/mnt/data")],
            )
        ],
        metadata={"owner": "me"},
    )


def test_a_copied_app_shares_no_mutable_value_with_the_original() -> None:
    app = _app()
    copied = copy.deepcopy(app)
    assert copied == app
    role, original = copied.roles[0], app.roles[0]
    role.args.append("--extra")
    role.env["C"] = "3"
    role.port_map["grpc"] = 9090
    role.metadata["team"]["ids"].append(3)
    role.resource.capabilities["k"] = "changed"
    mount = role.mounts[0]
    assert isinstance(mount, BindMount)
    mount.src_path = "/elsewhere"
    copied.metadata["owner"] = "you"
    copied.roles.append(Role("other", image="img", entrypoint="true"))
    assert app == _app()
    assert original.args == ["-m", "train", "--lr", "0.1"]


def test_a_copied_role_keeps_its_overrides_unresolved() -> None:
    calls: list[str] = []

    def image() -> str:
        calls.append("image")
        return "resolved"

    role = Role("r", image="img", entrypoint="true", overrides={"image": image})
    copied = copy.deepcopy(role)
    assert calls == []
    assert vars(copied)["overrides"]["image"] is image
    assert copied.image == "resolved"


def test_a_list_shared_by_two_roles_stays_shared_in_the_copy() -> None:
    shared = ["--flag"]
    env = {"X": "1"}
    app = AppDef(
        "app",
        roles=[
            Role("a", image="i", entrypoint="e", args=shared, env=env),
            Role("b", image="i", entrypoint="e", args=shared, env=env),
        ],
    )
    copied = copy.deepcopy(app)
    a, b = copied.roles
    assert a.args is b.args
    assert a.env is b.env
    assert a.args is not shared


def test_a_subclass_of_role_is_copied_as_itself() -> None:
    class MyRole(Role):
        pass

    role = MyRole("r", image="i", entrypoint="e", args=["x"])
    copied: Any = copy.deepcopy(role)
    assert type(copied) is MyRole
    assert copied == role
