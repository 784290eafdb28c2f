"""The one entry point for humans and CI: ``nox -s lint typecheck tests docs``."""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["lint", "typecheck", "tests", "docs"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_external_run = True

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(str(ROOT / "pyproject.toml"))
PROVISION = [
    ROOT / "tests" / "docker" / "provision.sh",
    ROOT / "tests" / "web" / "provision.sh",
    ROOT / "tests" / "slurm" / "provision.sh",
    # builds Kubernetes 1.20 once (~7 min on 2 cores), then reuses the cache
    ROOT / "tests" / "kubernetes" / "realcluster" / "provision.sh",
]
#: pytest-xdist, 4 workers on 2 cores (the engines' tests mostly wait on their
#: daemons): each engine's tests run in one worker, the others are spread
#: (tests/engine_groups.py)
PARALLEL = ["-n", "4", "--dist", "loadgroup"]
#: pip flag of the sessions that import little of what they install (lint,
#: typecheck, docs): no bytecode compiled for every installed module (about 18 s
#: of one core for the typecheck's packages), which those runs never load
NO_COMPILE = "--no-compile"
#: the test processes cache bytecode (``__pycache__``, git-ignored) even where
#: PYTHONDONTWRITEBYTECODE is set: otherwise each of the suite's hundreds of
#: Python processes (xdist workers, CLI runs, owner processes) compiles the
#: package and the tests from source again, and each worker rewrites every test
#: module's asserts again (15 instead of 6 s of one core to collect)
TEST_ENV: dict[str, str | None] = {"PYTHONDONTWRITEBYTECODE": None}
# ``nox -s bench -- NAME [args]`` runs one of these; ``nox -s bench`` runs them all.
BENCHMARKS = {
    "local": "local_fanout.py",
    "docker": "docker_fanout.py",
    "docker-events": "docker_events.py",
    "web": "web_sse_load.py",
    "webevents": "web_events_load.py",
    "log": "log_throughput.py",
    "fds": "local_fds.py",
    "localevents": "local_events.py",
    "slurm": "slurm_fanout.py",
    "slurmevents": "slurm_events.py",
    "kubernetes": "kubernetes_api_load.py",
    "kubecache": "kubernetes_cache_memory.py",
    "kubeevents": "kubernetes_events.py",
}


def _group(name: str) -> list[str]:
    return list(nox.project.dependency_groups(PYPROJECT, name))


@nox.session
def tests(session: nox.Session) -> None:
    """Provision system services (Docker, Chromium, Slurm, a Kubernetes 1.20 build:
    when root on Debian), run pytest."""
    for provision in PROVISION:
        if provision.exists() and not os.environ.get("ASYNCSCHED_SKIP_PROVISION"):
            session.run("bash", str(provision), external=True)
    session.install("-e", ".[all]", *_group("test"))
    # ``nox -s tests -- -n 0`` runs the tests in one process
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "--durations=15",
        *PARALLEL,
        *session.posargs,
        env=TEST_ENV,
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(NO_COMPILE, *_group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package, the tests and the benchmarks."""
    session.install(NO_COMPILE, "-e", ".[all]", *_group("typecheck"))
    session.run("mypy", "asyncsched", "tests", "benchmarks", "noxfile.py")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with mkdocs --strict."""
    session.install(NO_COMPILE, "-e", ".", *_group("docs"))
    session.run("mkdocs", "build", "--strict", "--site-dir", str(ROOT / "site"))


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks beside the raw floor and TorchX 0.7.0.

    ``nox -s bench`` runs every benchmark with its defaults;
    ``nox -s bench -- local -n 500`` runs ``benchmarks/local_fanout.py -n 500``;
    ``nox -s bench -- web`` the SSE load test of the web example,
    ``nox -s bench -- log --mib 128`` ``benchmarks/log_throughput.py --mib 128``;
    the names are the keys of ``BENCHMARKS``.
    """
    session.install("-e", ".[all]", "psutil", "httpx2", "torchx==0.7.0")
    scripts = {
        name: ROOT / "benchmarks" / script for name, script in BENCHMARKS.items()
    }
    if session.posargs and session.posargs[0] in scripts:
        session.run("python", str(scripts[session.posargs[0]]), *session.posargs[1:])
        return
    for script in scripts.values():
        session.run("python", str(script))
