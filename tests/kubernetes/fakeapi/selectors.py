"""Label and field selectors with the grammar of the real API server.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``,
``a`` (exists) and ``!a`` (does not exist), joined by commas. Field
selectors: ``path=value``, ``path==value``, ``path!=value`` over dotted paths
such as ``metadata.name`` or ``status.phase``.

Example::

    sel = parse_label_selector("app=web,tier notin (db),!legacy")
    sel.matches({"app": "web", "tier": "fe"})  # True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .kinds import bad_request

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_TERM = re.compile(
    rf"""^\s*(?:
        (?P<notkey>!\s*{_KEY})
      | (?P<setkey>{_KEY})\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)
      | (?P<eqkey>{_KEY})\s*(?P<eqop>==|!=|=)\s*(?P<value>[-A-Za-z0-9_.]*)
      | (?P<key>{_KEY})
    )\s*$""",
    re.VERBOSE,
)

Matcher = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True)
class Selector:
    """A parsed selector: every requirement must hold."""

    requirements: tuple[Matcher, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req(labels) for req in self.requirements)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in terms if t.strip()]


def _requirement(term: str, raw: str) -> Matcher:
    m = _TERM.match(term)
    if m is None:
        raise bad_request(f"unable to parse requirement: {raw!r}")
    if m["notkey"]:
        key = m["notkey"][1:].strip()
        return lambda labels: key not in labels
    if m["setkey"]:
        key, values = m["setkey"], {v.strip() for v in m["values"].split(",")}
        if m["setop"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m["eqkey"]:
        key, value = m["eqkey"], m["value"]
        if m["eqop"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    key = m["key"]
    return lambda labels: key in labels


def parse_label_selector(text: str | None) -> Selector:
    """Parse a ``labelSelector`` query value (empty or None selects everything)."""
    if not text:
        return Selector()
    return Selector(tuple(_requirement(t, text) for t in _split_terms(text)))


def field_value(obj: Mapping[str, Any], path: str) -> str | None:
    """The string value at a dotted path, or None when absent."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur if isinstance(cur, str) else None if cur is None else str(cur)


@dataclass(frozen=True)
class FieldSelector:
    """A parsed ``fieldSelector``: (path, negated, value) triples."""

    terms: tuple[tuple[str, bool, str], ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for path, negated, value in self.terms:
            if (field_value(obj, path) or "") == value:
                if negated:
                    return False
            elif not negated:
                return False
        return True


_FIELD = re.compile(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*([^,]*?)\s*$")


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a ``fieldSelector`` query value."""
    if not text:
        return FieldSelector()
    terms = []
    for raw in text.split(","):
        m = _FIELD.match(raw)
        if m is None:
            raise bad_request(f"invalid selector: {text!r}; can't understand {raw!r}")
        terms.append((m[1], m[2] == "!=", m[3]))
    return FieldSelector(tuple(terms))
