"""LocalScheduler behaviour (TorchX checklist L5-L25 plus asyncsched additions)."""

from __future__ import annotations

import json
import os
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncsched.errors import InvalidRunConfigException, SpecError, SubmitError
from asyncsched.schedulers.local._render import HostFacts, render_request
from asyncsched.schedulers.local_scheduler import (
    CWDImageProvider,
    LocalDirectoryImageProvider,
    LocalScheduler,
    PopenRequest,
)
from asyncsched.schedulers.shared.ids import make_unique
from asyncsched.specs import AppDef, AppState, CfgVal, Resource, RetryPolicy, Role

from .conftest import PY, app_of, py_role, sh_role


async def lines(
    sched: LocalScheduler, app_id: str, role: str = "worker", k: int = 0, **kw: Any
) -> list[str]:
    return [line async for line in sched.log_iter(app_id, role, k, **kw)]


async def run(
    sched: LocalScheduler, app: AppDef, cfg: dict[str, Any]
) -> tuple[str, AppState]:
    app_id = await sched.submit(app, cfg)
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    return app_id, desc.state


# L5
async def test_app_id_and_macros_make_one_file_per_replica(
    sched: LocalScheduler,
    log_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "asyncsched.schedulers.local._scheduler.make_unique",
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


# L6, per-replica statuses
async def test_failed_replica_reports_exit_code(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id, state = await run(
        sched, app_of(py_role("raise SystemExit(3)")), {"log_dir": str(log_dir)}
    )
    assert state == AppState.FAILED
    desc = await sched.describe(app_id)
    assert desc is not None
    [replica] = desc.roles_statuses[0].replicas
    assert replica.exit_code == 3
    assert replica.state == AppState.FAILED
    assert replica.pid is not None
    assert "exited with code 3" in desc.msg


# L7
async def test_given_log_dir_survives_close(log_dir: Path) -> None:
    async with LocalScheduler("s") as s:
        app_id, _ = await run(s, app_of(sh_role("echo hi")), {"log_dir": str(log_dir)})
    assert (
        log_dir / "s" / app_id / "worker" / "0" / "stdout.log"
    ).read_text() == "hi\n"


async def test_default_logs_live_in_the_state_dir_and_outlive_the_scheduler(
    log_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    async with LocalScheduler("s", state_dir=str(state)) as s:
        app_id, _ = await run(s, app_of(sh_role("echo hi")), {})
        assert await lines(s, app_id) == ["hi\n"]  # L15
    app_dir = state / "logs" / "s" / app_id
    assert (app_dir / "worker" / "0" / "stdout.log").read_text() == "hi\n"
    assert (app_dir / "SUCCESS").exists()
    async with LocalScheduler("s", state_dir=str(state)) as later:
        desc = await later.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert await lines(later, app_id) == ["hi\n"]


# L8 / L9
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


# L10 in a real child
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


# L11
async def test_success_file(sched: LocalScheduler, log_dir: Path) -> None:
    app_id, _ = await run(
        sched,
        app_of(sh_role("echo hello_world; echo hello_world >&2", replicas=2)),
        {"log_dir": str(log_dir)},
    )
    app_dir = log_dir / "test" / app_id
    success = json.loads((app_dir / "SUCCESS").read_text())
    assert success["app_id"] == app_id
    assert success["log_dir"] == str(app_dir)
    assert success["final_state"] == "SUCCEEDED"
    for i, replica in enumerate(success["roles"]["worker"]):
        assert replica["replica_id"] == i
        assert replica["exitcode"] == 0
        assert Path(replica["stdout"]).read_text() == "hello_world\n"
        assert Path(replica["stderr"]).read_text() == "hello_world\n"


# L12
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


# L14 / L16 / stream selection / \r
async def test_log_iter_regex_streams_utf8_and_cr(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import sys\nfor i in range(11): print(i, file=sys.stderr)"
    app_id, _ = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    assert await lines(sched, app_id) == [f"{i}\n" for i in range(11)]
    assert await lines(sched, app_id, regex="[02468]") == [
        "0\n",
        "2\n",
        "4\n",
        "6\n",
        "8\n",
        "10\n",
    ]
    assert await lines(sched, app_id, streams="stdout") == []
    code = (
        "import sys; sys.stdout.buffer.write(b'\\x02\\xc5\\xd8\\n50%\\r100%\\r\\ndone')"
    )
    app_id, _ = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    assert await lines(sched, app_id, streams="stdout") == [
        "\x02\ufffd\ufffd\n",
        "50%\r100%\r\n",
        "done",
    ]
    with pytest.raises(ValueError, match="no replica"):
        await lines(sched, app_id, role="nope")


# L17 / L18 / L19 / L21
async def test_two_roles_and_describe_lifecycle(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app = app_of(sh_role("echo a", name="a"), sh_role("echo b", name="b", replicas=2))
    app_id, state = await run(sched, app, {"log_dir": str(log_dir)})
    assert state == AppState.SUCCEEDED
    assert await sched.describe("nope-bcdfg") is None
    app_id = await sched.submit(app_of(sh_role("sleep 30")), {"log_dir": str(log_dir)})
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.RUNNING
    assert desc.roles[0].name == "worker"
    assert await sched.exists(app_id)
    t0 = time.monotonic()
    await sched.cancel(app_id)
    assert time.monotonic() - t0 < 0.5  # does not block for the grace
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert await sched.exists(app_id)
    await sched.cancel(app_id)  # idempotent


async def test_cancel_escalates_to_sigkill_after_grace(log_dir: Path) -> None:
    code = "import signal, time, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    async with LocalScheduler("s", cancel_grace=0.3) as s:
        app_id = await s.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
        async for line in s.log_iter(app_id, "worker", should_tail=True):
            assert line == "ready\n"
            break
        await s.cancel(app_id)
        app = s._apps[app_id]
        with anyio.fail_after(5):
            await app.finished.wait()
        desc = await s.describe(app_id)
        assert desc is not None
        assert (
            desc.roles_statuses[0].replicas[0].exit_code == 137
        )  # 128 + SIGKILL, as a shell reports it


# L20 (diverges: list works)
async def test_list_returns_known_apps(sched: LocalScheduler, log_dir: Path) -> None:
    a, _ = await run(
        sched, app_of(sh_role("exit 0"), name="one"), {"log_dir": str(log_dir)}
    )
    b, _ = await run(
        sched, app_of(sh_role("exit 1"), name="two"), {"log_dir": str(log_dir)}
    )
    listed = {x.app_id: x for x in await sched.list()}
    assert listed[a].state == AppState.SUCCEEDED
    assert listed[a].name == "one"
    assert listed[b].state == AppState.FAILED


# L23 / L24
async def test_cache_full_of_running_apps_raises(log_dir: Path) -> None:
    async with LocalScheduler("s", cache_size=1, close_grace=0.2) as s:
        await s.submit(app_of(sh_role("sleep 30")), {"log_dir": str(log_dir)})
        with pytest.raises(IndexError, match="cache size"):
            await s.submit(app_of(sh_role("sleep 30")), {"log_dir": str(log_dir)})


async def test_concurrent_submits_cannot_overfill_the_cache(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    outcomes: list[str] = []

    async def submit_one(s: LocalScheduler) -> None:
        try:
            outcomes.append(await s.submit(app_of(sh_role("sleep 30")), cfg))
        except IndexError:
            outcomes.append("full")

    async with LocalScheduler("s", cache_size=2, close_grace=0.2) as s:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(submit_one, s)
        assert sorted(o == "full" for o in outcomes) == [False, False, True]
        assert len(await s.list()) == 2


async def test_eviction_frees_memory_but_the_app_stays_readable(
    log_dir: Path,
) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=2) as s:
        first, _ = await run(s, app_of(sh_role("echo one")), cfg)
        second, _ = await run(s, app_of(sh_role("true")), cfg)
        running = await s.submit(app_of(sh_role("sleep 30")), cfg)  # evicts first
        desc = await s.describe(first)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        waited = await s.wait(first)
        assert waited is not None
        assert waited.state == AppState.SUCCEEDED
        lines = [line async for line in s.log_iter(first, "worker")]
        assert lines == ["one\n"]
        third = await s.submit(app_of(sh_role("sleep 30")), cfg)  # evicts `second`
        assert (await s.describe(second)) is not None
        assert {a.app_id for a in await s.list()} >= {first, second, running, third}
        with pytest.raises(IndexError):  # both running: nothing may be evicted
            await s.submit(app_of(sh_role("true")), cfg)
        assert await s.describe(running) is not None
        await s.cancel(running)


# L25
async def test_close_kills_every_replica(log_dir: Path) -> None:
    from .conftest import alive

    pids: set[int] = set()
    async with LocalScheduler("s", close_grace=0.5) as s:
        for _ in range(2):
            app_id = await s.submit(
                app_of(sh_role("sleep 30", replicas=4)), {"log_dir": str(log_dir)}
            )
            desc = await s.describe(app_id)
            assert desc is not None
            pids |= {r.pid for r in desc.roles_statuses[0].replicas if r.pid}
        assert len(alive(pids)) == 8
        await s.aclose()
        assert alive(pids) == set()
        await s.aclose()


# fail-fast
async def test_fail_fast_terminates_the_others(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app = app_of(sh_role("exit 2", name="bad"), sh_role("sleep 30", name="slow"))
    t0 = time.monotonic()
    app_id, state = await run(sched, app, {"log_dir": str(log_dir)})
    assert state == AppState.FAILED
    assert time.monotonic() - t0 < 10
    with anyio.fail_after(5):
        await sched._apps[app_id].finished.wait()
    desc = await sched.describe(app_id)
    assert desc is not None
    by_role = {rs.role: rs.replicas[0] for rs in desc.roles_statuses}
    assert by_role["bad"].state == AppState.FAILED
    assert by_role["slow"].state == AppState.CANCELLED


async def test_without_fail_fast_the_others_finish(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    slow = f"while [ ! -e {go} ]; do sleep 0.01; done; echo done"
    app = app_of(sh_role("exit 2", name="bad"), sh_role(slow, name="slow"))
    app_id = await sched.submit(app, {"log_dir": str(log_dir), "fail_fast": False})
    with anyio.fail_after(10):
        while True:  # poll until the bad replica has failed
            desc = await sched.describe(app_id)
            assert desc is not None
            states = {rs.role: rs.replicas[0].state for rs in desc.roles_statuses}
            if states["bad"] == AppState.FAILED:
                break
            await anyio.sleep(0.01)
    assert desc.state == AppState.RUNNING
    go.touch()
    desc = await sched.wait(app_id, timeout=10)
    assert desc is not None
    assert desc.state == AppState.FAILED
    by_role = {rs.role: rs.replicas[0] for rs in desc.roles_statuses}
    assert by_role["slow"].state == AppState.SUCCEEDED
    assert await lines(sched, app_id, "slow") == ["done\n"]


# retries
FLAKY = (
    "import os, sys\n"
    "p = os.path.join(sys.argv[1], os.environ['ASYNCSCHED_ROLE_NAME'] + os.environ['ASYNCSCHED_REPLICA_ID'])\n"
    "n = int(open(p).read()) if os.path.exists(p) else 0\n"
    # atomic: a replica SIGTERMed by a restart must not leave an empty file
    "t = sys.argv[1] + '-' + os.path.basename(p) + '.tmp'\n"
    "open(t, 'w').write(str(n + 1))\n"
    "os.replace(t, p)\n"
    "print('attempt', n)\n"
    "fail = os.environ['ASYNCSCHED_REPLICA_ID'] == '0' and n < int(sys.argv[2])\n"
    "sys.exit(1 if fail else 0)\n"
)


def flaky(
    tmp: Path, fails: int, policy: RetryPolicy, retries: int, replicas: int = 2
) -> Role:
    role = py_role(FLAKY, replicas=replicas, max_retries=retries, retry_policy=policy)
    role.args += [str(tmp), str(fails)]
    return role


def counts(tmp: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in tmp.iterdir()}


@pytest.mark.parametrize(
    ("policy", "expected_runs"),
    [
        (RetryPolicy.REPLICA, {"worker0": 2, "worker1": 0}),
        (RetryPolicy.ROLE, {"worker0": 2, "worker1": 2}),
        (RetryPolicy.APPLICATION, {"worker0": 2, "worker1": 2, "other0": 2}),
    ],
)
async def test_retry_policies(
    sched: LocalScheduler,
    log_dir: Path,
    tmp_path: Path,
    policy: RetryPolicy,
    expected_runs: dict[str, int],
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    other = py_role(FLAKY, name="other")
    other.args += [str(marks), "0"]
    roles = [flaky(marks, 2, policy, 2)]
    if policy == RetryPolicy.APPLICATION:
        roles.append(other)
    app_id, state = await run(sched, app_of(*roles), {"log_dir": str(log_dir)})
    assert state == AppState.SUCCEEDED
    assert counts(marks)["worker0"] == 3
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.num_restarts == 2
    restarts = {
        f"{rs.role}{r.id}": r.num_restarts
        for rs in desc.roles_statuses
        for r in rs.replicas
    }
    assert restarts == expected_runs
    assert await lines(sched, app_id) == ["attempt 0\n", "attempt 1\n", "attempt 2\n"]
    record = json.loads((log_dir / "test" / app_id / "app.json").read_text())
    assert len(record["roles"]["worker"][0]["attempts"]) == 3
    assert [a["exit_code"] for a in record["roles"]["worker"][0]["attempts"]] == [
        1,
        1,
        0,
    ]


async def test_retries_exhausted_fail(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    role = flaky(marks, 5, RetryPolicy.REPLICA, 1, replicas=1)
    _, state = await run(sched, app_of(role), {"log_dir": str(log_dir)})
    assert state == AppState.FAILED
    assert counts(marks)["worker0"] == 2


async def test_structured_error_from_error_file(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = (
        "import json, os, sys\n"
        "json.dump({'message': {'message': 'boom', 'errorCode': 7}}, open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w'))\n"
        "sys.exit(1)"
    )
    app_id, _ = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    desc = await sched.describe(app_id)
    assert desc is not None
    assert json.loads(desc.structured_error_msg)["message"]["message"] == "boom"
    assert (
        json.loads(desc.roles_statuses[0].replicas[0].structured_error_msg)["message"][
            "errorCode"
        ]
        == 7
    )


# bad input
async def test_bad_input_fails_before_anything_starts(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    cfg = {"log_dir": str(log_dir)}
    with pytest.raises(SpecError, match="was not found") as info:
        await sched.submit(app_of(Role("r", "/", entrypoint="no-such-binary-xyz")), cfg)
    assert info.value.field == "roles[0].entrypoint"
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(SpecError, match="not executable"):
        await sched.submit(app_of(Role("r", "/", entrypoint=str(script))), cfg)
    with pytest.raises(InvalidRunConfigException) as cfg_info:
        await sched.submit(app_of(sh_role("true")), {**cfg, "prepend_cwd": "yes"})
    assert cfg_info.value.cfg_key == "prepend_cwd"
    with pytest.raises(InvalidRunConfigException, match="no_such"):
        await sched.submit(app_of(sh_role("true")), {**cfg, "no_such": 1})
    # a partly good app: the good replica must not be started
    good_then_bad = app_of(
        sh_role("sleep 30", name="good"), Role("bad", "/", entrypoint="nope-xyz")
    )
    with pytest.raises(SpecError):
        await sched.submit(good_then_bad, cfg)
    assert os.listdir(log_dir) == []
    assert await sched.list() == []


async def test_bad_local_dir_image(log_dir: Path, tmp_path: Path) -> None:
    async with LocalScheduler("d", LocalDirectoryImageProvider) as s:
        with pytest.raises(SpecError, match="absolute"):
            await s.submit(
                app_of(Role("r", "relative", entrypoint="true")),
                {"log_dir": str(log_dir)},
            )
        with pytest.raises(SpecError, match="not an existing directory"):
            await s.submit(
                app_of(Role("r", str(tmp_path / "x"), entrypoint="true")),
                {"log_dir": str(log_dir)},
            )
        script = tmp_path / "run.sh"
        script.write_text("#!/bin/sh\necho from-dir\n")
        script.chmod(0o755)
        app_id, state = await run(
            s,
            app_of(Role("r", str(tmp_path), entrypoint="run.sh")),
            {"log_dir": str(log_dir)},
        )
        assert state == AppState.SUCCEEDED
        assert await lines(s, app_id, "r") == ["from-dir\n"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
async def test_unwritable_log_dir(sched: LocalScheduler, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    with pytest.raises(InvalidRunConfigException, match="not a writable"):
        await sched.submit(app_of(sh_role("true")), {"log_dir": str(ro / "sub")})


async def test_unwritable_log_dir_as_file(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InvalidRunConfigException, match="not a writable"):
        await sched.submit(app_of(sh_role("true")), {"log_dir": str(blocker / "sub")})


async def test_spawn_failure_part_way_kills_started(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asyncsched.schedulers.local import _process as process

    from .conftest import alive

    real = process.Child.spawn
    started: list[int] = []

    def spawn(*a: Any, **kw: Any) -> process.Child:
        if len(started) == 2:
            raise OSError("no more processes")
        child = real(*a, **kw)
        started.append(child.pid)
        return child

    monkeypatch.setattr(process.Child, "spawn", spawn)
    async with LocalScheduler("s") as s:
        with pytest.raises(SubmitError, match="no more processes"):
            await s.submit(
                app_of(sh_role("sleep 30", replicas=3)), {"log_dir": str(log_dir)}
            )
        assert len(started) == 2
        assert alive(set(started)) == set()
        assert os.listdir(log_dir / "s") == []


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


# logs: since/until, tail, big output, ordering, latency
async def test_since_until_use_arrival_times(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import time\nprint('early', flush=True)\ntime.sleep(0.6)\nprint('late', flush=True)"
    app_id, _ = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    record = json.loads((log_dir / "test" / app_id / "app.json").read_text())
    started = record["roles"]["worker"][0]["attempts"][0]["started"]
    middle = datetime.fromtimestamp(started + 0.3, tz=UTC)
    assert await lines(sched, app_id, since=middle) == ["late\n"]
    assert await lines(sched, app_id, until=middle) == ["early\n"]
    assert await lines(sched, app_id, streams="stdout", until=middle) == ["early\n"]
    # naive datetimes are UTC (the old test used the local-time datetime.now())
    naive_future = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
    assert await lines(sched, app_id, since=naive_future) == []


async def test_should_tail_false_returns_what_exists(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import time; print('one', flush=True); time.sleep(30)"
    app_id = await sched.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
    async for line in sched.log_iter(app_id, "worker", should_tail=True):
        assert line == "one\n"
        break
    with anyio.fail_after(2):
        assert await lines(sched, app_id) == ["one\n"]
    await sched.cancel(app_id)


async def test_million_lines_nothing_lost(sched: LocalScheduler, log_dir: Path) -> None:
    n = 1_000_000
    code = f"import sys\nw = sys.stdout.write\nfor i in range({n}): w(f'{{i}}\\n')"
    app_id = await sched.submit(
        app_of(py_role(code, env={"PYTHONUNBUFFERED": ""})), {"log_dir": str(log_dir)}
    )
    count = 0
    async for line in sched.log_iter(
        app_id, "worker", should_tail=True, streams="stdout"
    ):
        assert line == f"{count}\n"
        count += 1
    assert count == n
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    combined = (
        log_dir / "test" / app_id / "worker" / "0" / "combined.log"
    ).read_bytes()
    assert combined.count(b"\n") == n


async def test_combined_keeps_interleaved_order(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = (
        "import sys, time\n"
        "for i in range(15):\n"
        "    s = sys.stdout if i % 2 == 0 else sys.stderr\n"
        "    s.write(f'line{i}\\n'); s.flush(); time.sleep(0.02)\n"
    )
    app_id, _ = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    assert await lines(sched, app_id) == [f"line{i}\n" for i in range(15)]
    assert await lines(sched, app_id, streams="stderr") == [
        f"line{i}\n" for i in range(1, 15, 2)
    ]


async def test_tail_latency_under_50ms(sched: LocalScheduler, log_dir: Path) -> None:
    code = (
        "import sys, time\n"
        "for i in range(10):\n"
        "    time.sleep(0.05); print(time.time(), flush=True)\n"
    )
    app_id = await sched.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
    delays = [
        time.time() - float(line)
        async for line in sched.log_iter(app_id, "worker", should_tail=True)
    ]
    assert len(delays) == 10
    delays.sort()
    assert delays[len(delays) // 2] < 0.05, delays
    assert delays[-1] < 0.25, delays


async def test_partial_line_is_kept_whole_while_tailing(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import sys, time\nsys.stdout.write('hel'); sys.stdout.flush(); time.sleep(0.2); print('lo')"
    app_id = await sched.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
    assert [x async for x in sched.log_iter(app_id, "worker", should_tail=True)] == [
        "hello\n"
    ]


async def test_cancelling_wait_does_not_kill_the_app(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id = await sched.submit(
        app_of(sh_role("sleep 0.5; echo survived")), {"log_dir": str(log_dir)}
    )
    with anyio.move_on_after(0.1):
        await sched.wait(app_id)
    desc = await sched.wait(app_id, timeout=10)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert await lines(sched, app_id) == ["survived\n"]


async def test_grandchildren_left_behind_are_killed_when_replica_exits(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import subprocess, sys; p = subprocess.Popen(['sleep', '30']); print(p.pid)"
    app_id, state = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    assert state == AppState.SUCCEEDED
    from .conftest import alive

    [pid] = [int(x) for x in await lines(sched, app_id)]
    with anyio.fail_after(5):
        while alive({pid}):
            await anyio.sleep(0.02)
