"""Launch an app's replicas, all or nothing: plan them, spawn them, undo them.

:func:`plan_launches` checks a rendered request against this host (working
directories, executables) before anything is made; :func:`spawn_app` makes the
app dir and log files, starts every replica and then runs the caller's
``then`` (the app's first record write) in ONE spawner-thread job; when a step
fails, what was started is killed and reaped and the app dir removed
(:func:`undo_spawn`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from asyncsched.errors import InvalidRunConfigException, SpecError, SubmitError
from asyncsched.schedulers.local._env import child_env
from asyncsched.schedulers.local._limits import (
    MEBIBYTE,
    child_limit_argv,
    original_nofile,
)
from asyncsched.schedulers.local._logs import LogFiles, create_log_files
from asyncsched.schedulers.local._process import find_executable
from asyncsched.schedulers.local._render import PopenRequest
from asyncsched.schedulers.local._spawn import (
    ReplicaLaunch,
    SpawnConfig,
    Started,
    spawn_child,
)
from asyncsched.schedulers.local._spawner import (
    SPAWN_TIMEOUT,
    Spawner,
    SpawnTimeoutError,
)
from asyncsched.schedulers.shared.state_dir import PRIVATE_DIR_MODE, makedirs_private

__all__ = (
    "AfterSpawn",
    "ExecutableCache",
    "Undoable",
    "plan_launches",
    "spawn_app",
    "undo_spawn",
)


class Undoable(Protocol):
    """What ``then`` of :func:`spawn_app` returns: its own undo (blocking)."""

    def undo(self) -> None:
        """Take back what ``then`` did (the spawn is being undone)."""
        ...


T = TypeVar("T", bound=Undoable)
#: what runs in the spawner thread once every replica started
AfterSpawn = Callable[[list[LogFiles], list[Started]], T]

#: positive executable lookups remembered before the cache starts afresh
_EXECUTABLES_KEPT = 256
#: seconds a positive lookup is used before PATH is walked again
EXECUTABLE_TTL = 2.0


class ExecutableCache:
    """PATH lookups of entrypoints, the positive ones remembered for a moment.

    A PATH walk is a dozen stat calls on the loop thread per submit, and the
    file found is the one the replica execs (no second walk in the child), so
    a program installed earlier on PATH is used by submits made more than
    ``ttl`` seconds later. Should a remembered file vanish meanwhile, the
    spawn fails and submit raises ``SubmitError`` instead of ``SpecError``.

    Example:
        >>> ExecutableCache().find("sh", "/bin:/usr/bin", "/").endswith("/sh")
        True
    """

    def __init__(
        self,
        ttl: float = EXECUTABLE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._found: dict[tuple[str, str, str | None], tuple[str, float]] = {}

    def find(self, cmd: str, path: str, cwd: str | None) -> str | None:
        """The file ``cmd`` runs with ``path`` as PATH in ``cwd``, or None."""
        key = (cmd, path, cwd)
        now = self._clock()
        hit = self._found.get(key)
        if hit is not None and now - hit[1] < self._ttl:
            return hit[0]
        found = find_executable(cmd, path, cwd)
        if found is None:
            self._found.pop(key, None)
        else:
            if len(self._found) >= _EXECUTABLES_KEPT:
                self._found.clear()
            self._found[key] = (found, now)
        return found


def plan_launches(
    request: PopenRequest, prlimit: str | None, executables: ExecutableCache
) -> list[ReplicaLaunch]:
    """What starts each replica of ``request`` (no side effect).

    Raises:
        SpecError: a working directory does not exist, or an entrypoint is
            missing or not executable.
    """
    parent_env = dict(os.environ)
    launches: list[ReplicaLaunch] = []
    for role_idx, (role_name, params) in enumerate(request.role_params.items()):
        memory_mb = request.memory_mb.get(role_name)
        memory = memory_mb * MEBIBYTE if memory_mb and prlimit else None
        limits = child_limit_argv(prlimit, nofile=original_nofile(), data_bytes=memory)
        for i, param in enumerate(params):
            if param.cwd is not None and not os.path.isdir(param.cwd):
                raise SpecError(
                    f"roles[{role_idx}].image",
                    f"working directory {param.cwd!r} does not exist",
                )
            env = child_env(param.env, parent_env)
            cmd = param.args[0]
            executable = executables.find(cmd, env["PATH"], param.cwd)
            if executable is None:
                raise SpecError(
                    f"roles[{role_idx}].entrypoint",
                    _not_found(cmd, env["PATH"], param.cwd),
                )
            replica_dir = request.role_log_dirs[role_name][i]
            launches.append(
                ReplicaLaunch(
                    role=role_name,
                    replica_id=i,
                    args=[*limits, *param.args],
                    # exec'd as found: no PATH walk in the child (behind the
                    # limits prefix, prlimit execs the command itself)
                    executable=None if limits else executable,
                    env=env,
                    cwd=param.cwd,
                    log_dir=replica_dir,
                    error_file=env.get(
                        "TORCHELASTIC_ERROR_FILE",
                        os.path.join(replica_dir, "error.json"),
                    ),
                    memory_mb=memory_mb if memory is not None else None,
                )
            )
    return launches


def _not_found(cmd: str, path: str, cwd: str | None) -> str:
    base = cwd or os.getcwd()
    candidates = (
        [os.path.join(base, cmd)]
        if os.sep in cmd
        else [os.path.join(base, entry or ".", cmd) for entry in path.split(os.pathsep)]
    )
    for candidate in candidates:
        if os.path.isdir(candidate):
            return f"{cmd!r} ({candidate}) is a directory, not an executable file"
        if os.path.isfile(candidate):
            return f"{cmd!r} ({candidate}) is not executable (chmod +x?)"
    if os.sep in cmd:
        return f"{cmd!r} does not exist (relative to {base!r})"
    return f"{cmd!r} was not found on the replica PATH {path!r}"


async def spawn_app(
    spawner: Spawner,
    request: PopenRequest,
    launches: list[ReplicaLaunch],
    cfg: SpawnConfig,
    then: AfterSpawn[T],
) -> tuple[list[LogFiles], list[Started], T]:
    """Make the app dir and log files, start every replica, then run
    ``then(files, started)``: one job of ``spawner``.

    All or nothing: on any failure, or when cancelled, whatever started is
    stopped, ``then``'s result undone and the app dir removed.

    Raises:
        SubmitError: the log dir cannot be created, a replica failed to start,
            or starting took longer than ``SPAWN_TIMEOUT``.
    """
    try:
        made: tuple[list[LogFiles], list[Started], T] = await spawner.run(
            _prepare_and_spawn,
            request.log_dir,
            launches,
            cfg,
            then,
            undo=lambda result: undo_spawn(request.log_dir, result[1], cfg, result[2]),
        )
    except SpawnTimeoutError as exc:
        raise SubmitError(
            f"starting the replicas of {request.app_id} took longer than"
            f" {SPAWN_TIMEOUT}s (what started is stopped when the start ends)"
        ) from exc
    except _SpawnFailed as exc:
        raise SubmitError(
            f"failed to start a replica of {request.app_id}: {exc}"
        ) from exc.__cause__
    except OSError as exc:
        text = (
            f"cannot create the log dir of {request.app_id} under"
            f" {request.log_dir!r}: {exc}"
        )
        if exc.errno in _UNUSABLE_DIR:  # the run option, not the moment
            raise InvalidRunConfigException(text, "log_dir", request.log_dir) from exc
        raise SubmitError(text) from exc
    return made


#: a log dir that no retry can use: the ``log_dir`` run option is wrong
_UNUSABLE_DIR = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS}
)


class _SpawnFailed(Exception):
    """A replica could not be started (what had started was killed)."""


def _prepare_app_dir(app_dir: str, replica_dirs: list[str]) -> list[LogFiles]:
    makedirs_private(os.path.dirname(app_dir))
    os.mkdir(app_dir, PRIVATE_DIR_MODE)  # FileExistsError: never mix two apps' logs
    os.chmod(app_dir, PRIVATE_DIR_MODE)  # exactly, whatever the umask
    try:
        return [create_log_files(d) for d in replica_dirs]
    except OSError:
        shutil.rmtree(app_dir, ignore_errors=True)
        raise


def _prepare_and_spawn(
    app_dir: str,
    launches: list[ReplicaLaunch],
    cfg: SpawnConfig,
    then: AfterSpawn[T],
) -> tuple[list[LogFiles], list[Started], T]:
    """Create the app dir and log files, spawn every replica, run ``then``
    (blocking).

    Runs in the spawner thread. On a failure whatever started is killed and
    reaped and the app dir removed; raises ``_SpawnFailed`` (spawn, ``then``)
    or OSError (dirs).
    """
    files = _prepare_app_dir(app_dir, [launch.log_dir for launch in launches])
    started: list[Started] = []
    try:
        # extend() keeps what started before a failure
        started.extend(spawn_child(launch, cfg) for launch in launches)
        after = then(files, started)
    except Exception as exc:  # any failure (OSError, ValueError...): all or nothing
        undo_spawn(app_dir, started, cfg)
        raise _SpawnFailed(str(exc)) from exc
    return files, started, after


def undo_spawn(
    app_dir: str,
    started: list[Started],
    cfg: SpawnConfig,
    after: Undoable | None = None,
) -> None:
    """Kill and reap what started, close its fds, take back ``after`` (the
    first record), remove the app dir (blocking)."""
    if after is not None:
        after.undo()
    for st in started:
        st.child.signal(signal.SIGKILL)
        with contextlib.suppress(OSError):
            st.child.popen.wait()
        st.child.returncode = st.child.popen.returncode
        cfg.guardian.remove(st.child.pid)
        st.child.close()
        for fd in (st.out_r, st.err_r):
            os.close(fd)
    shutil.rmtree(app_dir, ignore_errors=True)
