from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from asyncsched.specs import (
    NONE,
    AppState,
    AppStatus,
    AppStatusError,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    StatusReason,
    deciding_reason,
    exit_code_of_signal,
    is_started,
    is_terminal,
    reason_of_exit_code,
    signal_name,
)

TERMINAL = {AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}


def test_app_state_values_and_text() -> None:
    assert [s.value for s in AppState] == list(range(8))
    assert [s.name for s in AppState] == [
        "UNSUBMITTED",
        "SUBMITTED",
        "PENDING",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "CANCELLED",
        "UNKNOWN",
    ]
    assert int(AppState.UNKNOWN) == 7
    assert str(AppState.FAILED) == "FAILED"
    assert repr(AppState.FAILED) == "FAILED (5)"
    assert ReplicaState is AppState


@pytest.mark.parametrize("state", list(AppState))
def test_is_terminal_and_is_started(state: AppState) -> None:
    assert is_terminal(state) == (state in TERMINAL)
    assert AppStatus(state).is_terminal() == (state in TERMINAL)
    assert is_started(state) == (state in TERMINAL or state == AppState.RUNNING)


def test_repr_is_sorted_yaml_block() -> None:
    assert repr(AppStatus(AppState.FAILED)) == (
        "AppStatus:\n"
        "  msg: ''\n"
        "  num_restarts: 0\n"
        "  roles: []\n"
        "  state: FAILED (5)\n"
        "  structured_error_msg: <NONE>\n"
        "  ui_url: null\n"
    )


def test_repr_embeds_json_structured_error_msg() -> None:
    status = AppStatus(
        AppState.FAILED, structured_error_msg=json.dumps({"message": "test error"})
    )
    assert repr(status) == (
        "AppStatus:\n"
        "  msg: ''\n"
        "  num_restarts: 0\n"
        "  roles: []\n"
        "  state: FAILED (5)\n"
        "  structured_error_msg:\n"
        "    message: test error\n"
        "  ui_url: null\n"
    )


def test_repr_shows_replica_states_readably() -> None:
    replica = ReplicaStatus(id=0, state=AppState.RUNNING, role="w", hostname="h")
    text = repr(AppStatus(AppState.RUNNING, roles=[RoleStatus("w", [replica])]))
    assert "state: RUNNING (3)" in text
    assert "python/object" not in text


def test_raise_for_status_passes_when_succeeded() -> None:
    AppStatus(AppState.SUCCEEDED).raise_for_status()


@pytest.mark.parametrize(
    "state", [AppState.FAILED, AppState.CANCELLED, AppState.RUNNING]
)
def test_raise_for_status_raises_otherwise(state: AppState) -> None:
    status = AppStatus(state)
    with pytest.raises(
        AppStatusError, match=f"(?s)job did not succeed:.*{state.name}"
    ) as exc:
        status.raise_for_status()
    assert exc.value.status is status
    assert str(exc.value).startswith("job did not succeed: AppStatus:")


RPC_ERROR = (
    "RuntimeError('On WorkerInfo(id=1, name=trainer:0:0):\n"
    "RuntimeError(ShardingError('Table of size 715.26GB cannot be added to any rank'))\n"
    "Traceback (most recent call last):\n"
    "..\n"
    "')\n"
    "Traceback (most recent call last):\n"
    '  File "/dev/shm/uid-0/360e3568-seed/torch/distributed/rpc/internal.py", line 190\n'
)


def test_format_error_message_keeps_rpc_block_and_wraps_at_80() -> None:
    actual = AppStatus(AppState.FAILED)._format_error_message(
        RPC_ERROR, header="", width=80
    )
    assert actual == (
        "RuntimeError('On WorkerInfo(id=1, name=trainer:0:0):\n"
        "RuntimeError(ShardingError('Table\n"
        " of size 715.26GB cannot be added to any rank'))\n"
        "Traceback (most recent call last):\n"
        "..\n"
        "')"
    )


def test_format_error_message_indents_continuation_lines_under_header() -> None:
    msg = " ".join(["word"] * 40)  # 199 chars
    out = AppStatus(AppState.FAILED)._format_error_message(
        msg, header="HDR: ", width=20
    )
    lines = out.split("\n")
    # cut at the first space at or after 20 chars; that space starts the next line
    assert lines[0] == "HDR: word word word word word"
    assert lines[1] == "      word word word word"
    assert all(line.startswith("      word") for line in lines[1:])
    assert "".join(line[5:] for line in lines) == msg


def test_format_error_message_cuts_nested_exception() -> None:
    msg = (
        "c10::Error: CUDA error: an illegal memory access was encountered\n"
        "Exception raised from create_event_internal at CUDACachingAllocator.cpp:733"
    )
    out = AppStatus(AppState.FAILED)._format_error_message(msg, header="", width=200)
    assert out == "c10::Error: CUDA error: an illegal memory access was encountered"


@pytest.fixture
def london_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Europe/London")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def torchelastic_error(message: str, code: int | None, timestamp: int) -> str:
    return json.dumps(
        {
            "message": {
                "message": message,
                "errorCode": code,
                "extraInfo": {"py_callstack": "...", "timestamp": str(timestamp)},
            }
        }
    )


@pytest.mark.usefixtures("london_tz")
def test_format_renders_replicas() -> None:
    failed = ReplicaStatus(
        id=0,
        state=AppState.FAILED,
        role="worker",
        hostname="localhost",
        structured_error_msg=torchelastic_error("error", -1, 1633766453),
    )
    running = ReplicaStatus(id=1, state=AppState.RUNNING, role="worker", hostname="h")
    status = AppStatus(
        state=AppState.RUNNING, roles=[RoleStatus("worker", [running, failed])]
    )
    expected = """AppStatus:
        State: RUNNING
        Num Restarts: 0
        Roles:
         *worker[0]:FAILED (exitcode: -1)
            timestamp: 2021-10-09 09:00:53
            hostname: localhost
            error_msg: error
         worker[1]:RUNNING
        Msg:
        Structured Error Msg: <NONE>
        UI URL: None
    """
    assert status.format().split() == expected.split()
    lines = status.format().splitlines()
    assert " *worker[0]:FAILED (exitcode: -1)" in lines
    assert "  worker[1]:RUNNING" in lines


@pytest.mark.usefixtures("london_tz")
def test_format_shows_na_for_falsy_exit_code() -> None:
    replica = ReplicaStatus(
        id=0,
        state=AppState.FAILED,
        role="r",
        hostname="h",
        structured_error_msg=torchelastic_error("boom", 0, 1633766453),
    )
    text = AppStatus(AppState.FAILED, roles=[RoleStatus("r", [replica])]).format()
    assert "*r[0]:FAILED (exitcode: <N/A>)" in text


@pytest.mark.parametrize(
    ("state", "suffix"),
    [
        (AppState.FAILED, "FAILED (no reply file)"),
        (AppState.CANCELLED, "CANCELLED (no reply file)"),
        (AppState.SUCCEEDED, "SUCCEEDED"),
    ],
)
def test_format_without_error_reply(state: AppState, suffix: str) -> None:
    replica = ReplicaStatus(id=2, state=state, role="r", hostname="h")
    text = AppStatus(state, roles=[RoleStatus("r", [replica])]).format()
    assert f"\n  r[2]:{suffix}\n" in text


def test_format_prints_invalid_json_raw() -> None:
    replica = ReplicaStatus(
        id=0,
        state=AppState.FAILED,
        role="r",
        hostname="h",
        structured_error_msg="oops{",
    )
    text = AppStatus(AppState.FAILED, roles=[RoleStatus("r", [replica])]).format()
    assert "*r[0]:FAILED oops{" in text


def test_format_filters_roles() -> None:
    roles = [
        RoleStatus("a", [ReplicaStatus(0, AppState.RUNNING, "a", "h")]),
        RoleStatus("b", [ReplicaStatus(0, AppState.RUNNING, "b", "h")]),
    ]
    text = AppStatus(AppState.RUNNING, roles=roles, ui_url="http://ui").format(["b"])
    assert "*b[0]:RUNNING" in text
    assert "a[0]" not in text
    assert "UI URL: http://ui" in text


def test_to_json() -> None:
    replica = ReplicaStatus(id=0, state=AppState.RUNNING, role="w", hostname="h")
    status = AppStatus(
        state=AppState.RUNNING,
        num_restarts=2,
        msg="hi",
        ui_url="http://u",
        roles=[RoleStatus("w", [replica]), RoleStatus("x", [])],
    )
    expected_replica = {
        "id": 0,
        "state": 3,
        "role": "w",
        "hostname": "h",
        "structured_error_msg": NONE,
        "exit_code": None,
        "pid": None,
        "num_restarts": 0,
        "reason": None,
        "message": "",
    }
    assert status.to_json() == {
        "state": "RUNNING",
        "reason": None,
        "num_restarts": 2,
        "roles": [
            {"role": "w", "replicas": [expected_replica]},
            {"role": "x", "replicas": []},
        ],
        "msg": "hi",
        "structured_error_msg": NONE,
        "url": "http://u",
    }
    assert (
        json.loads(json.dumps(status.to_json()))["roles"][0]["replicas"][0]["state"]
        == 3
    )
    assert [r["role"] for r in status.to_json(filter_roles=["x"])["roles"]] == ["x"]


def test_replica_status_defaults() -> None:
    replica = ReplicaStatus(id=1, state=AppState.PENDING, role="r", hostname="h")
    assert replica.structured_error_msg == NONE
    assert (replica.exit_code, replica.pid, replica.num_restarts) == (None, None, 0)


def test_app_status_defaults() -> None:
    status = AppStatus(AppState.UNKNOWN)
    assert (status.num_restarts, status.msg, status.structured_error_msg) == (
        0,
        "",
        NONE,
    )
    assert status.ui_url is None
    assert status.roles == []


def test_a_failed_replicas_reason_shows_in_format_json_and_repr() -> None:
    oom = ReplicaStatus(
        id=1,
        state=AppState.FAILED,
        role="w",
        hostname="h",
        exit_code=137,
        reason=StatusReason.OOM_KILLED,
        message="memory limit 20 MiB",
    )
    ok = ReplicaStatus(id=0, state=AppState.SUCCEEDED, role="w", hostname="h")
    roles = [RoleStatus("w", [ok, oom])]
    reason, message = deciding_reason(AppState.FAILED, roles)
    assert (reason, message) == (StatusReason.OOM_KILLED, "memory limit 20 MiB")
    status = AppStatus(AppState.FAILED, roles=roles, reason=reason)
    text = status.format()
    assert "reason: OOM_KILLED (exit code 137): memory limit 20 MiB" in text
    assert "w[0]:SUCCEEDED\n" in text  # no reason line for a success
    as_json = json.loads(json.dumps(status.to_json()))
    assert as_json["reason"] == "OOM_KILLED"
    assert as_json["roles"][0]["replicas"][1]["reason"] == "OOM_KILLED"
    assert "reason: OOM_KILLED" in repr(status)


def test_a_cancelled_app_without_replica_reasons_reads_cancelled() -> None:
    assert deciding_reason(AppState.CANCELLED, []) == (StatusReason.CANCELLED, "")
    assert deciding_reason(AppState.SUCCEEDED, []) == (None, "")


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (0, None),
        (1, StatusReason.EXIT_CODE),
        (3, StatusReason.EXIT_CODE),
        (137, StatusReason.SIGNAL),
        (143, StatusReason.SIGNAL),
        (255, StatusReason.EXIT_CODE),
    ],
)
def test_exit_codes_read_as_signal_deaths_above_128(
    code: int, reason: StatusReason | None
) -> None:
    assert reason_of_exit_code(code) == reason
    assert exit_code_of_signal(9) == 137
    assert signal_name(9) == "SIGKILL"
