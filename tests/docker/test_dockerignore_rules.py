"""Docker's ``.dockerignore`` pattern rules, without a daemon (the same rules are
checked against ``docker build`` in test_dockerignore_matches_docker_build)."""

from __future__ import annotations

import io
import logging
import tarfile
from pathlib import Path

import pytest

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.shared.dockerignore import DockerIgnore, read_patterns
from asyncsched.schedulers.shared.images import build_context


@pytest.mark.parametrize(
    ("pattern", "path", "excluded"),
    [
        ("**/.env", ".env", True),  # ** matches zero directories
        ("**/.env", "a/b/.env", True),
        ("**/.env", "a/x.env", False),
        ("/secrets", "secrets/key", True),  # the leading / is dropped
        ("/secrets", "app/secrets/key", False),
        ("*.pem", "x.pem", True),
        ("*.pem", "a/x.pem", False),  # * stays within one element
        ("**/*.pem", "a/b/x.pem", True),
        ("**/*.pem", "x.pem", True),
        ("dir/**", "dir/a/b", True),
        ("dir/**", "dir", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("**x", "abx", True),  # a leading ** is a suffix test
        ("?.txt", "a.txt", True),
        ("?.txt", "ab.txt", False),
        ("[a-c].txt", "b.txt", True),
        ("[^a-c].txt", "b.txt", False),
        ("\\*.txt", "*.txt", True),
        ("\\*.txt", "a.txt", False),
        ("a.b", "axb", False),  # '.' is literal
        ("a+(b)", "a+(b)", True),
        ("a//b/../c/", "a/c/x", True),  # cleaned like a path
        ("secrets", "secrets/deep/key", True),  # via the parent directory
    ],
)
def test_pattern_matches_as_docker(pattern: str, path: str, excluded: bool) -> None:
    assert DockerIgnore(read_patterns(pattern)).excluded(path) is excluded


def test_exceptions_and_last_match_wins() -> None:
    rules = DockerIgnore(["*.pem", "!keep.pem", "keep.pem.bak"])
    assert rules.excluded("a.pem")
    assert not rules.excluded("keep.pem")
    assert not DockerIgnore(["!keep", "keep"]).excluded("other")
    assert DockerIgnore(["!keep", "keep"]).excluded("keep")


def test_only_a_hash_in_the_first_column_starts_a_comment() -> None:
    assert read_patterns("#a\n #b\nc#d\n") == ["#b", "c#d"]


@pytest.mark.parametrize("pattern", ["[", "a[]", "[a-]", "[-a]", "x\\", "!"])
def test_invalid_pattern_is_a_clear_error_before_anything_is_sent(
    tmp_path: Path, pattern: str
) -> None:
    (tmp_path / ".dockerignore").write_text(f"ok\n{pattern}\n")
    (tmp_path / "f").write_text("x")
    with pytest.raises(SchedulerError, match=r"invalid \.dockerignore pattern") as info:
        build_context(str(tmp_path))
    assert str(tmp_path / ".dockerignore") in str(info.value)


def test_a_file_torchx_rules_left_out_is_sent_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for rel in ("x.pem", "a/b.pem", "c/d.pem", "keep/k.pem"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("key")
    (tmp_path / ".dockerignore").write_text("*.pem\n!keep/k.pem\n")
    with caplog.at_level(logging.WARNING):
        members = _members(build_context(str(tmp_path)))
    assert {"a/b.pem", "c/d.pem", "keep/k.pem"} <= members
    assert "x.pem" not in members
    [warning] = [r.getMessage() for r in caplog.records]
    assert "'*.pem' leaves out 'a/b.pem' under TorchX's rules" in warning
    assert "it is sent and 1 more" in warning  # c/d.pem; keep/k.pem is wanted
    assert "'**/*.pem'" in warning

    caplog.clear()
    (tmp_path / ".dockerignore").write_text("**/*.pem\n")
    with caplog.at_level(logging.WARNING):
        members = _members(build_context(str(tmp_path)))
    assert not any(name.endswith(".pem") for name in members)
    assert caplog.records == []


def _members(data: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name for m in tar.getmembers()}
