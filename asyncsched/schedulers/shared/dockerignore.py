"""Docker's ``.dockerignore`` rules, as ``docker build`` applies them.

Reading (what Docker's ignore-file reader does): a UTF-8 BOM is dropped; a line
whose first character is ``#`` is a comment (a ``#`` anywhere else is part of
the pattern); each line is stripped; a leading ``!`` marks an exception; the
rest is cleaned like a path (``a//b/./c/`` is ``a/b/c``) and one leading ``/``
is removed, so ``/secrets`` is ``secrets``.

Matching (Docker's pattern matcher): ``*`` matches within one path element and
``?`` one character other than ``/``; ``[...]`` is a class and ``\\`` escapes;
``**`` matches any number of directories, zero included, so ``**/.env``
matches ``.env`` and ``a/b/.env``; ``dir/**`` matches what is under ``dir``.
A pattern that matches a directory matches everything in it. Patterns apply in
order and the last one that matches decides: ``!keep`` re-includes.

Example:
    >>> rules = DockerIgnore.parse("**/.env\\n/secrets\\n*.pem\\n!keep.pem\\n")
    >>> [rules.excluded(p) for p in (".env", "a/.env", "secrets/k", "x.pem", "a/x.pem")]
    [True, True, True, True, False]
    >>> rules.excluded("keep.pem")
    False
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from asyncsched.errors import SchedulerError

__all__ = ["DockerIgnore", "Pattern", "clean_path", "read_patterns"]

_BOM = "\ufeff"
_ESCAPED = frozenset(".+()|{}$")  # regexp-special, but literal in a file pattern


def clean_path(path: str) -> str:
    """A path cleaned as Go's ``filepath.Clean`` does (``""`` is ``"."``).

    Example:
        >>> clean_path("//a/./b/../c/")
        '/a/c'
    """
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):  # POSIX keeps two leading slashes; Go does not
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def read_patterns(text: str) -> list[str]:
    """The patterns of a ``.dockerignore`` file's ``text``, in order.

    Exceptions keep their ``!``. Example:
        >>> read_patterns("# comment\\n /a/b/ \\n!./c\\nd # not a comment\\n")
        ['a/b', '!c', 'd # not a comment']
    """
    patterns = []
    for number, line in enumerate(text.splitlines()):
        if number == 0:
            line = line.removeprefix(_BOM)
        if line.startswith("#"):
            continue
        line = line.strip()
        if not line:
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
        if line:
            line = clean_path(line)
            if len(line) > 1 and line.startswith("/"):
                line = line[1:]
        patterns.append(f"!{line}" if negated else line)
    return patterns


@dataclass(frozen=True)
class Pattern:
    """One compiled pattern: ``text`` (cleaned, without ``!``) and how it matches."""

    text: str
    exception: bool
    _kind: str = field(repr=False)  # exact, prefix, suffix or regexp
    _regexp: re.Pattern[str] | None = field(repr=False)

    @classmethod
    def compile(cls, line: str) -> Pattern:
        """Compile one line of :func:`read_patterns`.

        Raises:
            SchedulerError: ``!`` alone, or a malformed ``[...]`` or ``\\``.
        """
        text = clean_path(line.strip())
        exception = text.startswith("!")
        if exception:
            if len(text) == 1:
                raise SchedulerError(
                    "invalid .dockerignore pattern '!': an exception needs a pattern"
                )
            text = text[1:]
        _check_syntax(text)
        kind, regexp = _translate(text)
        return cls(text, exception, kind, regexp)

    def matches(self, path: str) -> bool:
        """Whether the relative slash-separated ``path`` itself matches."""
        if self._kind == "exact":
            return path == self.text
        if self._kind == "prefix":
            return path.startswith(self.text[:-2])
        if self._kind == "suffix":
            suffix = self.text[2:]
            return path.endswith(suffix) or (
                suffix.startswith("/") and path == suffix[1:]
            )
        assert self._regexp is not None
        return self._regexp.match(path) is not None


def _translate(text: str) -> tuple[str, re.Pattern[str] | None]:
    """The match kind of ``text`` and, for ``regexp``, the expression."""
    out = ["^"]
    kind = "exact"
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        first = i == 0
        i += 1
        if ch == "*" and i < n and text[i] == "*":
            i += 1
            if i < n and text[i] == "/":
                i += 1
            if i == n:
                if kind == "exact":
                    kind = "prefix"
                else:
                    out.append(".*")
                    kind = "regexp"
            else:
                out.append("(.*/)?")
                kind = "regexp"
            if first:
                kind = "suffix"
        elif ch == "*":
            out.append("[^/]*")
            kind = "regexp"
        elif ch == "?":
            out.append("[^/]")
            kind = "regexp"
        elif ch in _ESCAPED:
            out.append("\\" + ch)
        elif ch == "\\":
            if i < n:
                out.append("\\" + text[i])
                i += 1
                kind = "regexp"
            else:
                out.append("\\\\")
        elif ch in "[]":
            out.append(ch)
            kind = "regexp"
        else:
            out.append(ch)
    if kind != "regexp":
        return kind, None
    try:
        return kind, re.compile("".join(out) + "$")
    except re.error as exc:
        raise SchedulerError(f"invalid .dockerignore pattern {text!r}: {exc}") from None


def _check_syntax(text: str) -> None:
    """Refuse what Go's ``filepath.Match`` calls a bad pattern (as Docker does)."""

    def bad(why: str) -> SchedulerError:
        return SchedulerError(f"invalid .dockerignore pattern {text!r}: {why}")

    def class_char(j: int) -> int:
        if j >= len(text) or text[j] in "-]":
            raise bad("malformed character class")
        if text[j] == "\\":
            j += 1
            if j >= len(text):
                raise bad("'\\' at the end")
        j += 1
        if j >= len(text):
            raise bad("unclosed character class")
        return j

    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch == "\\":
            if i >= len(text):
                raise bad("'\\' at the end")
            i += 1
        elif ch == "[":
            if i < len(text) and text[i] == "^":
                i += 1
            ranges = 0
            while True:
                if i < len(text) and text[i] == "]" and ranges:
                    i += 1
                    break
                i = class_char(i)
                if text[i] == "-":
                    i = class_char(i + 1)
                ranges += 1


class DockerIgnore:
    """The rules of one ``.dockerignore``, applied as ``docker build`` does.

    Example:
        >>> rules = DockerIgnore(["secrets", "!secrets/public"])
        >>> rules.excluded("secrets/key"), rules.excluded("secrets/public/a")
        (True, False)
        >>> rules.walk_into("secrets"), rules.walk_into("other")
        (True, False)

    Raises:
        SchedulerError: a pattern is invalid (``docker build`` refuses it too).
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = [Pattern.compile(p) for p in patterns if p.strip()]

    @classmethod
    def parse(cls, text: str) -> DockerIgnore:
        """The rules of a ``.dockerignore`` file's text (:func:`read_patterns`)."""
        return cls(read_patterns(text))

    def excluded(self, path: str) -> bool:
        """Whether ``path`` (relative, ``/``-separated) is excluded, as the walk
        finds it when it gets there (an excluded directory is walked only when
        :meth:`walk_into` says so)."""
        parents: list[bool] | None = None
        parts = clean_path(path).split("/")
        verdict = False
        for depth in range(1, len(parts) + 1):
            verdict, parents = self.match(
                "/".join(parts[:depth]), parents or [False] * len(self.patterns)
            )
        return verdict

    def match(self, path: str, parents: Sequence[bool]) -> tuple[bool, list[bool]]:
        """Whether ``path`` is excluded, given which patterns its directory matched.

        ``parents`` is the second value returned for the directory holding
        ``path`` (all False at the root). This is the walk's step: a walk asks
        for each directory's entries with that directory's answer, as Docker's
        context walker does.
        """
        verdict = False
        matched = [False] * len(self.patterns)
        for i, pattern in enumerate(self.patterns):
            hit = parents[i]
            if not hit:
                if pattern.exception != verdict:
                    continue  # it could not change the verdict
                hit = pattern.matches(path)
            matched[i] = hit
            if hit:
                verdict = not pattern.exception
        return verdict, matched

    def walk_into(self, directory: str) -> bool:
        """Whether an excluded ``directory`` must still be walked: an exception
        pattern names something below it (``!dir/keep``). Docker decides this on
        the pattern's text, so ``!**/keep`` does not reach into an excluded
        directory."""
        prefix = directory + "/"
        return any(
            p.exception and (p.text + "/").startswith(prefix) for p in self.patterns
        )

    def torchx_reading(self, path: str) -> str | None:
        """The pattern that TorchX's rules (``fnmatch``, where ``*`` crosses
        ``/``) would have excluded the sent file ``path`` with, if any.

        None when an exception names ``path`` or a directory above it: the
        file is wanted. For a warning: ``*.pem`` left ``a/b.pem`` out under
        TorchX, and ``docker build`` sends it.

        Example:
            >>> DockerIgnore(["*.pem"]).torchx_reading("a/b.pem")
            '*.pem'
        """
        if "/" not in path:
            return None
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        wanted = (p for p in self.patterns if p.exception)
        if any(p.matches(prefix) for p in wanted for prefix in prefixes):
            return None
        for pattern in self.patterns:
            if (
                not pattern.exception
                and "*" in pattern.text
                and fnmatch.fnmatchcase(path, pattern.text)
            ):
                return pattern.text
        return None
