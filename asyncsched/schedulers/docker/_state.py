"""Container states -> AppState, and the in-memory index the events keep current.

The index is a cache of what the Docker daemon knows: one
:class:`ContainerRecord` per asyncsched container. It is rebuilt from a
container listing whenever the events stream (re)connects and is then kept
current by events, so ``describe``/``wait``/``list`` cost no API call.

Example:
    >>> replica_state("exited", 0, cancelled=False)
    <AppState.SUCCEEDED: 4>
    >>> replica_state("exited", 137, cancelled=True)
    <AppState.CANCELLED: 6>
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from asyncsched.schedulers.kit import (
    AppSnapshot,
    ChangeNotifier,
    ReplicaSnapshot,
    app_failure_message,
)
from asyncsched.schedulers.shared.labels import LABEL_PREFIX, ReplicaLabels
from asyncsched.specs import AppState, Role, StatusReason

from ._reasons import container_reason

__all__ = [
    "CANCEL_MARK_POLICY",
    "DOCKER_STATES",
    "LABEL_FAIL_FAST",
    "LABEL_MAX_RETRIES",
    "LIVE_STATUSES",
    "STOPPED_BY_FAILURE",
    "AppView",
    "ContainerIndex",
    "ContainerRecord",
    "replica_state",
]

#: Docker ``State.Status`` -> replica state; ``exited`` depends on the exit code.
DOCKER_STATES: Mapping[str, AppState] = {
    "created": AppState.SUBMITTED,
    "restarting": AppState.PENDING,
    "running": AppState.RUNNING,
    "paused": AppState.PENDING,
    "removing": AppState.PENDING,
    "dead": AppState.FAILED,
}

#: The restart policy ``cancel`` sets before stopping a container. asyncsched
#: never creates containers with it, so it marks "stopped by cancel" in the
#: daemon itself, visible to every process (labels cannot change after create).
CANCEL_MARK_POLICY = "unless-stopped"

#: ``"true"`` or ``"false"``: the ``fail_fast`` run option of the app (absent:
#: true, the default)
LABEL_FAIL_FAST = LABEL_PREFIX + "fail-fast"

#: the role's ``max_retries`` at create (its restart policy: ``on-failure``
#: with that many retries, or none for 0), so an exit is understood without
#: an inspect; a later ``update`` event is inspected (the policy may change)
LABEL_MAX_RETRIES = LABEL_PREFIX + "max-retries"

#: the message of a replica stopped because another one failed (as local's)
STOPPED_BY_FAILURE = "stopped: another replica failed"

#: Docker statuses of a container that runs or may (re)start
LIVE_STATUSES = ("created", "running", "restarting", "paused")

_STATUS_EXIT = re.compile(r"^(?:Exited|Restarting) \((-?\d+)\)")


def replica_state(status: str, exit_code: int | None, *, cancelled: bool) -> AppState:
    """Map a Docker container status (plus exit code) to a replica state.

    A container stopped by ``cancel`` is CANCELLED once it is no longer running
    (TorchX reports FAILED); an unknown status is UNKNOWN.
    """
    if cancelled and status in ("exited", "dead", "created"):
        return AppState.CANCELLED
    if status == "exited":
        if exit_code is None:
            return AppState.UNKNOWN
        return AppState.SUCCEEDED if exit_code == 0 else AppState.FAILED
    return DOCKER_STATES.get(status, AppState.UNKNOWN)


@dataclass
class ContainerRecord(ReplicaLabels):
    """What the index knows of one container (whose replica: the base fields)."""

    id: str
    name: str
    image: str
    status: str
    exit_code: int | None = None
    cancelled: bool = False
    restarts: int = 0
    #: False until exit code and cancel mark are known for an exited container
    settled: bool = True
    #: ``State.OOMKilled`` and ``State.Error`` of the last inspect
    oom_killed: bool = False
    error: str = ""
    #: the app's ``fail_fast`` (label): a failure for good stops the others
    fail_fast: bool = True
    #: ``HostConfig.RestartPolicy.Name`` ("no" for none); None while unknown:
    #: known from an inspect, or from the label of a container seen created
    #: (a later cancel mark then comes as an ``update`` event), never from a
    #: listing (the mark may be set already)
    restart_policy: str | None = None

    def exit_is_final(self, exit_code: int | None) -> bool:
        """Whether the exit of this container's process with ``exit_code``
        (a ``die`` event's) is final whatever the daemon does next, so that
        no inspect is needed: its restart policy is known and restarts no
        such exit, and neither a cancel nor an OOM kill (an ``oom`` event,
        or exit code 137) needs the daemon's word. (A ``die`` of a container that never ran is a failed start:
        its error is only in an inspect; callers check ``status``.)

        Example:
            >>> labels = {"asyncsched.io/app-id": "a", "asyncsched.io/role-name": "r",
            ...     "asyncsched.io/replica-id": "0", LABEL_MAX_RETRIES: "2"}
            >>> rec = ContainerRecord.from_labels("c", "n", "i", labels, "running")
            >>> rec.exit_is_final(0), rec.exit_is_final(1)
            (True, False)
        """
        if exit_code in (None, 137) or self.cancelled or self.oom_killed:
            return False  # 137, a SIGKILL: the OOM killer's, for all we know
        if self.restart_policy in ("no", ""):
            return True
        return self.restart_policy == "on-failure" and exit_code == 0

    @property
    def state(self) -> AppState:
        """The replica state of this container."""
        return replica_state(self.status, self.exit_code, cancelled=self.cancelled)

    @property
    def live(self) -> bool:
        """True while the container runs or may (re)start."""
        return self.status in LIVE_STATUSES

    def reason(self) -> tuple[StatusReason | None, str]:
        """Why this container is not running or did not succeed (see _reasons)."""
        state = {
            "Status": self.status,
            "ExitCode": self.exit_code,
            "OOMKilled": self.oom_killed,
            "Error": self.error,
        }
        return container_reason(state, cancelled=self.cancelled)

    @classmethod
    def from_labels(
        cls, cid: str, name: str, image: str, labels: Mapping[str, str], status: str
    ) -> ContainerRecord | None:
        """Build a record from a container's labels; None if they are not ours."""
        ids = ReplicaLabels.read(labels)
        if ids is None:
            return None
        return cls(
            id=cid,
            name=name.lstrip("/"),
            image=image,
            status=status,
            fail_fast=labels.get(LABEL_FAIL_FAST, "true") != "false",
            restart_policy=_policy_of_label(labels.get(LABEL_MAX_RETRIES)),
            **asdict(ids),
        )

    @classmethod
    def from_list_item(cls, item: Mapping[str, Any]) -> ContainerRecord | None:
        """Build a record from one ``GET /containers/json`` entry.

        The exit code is read from the ``Status`` text ("Exited (3) ..."); the
        cancel mark is not in listings, so exited containers are unsettled.
        """
        names = item.get("Names") or [""]
        status = str(item.get("State", ""))
        record = cls.from_labels(
            str(item["Id"]),
            str(names[0]),
            str(item.get("Image", "")),
            item.get("Labels") or {},
            status,
        )
        if record is None:
            return None
        match = _STATUS_EXIT.match(str(item.get("Status", "")))
        if match:
            record.exit_code = int(match.group(1))
        record.settled = status not in ("exited", "dead", "created")
        # a cancel may have set its mark already: only an inspect tells
        record.restart_policy = None
        return record

    def apply_inspect(self, info: Mapping[str, Any]) -> None:
        """Update from ``GET /containers/{id}/json`` (authoritative)."""
        st = info.get("State") or {}
        status = str(st.get("Status", self.status))
        if status == "running" and self.status in ("exited", "restarting"):
            # inspected between a restart-policy restart and its start event
            status = "restarting"
        self.status = status
        if status in ("exited", "dead", "restarting"):
            self.exit_code = int(st.get("ExitCode", 0))
        self.oom_killed = bool(st.get("OOMKilled"))
        self.error = str(st.get("Error") or "")
        policy = ((info.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name")
        self.cancelled = policy == CANCEL_MARK_POLICY
        self.restart_policy = str(policy or "no")
        self.restarts = int(info.get("RestartCount", self.restarts) or 0)
        self.settled = True


def _policy_of_label(value: str | None) -> str | None:
    """The restart policy a ``max-retries`` label stands for (None: unknown)."""
    if value is None or not value.isdigit():
        return None
    return "on-failure" if int(value) > 0 else "no"


@dataclass
class AppView:
    """The records of one app, sorted by role index then replica id."""

    app_id: str
    records: list[ContainerRecord]

    @property
    def name(self) -> str:
        """The AppDef name, from the labels."""
        return self.records[0].app_name if self.records else ""

    @property
    def session(self) -> str:
        """The session that submitted the app, from the labels."""
        return self.records[0].session if self.records else ""

    @property
    def fail_fast(self) -> bool:
        """Whether a replica failing for good stops the others (the label)."""
        return all(r.fail_fast for r in self.records)

    @property
    def failed(self) -> bool:
        """True once a replica failed for good (its retries used up)."""
        return any(r.state == AppState.FAILED for r in self.records)

    def to_stop(self) -> list[ContainerRecord]:
        """Live replicas that fail-fast must stop (none while none failed)."""
        if not (self.fail_fast and self.failed):
            return []
        return [r for r in self.records if r.live and not r.cancelled]

    def decided(self) -> AppState | None:
        """FAILED once fail-fast applies, CANCELLED once a cancel was asked."""
        if self.fail_fast and self.failed:
            return AppState.FAILED
        if any(r.cancelled for r in self.records):
            return AppState.CANCELLED
        return None

    def snapshot(self) -> AppSnapshot:
        """The app as the scheduler reports it (exit codes, restart counts).

        A replica stopped after another one failed (by fail-fast, or a
        cancel that came later) reads CANCELLED, ``stopped: another replica
        failed``.
        """
        failed = self.failed
        replicas = []
        for r in self.records:
            reason, message = r.reason()
            if r.cancelled and failed and reason == StatusReason.CANCELLED:
                message = STOPPED_BY_FAILURE
            replicas.append(
                ReplicaSnapshot(
                    r.role,
                    r.replica_id,
                    r.state,
                    exit_code=r.exit_code if r.status in ("exited", "dead") else None,
                    hostname=r.name,
                    num_restarts=r.restarts,
                    reason=reason,
                    message=message,
                )
            )
        return AppSnapshot(
            self.app_id,
            replicas,
            name=self.name,
            decided=self.decided(),
            msg=app_failure_message(replicas),
            roles=self.roles(),
            settled=all(r.settled for r in self.records),
            native=self,
        )

    def roles(self) -> list[Role]:
        """Partial roles (name, image, num_replicas) recovered from the containers."""
        out: dict[str, Role] = {}
        for r in self.records:
            role = out.get(r.role)
            if role is None:
                role = out[r.role] = Role(name=r.role, image=r.image, num_replicas=0)
            role.num_replicas += 1
        return list(out.values())


def _sort_key(r: ContainerRecord) -> tuple[int, str, int]:
    return (r.role_index, r.role, r.replica_id)


@dataclass
class ContainerIndex:
    """Records of every asyncsched container, plus per-app change events."""

    records: dict[str, ContainerRecord] = field(default_factory=dict)
    #: where the index signals that an app changed
    changes: ChangeNotifier = field(default_factory=ChangeNotifier)
    #: container id -> set when the daemon reports it signalled the container
    kills: dict[str, anyio.Event] = field(default_factory=dict)

    def app(self, app_id: str) -> AppView | None:
        """The records of ``app_id``; None when the index has none."""
        records = sorted(
            (r for r in self.records.values() if r.app_id == app_id), key=_sort_key
        )
        return AppView(app_id, records) if records else None

    def apps(self) -> list[AppView]:
        """Every app, in the order their first container was indexed."""
        grouped: dict[str, list[ContainerRecord]] = {}
        for r in self.records.values():
            grouped.setdefault(r.app_id, []).append(r)
        return [AppView(a, sorted(rs, key=_sort_key)) for a, rs in grouped.items()]

    def replace_all(self, records: Iterable[ContainerRecord]) -> None:
        """Swap in a fresh listing; unsettled details already known are kept."""
        fresh = {r.id: r for r in records}
        for cid, rec in fresh.items():
            old = self.records.get(cid)
            if old is not None and old.settled and old.status == rec.status:
                rec.cancelled = old.cancelled
                rec.restarts = old.restarts
                rec.restart_policy = old.restart_policy
                rec.exit_code = (
                    old.exit_code if rec.exit_code is None else rec.exit_code
                )
                rec.settled = True
        touched = {r.app_id for r in self.records.values()} | {
            r.app_id for r in fresh.values()
        }
        self.records = fresh
        for app_id in touched:
            self.changes.notify(app_id)

    def upsert(self, record: ContainerRecord) -> None:
        """Add or replace one record and wake the app's waiters."""
        self.records[record.id] = record
        self.changes.notify(record.app_id)

    def expect_kill(self, cid: str) -> anyio.Event:
        """An event set at the next ``kill`` event of container ``cid``."""
        event = self.kills.get(cid)
        if event is None:
            event = self.kills[cid] = anyio.Event()
        return event

    def note_kill(self, cid: str) -> None:
        """The daemon signalled container ``cid``: wake who expects it."""
        event = self.kills.pop(cid, None)
        if event is not None:
            event.set()

    def forget_kill(self, cid: str, event: anyio.Event) -> None:
        """Stop expecting a kill of ``cid`` (if ``event`` is still the one)."""
        if self.kills.get(cid) is event:
            del self.kills[cid]

    def remove(self, cid: str) -> None:
        """Forget a destroyed container."""
        record = self.records.pop(cid, None)
        if record is not None:
            self.changes.notify(record.app_id)
