"""``python -m asyncsched``: the same as the ``asyncsched`` command."""

from __future__ import annotations

from asyncsched.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
