"""Names TorchX code imports exist at TorchX's module paths and behave like TorchX's.

Covers every row of the differences page's "Module paths kept" table (each
path and name it lists imports), ``specs.api`` (TorchX's public names),
the default session name, ``schedulers.local_scheduler.LocalOpts``,
``workspace.WorkspaceMixin`` (and ``workspace.api``),
``schedulers.devices.get_device_mounts`` and ``schedulers.docker_scheduler.has_docker``.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast, get_type_hints, is_typeddict

import pytest

import asyncsched.specs
import asyncsched.specs.api
import asyncsched.workspace
import asyncsched.workspace.api
from asyncsched.errors import AsyncschedWarning, UnsupportedOperationError
from asyncsched.schedulers.api import AppSnapshot, ReplicaSnapshot, Scheduler
from asyncsched.schedulers.devices import DEVICES, get_device_mounts
from asyncsched.schedulers.docker._render import render_job
from asyncsched.schedulers.docker._scheduler import DockerScheduler
from asyncsched.schedulers.docker_scheduler import has_docker
from asyncsched.schedulers.local_scheduler import LocalOpts, LocalScheduler
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    DeviceMount,
    Resource,
    Role,
    Workspace,
    runopts,
)
from asyncsched.testing import InMemoryScheduler
from asyncsched.workspace import WorkspaceMixin

# -- module paths the differences page lists ---------------------------------

DIFFERENCES = Path(__file__).parents[2] / "docs" / "torchx-differences.md"


def _kept_paths_rows() -> list[tuple[str, str]]:
    """(TorchX column, asyncsched column) of each "Module paths kept" row."""
    text = DIFFERENCES.read_text()
    section = text.split("## Module paths kept for TorchX code", 1)[1].split(
        "\n## ", 1
    )[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`torchx"):
            rows.append((cells[0], cells[1]))
    return rows


def _resolve(dotted: str) -> object:
    """The module or attribute a dotted path names."""
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError:
        module, _, name = dotted.rpartition(".")
        return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(
    ("torchx", "ours"), _kept_paths_rows(), ids=lambda cell: cell.split("`")[1]
)
def test_every_module_path_the_differences_page_keeps_imports(
    torchx: str, ours: str
) -> None:
    module: object = None
    for token in re.findall(r"`([^`]+)`", torchx):
        if token.startswith("torchx."):
            path = "asyncsched" + token.removeprefix("torchx")
            assert f"`{path.rsplit('.', 1)[0]}" in ours, (path, ours)
            target = _resolve(path)
            if isinstance(target, types.ModuleType):
                module = target
            else:
                module = importlib.import_module(path.rsplit(".", 1)[0])
        elif "*" in token:  # a pattern of names of the last module named
            assert fnmatch.filter(dir(module), token), (module, token)
        else:  # a name of the last module named (maybe imported on first use)
            assert hasattr(module, token), (module, token)


#: what TorchX's torchx.specs.api defines and TorchX code imports from it
TORCHX_SPECS_API_NAMES = {
    "ALL", "AppDef", "AppDryRunInfo", "AppHandle", "AppState", "AppStatus",
    "AppStatusError", "BindMount", "CfgVal", "DeviceMount",
    "InvalidRunConfigException", "MISSING", "MalformedAppHandleException",
    "MountType", "NONE", "NULL_RESOURCE", "ParsedAppHandle", "ReplicaState",
    "ReplicaStatus", "Resource", "RetryPolicy", "Role", "RoleStatus",
    "UnknownAppException", "UnknownSchedulerException", "VolumeMount",
    "Workspace", "get_type_name", "is_started", "is_terminal", "macros",
    "parse_app_handle", "runopt", "runopts",
}  # fmt: skip


def test_specs_api_exports_torchx_names_as_the_same_objects() -> None:
    exported = set(asyncsched.specs.api.__all__)
    assert exported >= TORCHX_SPECS_API_NAMES
    assert exported == set(asyncsched.specs.__all__)  # the same names, too
    for name in exported:
        assert getattr(asyncsched.specs.api, name) is getattr(asyncsched.specs, name)
    handle = asyncsched.specs.api.parse_app_handle("local_cwd://s/app-1")
    assert handle == ("local_cwd", "s", "app-1")


def test_default_session_is_asyncsched_and_torchx_is_one_argument_away() -> None:
    from asyncsched.runner import get_runner
    from asyncsched.sync import get_runner as get_sync_runner

    assert get_runner().name() == "asyncsched"
    assert get_runner("torchx").name() == "torchx"
    with get_sync_runner("torchx") as runner:
        assert runner.name() == "torchx"


# -- LocalOpts ---------------------------------------------------------------


def test_local_opts_is_a_typeddict_of_exactly_the_local_run_options() -> None:
    assert is_typeddict(LocalOpts)
    opts = LocalScheduler("s").run_opts()
    hints = get_type_hints(LocalOpts)
    assert set(hints) == {name for name, _ in opts}
    for name, opt in opts:
        # the runopt type is what the TypedDict holds (None allowed when no default)
        assert opt.opt_type in (hints[name], *getattr(hints[name], "__args__", ()))


def test_local_opts_keys_are_optional_like_torchx() -> None:
    assert LocalOpts.__required_keys__ == frozenset()
    cfg: LocalOpts = {"log_dir": "/tmp/x", "prepend_cwd": True}
    assert (
        LocalScheduler("s").resolve_cfg(cast("dict[str, CfgVal]", cfg))["prepend_cwd"]
        is True
    )


# -- WorkspaceMixin ----------------------------------------------------------


def test_workspace_mixin_is_one_class_at_both_torchx_paths() -> None:
    assert (
        asyncsched.workspace.WorkspaceMixin is asyncsched.workspace.api.WorkspaceMixin
    )


def test_workspace_capable_schedulers_are_workspace_mixins() -> None:
    assert issubclass(DockerScheduler, WorkspaceMixin)
    assert not issubclass(LocalScheduler, WorkspaceMixin)
    assert not isinstance(LocalScheduler("s"), WorkspaceMixin)
    assert not issubclass(InMemoryScheduler, WorkspaceMixin)


class RecordingScheduler(Scheduler[dict[str, CfgVal]]):
    """A scheduler that records what it was asked to run; every app succeeds."""

    def __init__(self, session_name: str) -> None:
        super().__init__("recording", session_name)
        self.apps: dict[str, AppDef] = {}

    async def _submit_dryrun(
        self, app: AppDef, cfg: dict[str, CfgVal]
    ) -> AppDryRunInfo[AppDef]:
        return AppDryRunInfo(app, repr)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        app_id = f"app-{len(self.apps)}"
        self.apps[app_id] = dryrun_info.request
        return app_id

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        app = self.apps.get(app_id)
        if app is None:
            return None
        replicas = [ReplicaSnapshot(r.name, 0, AppState.SUCCEEDED) for r in app.roles]
        return AppSnapshot(app_id, replicas, roles=list(app.roles))

    async def _list(self) -> list[AppSnapshot]:
        return [s for a in self.apps if (s := await self._describe(a)) is not None]

    async def _cancel(self, app: AppSnapshot) -> None:
        pass


class TorchXStyleScheduler(WorkspaceMixin[dict[str, str]], RecordingScheduler):
    """A workspace scheduler written the TorchX way: blocking hooks."""

    def __init__(self, session_name: str) -> None:
        super().__init__(session_name)
        self.build_threads: list[int] = []
        self.pushed: list[dict[str, str]] = []

    def workspace_opts(self) -> runopts:
        opts = runopts()
        opts.add("image_repo", type_=str, default=None, help="where to push")
        return opts

    def build_workspace_and_update_role(  # type: ignore[override]
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        self.build_threads.append(threading.get_ident())
        role.image = f"built:{workspace}:{cfg.get('image_repo')}"

    def dryrun_push_images(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> dict[str, str]:
        return {role.image: str(cfg["image_repo"]) for role in app.roles}

    def push_images(self, images_to_push: dict[str, str]) -> None:  # type: ignore[override]
        self.pushed.append(images_to_push)


async def test_torchx_style_subclass_builds_its_workspace_off_the_loop() -> None:
    async with TorchXStyleScheduler("s") as sched:
        assert isinstance(sched, WorkspaceMixin)
        assert sched.capabilities.workspaces
        assert "image_repo" in {name for name, _ in sched.run_opts()}
        role = Role(
            "r",
            image="base",
            entrypoint="sh",
            args=["-c", "true"],
            resource=Resource(cpu=1, gpu=0, memMB=64),
        )
        app = AppDef("ws", roles=[role])
        app_id = await sched.submit(app, {"image_repo": "repo"}, workspace="/src")
        desc = await sched.wait(app_id, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert desc.roles[0].image == "built:/src:repo"
        assert role.image == "base"  # the caller's AppDef is untouched
        assert sched.build_threads
        assert threading.get_ident() not in sched.build_threads
        as_written: Any = sched  # TorchX-typed push_images is a coroutine here
        await as_written.push_images({"img": "repo"})
        assert sched.pushed == [{"img": "repo"}]


async def test_mixin_defaults_match_torchx() -> None:
    class BuildOnly(WorkspaceMixin[None], RecordingScheduler):
        async def build_workspace_and_update_role(
            self, role: Role, workspace: str | Workspace, cfg: Any
        ) -> None:
            role.image = "built"

    sched = BuildOnly("s")
    assert list(sched.workspace_opts()) == []
    with pytest.raises(UnsupportedOperationError):
        sched.dryrun_push_images(AppDef("a"), {})
    with pytest.raises(UnsupportedOperationError):
        await sched.push_images(None)


def test_mixin_without_a_build_hook_cannot_be_instantiated() -> None:
    class NoBuild(WorkspaceMixin[None]):
        pass

    with pytest.raises(TypeError, match="build_workspace_and_update_role"):
        NoBuild()  # type: ignore[abstract]


# -- devices -----------------------------------------------------------------


def test_efa_devices_mount_uverbs_files_like_torchx() -> None:
    assert get_device_mounts({"vpc.amazonaws.com/efa": 3}) == [
        DeviceMount(f"/dev/infiniband/uverbs{i}", f"/dev/infiniband/uverbs{i}", "rwm")
        for i in range(3)
    ]


def test_neuron_devices_and_dict_order_are_kept() -> None:
    mounts = get_device_mounts(
        {"aws.amazon.com/neurondevice": 2, "vpc.amazonaws.com/efa": 1}
    )
    assert [m.src_path for m in mounts] == [
        "/dev/neuron0",
        "/dev/neuron1",
        "/dev/infiniband/uverbs0",
    ]
    assert get_device_mounts({}) == []
    assert set(DEVICES) == {"vpc.amazonaws.com/efa", "aws.amazon.com/neurondevice"}


def test_unknown_device_is_skipped_with_a_warning() -> None:
    with pytest.warns(AsyncschedWarning, match="Could not find named device: x/y"):
        mounts = get_device_mounts({"x/y": 1, "vpc.amazonaws.com/efa": 1})
    assert [m.src_path for m in mounts] == ["/dev/infiniband/uverbs0"]


def test_docker_backend_mounts_the_same_devices() -> None:
    devices = {"vpc.amazonaws.com/efa": 2, "aws.amazon.com/neurondevice": 1}
    role = Role(
        "r",
        image="img",
        entrypoint="true",
        resource=Resource(cpu=1, gpu=0, memMB=64, devices=devices),
    )
    job = render_job(AppDef("a", roles=[role]), "a-1", {}, session="s", version="v")
    rendered = job.containers[0].body["HostConfig"]["Devices"]
    expected = get_device_mounts(devices)
    assert rendered == [
        {
            "PathOnHost": m.src_path,
            "PathInContainer": m.dst_path,
            "CgroupPermissions": m.permissions,
        }
        for m in expected
    ]


# -- has_docker ----------------------------------------------------------------


@pytest.fixture
def unix_listener(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "docker.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen()
        yield path


def test_has_docker_true_when_the_daemon_socket_accepts(unix_listener: str) -> None:
    assert has_docker({"DOCKER_HOST": f"unix://{unix_listener}"}) is True


def test_has_docker_false_when_no_daemon_listens(tmp_path: Path) -> None:
    gone = tmp_path / "gone.sock"
    assert has_docker({"DOCKER_HOST": f"unix://{gone}"}) is False
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(stale))  # a socket file nobody listens on
    assert has_docker({"DOCKER_HOST": f"unix://{stale}"}) is False
    assert has_docker({"DOCKER_HOST": "ssh://user@host"}) is False


def test_has_docker_checks_a_tcp_daemon() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert has_docker({"DOCKER_HOST": f"tcp://127.0.0.1:{port}"}) is True
    assert has_docker({"DOCKER_HOST": f"tcp://127.0.0.1:{port}"}) is False


def test_has_docker_reads_docker_host_from_the_environment(
    unix_listener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{unix_listener}")
    assert has_docker() is True


def test_has_docker_and_module_import_work_without_aiodocker(
    unix_listener: str,
) -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["aiodocker"] = None  # as if the docker extra were missing
        from asyncsched.errors import SchedulerUnavailableError
        from asyncsched.schedulers import get_scheduler
        from asyncsched.schedulers.docker_scheduler import has_docker
        print(has_docker())
        try:
            from asyncsched.schedulers.docker_scheduler import DockerScheduler
        except ImportError as exc:
            print("ImportError", exc.name)
        try:
            get_scheduler("local_docker")
        except SchedulerUnavailableError as exc:
            print("unavailable", exc.hint)
        """
    )
    env = {**os.environ, "DOCKER_HOST": f"unix://{unix_listener}"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\n")
    assert out[:3] == [
        "False",
        "ImportError aiodocker",
        "unavailable pip install 'asyncsched[docker]'",
    ]


def test_torchx_path_modules_and_has_docker_import_no_docker_client() -> None:
    script = textwrap.dedent(
        """
        import sys
        import asyncsched.schedulers.devices
        import asyncsched.specs.named_resources_aws
        import asyncsched.workspace
        from asyncsched.schedulers.docker_scheduler import has_docker
        has_docker({"DOCKER_HOST": "unix:///nonexistent.sock"})
        print(",".join(m for m in ("aiohttp", "aiodocker") if m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert out == ""
