"""Which pytest-xdist worker runs which tests: one worker per engine.

``pytest -n 4 --dist loadgroup`` (what ``nox -s tests`` runs) hands all the
tests of one engine directory (for Kubernetes: those on the real cluster) to
a single worker, so only that worker starts the engine (a dockerd and its
registries, the two Slurm clusters, the real Kubernetes cluster, uvicorn and
Chromium) and the engine's session fixtures start once. The engines mostly wait on their daemons, so while one worker
drives an engine the others run the rest of the suite, test by test.

A test that needs an engine lives in that engine's directory: the group is
read from the test's path. (pytest-xdist's ``xdist_group`` marker does not
work here: pytest-xdist 3.8 marks a test by setting its ``_nodeid``, which
pytest 9 no longer reads, so every marked test stayed a group of its own.)

Example:
    >>> engine_group("tests/slurm/test_logs.py::test_tail[jobcomp]")
    'slurm'
    >>> engine_group("tests/kubernetes/test_state.py::test_x[real-indexed]")
    'kubernetes'
    >>> engine_group("tests/kubernetes/test_state.py::test_x[fake-indexed]") is None
    True
    >>> engine_group("tests/local/test_retries.py::test_retry") is None
    True
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

__all__ = ("ENGINE_GROUPS", "EngineGroupScheduling", "engine_group")

#: the test directories (under ``tests/``) whose tests share an engine
ENGINE_GROUPS = ("docker", "kubernetes", "slurm", "web")


def engine_group(nodeid: str) -> str | None:
    """The engine directory of the test ``nodeid``, or None for the others.

    A Kubernetes test is in the group only when it runs on the ``real``
    cluster (its ``kube_server`` parameter): the fake API server is started
    by each test for itself, on a free port, so those tests go anywhere.
    """
    path, _, name = nodeid.partition("::")
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tests" or parts[1] not in ENGINE_GROUPS:
        return None
    if parts[1] == "kubernetes" and not _on_real_cluster(name):
        return None
    return parts[1]


def _on_real_cluster(name: str) -> bool:
    """Whether the test ``name`` (``test_x[real-volcano]``) has the ``real``
    API server among its parameters."""
    params = name.partition("[")[2].removesuffix("]")
    return "real" in params.split("-")


class EngineGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """pytest-xdist's scope scheduling with one scope per engine directory and
    one per other test; the largest scopes (the engines) are handed out first."""

    def _split_scope(self, nodeid: str) -> str:
        return engine_group(nodeid) or nodeid
