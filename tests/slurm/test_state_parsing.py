"""Slurm records -> app states, per replica (pure; no cluster needed)."""

from __future__ import annotations

from datetime import datetime

import pytest

from asyncsched.schedulers.slurm._state import (
    group_components,
    parse_sacct,
    parse_squeue,
    slurm_state,
)
from asyncsched.specs import AppState

# squeue -h -O SQUEUE_FORMAT for a heterogeneous job of two replicas whose
# replica 1 exited 3 (raw wait status 768) and replica 0 was SIGTERMed
SQUEUE_HET = (
    "5|5|0|w-0|FAILED|36608|15|2026-11-23T11:08:31|n1|0|None|/work/a|b|\n"
    "6|5|1|w-1|FAILED|36608|768|2026-11-23T11:08:31|n2|0|None|/work/a|b|\n"
)
# a plain (one replica) job, still running
SQUEUE_ONE = "7|N/A|N/A|t-0|RUNNING|0|0|2026-11-23T11:09:00|n1|0|None|/w|\n"


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_heterogeneous_components_group_into_one_app_with_replica_codes() -> None:
    views = group_components(parse_squeue(SQUEUE_HET + SQUEUE_ONE), source="squeue")
    het = views["5"].snapshot()
    assert het.state == AppState.FAILED
    [role] = het.role_statuses()
    assert [(r.id, r.hostname, r.exit_code) for r in role.replicas] == [
        (0, "n1", 128 + 15),
        (1, "n2", 3),
    ]
    assert views["5"].work_dir == "/work/a|b"  # the last field may hold the separator
    one = views["7"].snapshot()
    assert one.state == AppState.RUNNING
    assert one.role_statuses()[0].replicas[0].exit_code is None  # not exited yet


def test_app_is_terminal_only_when_every_component_is() -> None:
    rows = parse_squeue(
        "8|8|0|w-0|COMPLETED|0|0|2026-11-23T11:00:00|n1|0|None|/w|\n"
        "9|8|1|w-1|COMPLETING|0|0|2026-11-23T11:00:00|n2|0|None|/w|\n"
    )
    assert group_components(rows, source="squeue")["8"].state == AppState.RUNNING


def test_completion_log_rows_map_component_ids_to_their_app() -> None:
    text = (
        "5|w-0|FAILED|3:0|0:0|2026-11-23T11:08:31|n1|/w\n"
        "6|w-1|FAILED|3:0|3:0|2026-11-23T11:08:31|n2|/w\n"
    )
    views = group_components(parse_sacct(text, {"5": "5", "6": "5"}), source="sacct -c")
    desc = views["5"].snapshot()
    assert desc.state == AppState.FAILED
    # each replica's own result: its derived exit code
    assert [(r.state, r.exit_code) for r in desc.role_statuses()[0].replicas] == [
        (AppState.SUCCEEDED, 0),
        (AppState.FAILED, 3),
    ]


def test_accounting_rows_skip_steps_and_read_het_offsets() -> None:
    text = (
        "5+0|w-0|COMPLETED|0:0|0:0|2026-11-23T11:08:31|n1|/w\n"
        "5+0.batch|batch|COMPLETED|0:0||2026-11-23T11:08:31|n1|\n"
        "5+0.0|sh|COMPLETED|0:0||2026-11-23T11:08:31|n1|\n"
        "5+1|w-1|CANCELLED by 0|0:15|0:0|2026-11-23T11:08:31|n2|/w\n"
    )
    view = group_components(parse_sacct(text), source="sacct")["5"]
    assert [c.state for c in view.components] == [
        AppState.SUCCEEDED,
        AppState.CANCELLED,
    ]
    assert view.state == AppState.CANCELLED


def test_reused_job_id_keeps_only_the_record_submitted_after_ours() -> None:
    # job ids restart at 1 on a fresh cluster: the completion log may hold an
    # older job 5; ours was submitted at 12:00
    text = (
        "5|old-0|COMPLETED|0:0|0:0|2026-11-20T09:00:00|n1|/old\n"
        "5|new-0|FAILED|1:0|1:0|2026-11-23T12:00:01|n1|/new\n"
    )
    ours = {"5": _epoch("2026-11-23T12:00:00") - 120}
    view = group_components(parse_sacct(text), source="sacct", not_before=ours)["5"]
    assert [c.name for c in view.components] == ["new-0"]
    only_old = parse_sacct(text.splitlines()[0])
    assert group_components(only_old, source="sacct", not_before=ours) == {}


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("COMPLETED", AppState.SUCCEEDED),
        ("CANCELLED by 1000", AppState.CANCELLED),
        ("RUNNING", AppState.RUNNING),
        ("REQUEUED", AppState.PENDING),
        ("SUSPENDED", AppState.PENDING),
        ("TIMEOUT", AppState.FAILED),
        ("OUT_OF_MEMORY", AppState.FAILED),
        ("NODE_FAIL", AppState.FAILED),
        ("PREEMPTED", AppState.FAILED),
        ("COMPLETING", AppState.RUNNING),
        ("FAILED+", AppState.FAILED),
        ("NEW_STATE", AppState.UNKNOWN),
    ],
)
def test_slurm_states_map_as_torchx(raw: str, state: AppState) -> None:
    assert slurm_state(raw) == state
