from __future__ import annotations

import os

import pytest

from asyncsched.specs import (
    BindMount,
    DeviceMount,
    MountType,
    VolumeMount,
    parse_mounts,
)


def test_mount_type_values() -> None:
    assert [m.value for m in MountType] == ["bind", "volume", "device"]
    assert MountType("bind") is MountType.BIND


def test_parse_mounts_empty_gives_empty_list() -> None:
    assert parse_mounts([]) == []


def test_parse_mounts_mixed_example_with_aliases() -> None:
    opts = [
        *("type=bind", "src=foo", "dst=dst"),
        *("type=bind", "source=foo1", "readonly", "target=dst1"),
        *("type=volume", "destination=dst2", "source=foo2", "read_only"),
        *("type=device", "src=duck"),
        *("type=device", "src=foo", "dst=bar", "perm=rw"),
        *("type=bind", "src=~/foo", "dst=dst"),
    ]
    assert parse_mounts(opts) == [
        BindMount(src_path="foo", dst_path="dst"),
        BindMount(src_path="foo1", dst_path="dst1", read_only=True),
        VolumeMount(src="foo2", dst_path="dst2", read_only=True),
        DeviceMount(src_path="duck", dst_path="duck", permissions="rwm"),
        DeviceMount(src_path="foo", dst_path="bar", permissions="rw"),
        BindMount(src_path=os.path.expanduser("~/foo"), dst_path="dst"),
    ]


def test_readonly_is_true_whenever_present() -> None:
    mounts = parse_mounts(["type=bind", "src=a", "dst=b", "readonly=false"])
    assert mounts == [BindMount(src_path="a", dst_path="b", read_only=True)]


def test_volume_src_is_not_expanded() -> None:
    assert parse_mounts(["type=volume", "src=~/v", "dst=/d"]) == [
        VolumeMount(src="~/v", dst_path="/d")
    ]


def test_option_before_type_raises() -> None:
    with pytest.raises(KeyError, match="type must be specified first"):
        parse_mounts(["src=foo"])


def test_unknown_option_raises_listing_valid_keys() -> None:
    with pytest.raises(
        KeyError, match=r"unknown mount option blah, must be one of .*type"
    ):
        parse_mounts(["blah=foo"])


@pytest.mark.parametrize(
    ("opts", "missing"),
    [
        (["type=bind"], "src"),
        (["type=bind", "src=a"], "dst"),
        (["type=volume", "dst=a"], "src"),
        (["type=device", "dst=a"], "src"),
    ],
)
def test_missing_required_key_raises_key_error_naming_it(
    opts: list[str], missing: str
) -> None:
    with pytest.raises(KeyError) as exc_info:
        parse_mounts(opts)
    assert exc_info.value.args == (missing,)


def test_invalid_mount_type_raises_value_error() -> None:
    with pytest.raises(
        ValueError, match=r"invalid mount type 'foo', must be one of .*bind"
    ):
        parse_mounts(["type=foo"])


def test_invalid_device_permissions_raise_value_error() -> None:
    with pytest.raises(ValueError, match="permissions"):
        parse_mounts(["type=device", "src=/dev/fuse", "perm=rwx"])
