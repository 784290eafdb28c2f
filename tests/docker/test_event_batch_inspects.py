"""Which containers of one batch of daemon events an ``events()`` reader inspects (no daemon).

The daemon sends the events of a busy moment together. A reader whose loop
was late can get a container's ``create``, ``start`` and final ``die`` in one
batch: the batch's own events say it all, so no inspect is made.
"""

from __future__ import annotations

from asyncsched.schedulers.docker._event_source import EngineEvent, _to_inspect
from asyncsched.schedulers.docker._state import LABEL_MAX_RETRIES, ContainerRecord
from asyncsched.schedulers.shared.labels import (
    LABEL_APP_ID,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
)

LABELS = {
    LABEL_APP_ID: "app-1",
    LABEL_SESSION: "s",
    LABEL_ROLE_NAME: "r",
    LABEL_REPLICA_ID: "0",
    "name": "app-1-r-0",
    "image": "busybox",
}


def _event(n: int, action: str, cid: str = "c1", **extra: str) -> EngineEvent:
    attrs = {**LABELS, **extra}
    return EngineEvent(1_000 + n, 1, action, cid, attrs[LABEL_APP_ID], attrs)


def _created(cid: str, max_retries: str) -> ContainerRecord:
    labels = {**LABELS, LABEL_MAX_RETRIES: max_retries}
    record = ContainerRecord.from_labels(cid, "n", "busybox", labels, "created")
    assert record is not None
    return record


def test_a_container_created_started_and_ended_in_one_batch_needs_no_inspect() -> None:
    batch = [
        _event(1, "create", **{LABEL_MAX_RETRIES: "0"}),
        _event(2, "start", **{LABEL_MAX_RETRIES: "0"}),
        _event(3, "die", exitCode="3", **{LABEL_MAX_RETRIES: "0"}),
        _event(4, "destroy", **{LABEL_MAX_RETRIES: "0"}),
    ]
    assert _to_inspect({}, batch) == set()


def test_an_exit_its_restart_policy_may_undo_is_inspected() -> None:
    batch = [
        _event(1, "start", **{LABEL_MAX_RETRIES: "2"}),
        _event(2, "die", exitCode="1", **{LABEL_MAX_RETRIES: "2"}),
    ]
    assert _to_inspect({"c1": _created("c1", "2")}, batch) == {"c1"}


def test_an_exit_of_a_container_that_never_started_is_inspected() -> None:
    # a die straight after create is a failed start: its error is only in an inspect
    batch = [
        _event(1, "create", **{LABEL_MAX_RETRIES: "0"}),
        _event(2, "die", exitCode="127", **{LABEL_MAX_RETRIES: "0"}),
    ]
    assert _to_inspect({}, batch) == {"c1"}


def test_a_sigkill_exit_and_an_oom_are_inspected() -> None:
    started = [_event(1, "create", cid=c) for c in ("c1", "c2")] + [
        _event(2, "start", cid=c) for c in ("c1", "c2")
    ]
    batch = [
        *started,
        _event(3, "die", cid="c1", exitCode="137"),
        _event(3, "oom", cid="c2"),
    ]
    records = {c: _created(c, "0") for c in ("c1", "c2")}
    assert _to_inspect(records, batch) == {"c1", "c2"}


def test_a_start_of_a_container_already_seen_ended_is_inspected() -> None:
    ended = _created("c1", "0")
    ended.status, ended.exit_code = "exited", 0
    assert _to_inspect({"c1": ended}, [_event(1, "start")]) == {"c1"}


def test_events_of_containers_of_no_app_are_ignored() -> None:
    stray = EngineEvent(1_000, 1, "die", "c9", "", {"exitCode": "1"})
    assert _to_inspect({}, [stray]) == set()
