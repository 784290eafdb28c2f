"""The record of the jobs asyncsched submitted to Slurm (one JSON line each).

Slurm keeps no trace of which jobs asyncsched started, nor of the app name;
this append-only file does: job id, submit time (job ids restart at 1 on a
fresh cluster, so a record is matched by submit time too), app name, roles
and replica counts, the directory the job runs in (where its logs are) and
the directory of its environment files (removed when the job is cancelled).
It lives in ``{state_dir}/slurm/jobs.jsonl``; the newest line of an id wins.

Example:
    >>> rec = JobRecord("12", 1700000000.0, "trainer", "/work", {"w": 2})
    >>> JobRecord.from_json(rec.to_json()) == rec
    True
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from asyncsched.schedulers.shared.state_dir import check_state_dir, makedirs_private

__all__ = ["JobRecord", "Registry"]


@dataclass(frozen=True)
class JobRecord:
    """What asyncsched knows of one job it submitted."""

    app_id: str
    submit: float
    name: str
    work_dir: str
    roles: dict[str, int] = field(default_factory=dict)
    session: str = ""
    env_dir: str = ""

    @property
    def num_components(self) -> int:
        """Replicas in total (one heterogeneous component each)."""
        return sum(self.roles.values()) or 1

    def to_json(self) -> str:
        """One line of the registry file."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> JobRecord | None:
        """Parse a line; None when it is not a record."""
        try:
            data: Any = json.loads(line)
            return cls(
                app_id=str(data["app_id"]),
                submit=float(data["submit"]),
                name=str(data["name"]),
                work_dir=str(data["work_dir"]),
                roles={str(k): int(v) for k, v in dict(data.get("roles", {})).items()},
                session=str(data.get("session", "")),
                env_dir=str(data.get("env_dir", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None


class Registry:
    """Append and look up :class:`JobRecord` in one file (off the event loop)."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, "slurm", "jobs.jsonl")
        self._state_dir = state_dir
        self._checked = False
        self._cache: dict[str, JobRecord] = {}
        self._stamp: tuple[int, int] | None = None

    async def add(self, record: JobRecord) -> None:
        """Append ``record`` (one ``write`` of one line, so appends interleave safely)."""
        self._cache[record.app_id] = record
        await anyio.to_thread.run_sync(self._append, record.to_json() + "\n")

    def _append(self, line: str) -> None:
        self._check()
        makedirs_private(os.path.dirname(self.path))  # 0700, as the local state
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    async def all(self) -> dict[str, JobRecord]:
        """Every record, newest per app id (re-read only when the file changed)."""
        records = await anyio.to_thread.run_sync(self._load)
        return dict(records)

    async def get(self, app_id: str) -> JobRecord | None:
        """The newest record of ``app_id``."""
        if app_id in self._cache:
            return self._cache[app_id]
        return (await self.all()).get(app_id)

    def _check(self) -> None:
        """Refuse a state dir others own or may write to (once it passed)."""
        if not self._checked:
            self._checked = check_state_dir(self._state_dir)

    def _load(self) -> dict[str, JobRecord]:
        self._check()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._cache
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return self._cache
        loaded: dict[str, JobRecord] = {}
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                record = JobRecord.from_json(line)
                if record is not None:
                    old = loaded.get(record.app_id)
                    if old is None or record.submit >= old.submit:
                        loaded[record.app_id] = record
        self._cache = loaded
        self._stamp = stamp
        return loaded
