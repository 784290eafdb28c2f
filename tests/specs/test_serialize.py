from __future__ import annotations

import pytest

from asyncsched.errors import AppFileError, SpecError
from asyncsched.specs import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    app_from_dict,
    app_to_dict,
    role_from_dict,
    role_to_dict,
)


def _role() -> Role:
    return Role(
        "trainer",
        image="/img",
        entrypoint="python",
        args=["-m", "train"],
        env={"SEED": "1"},
        num_replicas=3,
        min_replicas=2,
        max_retries=2,
        retry_policy=RetryPolicy.REPLICA,
        resource=Resource(cpu=2, gpu=1, memMB=2048, capabilities={"zone": "a"}),
        port_map={"http": 8080},
        metadata={"team": "ml"},
        mounts=[
            BindMount("/data", "/data", read_only=True),
            VolumeMount("cache", "/cache"),
            DeviceMount("/dev/fuse", "/dev/fuse", permissions="rw"),
        ],
    )


def test_role_round_trips_through_the_dict_schema() -> None:
    role = _role()
    again = role_from_dict(role_to_dict(role))
    for field in (
        "name",
        "image",
        "entrypoint",
        "args",
        "env",
        "num_replicas",
        "min_replicas",
        "max_retries",
        "retry_policy",
        "resource",
        "port_map",
        "metadata",
        "mounts",
    ):
        assert getattr(again, field) == getattr(role, field), field


def test_app_round_trips_and_optional_fields_stay_out() -> None:
    app = AppDef(
        "a", roles=[Role("r", image="/", entrypoint="echo")], metadata={"k": "v"}
    )
    data = app_to_dict(app)
    assert data == {
        "name": "a",
        "metadata": {"k": "v"},
        "roles": [
            {
                "name": "r",
                "image": "/",
                "entrypoint": "echo",
                "args": [],
                "env": {},
                "num_replicas": 1,
                "max_retries": 0,
                "retry_policy": "APPLICATION",
            }
        ],
    }
    assert app_to_dict(app_from_dict(data)) == data


def test_bad_field_names_the_path_and_is_a_spec_error() -> None:
    with pytest.raises(AppFileError) as info:
        app_from_dict(
            {
                "name": "a",
                "roles": [{"name": "r", "entrypoint": "x", "nmu_replicas": 2}],
            }
        )
    assert isinstance(info.value, SpecError)
    assert info.value.field == "roles[0].nmu_replicas"
    assert "did you mean `num_replicas`" in str(info.value)
