from __future__ import annotations

import logging

import pytest

from asyncsched.specs import NULL_RESOURCE, Resource, Role, macros


@pytest.fixture
def values() -> macros.Values:
    return macros.Values(
        img_root="/img", app_id="app-123", replica_id="2", rank0_env="RANK0_HOST"
    )


def test_placeholders() -> None:
    assert (macros.img_root, macros.base_img_root, macros.app_id) == (
        "${img_root}",
        "${base_img_root}",
        "${app_id}",
    )
    assert (macros.replica_id, macros.rank0_env) == ("${replica_id}", "${rank0_env}")


def test_substitute_replaces_every_macro() -> None:
    values = macros.Values(
        img_root="img_root",
        app_id="app_id",
        replica_id="replica_id",
        rank0_env="rank0_env",
        base_img_root="base_img_root",
    )
    for name in ("img_root", "app_id", "replica_id", "rank0_env", "base_img_root"):
        template = f"tmpl-{getattr(macros, name)}-end"
        assert values.substitute(template) == f"tmpl-{name}-end"


def test_substitute_template_rules(values: macros.Values) -> None:
    assert values.substitute("$app_id/${replica_id}") == "app-123/2"
    assert (
        values.substitute("$app_id_x ${APP_ID} ${unknown}")
        == "$app_id_x ${APP_ID} ${unknown}"
    )
    assert values.substitute("$${TORCHX_RANK0_HOST:=localhost}") == (
        "${TORCHX_RANK0_HOST:=localhost}"
    )
    assert values.substitute("$${${rank0_env}}") == "${RANK0_HOST}"
    assert values.substitute("cost $5") == "cost $5"
    assert values.base_img_root == "DEPRECATED"


def test_apply_returns_substituted_copy_and_leaves_role_untouched(
    values: macros.Values,
) -> None:
    role = Role(
        "trainer",
        image="${img_root}/image",
        entrypoint="${img_root}/run",
        args=["--id", macros.app_id, "$$HOME"],
        env={"RID": macros.replica_id, macros.app_id: "k"},
        metadata={"top": "${app_id}"},
    )
    new = values.apply(role)
    assert new is not role
    assert new.args == ["--id", "app-123", "$HOME"]
    assert new.env == {"RID": "2", "${app_id}": "k"}  # keys are not substituted
    assert new.metadata == {"top": "app-123"}
    assert new.image == "${img_root}/image"
    assert new.entrypoint == "${img_root}/run"
    assert role.args == ["--id", "${app_id}", "$$HOME"]
    assert role.env == {"RID": "${replica_id}", "${app_id}": "k"}
    assert role.metadata == {"top": "${app_id}"}


def test_apply_walks_nested_metadata(values: macros.Values) -> None:
    nested = [["${app_id}"]]
    role = Role(
        "r",
        "i",
        metadata={
            "a": {"b": {"c": "${app_id}"}, "n": 1},
            "l": ["${replica_id}", 3, "x"],
            "deep": nested,
        },
    )
    new = values.apply(role)
    assert new.metadata == {
        "a": {"b": {"c": "app-123"}, "n": 1},
        "l": ["2", 3, "x"],
        "deep": [["${app_id}"]],  # lists in lists are not walked
    }
    assert role.metadata["a"] == {"b": {"c": "${app_id}"}, "n": 1}
    assert role.metadata["l"] == ["${replica_id}", 3, "x"]


def test_apply_keeps_shared_null_resource_and_copies_others(
    values: macros.Values,
) -> None:
    assert values.apply(Role("r", "i")).resource is NULL_RESOURCE
    res = Resource(cpu=1, gpu=0, memMB=1)
    new = values.apply(Role("r", "i", resource=res))
    assert new.resource == res
    assert new.resource is not res


def test_apply_carries_overrides_without_touching_the_original(
    values: macros.Values, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def args() -> list[str]:
        calls.append(1)
        return ["${app_id}"]

    role = Role("r", "i", overrides={"args": args})
    with caplog.at_level(logging.WARNING, logger="asyncsched.specs.macros"):
        new = values.apply(role)
    assert "macros are not substituted into overrides" in caplog.text
    assert calls == []
    assert list(role.overrides) == ["args"]
    assert list(new.overrides) == ["args"]
    assert new.args == ["${app_id}"]
    assert calls == [1]
    assert "args" in role.overrides  # resolving the copy left the original pending
