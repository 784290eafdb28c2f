"""Run options that mean the same on every backend, declared once.

Example:
    >>> from asyncsched.specs import runopts
    >>> opts = runopts()
    >>> add_fail_fast(opts)
    >>> opts.get("fail_fast").default
    True
"""

from __future__ import annotations

from asyncsched.specs import runopts

__all__ = ("add_fail_fast",)


def add_fail_fast(opts: runopts) -> None:
    """Declare ``fail_fast`` (default True) in ``opts``: a replica that fails
    for good (its retries used up) stops the others."""
    opts.add(
        "fail_fast",
        type_=bool,
        default=True,
        help="stop the other replicas when one fails for good; False lets"
        " them run to their own end (the app is FAILED either way)",
    )
