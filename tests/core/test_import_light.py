from __future__ import annotations

import subprocess
import sys


def test_import_asyncsched_does_not_import_heavy_clients() -> None:
    code = (
        "import sys, asyncsched, asyncsched.specs, asyncsched.schedulers, "
        "asyncsched.schedulers.api\n"
        "heavy = [m for m in ('aiohttp', 'aiodocker', 'kubernetes_asyncio') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_public_all_is_sorted_and_resolvable() -> None:
    import asyncsched

    assert list(asyncsched.__all__) == sorted(asyncsched.__all__)
    for name in asyncsched.__all__:
        assert getattr(asyncsched, name) is not None
