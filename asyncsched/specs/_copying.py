"""Deep copies of app specs without ``copy.deepcopy``'s per-object overhead.

Every submit copies its ``AppDef`` (the runner's private copy) and each role
once more per replica (macro substitution). Most of a spec is strings,
numbers and flat lists or dicts of them; ``copy.deepcopy`` still visits each
of those values through its dispatch and memo (62 calls to copy a plain
one-role app). :func:`copy_value` copies such flat containers in one step
and hands anything else to ``copy.deepcopy`` with the same memo, so the
result is the same independent deep copy, shared objects stay shared, and
values with their own ``__deepcopy__`` keep it.

Example:
    >>> value = {"args": ["-c", "echo hi"], "env": {"A": "1"}}
    >>> copied = copy_value(value, {})
    >>> copied == value and copied["args"] is not value["args"]
    True
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

__all__ = ["copy_instance", "copy_value"]

_T = TypeVar("_T")

#: immutable values a deep copy returns as they are
_ATOMIC: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})


def copy_value(value: Any, memo: dict[int, Any]) -> Any:
    """A deep copy of ``value``, taking flat lists and dicts of atoms in one step."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    key = id(value)
    if key in memo:
        return memo[key]
    if kind is list and all(type(item) in _ATOMIC for item in value):
        result: Any = list(value)
    elif kind is dict and all(
        type(k) in _ATOMIC and type(v) in _ATOMIC for k, v in value.items()
    ):
        result = dict(value)
    else:
        return copy.deepcopy(value, memo)
    memo[key] = result
    # as copy.deepcopy does: the original lives as long as the memo
    memo.setdefault(id(memo), []).append(value)
    return result


def copy_instance(obj: _T, memo: dict[int, Any]) -> _T:
    """A deep copy of a plain object (a ``__dict__``, no ``__slots__``).

    For a class's ``__deepcopy__``: the raw attribute values are copied
    (nothing the class computes on access runs), the new object is built
    without calling ``__init__``, as ``copy.deepcopy`` builds it.
    """
    new = object.__new__(type(obj))
    memo[id(obj)] = new
    memo.setdefault(id(memo), []).append(obj)
    state = new.__dict__
    for name, value in vars(obj).items():
        state[name] = copy_value(value, memo)
    return new
