"""In-process tests of the CLI's pieces: AppDef files, targets, times, progress."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from asyncsched.cli._common import UsageError, parse_log_target, parse_time
from asyncsched.cli._progress import ProgressDisplay, format_elapsed
from asyncsched.errors import AppFileError, MalformedAppHandleException
from asyncsched.specs import (
    AppState,
    AppStatus,
    BindMount,
    ReplicaStatus,
    RetryPolicy,
    RoleStatus,
    VolumeMount,
)
from asyncsched.specs.serialize import app_to_dict, load_app_file

GOOD = """
name: trainer
metadata: {team: ml}
roles:
  - name: worker
    entrypoint: python
    args: [-m, train, --lr, 0.1]
    image: /srv
    env: {SEED: 1}
    num_replicas: 2
    retry_policy: replica
    resource: {cpu: 2, memMB: 512}
    port_map: {http: 8080}
    mounts:
      - type=bind,src=/data,dst=/data,readonly
      - {type: volume, src: cache, dst: /cache}
  - name: ps
    entrypoint: echo
    resource: cpu.small
"""


def _write(tmp_path: Path, text: str, name: str = "app.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_appdef_file_round_trip(tmp_path: Path) -> None:
    app = load_app_file(_write(tmp_path, GOOD))
    worker, ps = app.roles
    assert app.name == "trainer"
    assert app.metadata == {"team": "ml"}
    assert worker.args == ["-m", "train", "--lr", "0.1"]
    assert worker.env == {"SEED": "1"}
    assert worker.num_replicas == 2
    assert worker.retry_policy == RetryPolicy.REPLICA
    assert (worker.resource.cpu, worker.resource.gpu, worker.resource.memMB) == (
        2,
        0,
        512,
    )
    assert worker.mounts == [
        BindMount("/data", "/data", True),
        VolumeMount("cache", "/cache"),
    ]
    assert ps.resource.cpu == 1
    again = load_app_file(_write(tmp_path, json.dumps(app_to_dict(app)), "app.json"))
    assert app_to_dict(again) == app_to_dict(app)


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("roles: []\nname: x", "roles", "non-empty"),
        ("name: x\nroles: [{name: w}]", "roles[0].entrypoint", "required"),
        (
            "name: x\nroles: [{name: w, entrypoint: e, replicas: 2}]",
            "roles[0].replicas",
            "num_replicas",
        ),
        (
            "name: x\nroles: [{name: w, entrypoint: e, num_replicas: two}]",
            "roles[0].num_replicas",
            "integer",
        ),
        (
            "name: x\nroles: [{name: w, entrypoint: e, num_replicas: 0}]",
            "roles[0].num_replicas",
            ">= 1",
        ),
        (
            "name: x\nroles: [{name: 'bad name', entrypoint: e}]",
            "roles[0].name",
            "must match",
        ),
        (
            "name: x\nroles: [{name: w, entrypoint: e, resource: {cpus: 1}}]",
            "roles[0].resource.cpus",
            "cpu",
        ),
        (
            "name: x\nroles: [{name: w, entrypoint: e, mounts: [type=bind]}]",
            "roles[0].mounts[0]",
            "src",
        ),
        (
            "name: x\nroles: [{name: w, entrypoint: e, retry_policy: sometimes}]",
            "roles[0].retry_policy",
            "one of",
        ),
        ("- just a list", "", "mapping"),
        ("name: [unclosed", "", "YAML"),
    ],
)
def test_appdef_file_errors_name_the_field(
    tmp_path: Path, text: str, field: str, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(AppFileError, match=message) as info:
        load_app_file(path)
    assert info.value.field == field
    assert str(info.value).startswith(path)
    assert "\n" not in str(info.value)


def test_missing_appdef_file(tmp_path: Path) -> None:
    with pytest.raises(AppFileError, match="No such file"):
        load_app_file(str(tmp_path / "nope.yaml"))


def test_log_targets() -> None:
    t = parse_log_target("local_cwd://sess/app-1/trainer/0,2")
    assert (t.handle, t.role, t.replicas) == (
        "local_cwd://sess/app-1",
        "trainer",
        (0, 2),
    )
    t = parse_log_target("local_cwd:///app-1")
    assert (t.session, t.app_id, t.role, t.replicas) == ("", "app-1", None, None)
    for bad in ("app-1", "local://sess", "local://s/a/r/x", "local://s/a/r/1/extra"):
        with pytest.raises(MalformedAppHandleException):
            parse_log_target(bad)


def test_parse_time() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    assert parse_time("5m", now) == now - timedelta(minutes=5)
    assert parse_time("1.5h", now) == now - timedelta(minutes=90)
    assert parse_time("0", now) == datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_time("2024-05-01T10:00:00+00:00") == datetime(
        2024, 5, 1, 10, tzinfo=UTC
    )
    assert parse_time("2024-05-01T10:00").tzinfo is not None
    with pytest.raises(UsageError, match="invalid time"):
        parse_time("yesterday")


def _status(*states: AppState) -> AppStatus:
    replicas = [ReplicaStatus(i, s, "w", "h") for i, s in enumerate(states)]
    return AppStatus(AppState.RUNNING, roles=[RoleStatus("w", replicas)])


def test_plain_progress_prints_only_changes() -> None:
    out = io.StringIO()
    display = ProgressDisplay(out, "h", live=False)
    display.update(_status(AppState.RUNNING, AppState.PENDING))
    display.update(_status(AppState.RUNNING, AppState.PENDING))
    display.update(_status(AppState.RUNNING, AppState.RUNNING))
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert "w: 1 PENDING, 1 RUNNING  [0:R 1:p]" in lines[1]
    assert "\x1b" not in out.getvalue()


def test_live_progress_redraws_in_place() -> None:
    out = io.StringIO()
    display = ProgressDisplay(out, "h", live=True)
    display.update(_status(AppState.RUNNING))
    display.update(_status(AppState.SUCCEEDED))
    text = out.getvalue()
    assert "\x1b[2F" in text  # moved back over the two lines drawn first
    assert format_elapsed(3725) == "1:02:05"
