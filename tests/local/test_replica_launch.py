"""Launching replicas: app ids and macros, environment, PATH, the dry-run request, GPUs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from asyncsched.schedulers.local._render import HostFacts, render_request
from asyncsched.schedulers.local_scheduler import (
    CWDImageProvider,
    LocalDirectoryImageProvider,
    LocalScheduler,
    PopenRequest,
)
from asyncsched.schedulers.shared.ids import make_unique
from asyncsched.specs import AppState, CfgVal, Resource, Role

from ._helpers import lines, run
from .conftest import PY, app_of, py_role, sh_role

pytestmark = pytest.mark.anyio


async def test_app_id_and_macros_make_one_file_per_replica(
    sched: LocalScheduler,
    log_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "asyncsched.schedulers.local_scheduler.make_unique",  # TorchX's seam
        lambda name: f"{name}-fixedid",
    )
    out = tmp_path / "out"
    out.mkdir()
    role = py_role("import sys; open(sys.argv[1], 'w').close()", replicas=3)
    role.args.append(f"{out}/${{app_id}}_${{replica_id}}")
    app_id, state = await run(sched, app_of(role, name="mk"), {"log_dir": str(log_dir)})
    assert app_id == "mk-fixedid"
    assert state == AppState.SUCCEEDED
    assert sorted(os.listdir(out)) == [f"mk-fixedid_{i}" for i in range(3)]
    assert make_unique("x").startswith("x-")


async def test_env_macros_inheritance_and_override(
    sched: LocalScheduler, log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOO", "bar")
    cfg = {"log_dir": str(log_dir)}
    code = "import os; print(os.environ['FOO'])"
    app_id, _ = await run(sched, app_of(py_role(code)), cfg)
    assert await lines(sched, app_id) == ["bar\n"]
    app_id, _ = await run(sched, app_of(py_role(code, env={"FOO": "new_bar"})), cfg)
    assert await lines(sched, app_id) == ["new_bar\n"]
    role = py_role(code, env={"FOO": "${img_root}/config.yaml"})
    app_id, _ = await run(sched, app_of(role), cfg)
    assert await lines(sched, app_id) == [f"{os.getcwd()}/config.yaml\n"]


async def test_replica_identity_and_torchx_variables(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = (
        "import os; print(*[os.environ.get(k) for k in ('ASYNCSCHED_APP_ID','ASYNCSCHED_ROLE_NAME',"
        "'ASYNCSCHED_REPLICA_ID','ASYNCSCHED_NUM_REPLICAS','TORCHX_RANK0_HOST','PYTHONUNBUFFERED')])"
    )
    app_id, _ = await run(
        sched, app_of(py_role(code, replicas=2, name="tr")), {"log_dir": str(log_dir)}
    )
    unbuffered = os.environ.get("PYTHONUNBUFFERED", "x")
    assert await lines(sched, app_id, "tr", 1) == [
        f"{app_id} tr 1 2 localhost {unbuffered}\n"
    ]


async def test_child_path_order(
    sched: LocalScheduler,
    tmp_path: Path,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{os.path.dirname(PY)}:/bin:/usr/bin")
    code = "import os; print(os.environ['PATH'])"
    role = py_role(code, env={"PATH": "/home/bob"}, image=str(tmp_path))
    async with LocalScheduler("d", LocalDirectoryImageProvider) as s:
        for prepend, want in [
            (False, f"/home/bob:{tmp_path}:{os.path.dirname(PY)}:/bin:/usr/bin"),
            (True, f"{tmp_path}:/home/bob:{os.path.dirname(PY)}:/bin:/usr/bin"),
        ]:
            app_id, _ = await run(
                s, app_of(role), {"log_dir": str(log_dir), "prepend_cwd": prepend}
            )
            assert await lines(s, app_id) == [want + "\n"]
    assert role.env == {"PATH": "/home/bob"}  # the caller's role is not mutated


@pytest.mark.parametrize("with_log_dir", [True, False])
async def test_dryrun_request(
    sched: LocalScheduler, log_dir: Path, with_log_dir: bool
) -> None:
    role = Role(
        "trainer",
        "/",
        entrypoint="echo",
        args=["${replica_id}"],
        num_replicas=2,
        env={"A": "${app_id}"},
    )
    cfg = {"log_dir": str(log_dir)} if with_log_dir else {}
    info = await sched.submit_dryrun(
        app_of(role, Role("ps", "/", entrypoint="true")), cfg
    )
    req: PopenRequest = info.request
    assert set(req.role_params) == {"trainer", "ps"}
    assert len(req.role_params["trainer"]) == 2
    assert len(req.role_log_dirs["trainer"]) == 2
    if with_log_dir:
        assert req.log_dir == str(log_dir / "test" / req.app_id)
    for i, (param, rdir) in enumerate(
        zip(req.role_params["trainer"], req.role_log_dirs["trainer"], strict=True)
    ):
        assert rdir == os.path.join(req.log_dir, "trainer", str(i))
        assert not os.path.exists(rdir)
        assert param.args == ["echo", str(i)]
        assert param.env == {
            "A": req.app_id,
            "PATH": os.getcwd(),
            "TORCHX_RANK0_HOST": "localhost",
            "TORCHELASTIC_ERROR_FILE": f"{rdir}/error.json",
            "PET_LOG_DIR": f"{req.log_dir}/torchelastic/trainer",
            "ASYNCSCHED_APP_ID": req.app_id,
            "ASYNCSCHED_ROLE_NAME": "trainer",
            "ASYNCSCHED_REPLICA_ID": str(i),
            "ASYNCSCHED_NUM_REPLICAS": "2",
        }
        assert param.stdout == f"{rdir}/stdout.log"
        assert param.stderr == f"{rdir}/stderr.log"
        assert param.combined == f"{rdir}/combined.log"
    assert req.app_id in repr(info)
    assert role.env == {"A": "${app_id}"}
    assert await sched.list() == []


def test_cuda_visible_devices_split_between_replicas(log_dir: Path) -> None:
    role = Role(
        "g",
        "/",
        entrypoint="true",
        num_replicas=2,
        resource=Resource(cpu=1, gpu=3, memMB=1),
    )

    def render(cfg: dict[str, CfgVal]) -> PopenRequest:
        return render_request(
            app_of(role),
            "app-1",
            cfg,
            session_name="s",
            base_log_dir=str(log_dir),
            provider=CWDImageProvider(),
            host=HostFacts(gpu_count=8),
        )

    request = render({"auto_set_cuda_visible_devices": True})
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in request.role_params["g"]] == [
        "0,1,2",
        "3,4,5",
    ]
    request = render({})
    assert all("CUDA_VISIBLE_DEVICES" not in p.env for p in request.role_params["g"])


async def test_gpu_count_is_probed_once_per_scheduler(
    sched: LocalScheduler,
    log_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho GPU 0\necho GPU 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    gpu_role = Role(
        "g", "/", entrypoint="true", resource=Resource(cpu=1, gpu=1, memMB=1)
    )
    cfg: dict[str, CfgVal] = {
        "log_dir": str(log_dir),
        "auto_set_cuda_visible_devices": True,
    }
    for _ in range(3):
        info = await sched.submit_dryrun(app_of(gpu_role), cfg)
        assert info.request.role_params["g"][0].env["CUDA_VISIBLE_DEVICES"] == "0"
    await sched.submit_dryrun(app_of(sh_role("true")), cfg)
    assert calls.read_text().splitlines() == ["x"]


async def test_no_nvidia_smi_means_zero_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    from asyncsched.schedulers.local._gpus import count_gpus

    monkeypatch.setenv("PATH", "/nonexistent")
    assert await count_gpus() == 0
