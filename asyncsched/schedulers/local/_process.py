"""Spawning, reaping and killing replica process groups, orphan-proof.

Each replica leads its own session (so its process group holds it and every
process it starts). Three layers keep replicas from outliving their owner:

1. ``aclose()``/cancellation: SIGTERM to each group, SIGKILL after a grace.
2. Linux parent-death signal (opt-in; off by default since the guardian covers
   owner death): the replica gets SIGKILL when the thread that spawned it (a
   long-lived spawner thread, or the event-loop thread on restarts) dies. It is set by exec'ing through
   util-linux ``setpriv --pdeathsig KILL`` (keeps ``vfork``: the spawn cost does
   not grow with the owner's memory), or by a ``preexec_fn`` when setpriv is
   missing (forces ``fork``: slower for big owners).
3. A guardian process per scheduler (its own session, no parent-death signal)
   reads the process groups to protect from a pipe; when the pipe hits EOF --
   the owner died, even by SIGKILL -- it SIGKILLs every registered group, which
   reaches grandchildren that the parent-death signal does not.

Reaping is event-driven through a pidfd (``os.pidfd_open`` + ``anyio.wait_readable``)
where available, and a short poll elsewhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, NamedTuple

import anyio

from asyncsched.errors import (
    InvalidArgumentError,
    SchedulerUnavailableError,
)

__all__ = [
    "Child",
    "Guardian",
    "PdeathsigMode",
    "find_executable",
    "leads_own_group",
    "own_groups",
    "pid_alive",
    "pid_start_time",
    "resolve_pdeathsig",
    "signal_group",
    "signal_recorded_group",
]

logger = logging.getLogger(__name__)

PdeathsigMode = Literal["auto", "setpriv", "preexec", "off"]

_PR_SET_PDEATHSIG = 1
_IS_LINUX = sys.platform.startswith("linux")
_setpriv_cache: str | bool | None = False  # False: not probed yet


def _probe_setpriv() -> str | None:
    exe = shutil.which("setpriv")
    true = shutil.which("true")
    if exe is None or true is None:
        return None
    try:
        result = subprocess.run(
            [exe, "--pdeathsig", "KILL", "--", true],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return exe if result.returncode == 0 else None


async def resolve_pdeathsig(mode: PdeathsigMode) -> tuple[str | None, bool]:
    """Return ``(setpriv_path, use_preexec)`` for ``mode`` on this host."""
    global _setpriv_cache
    if not _IS_LINUX or mode == "off":
        return None, False
    if mode == "preexec":
        return None, True
    if _setpriv_cache is False:
        _setpriv_cache = await anyio.to_thread.run_sync(_probe_setpriv)
    setpriv = _setpriv_cache if isinstance(_setpriv_cache, str) else None
    if setpriv is None and mode == "setpriv":
        raise SchedulerUnavailableError(
            "local",
            "pdeathsig='setpriv' but setpriv with --pdeathsig support is not available",
            "install util-linux >= 2.33 or use pdeathsig='auto'",
        )
    return setpriv, setpriv is None


def _make_preexec(owner_pid: int) -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    sigkill = int(signal.SIGKILL)

    def preexec() -> None:  # runs in the forked child: keep it tiny
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if os.getppid() != owner_pid:  # the owner died before prctl
            os.kill(os.getpid(), sigkill)

    return preexec


def find_executable(cmd: str, path: str, cwd: str | None) -> str | None:
    """Locate ``cmd`` as exec would in a child with ``PATH=path`` running in ``cwd``.

    Returns the path found or None. A ``cmd`` containing ``/`` is taken
    relative to ``cwd``. Relative PATH entries are relative to ``cwd`` too.
    """
    base = cwd or os.getcwd()

    def ok(candidate: str) -> bool:
        return os.path.isfile(candidate) and os.access(candidate, os.X_OK)

    if os.sep in cmd:
        candidate = os.path.join(base, cmd)
        return candidate if ok(candidate) else None
    for entry in path.split(os.pathsep) if path else []:
        candidate = os.path.join(base, entry or ".", cmd)
        if ok(candidate):
            return candidate
    return None


class _ProcStat(NamedTuple):
    state: str  # field 3
    pgrp: int  # field 5
    session: int  # field 6
    start_time: int  # field 22


def _proc_stat(pid: int) -> _ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return _ProcStat(rest[0].decode(), int(rest[2]), int(rest[3]), int(rest[19]))
    except (IndexError, ValueError):
        return None


def pid_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22).

    None when the process does not exist (or on systems without ``/proc``).
    """
    if pid <= 0:  # /proc/0 and /proc/-1 name no process
        return None
    stat = _proc_stat(pid)
    return stat.start_time if stat is not None else None


def pid_alive(pid: int, start_time: int | None) -> bool:
    """True when ``pid`` runs (not a zombie) and, where known, started at ``start_time``.

    A pid <= 0 names no single process (``kill(0)`` and ``kill(-1)`` reach
    groups): never alive.
    """
    if pid <= 0:
        return False
    if _IS_LINUX and start_time is not None:
        stat = _proc_stat(pid)
        return (
            stat is not None
            and stat.state not in ("Z", "X")
            and stat.start_time == start_time
        )
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def own_groups() -> frozenset[int]:
    """This process's pid, process group and session: ids never signalled.

    Example:
        >>> os.getpid() in own_groups()
        True
    """
    return frozenset((os.getpid(), os.getpgrp(), os.getsid(0)))


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when it is gone.

    Any OSError counts as "gone" (macOS raises EPERM for a reaped group).

    Raises:
        InvalidArgumentError: ``pgid`` is <= 1 (``killpg(1)`` is ``kill(-1)``:
            every process the caller may signal; ``killpg(0)`` is the caller's
            own group), or the pid, group or session of this process.

    Example:
        >>> try:
        ...     signal_group(1, 0)
        ... except InvalidArgumentError as exc:
        ...     print(str(exc).split(":")[0])
        refusing to signal process group 1
    """
    if pgid <= 1:
        raise InvalidArgumentError(
            f"refusing to signal process group {pgid}: a group id <= 1 reaches"
            " every process (1), the caller's own group (0) or nothing valid"
        )
    if pgid in own_groups():
        raise InvalidArgumentError(
            f"refusing to signal process group {pgid}: it is this process's own"
            " pid, process group or session"
        )
    try:
        os.killpg(pgid, sig)
    except OSError:
        return False
    return True


def leads_own_group(pid: int, start_time: int | None) -> bool:
    """True when ``pid`` is a live replica leader as recorded (blocking).

    That is: a pid > 1 that is not this process's pid, group or session,
    leading its own session and process group (each replica starts one) and,
    on Linux, started at ``start_time`` (``/proc/<pid>/stat``): a pid reused
    by another process fails. Without a start time on Linux it is False: an
    unverified pid is never signalled. Elsewhere (no ``/proc``) the start time
    cannot be checked; the session and group are.
    """
    if pid <= 1 or pid in own_groups():
        return False
    if _IS_LINUX:
        if start_time is None:
            return False
        stat = _proc_stat(pid)
        return (
            stat is not None
            and stat.state not in ("Z", "X")
            and stat.start_time == start_time
            and stat.pgrp == pid
            and stat.session == pid
        )
    try:
        return os.getpgid(pid) == pid and os.getsid(pid) == pid
    except OSError:
        return False


def signal_recorded_group(pid: int, start_time: int | None, sig: int) -> bool:
    """Signal the process group a record names, only after :func:`leads_own_group`.

    The check runs just before the signal; False when it fails (nothing sent)
    or the group is gone.
    """
    if not leads_own_group(pid, start_time):
        return False
    return signal_group(pid, sig)


class Child:
    """One spawned replica process (the leader of its own process group)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.start_time = pid_start_time(self.pid) if _IS_LINUX else None
        self.returncode: int | None = None
        self._pidfd: int | None = None
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(self.pid)

    @classmethod
    def spawn(
        cls,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        stdin: int,
        executable: str | None = None,
        stdout: int,
        stderr: int,
        setpriv: str | None,
        use_preexec: bool,
    ) -> Child:
        """Start ``args`` in a new session; raise OSError when it cannot start.

        ``executable``, when given, is the file exec'd with ``args`` as its
        argv (``args[0]`` unchanged), instead of a PATH walk for ``args[0]``.
        Must run in a long-lived thread (the event loop's or a
        :class:`Spawner`'s): the parent-death signal fires when the spawning
        *thread* exits.
        """
        argv = list(args)
        preexec: Callable[[], None] | None = None
        if setpriv is not None:
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
            executable = None  # setpriv is exec'd; it execs the command
        elif use_preexec:
            preexec = _make_preexec(os.getpid())
        popen = subprocess.Popen(
            argv,
            executable=executable,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            preexec_fn=preexec,  # noqa: PLW1509 - only when setpriv is missing
        )
        return cls(popen)

    @property
    def pidfd(self) -> int | None:
        """The pidfd of the leader until it is reaped (None where unsupported)."""
        return self._pidfd

    def close(self) -> None:
        """Release the pidfd (the child was reaped elsewhere)."""
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def signal(self, sig: int) -> bool:
        """Signal the whole group while the leader is not reaped (pid reuse safe)."""
        if self.returncode is not None:
            return False
        return signal_group(self.pid, sig)

    async def wait_exit(self) -> None:
        """Return once the leader has exited (it stays a zombie: not reaped)."""
        if self._pidfd is not None:
            await anyio.wait_readable(self._pidfd)
            return
        delay = 0.001
        while True:
            try:
                result = os.waitid(  # noqa: ASYNC222 - WNOHANG never blocks
                    os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT
                )
            except ChildProcessError:
                return
            if result is not None:
                return
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def reap(self) -> int:
        """Collect the exit status (after :meth:`wait_exit`); negative for signals.

        The pidfd may turn readable a moment before the zombie can be waited
        for, so poll briefly instead of blocking the loop in ``waitpid``.
        """
        if self.returncode is None:
            delay = 0.0002
            while (code := self.popen.poll()) is None:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.02)
            self.returncode = code
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self.returncode


_GUARDIAN_CODE = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
groups = set()
buf = b""
fd = sys.stdin.fileno()
while True:
    try:
        data = os.read(fd, 65536)
    except InterruptedError:
        continue
    except OSError:
        data = b""
    if not data:
        break
    buf += data
    *lines, buf = buf.split(b"\n")
    for line in lines:
        if line[:1] == b"+" and int(line[1:]) > 1:
            groups.add(int(line[1:]))
        elif line[:1] == b"-":
            groups.discard(int(line[1:]))
for pgid in groups - {os.getpid(), os.getpgrp(), os.getsid(0)}:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class Guardian:
    """A helper process that SIGKILLs registered groups when its owner dies.

    Starting it costs one fork/exec (the Python start-up happens in the
    background); registration is a non-blocking pipe write.
    """

    def __init__(self) -> None:
        self._popen: subprocess.Popen[bytes] | None = None
        self._wfd: int | None = None
        self._pending = b""
        self._flushing = False
        self._lock = threading.Lock()  # add() runs in the spawner thread

    @property
    def running(self) -> bool:
        """True while the guardian process is up."""
        return self._popen is not None

    def start(self) -> None:
        """Spawn the guardian (idempotent); failures only weaken protection."""
        if self._popen is not None:
            return
        rfd, wfd = os.pipe()
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _GUARDIAN_CODE],
                stdin=rfd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            logger.warning("could not start the orphan guardian: %s", exc)
            os.close(wfd)
            return
        finally:
            os.close(rfd)
        os.set_blocking(wfd, False)
        self._wfd = wfd

    @property
    def has_pending(self) -> bool:
        """True when registrations wait for room in the pipe (call :meth:`flush`)."""
        with self._lock:
            return bool(self._pending)

    def add(self, pgid: int) -> None:
        """Protect process group ``pgid``."""
        self._send(b"+%d\n" % pgid)

    def remove(self, pgid: int) -> None:
        """Stop protecting ``pgid`` (its leader was reaped and the group killed)."""
        self._send(b"-%d\n" % pgid)

    def _send(self, data: bytes) -> None:
        if self._wfd is None:
            return
        with self._lock:
            self._pending += data
            self._write_locked()

    def _write_some(self) -> None:
        with self._lock:
            self._write_locked()

    def _write_locked(self) -> None:
        while self._pending and self._wfd is not None:
            try:
                n = os.write(self._wfd, self._pending)
            except BlockingIOError:
                return  # the guardian is still starting; flushed on the next send
            except OSError:
                self._pending = b""
                return
            self._pending = self._pending[n:]

    async def flush(self) -> None:
        """Write whatever is buffered, waiting for the pipe if needed.

        Only one flush runs at a time (another returns at once): two tasks
        may not wait on the same fd.
        """
        if self._flushing:
            return
        self._flushing = True
        try:
            while self.has_pending and self._wfd is not None:
                await anyio.wait_writable(self._wfd)
                self._write_some()
        finally:
            self._flushing = False

    async def aclose(self) -> None:
        """Close the pipe (the guardian exits) and reap it."""
        with contextlib.suppress(Exception):
            with anyio.move_on_after(1):
                await self.flush()
        with self._lock:
            if self._wfd is not None:
                os.close(self._wfd)
                self._wfd = None
        popen, self._popen = self._popen, None
        if popen is None:
            return
        child = Child(popen)
        with anyio.move_on_after(2) as scope:
            await child.wait_exit()
        if scope.cancelled_caught:
            popen.kill()
            await child.wait_exit()
        await child.reap()
