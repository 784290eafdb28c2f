"""Start one replica process: how replicas are spawned, what a start gives back.

Thread-safe: :func:`spawn_child` runs in the spawner thread at submit and in
the event loop on restarts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from asyncsched.schedulers.local._process import Child, Guardian
from asyncsched.schedulers.local._reaper import Reaper
from asyncsched.schedulers.local._spawner import Spawner

__all__ = ("ReplicaLaunch", "SpawnConfig", "Started", "spawn_child")


@dataclass
class SpawnConfig:
    """How replicas are spawned (shared by every app of a scheduler)."""

    setpriv: str | None
    use_preexec: bool
    devnull: int
    guardian: Guardian
    spawner: Spawner | None = None
    #: the scheduler's ``before_spawn`` hook: called with (role, replica id)
    #: before each replica process is started; what it raises fails that start
    before_spawn: Callable[[str, int], None] | None = None
    #: the scheduler's reaper: serves every replica's exit and output
    reaper: Reaper | None = None


@dataclass
class Started:
    """A replica process just spawned, with the read ends of its pipes."""

    child: Child
    out_r: int
    err_r: int


def spawn_child(launch: ReplicaLaunch, cfg: SpawnConfig) -> Started:
    """Spawn one attempt of ``launch`` and register it with the guardian.

    Thread-safe: runs in the spawner thread at submit, in the loop on restarts.
    The guardian registration follows the spawn at once (microseconds), so an
    owner killed right after still takes the group down.
    """
    if cfg.before_spawn is not None:
        cfg.before_spawn(launch.role, launch.replica_id)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = Child.spawn(
            launch.args,
            executable=launch.executable,
            env=launch.env,
            cwd=launch.cwd,
            stdin=cfg.devnull,
            stdout=out_w,
            stderr=err_w,
            setpriv=cfg.setpriv,
            use_preexec=cfg.use_preexec,
        )
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    cfg.guardian.add(child.pid)
    return Started(child, out_r, err_r)


@dataclass
class ReplicaLaunch:
    """Everything needed to (re)start one replica."""

    role: str
    replica_id: int
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    log_dir: str
    error_file: str
    #: the memory limit the replica runs under (``resource.memMB``), or None
    memory_mb: int | None = None
    #: the file ``args[0]`` was found to be on the replica's PATH at submit,
    #: exec'd as is (no PATH walk in the child); None: exec walks PATH
    executable: str | None = None
