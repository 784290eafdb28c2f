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


def _group(name: str) -> list[str]:
    return list(nox.project.dependency_groups(PYPROJECT, name))


@nox.session
def tests(session: nox.Session) -> None:
    """Provision system services (Docker, Slurm; when root on Debian), then run pytest."""
    for backend in ("docker", "slurm"):
        provision = ROOT / "tests" / backend / "provision.sh"
        if provision.exists() and not os.environ.get("ASYNCSCHED_SKIP_PROVISION"):
            session.run("bash", str(provision), external=True)
    session.install("-e", ".[all]", *_group("test"))
    session.run("pytest", "-p", "no:cacheprovider", "--durations=15", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(*_group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package, the tests and the benchmarks."""
    session.install("-e", ".[all]", *_group("typecheck"))
    session.run("mypy", "asyncsched", "tests", "benchmarks", "noxfile.py")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with mkdocs --strict."""
    session.install("-e", ".", *_group("docs"))
    session.run("mkdocs", "build", "--strict", "--site-dir", str(ROOT / "site"))


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks beside the raw floor and TorchX 0.7.0.

    ``nox -s bench`` runs every benchmark with its defaults;
    ``nox -s bench -- local -n 500`` runs ``benchmarks/local_fanout.py -n 500``.
    """
    session.install("-e", ".[all]", "psutil", "torchx==0.7.0")
    scripts = {
        p.stem.removesuffix("_fanout"): p
        for p in (ROOT / "benchmarks").glob("*_fanout.py")
    }
    if session.posargs and session.posargs[0] in scripts:
        session.run("python", str(scripts[session.posargs[0]]), *session.posargs[1:])
        return
    for script in sorted(scripts.values()):
        session.run("python", str(script))
