"""The owner-only directory that carries a Slurm job's environment to its replicas.

The batch script holds no environment value: each component's variables are
written at submit, one file per component, into a new directory
``.asyncsched-env-<random>`` in the job's working directory (which the nodes
share, as they share the logs). The directory is created with mode 0700 (never
an existing path: a random name and ``mkdir`` fail rather than reuse one);
each file is created inside it, through the directory's descriptor, with
``O_CREAT|O_EXCL|O_NOFOLLOW`` and mode 0600, whatever the umask. Blocking
calls: run them off the event loop.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as work:
    ...     path = create_env_dir(work, {"w-0.env": "A='1'\\nexport A\\n"})
    ...     oct(os.stat(path).st_mode & 0o777), sorted(os.listdir(path))
    ...     remove_env_dir(path)
    ...     os.path.exists(path)
    ('0o700', ['w-0.env'])
    False
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping

from asyncsched.errors import InvalidArgumentError

__all__ = [
    "CANCEL_MARK",
    "ENV_DIR_PREFIX",
    "create_env_dir",
    "mark_cancelled",
    "remove_env_dir",
]

#: the file ``cancel`` creates in a running job's environment directory before it
#: signals the job's script: a script that gets there after the signal reads it
CANCEL_MARK = "cancel"
#: the name of every environment directory starts so (and only those are removed)
ENV_DIR_PREFIX = ".asyncsched-env-"


def create_env_dir(work_dir: str, files: Mapping[str, str]) -> str:
    """Create the environment directory in ``work_dir`` and write ``files``
    (name -> text) into it; return its absolute path.

    Raises:
        OSError: the directory or a file could not be created (nothing is left
            behind).
    """
    path = os.path.join(
        os.path.abspath(work_dir), ENV_DIR_PREFIX + secrets.token_hex(8)
    )
    os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, 0o700)  # whatever the umask took away or left
            for name, text in files.items():
                _write_private(fd, name, text)
        finally:
            os.close(fd)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def _write_private(dir_fd: int, name: str, text: str) -> None:
    if name != os.path.basename(name) or name in ("", ".", ".."):
        raise InvalidArgumentError(f"not a plain file name: {name!r}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text.encode("utf-8", "surrogateescape"))


def mark_cancelled(path: str) -> None:
    """Create the (empty) :data:`CANCEL_MARK` file in the environment directory
    ``path``, which the job's script reads before it starts its replicas.

    Raises:
        OSError: the directory is gone or not writable.
    """
    dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        os.close(os.open(CANCEL_MARK, flags, 0o600, dir_fd=dir_fd))
    finally:
        os.close(dir_fd)


def remove_env_dir(path: str) -> None:
    """Remove an environment directory (a path whose name does not start with
    :data:`ENV_DIR_PREFIX` is left alone; a missing one is fine)."""
    if path and os.path.basename(path).startswith(ENV_DIR_PREFIX):
        shutil.rmtree(path, ignore_errors=True)
