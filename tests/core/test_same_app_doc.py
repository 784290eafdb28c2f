"""docs/backends/same-app.md states only what the contract and the declared
capabilities hold."""

from __future__ import annotations

import re
from pathlib import Path

from asyncsched.schedulers.capabilities import Capabilities
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.testing.cases import CASES

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends" / "same-app.md"
#: the table's columns, in order
BACKENDS: list[Capabilities] = [
    LocalScheduler.capabilities,
    DockerScheduler.capabilities,
    KubernetesScheduler.capabilities,
    SlurmScheduler.capabilities,
]


def _row(name: str) -> list[str]:
    [line] = [
        ln for ln in DOC.read_text().splitlines() if ln.startswith(f"| `{name}` |")
    ]
    return [cell.strip() for cell in line.strip("|").split("|")][1:5]


def test_every_case_the_page_names_is_a_contract_case() -> None:
    first_table = DOC.read_text().split("\n\n| Capability")[0]
    rows = [ln for ln in first_table.splitlines() if ln.startswith("| ")][1:]
    last_cells = [row.strip().strip("|").split("|")[-1] for row in rows]
    named = {n for cell in last_cells for n in re.findall(r"`([a-z_]+)`", cell)}
    cases = {case.name for case in CASES}
    assert named, "the page names no case"
    assert named <= cases, named - cases


def test_the_capability_table_is_what_each_backend_declares() -> None:
    streams = [", ".join(sorted(s.value for s in c.log_streams)) for c in BACKENDS]
    assert _row("log_streams") == streams
    since = ["yes" if c.log_since_until else "no" for c in BACKENDS]
    assert _row("log_since_until") == since


def test_every_backend_page_links_the_table() -> None:
    for page in ("local", "docker", "kubernetes", "slurm"):
        assert "(same-app.md)" in (DOC.parent / f"{page}.md").read_text(), page
