"""Helpers of the local backend tests: app records, fds, process liveness."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import psutil

IGNORES_TERM = "trap '' TERM; sleep 30"


def record(app_dir: Path) -> dict[str, Any]:
    return dict(json.loads((app_dir / "app.json").read_text()))


async def finished_record(app_dir: Path, timeout: float = 10) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while True:
            with_record = (app_dir / "app.json").exists()
            if with_record and (rec := record(app_dir))["finished"]:
                return rec
            await anyio.sleep(0.05)


def nfds() -> int:
    return len(os.listdir("/proc/self/fd"))


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def exists(pid: int) -> bool:
    """True while ``pid`` exists at all (a zombie too: it was not reaped)."""
    return psutil.pid_exists(pid)
