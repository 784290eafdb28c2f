from __future__ import annotations

from importlib import metadata

import pytest

from asyncsched.specs import (
    NULL_RESOURCE,
    GiB,
    Resource,
    named_resources,
    resource,
)
from asyncsched.specs.resources import (
    K8S_ITYPE,
    _builtin_factories,
    _NamedResourceLibrary,
)

AWS_GiB = int(1024 * 0.96)


def test_gib_is_1024_mb() -> None:
    assert GiB == 1024


def test_null_resource_is_minus_one_everywhere() -> None:
    assert (NULL_RESOURCE.cpu, NULL_RESOURCE.gpu, NULL_RESOURCE.memMB) == (-1, -1, -1)


def test_resource_copy_merges_capabilities_new_value_wins_original_unchanged() -> None:
    original = Resource(cpu=1, gpu=2, memMB=3, capabilities={"a": "1", "b": "2"})
    copied = Resource.copy(original, b="new", c="3")
    assert copied.capabilities == {"a": "1", "b": "new", "c": "3"}
    assert (copied.cpu, copied.gpu, copied.memMB) == (1, 2, 3)
    assert original.capabilities == {"a": "1", "b": "2"}


def test_resource_copy_keeps_devices_but_drops_tags() -> None:
    original = Resource(cpu=1, gpu=0, memMB=1, devices={"efa": 2}, tags={"team": "x"})
    copied = Resource.copy(original)
    assert copied.devices == {"efa": 2}
    assert copied.devices is not original.devices
    assert copied.tags == {}


def test_resource_defaults_to_two_cpus_no_gpu_one_gib() -> None:
    assert resource() == Resource(cpu=2, gpu=0, memMB=1024)


def test_resource_overrides_only_given_values() -> None:
    assert resource(cpu=1) == Resource(cpu=1, gpu=0, memMB=1024)
    assert resource(gpu=4, memMB=10) == Resource(cpu=2, gpu=4, memMB=10)


def test_resource_zero_falls_back_to_default() -> None:
    assert resource(cpu=0) == Resource(cpu=2, gpu=0, memMB=1024)


def test_resource_by_name_ignores_raw_values() -> None:
    assert (
        resource(cpu=16, gpu=4, h="aws_p3.2xlarge") == named_resources["aws_p3.2xlarge"]
    )
    assert resource(h="gpu.small").gpu == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("aws_t3.medium", (2, 0, 4 * AWS_GiB)),
        ("aws_m5.2xlarge", (8, 0, 32 * AWS_GiB)),
        ("aws_p3.2xlarge", (8, 1, 61 * AWS_GiB)),
        ("aws_p3.8xlarge", (32, 4, 244 * AWS_GiB)),
        ("aws_p3.16xlarge", (64, 8, 488 * AWS_GiB)),
        ("aws_g5.2xlarge", (8, 1, 32 * AWS_GiB)),
    ],
)
def test_aws_named_resources_match_instance_types(
    name: str, expected: tuple[int, int, int]
) -> None:
    res = named_resources[name]
    assert (res.cpu, res.gpu, res.memMB) == expected
    assert res.capabilities == {K8S_ITYPE: name.removeprefix("aws_")}
    assert name in named_resources


def test_aws_named_resource_with_efa_has_device() -> None:
    assert named_resources["aws_p4d.24xlarge"].devices == {"vpc.amazonaws.com/efa": 4}


def test_named_resources_are_fresh_objects() -> None:
    first = named_resources["gpu.small"]
    first.capabilities["x"] = 1
    second = named_resources["gpu.small"]
    assert first is not second
    assert second.capabilities == {}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu.small", (8, 1, 32 * GiB)),
        ("gpu.medium", (16, 2, 64 * GiB)),
        ("gpu.large", (32, 4, 128 * GiB)),
        ("gpu.xlarge", (64, 8, 256 * GiB)),
        ("cpu.nano", (1, 0, 512)),
        ("cpu.micro", (1, 0, 1 * GiB)),
        ("cpu.small", (1, 0, 2 * GiB)),
        ("cpu.medium", (2, 0, 4 * GiB)),
        ("cpu.large", (2, 0, 8 * GiB)),
        ("cpu.xlarge", (8, 0, 32 * GiB)),
    ],
)
def test_generic_named_resources_values(
    name: str, expected: tuple[int, int, int]
) -> None:
    res = named_resources[name]
    assert (res.cpu, res.gpu, res.memMB) == expected
    assert res.cpu >= 1
    assert res.memMB >= 1
    assert res.capabilities == {}
    assert res.devices == {}
    if name.startswith("gpu."):
        assert res.gpu >= 1


def test_unknown_name_is_not_contained() -> None:
    assert "nope.huge" not in named_resources
    assert 42 not in named_resources


@pytest.mark.parametrize("name", ["NULL", "MISSING"])
def test_null_and_missing_give_null_resource(name: str) -> None:
    assert named_resources[name] is NULL_RESOURCE
    assert name in named_resources


def test_unknown_named_resource_lists_registered_names() -> None:
    with pytest.raises(KeyError) as exc_info:
        named_resources["foo"]
    msg = exc_info.value.args[0]
    assert msg.startswith(
        "No named resource found for `foo`. Registered named resources: ["
    )
    assert "'gpu.small'" in msg


def test_near_miss_named_resource_suggests_closest() -> None:
    with pytest.raises(KeyError) as exc_info:
        named_resources["aws_p3.16xlarg"]
    assert exc_info.value.args[0] == (
        "No named resource found for `aws_p3.16xlarg`. Did you mean `aws_p3.16xlarge`?"
    )


def test_named_resources_cannot_be_iterated() -> None:
    with pytest.raises(NotImplementedError):
        iter(named_resources)


def plugin_tiny() -> Resource:
    return Resource(cpu=3, gpu=0, memMB=7)


def plugin_override_gpu_small() -> Resource:
    return Resource(cpu=99, gpu=9, memMB=9)


def test_plugins_load_lazily_and_override_builtins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group = "asyncsched.named_resources"
    eps = metadata.EntryPoints(
        [
            metadata.EntryPoint("tiny", f"{__name__}:plugin_tiny", group),
            metadata.EntryPoint(
                "gpu.small", f"{__name__}:plugin_override_gpu_small", group
            ),
            metadata.EntryPoint("broken", "no_such_module_xyz:factory", group),
        ]
    )
    calls: list[str] = []

    def fake_entry_points(*, group: str) -> metadata.EntryPoints:
        calls.append(group)
        return eps

    monkeypatch.setattr(metadata, "entry_points", fake_entry_points)
    library = _NamedResourceLibrary(_builtin_factories())
    assert calls == []  # nothing discovered before first use
    assert library["tiny"] == Resource(cpu=3, gpu=0, memMB=7)
    assert library["gpu.small"] == Resource(cpu=99, gpu=9, memMB=9)
    assert library["cpu.nano"] == Resource(cpu=1, gpu=0, memMB=512)
    assert "broken" in library.names()  # listed without being imported
    assert calls == ["asyncsched.named_resources"]
