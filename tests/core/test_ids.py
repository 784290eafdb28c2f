from __future__ import annotations

import re
from unittest import mock

from asyncsched.schedulers.shared.ids import (
    get_len_random_id,
    make_unique,
    random_id,
    random_uint64,
)


def test_make_unique_differs_between_calls() -> None:
    assert make_unique("test") != make_unique("test")
    assert make_unique("test", 6) != make_unique("test", 6)
    assert re.fullmatch(r"test-[a-z0-9]{5,}", make_unique("test"))


def test_random_values() -> None:
    assert random_uint64() > 0
    assert random_uint64() != random_uint64()
    rid = random_id()
    assert rid[0].isalpha()
    assert len(rid) > 5
    assert "8" not in "".join(random_id() for _ in range(200))
    assert len(get_len_random_id(6)) == 6
    assert get_len_random_id(6) != get_len_random_id(6)
    assert get_len_random_id(0) == ""


def test_known_vector_matches_torchx() -> None:
    with mock.patch("os.urandom", return_value=bytes(range(8))):
        assert random_id() == "fzfjxlmln9"
        assert make_unique("test") == "test-fzfjxlmln9"
