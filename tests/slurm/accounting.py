"""Accounting storage for the private test cluster: a private ``mariadbd`` and
``slurmdbd`` (no systemd, nothing shared with a system MariaDB).

:func:`start_database` initialises a datadir with ``mariadb-install-db`` (the
first time; later starts copy the empty datadir it cached under
``/var/tmp/asyncsched-tests``, or ``$ASYNCSCHED_TEST_CACHE``; empty: no
cache) and runs ``mariadbd`` on its own socket, pid file and loopback port, with a
database ``slurm_acct_db`` and a user for slurmdbd; :func:`start_slurmdbd`
writes ``slurmdbd.conf`` next to ``slurm.conf`` (where Slurm looks for it;
mode 600, owned by the SlurmUser) and runs ``slurmdbd``;
:func:`register_cluster` adds the cluster with ``sacctmgr`` once slurmdbd
answers. The caller keeps the processes and stops them by PID.

Example (as root; ``procs`` collects the daemons)::

    db = start_database(root / "mysql", db_port, procs)
    start_slurmdbd(root, db, dbd_port, munge_socket, procs, env)
    register_cluster("mycluster", env, procs)
"""

from __future__ import annotations

import hashlib
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ACCOUNTING_BINARIES",
    "AccountingError",
    "Database",
    "accounting_conf",
    "register_cluster",
    "start_database",
    "start_slurmdbd",
]

ACCOUNTING_BINARIES = (
    "mariadbd",
    "mariadb-install-db",
    "mariadb",
    "slurmdbd",
    "sacctmgr",
)
DB_NAME = "slurm_acct_db"
#: where an initialised, empty datadir is kept between test sessions (later
#: starts copy it instead of running mariadb-install-db); ``""`` disables it
CACHE_DIR = os.environ.get("ASYNCSCHED_TEST_CACHE", "/var/tmp/asyncsched-tests")
_INNODB = """\
innodb_buffer_pool_size=32M
innodb_log_file_size=16M
# a throwaway test database: no need to survive a crash, so no fsync
innodb_flush_log_at_trx_commit=0
innodb_doublewrite=0
innodb_flush_method=nosync
"""
DB_USER = "slurm"


class AccountingError(RuntimeError):
    """The database or slurmdbd could not be started."""


def _which(name: str) -> str:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=path)
    if found is None:
        raise AccountingError(f"{name} is not installed")
    return found


@dataclass(frozen=True)
class Database:
    """A running private MariaDB: where slurmdbd finds it."""

    defaults_file: Path
    port: int
    user: str
    password: str


def accounting_conf(dbd_port: int, munge_socket: Path) -> str:
    """The lines of ``slurm.conf`` that turn accounting storage on (the
    connections to slurmdbd name their munge socket in AccountingStoragePass)."""
    return (
        "AccountingStorageType=accounting_storage/slurmdbd\n"
        "AccountingStorageHost=localhost\n"
        f"AccountingStoragePort={dbd_port}\n"
        f"AccountingStoragePass={munge_socket}\n"
        "JobAcctGatherType=jobacct_gather/linux\n"
    )


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def _sql(db_cnf: Path, statement: str) -> None:
    subprocess.run(
        [_which("mariadb"), f"--defaults-file={db_cnf}", "-u", "root", "-e", statement],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )


def _template() -> Path | None:
    """The cached datadir for this MariaDB version and these InnoDB options."""
    if not CACHE_DIR:
        return None
    version = subprocess.run(
        [_which("mariadbd"), "--version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    key = hashlib.sha256((version + _INNODB).encode()).hexdigest()[:16]
    return Path(CACHE_DIR) / f"mariadb-datadir-{key}"


def _chown_tree(top: Path, user: pwd.struct_passwd) -> None:
    os.chown(top, user.pw_uid, user.pw_gid)
    for parent, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.chown(os.path.join(parent, name), user.pw_uid, user.pw_gid)


def _init_datadir(cnf: Path, data: Path, mysql: pwd.struct_passwd) -> None:
    """Copy the cached empty datadir, or run mariadb-install-db (and cache it)."""
    template = _template()
    if template is not None and template.is_dir():
        shutil.copytree(template, data, dirs_exist_ok=True)
        _chown_tree(data, mysql)
        return
    os.chown(data, mysql.pw_uid, mysql.pw_gid)
    init = subprocess.run(
        [
            _which("mariadb-install-db"),
            f"--defaults-file={cnf}",
            "--skip-test-db",
            "--auth-root-authentication-method=socket",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if init.returncode != 0:
        raise AccountingError(f"mariadb-install-db failed: {init.stdout}{init.stderr}")
    if template is None:
        return
    # copy aside, then rename: a concurrent session sees all of it or nothing
    template.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=template.parent))
    try:
        shutil.copytree(data, staging / "data")
        os.rename(staging / "data", template)
    except OSError:
        pass  # another session cached it first (or no space): not needed
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def start_database(
    mdir: Path, port: int, procs: dict[str, subprocess.Popen[bytes]]
) -> Database:
    """Initialise ``mdir`` and run ``mariadbd`` there (as the ``mysql`` user).

    Returns once it accepts SQL, with ``slurm_acct_db`` and its user created.
    """
    mysql = pwd.getpwnam("mysql")
    data = mdir / "data"
    data.mkdir(parents=True)
    cnf = mdir / "my.cnf"
    sock = mdir / "mariadb.sock"
    err = mdir / "mariadb.err"
    cnf.write_text(
        f"""\
[mysqld]
user=mysql
datadir={data}
socket={sock}
pid-file={mdir / "mariadb.pid"}
port={port}
bind-address=127.0.0.1
skip-name-resolve
log-error={err}
skip-log-bin
{_INNODB}[client]
socket={sock}
"""
    )
    os.chown(mdir, mysql.pw_uid, mysql.pw_gid)
    _init_datadir(cnf, data, mysql)
    with (mdir / "mariadbd-stdout.log").open("wb") as out:
        procs["mariadbd"] = subprocess.Popen(
            [_which("mariadbd"), f"--defaults-file={cnf}"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while True:
        if procs["mariadbd"].poll() is not None:
            raise AccountingError(f"mariadbd exited:\n{_tail(err)}")
        try:
            _sql(cnf, "SELECT 1")
            break
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise AccountingError(
                    f"mariadbd not ready in 60s:\n{_tail(err)}"
                ) from None
            time.sleep(0.1)
    password = secrets.token_hex(16)
    _sql(
        cnf,
        f"CREATE DATABASE {DB_NAME};"
        f" CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{password}';"
        f" GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';",
    )
    return Database(defaults_file=cnf, port=port, user=DB_USER, password=password)


def start_slurmdbd(
    root: Path,
    db: Database,
    dbd_port: int,
    munge_socket: Path,
    procs: dict[str, subprocess.Popen[bytes]],
    env: dict[str, str],
) -> None:
    """Write ``root/slurmdbd.conf`` (next to slurm.conf) and start ``slurmdbd``."""
    conf = root / "slurmdbd.conf"
    conf.touch(mode=0o600)
    os.chmod(conf, 0o600)  # slurmdbd refuses a conf others can read
    conf.write_text(
        f"""\
AuthType=auth/munge
AuthInfo=socket={munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
LogFile={root}/slurmdbd.log
PidFile={root}/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db.port}
StorageUser={db.user}
StoragePass={db.password}
StorageLoc={DB_NAME}
"""
    )
    with (root / "slurmdbd-stdout.log").open("wb") as out:
        procs["slurmdbd"] = subprocess.Popen(
            [_which("slurmdbd"), "-D"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def register_cluster(
    name: str,
    env: dict[str, str],
    procs: dict[str, subprocess.Popen[bytes]],
    log: Path,
    deadline_s: float = 60,
) -> None:
    """``sacctmgr -i add cluster NAME``, retried until slurmdbd answers."""
    deadline = time.monotonic() + deadline_s
    while True:
        proc = procs["slurmdbd"]
        if proc.poll() is not None:
            raise AccountingError(
                f"slurmdbd exited with {proc.returncode}:\n{_tail(log)}"
            )
        out = subprocess.run(
            [_which("sacctmgr"), "-i", "add", "cluster", name],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if out.returncode == 0 or "already exists" in out.stdout + out.stderr:
            return
        if time.monotonic() > deadline:
            raise AccountingError(
                f"sacctmgr add cluster failed: {out.stdout}{out.stderr}\n{_tail(log)}"
            )
        time.sleep(0.2)
