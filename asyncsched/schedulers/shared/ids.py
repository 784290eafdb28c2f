"""Unique, Kubernetes-safe app ids, in TorchX's format.

Example:
    >>> make_unique("trainer").startswith("trainer-")
    True
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable

__all__ = [
    "get_len_random_id",
    "make_unique",
    "random_id",
    "random_uint64",
    "unique_app_id",
]

_FIRST = "bcdfghjklmnpqrstvwxz"  # a letter first, so the id is a valid DNS label
_REST = _FIRST + "012345679"  # no 8, as TorchX


def make_unique(name: str, string_length: int = 0) -> str:
    """Return ``f"{name}-{suffix}"`` with a random suffix.

    ``string_length`` > 0 fixes the suffix length; otherwise the suffix is
    :func:`random_id` (10 to 14 characters).
    """
    suffix = get_len_random_id(string_length) if string_length > 0 else random_id()
    return f"{name}-{suffix}"


def unique_app_id(
    name: str, torchx_module: str, default: Callable[[str], str] | None = None
) -> str:
    """A new app id for ``name``, through ``torchx_module.make_unique`` when patched.

    TorchX tests pin ids by patching ``make_unique`` on a backend's module
    (``mock.patch("torchx.schedulers.docker_scheduler.make_unique")``). The
    same patch on asyncsched's TorchX-path module (``torchx_module``, e.g.
    ``asyncsched.schedulers.docker_scheduler``) takes effect: its attribute
    is looked up at each call when that module is loaded. When it is not
    patched, ``default`` (the caller's own ``make_unique``, so patching that
    works too) or :func:`make_unique` makes the id.

    Example:
        >>> unique_app_id("app", "not.loaded.module").startswith("app-")
        True
    """
    module = sys.modules.get(torchx_module)
    patched = getattr(module, "make_unique", make_unique) if module else make_unique
    if patched is not make_unique and callable(patched):
        return str(patched(name))
    return (default or make_unique)(name)


def random_uint64() -> int:
    """Return a random unsigned 64-bit integer from ``os.urandom``."""
    return int.from_bytes(os.urandom(8), byteorder="big")


def random_id() -> str:
    """Return a random id that starts with a letter and uses no ``8``.

    The 64 random bits are written least-significant digit first in a mixed
    radix: 20 letters for the first character, 29 symbols after it.
    """
    value = random_uint64()
    chars = [_FIRST[value % len(_FIRST)]]
    value //= len(_FIRST)
    while value:
        chars.append(_REST[value % len(_REST)])
        value //= len(_REST)
    return "".join(chars)


def get_len_random_id(string_length: int) -> str:
    """Return a random id of exactly ``string_length`` characters."""
    if string_length <= 0:
        return ""
    rng = random.SystemRandom()
    return rng.choice(_FIRST) + "".join(
        rng.choice(_REST) for _ in range(string_length - 1)
    )
