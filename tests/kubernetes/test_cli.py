"""``asyncsched run/status/log/list/cancel -s kubernetes`` through the real CLI.

The CLI runs in a subprocess (``python -m asyncsched``) with ``KUBECONFIG``
pointing at the test's API server; the test's event loop keeps serving it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from .fakeapi.env import KubeEnv
from .helpers import make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")

#: seconds a cancelled app may take to be seen CANCELLED through the CLI (each
#: poll is a new CLI process: seconds of imports on a loaded machine)
SETTLE = 60


class Cli:
    def __init__(self, env: KubeEnv, tmp_path: Path) -> None:
        self.env = {
            **os.environ,
            "KUBECONFIG": env.kubeconfig,
            "ASYNCSCHED_STATE_DIR": str(tmp_path / "state"),
            "NO_COLOR": "1",
        }

    async def __call__(self, *args: str, timeout: float = 60) -> tuple[int, str, str]:
        with anyio.fail_after(timeout):
            done = await anyio.run_process(
                [sys.executable, "-m", "asyncsched", *args], env=self.env, check=False
            )
        return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.mark.timeout(300)
async def test_run_status_log_list_cancel(kube_env: KubeEnv, tmp_path: Path) -> None:
    if not kube_env.logs_available or kube_env.context is not None:
        pytest.skip("needs the fake kubelet and the kubeconfig's current context")
    cli = Cli(kube_env, tmp_path)
    ns = kube_env.namespace
    extra = "".join(f",{k}={v}" for k, v in kube_env.run_cfg.items())
    # one process waits on its watch for the pod to start and end (on a
    # loaded node that alone can take tens of seconds): polling `status`
    # spent a process start, seconds under load, on each look
    code, out, err = await cli(
        "run", "-s", "kubernetes", "-cfg", f"namespace={ns},queue=default{extra}",
        "--wait", "--image", "busybox:1.36", "--name", "hello",
        "--", "sh", "-c", "echo hi there",
        timeout=180,
    )  # fmt: skip
    assert code == 0, err
    handle = out.strip().splitlines()[-1]
    assert handle.startswith("kubernetes://")
    assert f"/{ns}:hello-" in handle
    code, out, err = await cli("status", handle)
    assert code == 0, err
    assert "SUCCEEDED" in out
    code, out, err = await cli("log", f"{handle}/hello")
    assert code == 0, err
    assert "hi there" in out
    code, out, err = await cli("list", "-s", "kubernetes")
    assert code == 0, err
    assert handle.rpartition("/")[2] in out

    # Kubernetes 1.20 (the real test cluster) has no Indexed Jobs
    job_api = "indexed" if kube_env.indexed_jobs else "volcano,queue=default"
    code, out, err = await cli(
        "run", "-s", "kubernetes", "-cfg", f"namespace={ns},job_api={job_api}{extra}",
        "--image", "busybox:1.36", "--name", "sleeper", "--", "sleep", "30",
    )  # fmt: skip
    assert code == 0, err
    sleeper = out.strip().splitlines()[-1]
    code, out, err = await cli("cancel", sleeper)
    assert code == 0, err
    # the cancel decides the app at once (the pod stops in its grace)
    with anyio.fail_after(SETTLE):
        while "CANCELLED" not in (await cli("status", sleeper))[1]:
            await anyio.sleep(0.1)


async def test_run_without_queue_is_a_clear_error(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    code, _out, err = await Cli(kube_env, tmp_path)(
        "run", "-s", "kubernetes", "--image", "busybox", "--", "echo", "x",
    )  # fmt: skip
    assert code != 0
    assert "queue" in err


@pytest.mark.fake_api
async def test_indexed_jobs_on_a_server_without_them_exit_2(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    """A run option the server cannot honour is a usage error (docs/cli.md)."""
    if kube_env.server is None:
        pytest.skip("sets the fake API server's version")
    kube_env.server.version = (1, 20)
    code, _out, err = await Cli(kube_env, tmp_path)(
        "run", "-s", "kubernetes",
        "-cfg", f"namespace={kube_env.namespace},job_api=indexed",
        "--image", "busybox", "--", "echo", "x",
    )  # fmt: skip
    assert code == 2, err
    assert "job_api=indexed needs Indexed Jobs" in err
    assert kube_env.server.requests.count("create") == 0


@pytest.mark.fake_api
async def test_list_shows_the_apps_of_another_namespace(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    if kube_env.server is None or kube_env.context is not None:
        pytest.skip("creates a namespace on the fake API server")
    other = f"{kube_env.namespace}-away"
    kube_env.server.create_namespace(other)
    cli = Cli(kube_env, tmp_path)
    # made through the API: the CLI's `run` is test_run_status_log_list_cancel's
    # (a process start less: seconds of imports on a loaded machine)
    async with scheduler(kube_env, namespace=other) as sched:
        app_id = await sched.submit(
            make_app("echo x", name="away"),
            {"namespace": other, "queue": "default", **kube_env.run_cfg},
        )
    code, out, err = await cli("list", "-s", "kubernetes")
    assert code == 0, err
    assert app_id not in out  # the kubeconfig's namespace only
    for how in (["--namespace", other], ["-cfg", f"namespace={other}"]):
        code, out, err = await cli("list", "-s", "kubernetes", *how)
        assert code == 0, err
        assert app_id in out
    code, _out, err = await cli("list", "-s", "kubernetes", "-cfg", "nope=1")
    assert code == 2
    assert "nope" in err
