"""Chaos for event readers: kill a reader process at random, resume it, check.

:class:`ChaosReader` runs ``tests.events.reader`` in its own process,
SIGKILLs it when told and starts it again from its last saved cursor;
:func:`kill_at_random` kills it once it said ``open`` (connected, its first
batch delivered), so that the kills hit a reader that is reading, and counts
those that did (:attr:`ChaosReader.kills_reading`). :func:`check_delivery`
then reads everything the reader processes wrote and asserts what a user of
``events(since=...)`` relies on:

* every app's terminal state arrives (as an APP, CURRENT or SUBMITTED event);
* every replica failure (exit code != 0) and restart count a replica reached
  is delivered, unless a RESYNC in between announced the gap;
* per app, events never go back in order: once an event of a reader run is
  delivered, a later one of the same run is newer (states are monotonic
  within one replica's life, restart counts never decrease);
* duplicates (the same cursor twice) only right after a restart.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

REPO = Path(__file__).resolve().parents[2]
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclass
class ChaosReader:
    """One logical reader, restarted after each kill from its saved cursor."""

    scheduler: str
    session: str
    workdir: Path
    params: dict[str, Any] = field(default_factory=dict)
    kills: int = 0
    #: kills of a reader run that had delivered at least one event
    kills_reading: int = 0
    #: seconds from each run's start to its ``open``
    open_after: list[float] = field(default_factory=list)
    _proc: Process | None = None
    #: the running reader said ``open``
    _open: bool = False
    #: what was read of the running reader's output after its last full line
    _buffer: bytes = b""
    #: set (and replaced) at each kill
    _killed: anyio.Event | None = None
    _started: float = 0.0

    @property
    def out(self) -> Path:
        return self.workdir / "events.jsonl"

    @property
    def cursor_file(self) -> Path:
        return self.workdir / "cursor"

    async def start(self) -> None:
        """Start the reader and wait until its stream is open."""
        spec = {
            "scheduler": self.scheduler,
            "session": self.session,
            "params": self.params,
            "cursor_file": str(self.cursor_file),
            "out": str(self.out),
        }
        env = {
            **os.environ,
            "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        self._proc = await anyio.open_process(
            [sys.executable, "-m", "tests.events.reader", json.dumps(spec)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=None,
            start_new_session=True,
        )
        self._open, self._buffer = False, b""
        self._started = time.monotonic()
        with anyio.fail_after(60):
            line = await self._line()
        assert line == b"ready", line

    async def _line(self) -> bytes:
        """The reader's next line (what was read of it is kept if cancelled)."""
        assert self._proc is not None
        assert self._proc.stdout is not None
        while b"\n" not in self._buffer:
            self._buffer += await self._proc.stdout.receive()
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.strip()

    async def wait_open(self, quiet: anyio.Event | None = None) -> bool:
        """Wait until the reader's stream is connected and its first batch
        was delivered (an engine that is down, restarting, holds it up), or
        until ``quiet`` is set (no change is to come: a resumed reader may
        have nothing to read). Answers whether the reader said ``open``."""
        if self._open:
            return True
        async with anyio.create_task_group() as tg:

            async def opened() -> None:
                line = await self._line()
                assert line == b"open", line
                self._open = True
                self.open_after.append(time.monotonic() - self._started)
                tg.cancel_scope.cancel()

            tg.start_soon(opened)
            if quiet is not None:
                await quiet.wait()
                tg.cancel_scope.cancel()
        return self._open

    def delivered_by_this_run(self) -> int:
        """How many events the running reader process wrote."""
        if self._proc is None:
            return 0
        return sum(1 for e in self.events() if e["pid"] == self._proc.pid)

    async def kill_and_restart(self) -> None:
        """SIGKILL the reader (no cleanup of any kind), then resume it."""
        reading = self.delivered_by_this_run() > 0
        await self.stop(signal.SIGKILL)
        self.kills += 1
        self.kills_reading += reading
        if self._killed is not None:
            self._killed.set()
            self._killed = None
        await self.start()

    async def killed(self, count: int) -> None:
        """Wait until the reader was killed ``count`` times (e.g. to make
        changes while no reader runs, which the resumed one then reads)."""
        while self.kills < count:
            if self._killed is None:
                self._killed = anyio.Event()
            await self._killed.wait()

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self._proc is None:
            return
        if self._proc.returncode is None:
            self._proc.send_signal(sig)
        with anyio.fail_after(30):
            await self._proc.wait()
        await self._proc.aclose()
        self._proc = None

    def events(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line torn by the SIGKILL
        return out


def undelivered(
    events: list[dict[str, Any]],
    final: Mapping[str, str],
    failed: Mapping[str, set[tuple[str, int]]] | None = None,
) -> set[str]:
    """The apps whose terminal state (``final``: app id -> state name), or a
    replica's non-zero exit (``failed``: app id -> (role, replica id)), is not
    among ``events`` yet.

    An app's terminal state alone does not mean its replicas' exits were read:
    a cancelled app reads CANCELLED from the cancel, before its replica's exit
    (after the stop's grace) is a change of its own.
    """
    ended = {
        e["app_id"]
        for e in events
        if e["state"] == final.get(e["app_id"])
        and e["kind"] in ("app", "current", "submitted")
    }
    exits = {
        (e["app_id"], r["role"], r["id"])
        for e in events
        for r in ([e["replica"]] if "replica" in e else e.get("replicas", []))
        if r.get("exit_code") not in (None, 0)
    }
    return {
        app_id
        for app_id in final
        if app_id not in ended
        or any(
            (app_id, role, k) not in exits for role, k in (failed or {}).get(app_id, ())
        )
    }


async def until_delivered(
    reader: ChaosReader,
    final: Mapping[str, str],
    failed: Mapping[str, set[tuple[str, int]]] | None = None,
    *,
    timeout: float,
) -> None:
    """Wait until :func:`undelivered` is empty for what ``reader`` wrote (the
    reader is another process: its output file is read every 0.2 s)."""
    with anyio.fail_after(timeout):
        while undelivered(reader.events(), final, failed):
            await anyio.sleep(0.2)


async def kill_at_random(
    reader: ChaosReader,
    times: int,
    *,
    every: tuple[float, float] = (0.2, 1.5),
    quiet: anyio.Event | None = None,
    quiet_every: tuple[float, float] | None = None,
) -> None:
    """Kill and resume ``reader`` ``times`` times, each at a random moment
    (``every`` seconds) after the reader run said ``open`` (so that each
    killed reader was reading), or, once ``quiet`` is set (the workload made
    its last change), without waiting for that and ``quiet_every`` seconds
    (default ``every``) after its start: a resumed reader then only catches
    up, and a longer pause only waits. ``reader.kills_reading`` counts the
    kills of a run that had delivered an event."""
    rng = random.Random(os.environ.get("CHAOS_SEED", "7"))
    for _ in range(times):
        await reader.wait_open(quiet)
        span = every
        if quiet is not None and quiet.is_set() and quiet_every is not None:
            span = quiet_every
        await anyio.sleep(rng.uniform(*span))
        await reader.kill_and_restart()


def check_delivery(
    events: list[dict[str, Any]],
    app_ids: Iterable[str],
    *,
    final_states: dict[str, str],
    failed_replicas: dict[str, set[tuple[str, int]]] | None = None,
    restarts: dict[str, int] | None = None,
) -> None:
    """Assert the delivery guarantees listed in the module docstring.

    ``final_states``: app id -> the terminal state name the engine reports;
    ``failed_replicas``: app id -> replicas that exited non-zero at least once;
    ``restarts``: app id -> the restart count the app reached.
    """
    by_app: dict[str, list[dict[str, Any]]] = defaultdict(list)
    resynced_after: list[int] = []
    seen_cursors: dict[tuple[Any, ...], int] = {}
    last_pid = None
    for i, e in enumerate(events):
        fresh_run = e["pid"] != last_pid
        last_pid = e["pid"]
        if e["kind"] == "resync":
            resynced_after.append(i)
            continue
        # CURRENT events after a RESYNC share one cursor: key on the change
        key = (e["cursor"], e["app_id"], e["kind"], e.get("role"), e.get("replica_id"))
        if key in seen_cursors and not fresh_run:
            prev = events[seen_cursors[key]]
            # a duplicate is allowed only at a resume boundary: the same
            # cursor delivered again by a later reader process
            assert prev["pid"] != e["pid"], f"duplicate within one run: {e}"
        seen_cursors.setdefault(key, i)
        by_app[e["app_id"]].append({**e, "_i": i})
    for app_id in app_ids:
        got = by_app.get(app_id, [])
        assert got, f"no event at all for {app_id}"
        states = [e["state"] for e in got]
        want = final_states[app_id]
        assert any(
            e["state"] == want and e["kind"] in ("app", "current", "submitted")
            for e in got
        ), f"{app_id}: terminal {want} never delivered (saw {states})"
        # within one reader run, the app never goes back from terminal
        runs: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for e in got:
            runs[e["pid"]].append(e)
        for run in runs.values():
            for a, b in itertools.pairwise(run):
                if a["state"] in TERMINAL and a["kind"] != "forgotten":
                    assert b["state"] in TERMINAL or b["kind"] == "forgotten", (
                        f"{app_id}: {a['state']} then {b['state']} in one run"
                    )
                assert b["num_restarts"] >= a["num_restarts"], (
                    f"{app_id}: restarts went back {a['num_restarts']} -> {b['num_restarts']}"
                )
        for role, k in (failed_replicas or {}).get(app_id, set()):
            failures = [
                e
                for e in got
                for r in ([e["replica"]] if "replica" in e else e.get("replicas", []))
                if r["role"] == role
                and r["id"] == k
                and r.get("exit_code") not in (None, 0)
            ]
            assert failures, f"{app_id}: failure of {role}/{k} never delivered"
        want_restarts = (restarts or {}).get(app_id)
        if want_restarts:
            assert max(e["num_restarts"] for e in got) >= want_restarts or any(
                (r.get("num_restarts") or 0) >= want_restarts
                for e in got
                for r in ([e["replica"]] if "replica" in e else e.get("replicas", []))
            ), f"{app_id}: restart {want_restarts} never delivered"
