"""The type every module of this backend gives a Kubernetes object.

A leaf: objects come from the API server as decoded JSON, and every module
reads and builds them as plain dicts.

Example:
    >>> pod: JSON = {"kind": "Pod", "metadata": {"name": "a-0"}}
    >>> pod["metadata"]["name"]
    'a-0'
"""

from __future__ import annotations

from typing import Any

__all__ = ("JSON",)

#: a Kubernetes object (or a part of one) as decoded JSON
JSON = dict[str, Any]
