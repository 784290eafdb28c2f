from __future__ import annotations

import random

import pytest

from asyncsched.specs import (
    MalformedAppHandleException,
    ParsedAppHandle,
    make_app_handle,
    parse_app_handle,
)
from asyncsched.specs.handles import _HANDLE


def test_make_app_handle_formats_parts() -> None:
    assert make_app_handle("local", "my_session", "my_app_id_1234") == (
        "local://my_session/my_app_id_1234"
    )


def test_make_app_handle_with_empty_session() -> None:
    assert make_app_handle("local", "", "app") == "local:///app"


@pytest.mark.parametrize(
    "handle",
    [
        "my_session/my_application_id",
        "local://my_session/",
        "local://my_application_id",
    ],
)
def test_parse_app_handle_rejects_malformed(handle: str) -> None:
    with pytest.raises(MalformedAppHandleException) as exc_info:
        parse_app_handle(handle)
    assert exc_info.value.app_handle == handle


def test_parse_app_handle_accepts_empty_session() -> None:
    assert parse_app_handle("local:///my_app_id_1234") == ParsedAppHandle(
        "local", "", "my_app_id_1234"
    )


def test_parse_app_handle_splits_parts() -> None:
    parsed = parse_app_handle("local://my_session/my_app_id_1234")
    assert parsed.scheduler_backend == "local"
    assert parsed.session_name == "my_session"
    assert parsed.app_id == "my_app_id_1234"


def test_parse_app_handle_extra_slashes_go_to_session() -> None:
    assert parse_app_handle("k8s://sess/ns/app") == ParsedAppHandle(
        "k8s", "sess/ns", "app"
    )


def test_parse_app_handle_round_trips_make_app_handle() -> None:
    handle = make_app_handle("local_cwd", "s", "echo-x1")
    assert parse_app_handle(handle) == ("local_cwd", "s", "echo-x1")


@pytest.mark.parametrize(
    ("handle", "parts"),
    [
        ("local://s/b/", ("local", "s", "b/")),  # a trailing "/" stays in the app id
        ("a://b://c/d", ("a://b", "c", "d")),  # the last "://" ends the backend
        ("local://s/app\nrest", ("local", "s", "app")),  # a line ends the handle
    ],
)
def test_parse_app_handle_unusual_forms_keep_the_documented_grammar(
    handle: str, parts: tuple[str, str, str]
) -> None:
    assert parse_app_handle(handle) == ParsedAppHandle(*parts)


def test_parse_app_handle_agrees_with_its_grammar_on_random_handles() -> None:
    rng = random.Random(20)
    pieces = ["a", "b", ":", "/", "//", "://", ":/", "\n", " "]
    for _ in range(20_000):
        handle = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        match = _HANDLE.match(handle)
        if match is None:
            with pytest.raises(MalformedAppHandleException):
                parse_app_handle(handle)
        else:
            assert parse_app_handle(handle) == (
                match["backend"],
                match["session"],
                match["app_id"],
            ), handle
