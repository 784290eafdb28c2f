from __future__ import annotations
import os, sys, time
from pathlib import Path
import anyio
import pytest
from .fakeapi.env import KubeEnv
from .test_cli import Cli

pytestmark = [pytest.mark.usefixtures("kube_controller"), pytest.mark.fake_api]

async def test_scratch(kube_env: KubeEnv, tmp_path: Path) -> None:
    cli = Cli(kube_env, tmp_path)
    cli.env["LOGLEVEL"] = "DEBUG"
    ns = kube_env.namespace
    code, out, err = await cli("run", "-s", "kubernetes", "-cfg", f"namespace={ns},queue=default", "--wait", "--image", "busybox:1.36", "--name", "hello", "--", "sh", "-c", "echo hi there")
    handle = out.strip().splitlines()[-1]
    for verb in ("status", "log", "status"):
        t0 = time.monotonic()
        args = (verb, handle) if verb == "status" else (verb, handle + "/hello")
        code, out, err = await cli("--log_level", "DEBUG", *args)
        print("===", verb, time.monotonic() - t0, code)
        print(err[-3000:])
    print(kube_env.server.requests.snapshot())
