from __future__ import annotations

import json
import typing
from typing import Any, Union

import pytest

from asyncsched.errors import AsyncschedWarning, InvalidArgumentError
from asyncsched.specs import (
    CfgVal,
    InvalidRunConfigException,
    get_type_name,
    runopt,
    runopts,
    to_dict,
)

LIST_TYPES: list[Any] = [typing.List[str], list[str]]  # noqa: UP006
DICT_TYPES: list[Any] = [typing.Dict[str, str], dict[str, str]]  # noqa: UP006


def make_opts() -> runopts:
    opts = runopts()
    opts.add("run_as", type_=str, help="run as user", required=True)
    opts.add("priority", type_=int, help="job priority", default=10)
    opts.add("cluster_id", type_=str, help="cluster to submit to")
    return opts


# -- runopt.cast_to_type ------------------------------------------------------


@pytest.mark.parametrize("list_type", LIST_TYPES)
def test_cast_to_type_splits_lists_on_comma_or_semicolon(list_type: Any) -> None:
    opt = runopt(default=None, opt_type=list_type, is_required=False, help="")
    assert opt.is_type_list_of_str
    assert not opt.is_type_dict_of_str
    assert opt.cast_to_type("a,b,c") == ["a", "b", "c"]
    assert opt.cast_to_type("abc;def;ghi") == ["abc", "def", "ghi"]
    assert opt.cast_to_type("a,,b;") == ["a", "b"]


@pytest.mark.parametrize("dict_type", DICT_TYPES)
def test_cast_to_type_dict_splits_on_first_colon(dict_type: Any) -> None:
    opt = runopt(default=None, opt_type=dict_type, is_required=False, help="")
    assert opt.is_type_dict_of_str
    assert opt.cast_to_type("f:b,F:B;url:http://x") == {
        "f": "b",
        "F": "B",
        "url": "http://x",
    }
    # TorchX raises IndexError here; asyncsched an error of its tree that names the item
    with pytest.raises(InvalidArgumentError, match="'novalue' is not a `key:value`"):
        opt.cast_to_type("novalue")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("True", True), ("TRUE", True), ("1", False), ("x", False)],
)
def test_cast_to_type_bool_is_true_only_for_true(text: str, expected: bool) -> None:
    assert runopt(None, bool, False, "").cast_to_type(text) is expected


def test_cast_to_type_scalars_use_constructor() -> None:
    assert runopt(None, int, False, "").cast_to_type("42") == 42
    assert runopt(None, float, False, "").cast_to_type("0.5") == 0.5
    assert runopt(None, str, False, "").cast_to_type("x") == "x"
    with pytest.raises(ValueError):
        runopt(None, int, False, "").cast_to_type("4.2")


def test_cast_to_type_without_type_raises() -> None:
    with pytest.raises(ValueError):
        runopt(None, None, False, "").cast_to_type("x")  # type: ignore[arg-type]


# -- runopts.add / get / iter / update / repr ---------------------------------


def test_add_required_with_default_raises() -> None:
    with pytest.raises(ValueError, match="must not specify default value"):
        runopts().add("x", type_=str, help="", default="d", required=True)


def test_add_default_of_wrong_type_raises() -> None:
    with pytest.raises(TypeError, match="Option: x, must be of type"):
        runopts().add("x", type_=int, help="", default=0.5)


def test_add_again_replaces_option() -> None:
    opts = runopts()
    opts.add("x", type_=int, help="old", default=1)
    opts.add("x", type_=str, help="new")
    assert len(opts) == 1
    assert opts.get("x") == runopt(None, str, False, "new")


def test_iteration_yields_name_and_option_in_order() -> None:
    opts = make_opts()
    pairs = list(opts)
    assert [name for name, _ in pairs] == ["run_as", "priority", "cluster_id"]
    for name, opt in pairs:
        assert opts.get(name) is opt
    assert opts.get("nope") is None
    assert len(opts) == 3


def test_update_merges_other_wins() -> None:
    opts = make_opts()
    other = runopts()
    other.add("priority", type_=int, help="other", default=1)
    other.add("extra", type_=bool, help="extra", default=False)
    opts.update(other)
    assert [name for name, _ in opts] == ["run_as", "priority", "cluster_id", "extra"]
    priority = opts.get("priority")
    assert priority is not None
    assert priority.default == 1


def test_repr_is_help_text() -> None:
    opts = make_opts()
    opts.add("tags", type_=list[str], help="tags", default=["a"])
    assert repr(opts) == (
        "    usage:\n"
        "        run_as=RUN_AS,[priority=PRIORITY],[cluster_id=CLUSTER_ID],[tags=TAGS]\n"
        "\n"
        "    required arguments:\n"
        "        run_as=RUN_AS (str)\n"
        "            run as user\n"
        "\n"
        "    optional arguments:\n"
        "        priority=PRIORITY (int, 10)\n"
        "            job priority\n"
        "        cluster_id=CLUSTER_ID (str, None)\n"
        "            cluster to submit to\n"
        "        tags=TAGS (list[str], ['a'])\n"
        "            tags"
    )


def test_repr_of_empty_runopts_is_usage_only() -> None:
    assert repr(runopts()) == "    usage:\n        "


# -- runopts.is_type / get_type_name ------------------------------------------


def test_is_type() -> None:
    assert runopts.is_type(3, int)
    assert not runopts.is_type("foo", int)
    assert runopts.is_type(True, int)  # bool is an int
    for list_type in LIST_TYPES:
        assert not runopts.is_type(None, list_type)
        assert runopts.is_type([], list_type)
        assert runopts.is_type(["a", "b"], list_type)
        assert not runopts.is_type(["a", 1], list_type)  # type: ignore[list-item]
    for dict_type in DICT_TYPES:
        assert not runopts.is_type(None, dict_type)
        assert runopts.is_type({}, dict_type)
        assert runopts.is_type({"foo": "bar"}, dict_type)
        assert not runopts.is_type({"foo": 1}, dict_type)  # type: ignore[dict-item]


def test_is_type_generic_fallback_ignores_which_generic() -> None:
    assert runopts.is_type({"a": "b"}, list[str])
    assert runopts.is_type(["a"], dict[str, str])


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (int, "int"),
        (list, "list"),
        (Union[str, int], "typing.Union[str, int]"),  # noqa: UP007
        (typing.List[int], "typing.List[int]"),  # noqa: UP006
        (typing.Dict[str, int], "typing.Dict[str, int]"),  # noqa: UP006
        (typing.List[typing.List[int]], "typing.List[typing.List[int]]"),  # noqa: UP006
        (list[str], "list[str]"),
    ],
)
def test_get_type_name(tp: object, expected: str) -> None:
    assert get_type_name(tp) == expected


# -- runopts.resolve ------------------------------------------------------------


def test_resolve_fills_defaults_without_mutating_input() -> None:
    opts = make_opts()
    cfg: dict[str, CfgVal] = {"run_as": "me"}
    resolved = opts.resolve(cfg)
    assert resolved == {"run_as": "me", "priority": 10, "cluster_id": None}
    assert cfg == {"run_as": "me"}
    assert resolved is not cfg


def test_resolve_keeps_given_values() -> None:
    resolved = make_opts().resolve({"run_as": "me", "priority": 1, "cluster_id": "c"})
    assert resolved == {"run_as": "me", "priority": 1, "cluster_id": "c"}


def test_resolve_passes_unknown_keys_through() -> None:
    resolved = make_opts().resolve({"run_as": "me", "foo": "bar"})
    assert resolved["foo"] == "bar"


def test_resolve_missing_required_raises() -> None:
    with pytest.raises(InvalidRunConfigException) as exc_info:
        make_opts().resolve({})
    assert exc_info.value.cfg_key == "run_as"
    assert str(exc_info.value) == (
        "Required run option: run_as, must be provided and not `None`. Given: <EMPTY>"
    )


def test_resolve_required_given_as_none_raises() -> None:
    with pytest.raises(InvalidRunConfigException, match="Required run option: run_as"):
        make_opts().resolve({"run_as": None})


def test_resolve_wrong_type_raises() -> None:
    cfg: dict[str, CfgVal] = {"run_as": 100}
    with pytest.raises(InvalidRunConfigException) as exc_info:
        make_opts().resolve(cfg)
    assert exc_info.value.cfg_key == "run_as"
    assert str(exc_info.value) == (
        "Run option: run_as, must be of type: str, but was: 100 (int)."
        " Given: {'run_as': 100}"
    )


def test_resolve_strict_rejects_unknown_key_with_hint() -> None:
    with pytest.raises(InvalidRunConfigException) as exc_info:
        make_opts().resolve({"run_as": "me", "priorty": 1}, strict=True)
    assert exc_info.value.cfg_key == "priorty"
    assert str(exc_info.value).startswith(
        "Unknown run option: priorty, valid options are:"
        " ['run_as', 'priority', 'cluster_id'] (did you mean `priority`?)"
    )


def test_resolve_strict_rejects_unknown_key_without_hint() -> None:
    with pytest.raises(InvalidRunConfigException) as exc_info:
        make_opts().resolve({"run_as": "me", "zzz": 1}, strict=True)
    message = str(exc_info.value)
    assert message.startswith(
        "Unknown run option: zzz, valid options are: ['run_as', 'priority', 'cluster_id']."
    )
    assert "did you mean" not in message


def test_resolve_strict_accepts_known_keys() -> None:
    assert make_opts().resolve({"run_as": "me"}, strict=True)["priority"] == 10


# -- cfg_from_str ---------------------------------------------------------------


def list_opts(list_type: Any) -> runopts:
    opts = runopts()
    opts.add("K", type_=list_type, help="a list")
    opts.add("J", type_=str, help="a str")
    opts.add("E", type_=dict[str, str], help="a dict")
    return opts


@pytest.mark.parametrize("list_type", LIST_TYPES)
def test_cfg_from_str_empty_gives_empty(list_type: Any) -> None:
    assert list_opts(list_type).cfg_from_str("") == {}


@pytest.mark.parametrize("list_type", LIST_TYPES)
def test_cfg_from_str_unknown_key_is_dropped_with_warning(list_type: Any) -> None:
    with pytest.warns(AsyncschedWarning, match="unknown run option `UNKNOWN`"):
        assert list_opts(list_type).cfg_from_str("UNKNOWN=VALUE") == {}


@pytest.mark.parametrize("list_type", LIST_TYPES)
@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("K=a,J=b", {"K": ["a"], "J": "b"}),
        ("K=a,b", {"K": ["a", "b"]}),
        ("K=a;b", {"K": ["a", "b"]}),
        ("K=a,b;", {"K": ["a", "b"]}),
        ("K=a,b,J=d", {"K": ["a", "b"], "J": "d"}),
        ("K=a,b;J=d", {"K": ["a", "b"], "J": "d"}),
        ("K=a;b,J=d", {"K": ["a", "b"], "J": "d"}),
        ("K=a;b;J=d", {"K": ["a", "b"], "J": "d"}),
        ("E=f:b,F:B", {"E": {"f": "b", "F": "B"}}),
    ],
)
def test_cfg_from_str_casts_values(
    list_type: Any, literal: str, expected: dict[str, CfgVal]
) -> None:
    assert list_opts(list_type).cfg_from_str(literal) == expected


@pytest.mark.parametrize("list_type", LIST_TYPES)
def test_cfg_from_str_drops_unknown_key_in_the_middle(list_type: Any) -> None:
    with pytest.warns(AsyncschedWarning, match="`X`"):
        cfg = list_opts(list_type).cfg_from_str("K=a,b,X=1,2,J=d")
    assert cfg == {"K": ["a", "b"], "J": "d"}


def test_resolve_of_cfg_from_str_gives_typed_dict() -> None:
    opts = runopts()
    opts.add("foo", type_=str, help="", default="")
    opts.add("test_key", type_=str, help="", required=True)
    opts.add("default_time", type_=int, help="", default=10)
    opts.add("enable", type_=bool, help="", default=False)
    opts.add("disable", type_=bool, help="", default=True)
    opts.add("complex_list", type_=list[str], help="", default=[])
    opts.add("ratio", type_=float, help="", default=0.1)
    cfg = opts.resolve(
        opts.cfg_from_str(
            "foo=bar,test_key=test_value,default_time=42,enable=True,"
            "disable=False,complex_list=v1;v2;v3,ratio=0.5"
        )
    )
    assert cfg == {
        "foo": "bar",
        "test_key": "test_value",
        "default_time": 42,
        "enable": True,
        "disable": False,
        "complex_list": ["v1", "v2", "v3"],
        "ratio": 0.5,
    }


# -- cfg_from_json_repr -----------------------------------------------------------


def test_resolve_of_cfg_from_json_repr_maps_json_types() -> None:
    opts = runopts()
    opts.add("s", type_=str, help="", default="x")
    opts.add("i", type_=int, help="", default=1)
    opts.add("b", type_=bool, help="", default=False)
    opts.add("l", type_=list[str], help="", default=[])
    opts.add("d", type_=dict[str, str], help="", default={})
    opts.add("n", type_=str, help="")
    json_repr = json.dumps(
        {
            "s": "str",
            "i": 5,
            "b": True,
            "l": ["a", 1],
            "d": {"k": 2},
            "n": None,
            "unknown": "dropped",
        }
    )
    cfg = opts.cfg_from_json_repr(json_repr)
    assert cfg == {
        "s": "str",
        "i": 5,
        "b": True,
        "l": ["a", "1"],
        "d": {"k": "2"},
        "n": None,
    }
    assert opts.resolve(cfg) == cfg


# -- to_dict --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("", {}),
        ("FOO=v1", {"FOO": "v1"}),
        ("FOO=''", {"FOO": ""}),
        ('FOO=""', {"FOO": ""}),
        ("FOO=v1,v2", {"FOO": "v1,v2"}),
        ("FOO=v1;v2", {"FOO": "v1;v2"}),
        ("FOO=v1,v2,", {"FOO": "v1,v2,"}),
        ("FOO=v1;v2;", {"FOO": "v1;v2;"}),
        ("FOO=v1,v2,BAR=v3", {"FOO": "v1,v2", "BAR": "v3"}),
        ("FOO=v1;v2,BAR=v3", {"FOO": "v1;v2", "BAR": "v3"}),
        ("FOO=v1;v2;BAR=v3", {"FOO": "v1;v2", "BAR": "v3"}),
        ("key1=value1,,foo=bar", {"key1": "value1,", "foo": "bar"}),
        (" FOO = v1 , BAR = v2 ", {"FOO": "v1", "BAR": "v2"}),
        ('FOO="a=b,c;d",BAR=v3', {"FOO": "a=b,c;d", "BAR": "v3"}),
        ("FOO='x=1;y=2'", {"FOO": "x=1;y=2"}),
        ("FOO='a,b';'c',BAR=''", {"FOO": "a,b;c", "BAR": ""}),
        ("MSG=it's,B=x", {"MSG": "it's", "B": "x"}),
    ],
)
def test_to_dict(literal: str, expected: dict[str, str]) -> None:
    assert to_dict(literal) == expected


@pytest.mark.parametrize(
    "literal", ["FOO", "FOO,", "FOO;", "FOO=", "FOO=;BAR=v1", "=v1"]
)
def test_to_dict_malformed_raises(literal: str) -> None:
    with pytest.raises(ValueError):
        to_dict(literal)


def test_to_dict_unquoted_equals_in_value_is_not_supported() -> None:
    # a base64 value such as "v3==" loses its padding: quote such values
    assert to_dict("FOO=v1,BAR=v3==") == {"FOO": "v1", "BAR": "v3"}
    assert to_dict("FOO=v1,BAR='v3=='") == {"FOO": "v1", "BAR": "v3=="}
