"""TorchX's module path for unique app ids; see :mod:`asyncsched.schedulers.shared.ids`.

Example:
    >>> make_unique("app").startswith("app-")
    True
"""

from __future__ import annotations

from asyncsched.schedulers.shared.ids import (
    get_len_random_id,
    make_unique,
    random_id,
    random_uint64,
)

__all__ = ["get_len_random_id", "make_unique", "random_id", "random_uint64"]
