"""Every shielded wait in asyncsched has a deadline (a hung peer never hangs us)."""

from __future__ import annotations

import re
from pathlib import Path

import asyncsched

PACKAGE = Path(asyncsched.__file__).parent
BOUND = re.compile(r"\b(move_on_after|fail_after)\(")


def test_every_shielded_scope_is_bounded() -> None:
    unbounded = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "shield=True" not in line:
                continue
            # the deadline is on the same line or opens right after it
            if not any(BOUND.search(nxt) for nxt in lines[i : i + 3]):
                unbounded.append(f"{path.relative_to(PACKAGE)}:{i + 1}: {line.strip()}")
    assert unbounded == []
