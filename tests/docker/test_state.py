"""State table, the index, error mapping, log params (no daemon)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import cast

import aiohttp
import anyio
import pytest
from aiodocker.exceptions import DockerError

from asyncsched.errors import SchedulerError, SchedulerUnavailableError, SubmitError
from asyncsched.schedulers.api import Stream
from asyncsched.schedulers.docker._logs import docker_timestamp, log_params
from asyncsched.schedulers.docker._state import (
    LABEL_MAX_RETRIES,
    AppView,
    ContainerIndex,
    ContainerRecord,
    replica_state,
)
from asyncsched.schedulers.shared.docker_errors import docker_errors, map_error
from asyncsched.specs import AppState

S = AppState


@pytest.mark.parametrize(
    ("status", "code", "cancelled", "expected"),
    [
        ("created", None, False, S.SUBMITTED),
        ("restarting", 1, False, S.PENDING),
        ("running", None, False, S.RUNNING),
        ("paused", None, False, S.PENDING),
        ("removing", None, False, S.PENDING),
        ("dead", None, False, S.FAILED),
        ("exited", 0, False, S.SUCCEEDED),
        ("exited", 1, False, S.FAILED),
        ("exited", 137, True, S.CANCELLED),
        ("exited", 0, True, S.CANCELLED),
        ("created", None, True, S.CANCELLED),
        ("running", None, True, S.RUNNING),
        ("exited", None, False, S.UNKNOWN),
        ("weird", None, False, S.UNKNOWN),
    ],
)
def test_replica_state_table(
    status: str, code: int | None, cancelled: bool, expected: AppState
) -> None:
    assert replica_state(status, code, cancelled=cancelled) == expected


def _item(cid: str, state: str, status: str, replica: str = "0") -> dict[str, object]:
    return {
        "Id": cid,
        "Names": [f"/app-r-{replica}"],
        "Image": "img",
        "State": state,
        "Status": status,
        "Labels": {
            "asyncsched.io/app-id": "app",
            "asyncsched.io/app-name": "a",
            "asyncsched.io/role-name": "r",
            "asyncsched.io/replica-id": replica,
        },
    }


def test_record_from_list_item_parses_exit_code_and_is_unsettled() -> None:
    rec = ContainerRecord.from_list_item(
        _item("c1", "exited", "Exited (3) 2 seconds ago")
    )
    assert rec is not None
    assert (rec.name, rec.app_id, rec.role, rec.replica_id) == (
        "app-r-0",
        "app",
        "r",
        0,
    )
    assert rec.exit_code == 3
    assert rec.state == S.FAILED
    assert rec.settled is False
    running = ContainerRecord.from_list_item(_item("c2", "running", "Up 1 second"))
    assert running is not None
    assert running.settled
    assert running.state == S.RUNNING
    assert ContainerRecord.from_list_item({"Id": "x", "Labels": {}}) is None


def test_apply_inspect_reads_cancel_mark_and_restarts() -> None:
    rec = ContainerRecord.from_list_item(_item("c1", "exited", "Exited (137) now"))
    assert rec is not None
    rec.apply_inspect(
        {
            "State": {"Status": "exited", "ExitCode": 137},
            "HostConfig": {"RestartPolicy": {"Name": "unless-stopped"}},
            "RestartCount": 2,
        }
    )
    assert rec.settled
    assert rec.cancelled
    assert rec.restarts == 2
    assert rec.state == S.CANCELLED


@pytest.mark.parametrize(
    ("max_retries", "code", "cancelled", "oom", "final"),
    [
        ("0", 3, False, False, True),  # no restart policy: any exit is final
        ("0", 0, False, False, True),
        ("2", 0, False, False, True),  # on-failure never restarts a success
        ("2", 1, False, False, False),  # it may restart a failure: inspect
        ("0", 137, True, False, False),  # a cancel: the daemon's word
        ("0", 137, False, True, False),  # an OOM kill: the daemon's word
        ("0", 137, False, False, False),  # a SIGKILL may be the OOM killer's
        ("0", 143, False, False, True),  # a SIGTERM is not
        (None, 3, False, False, False),  # no label (an older container)
        ("0", None, False, False, False),  # no exit code in the event
    ],
)
def test_an_exit_is_final_without_an_inspect_only_when_no_policy_restarts_it(
    max_retries: str | None, code: int | None, cancelled: bool, oom: bool, final: bool
) -> None:
    labels = cast(dict[str, str], _item("c1", "running", "Up")["Labels"])
    if max_retries is not None:
        labels = {**labels, LABEL_MAX_RETRIES: max_retries}
    rec = ContainerRecord.from_labels("c1", "n", "img", labels, "running")
    assert rec is not None
    rec.cancelled, rec.oom_killed = cancelled, oom
    assert rec.exit_is_final(code) is final


def test_a_listed_container_needs_an_inspect_before_its_exit_is_final() -> None:
    # a listing shows neither the policy nor a cancel mark set before it
    item = _item("c1", "running", "Up")
    labels = cast(dict[str, str], item["Labels"])
    item["Labels"] = {**labels, LABEL_MAX_RETRIES: "0"}
    rec = ContainerRecord.from_list_item(item)
    assert rec is not None
    assert not rec.exit_is_final(3)
    rec.apply_inspect({"State": {"Status": "running"}, "HostConfig": {}})
    assert rec.exit_is_final(3)


async def test_index_notifies_waiters_per_app() -> None:
    index = ContainerIndex()
    rec = ContainerRecord.from_list_item(_item("c1", "running", "Up"))
    assert rec is not None
    ev_app, ev_other = index.changes.changed("app"), index.changes.changed("other")
    index.upsert(rec)
    assert ev_app.is_set()
    assert not ev_other.is_set()
    view = index.app("app")
    assert isinstance(view, AppView)
    assert view.snapshot().state == S.RUNNING
    assert view.name == "a"
    ev_app = index.changes.changed("app")
    index.remove("c1")
    assert ev_app.is_set()
    assert index.app("app") is None
    with anyio.fail_after(1):
        ev = index.changes.changed("other")
        index.changes.notify_all()
        await ev.wait()


def test_replace_all_keeps_settled_details() -> None:
    index = ContainerIndex()
    rec = ContainerRecord.from_list_item(_item("c1", "exited", "Exited (137) now"))
    assert rec is not None
    rec.cancelled, rec.settled = True, True
    index.upsert(rec)
    fresh = ContainerRecord.from_list_item(_item("c1", "exited", "Exited (137) later"))
    other = ContainerRecord.from_list_item(_item("c2", "running", "Up", replica="1"))
    assert fresh is not None
    assert other is not None
    index.replace_all([fresh, other])
    view = index.app("app")
    assert view is not None
    assert [r.state for r in view.records] == [S.CANCELLED, S.RUNNING]
    assert [r.replica_id for r in view.records] == [0, 1]


def test_error_mapping() -> None:
    down = map_error(
        DockerError(900, "Cannot connect [No such file]"), "list", "unix:///x"
    )
    assert isinstance(down, SchedulerUnavailableError)
    assert "unix:///x" in str(down)
    assert "DOCKER_HOST" in down.hint
    perm = map_error(
        DockerError(900, "Cannot connect [Permission denied]"), "list", "h"
    )
    assert isinstance(perm, SchedulerUnavailableError)
    assert "docker' group" in perm.hint
    api = map_error(DockerError(500, "boom"), "do x", "h")
    assert type(api) is SchedulerError
    assert "boom" in str(api)
    assert "do x" in str(api)
    sub = map_error(DockerError(400, "bad"), "create", "h", submit=True)
    assert isinstance(sub, SubmitError)
    conn = map_error(aiohttp.ClientConnectionError("gone"), "x", "h")
    assert isinstance(conn, SchedulerUnavailableError)
    with pytest.raises(SubmitError) as info, docker_errors("create", "h", submit=True):
        raise DockerError(409, "name in use")
    assert isinstance(info.value.__cause__, DockerError)


def test_docker_timestamp_and_log_params() -> None:
    aware = datetime(2024, 1, 1, 12, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=2)))
    assert docker_timestamp(aware) == "1704103200.250000000"
    naive = datetime(2024, 1, 1, 10, 0, 0, 250_000)  # taken as UTC
    assert docker_timestamp(naive) == docker_timestamp(naive.replace(tzinfo=UTC))
    assert log_params(None, None, None) == {"stdout": True, "stderr": True}
    assert log_params(None, None, Stream.COMBINED) == {"stdout": True, "stderr": True}
    assert log_params(None, None, Stream.STDERR) == {"stdout": False, "stderr": True}
    params = log_params(naive, naive, Stream.STDOUT)
    assert params["stdout"]
    assert not params["stderr"]
    assert params["since"] == params["until"] == docker_timestamp(naive)
