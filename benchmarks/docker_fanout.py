"""Fan-out benchmark: asyncsched's DockerScheduler vs TorchX 0.7.0's (docker-py).

Scenarios, each side in its own subprocess (so RSS is its own):

* ``echo``: N apps (default 50) running ``echo``, submitted and awaited;
* ``running``: M apps (default 200) running ``sleep 5``, all alive at once.

asyncsched submits every app concurrently and awaits them (event-driven
``wait``); TorchX is used as its API allows: ``submit`` one app after the other,
then ``describe`` each pending app every 0.1 s (its tests' ``wait`` helper).
``torchx-nopull`` is TorchX with its unconditional pre-submit ``images.pull``
disabled, to show what that registry round-trip costs. API calls are counted
by wrapping aiohttp's request (trace config) and docker-py's ``requests``
session ``send``.

Needs a Docker engine (``$DOCKER_HOST`` or the standard socket) and
``/bin/busybox`` (static) to import the test image when it is missing; no
registry access. Everything created is removed.

Usage::

    python benchmarks/docker_fanout.py [--apps 50] [--running 200] [--skip-torchx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

IMAGE = "asyncsched-test-busybox:latest"
SESSION = f"bench-{os.getpid()}"
NETWORK = "asyncsched-bench"
APPLETS = ["sh", "echo", "sleep", "true", "cat"]


# -- workers (run in a subprocess) -------------------------------------------


def _script(scenario: str, sleep: float) -> list[str]:
    return ["echo", "hello"] if scenario == "echo" else ["sleep", str(sleep)]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _asyncsched_worker(
    n: int, scenario: str, sleep: float, session: str
) -> dict[str, Any]:
    import aiodocker
    import aiohttp

    from asyncsched.schedulers.docker_scheduler import DockerScheduler
    from asyncsched.specs import AppDef, Role

    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    calls = 0

    async def on_start(
        _s: aiohttp.ClientSession,
        _c: SimpleNamespace,
        _p: aiohttp.TraceRequestStartParams,
    ) -> None:
        nonlocal calls
        calls += 1

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    connector = aiohttp.UnixConnector(host.removeprefix("unix://"))
    session_http = aiohttp.ClientSession(connector=connector, trace_configs=[trace])
    client = aiodocker.Docker(
        url="unix://localhost", connector=connector, session=session_http
    )
    cmd = _script(scenario, sleep)
    role = Role("w", image=IMAGE, entrypoint=cmd[0], args=cmd[1:])
    start = time.perf_counter()
    async with DockerScheduler(session, client=client, network=NETWORK) as sched:
        app_ids = await asyncio.gather(
            *(sched.submit(AppDef(f"a{i}", roles=[role]), {}) for i in range(n))
        )
        submitted = time.perf_counter() - start
        results = await asyncio.gather(*(sched.wait(a, timeout=600) for a in app_ids))
        wall = time.perf_counter() - start
        states = [str(r.state) if r else "None" for r in results]
    await client.close()
    await session_http.close()
    return {
        "wall": wall,
        "submit": submitted,
        "calls": calls,
        "rss_mb": _peak_rss_mb(),
        "states": sorted(set(states)),
    }


def _torchx_worker(n: int, scenario: str, sleep: float, pull: bool) -> dict[str, Any]:
    from torchx.schedulers.docker_scheduler import create_scheduler
    from torchx.specs import AppDef, Role

    sched = create_scheduler("bench")
    client = sched._docker_client
    api = client.api
    calls = 0
    original_send = api.send

    def counting_send(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return original_send(*args, **kwargs)

    api.send = counting_send
    if not pull:

        def no_pull(*_a: Any, **_k: Any) -> None:
            raise RuntimeError("pull disabled by the benchmark")

        client.images.pull = no_pull
    cmd = _script(scenario, sleep)
    role = Role("w", image=IMAGE, entrypoint=cmd[0], args=cmd[1:])
    start = time.perf_counter()
    app_ids = [sched.submit(AppDef(f"a{i}", roles=[role]), cfg={}) for i in range(n)]
    submitted = time.perf_counter() - start
    pending = set(app_ids)
    states: set[str] = set()
    while pending:
        for app_id in list(pending):
            desc = sched.describe(app_id)
            if desc is not None and desc.state in (4, 5, 6):
                states.add(str(desc.state))
                pending.discard(app_id)
        if pending:
            time.sleep(0.1)
    wall = time.perf_counter() - start
    return {
        "wall": wall,
        "submit": submitted,
        "calls": calls,
        "rss_mb": _peak_rss_mb(),
        "states": sorted(states),
    }


# -- orchestration -------------------------------------------------------------


def _docker(*args: str, check: bool = True) -> str:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def _ensure_image() -> bool:
    """Import the busybox test image if missing; True if we created it."""
    if _docker("images", "-q", IMAGE).strip():
        return False
    root = Path(tempfile.mkdtemp(prefix="bench-rootfs-"))
    try:
        (root / "bin").mkdir()
        (root / "tmp").mkdir()
        shutil.copy2("/bin/busybox", root / "bin" / "busybox")
        for applet in APPLETS:
            (root / "bin" / applet).symlink_to("busybox")
        tar_path = root / "rootfs.tar"
        with tarfile.open(tar_path, "w") as tar:
            for d in ("bin", "tmp"):
                tar.add(root / d, arcname=d)
        _docker("import", "--change", "ENV PATH=/bin", str(tar_path), IMAGE)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return True


def _cleanup(torchx_network_existed: bool) -> None:
    for label in (f"asyncsched.io/session={SESSION}", "torchx.pytorch.org/app-id"):
        ids = _docker("ps", "-aq", "--filter", f"label={label}").split()
        if ids:
            _docker("rm", "-f", *ids, check=False)
    _docker("network", "rm", NETWORK, check=False)
    if not torchx_network_existed:
        _docker("network", "rm", "torchx", check=False)


def _run_worker(side: str, n: int, scenario: str, sleep: float) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            side,
            "--n",
            str(n),
            "--scenario",
            scenario,
            "--sleep",
            str(sleep),
            "--session",
            SESSION,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{side} worker failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--running", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=5.0)
    parser.add_argument("--skip-torchx", action="store_true")
    parser.add_argument("--skip-running", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--session", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        if args.worker == "asyncsched":
            res = asyncio.run(
                _asyncsched_worker(args.n, args.scenario, args.sleep, args.session)
            )
        else:
            res = _torchx_worker(
                args.n, args.scenario, args.sleep, args.worker == "torchx"
            )
        print(json.dumps(res))
        return

    sides = ["asyncsched"]
    if not args.skip_torchx:
        try:
            import torchx  # noqa: F401
        except ImportError:
            print("torchx is not installed: asyncsched only")
        else:
            sides += ["torchx", "torchx-nopull"]
    scenarios = [("echo", args.apps)]
    if not args.skip_running:
        scenarios.append(("running", args.running))

    torchx_net = bool(
        _docker("network", "ls", "-q", "--filter", "name=^torchx$").strip()
    )
    created_image = _ensure_image()
    rows: list[tuple[str, str, int, dict[str, Any]]] = []
    try:
        for scenario, n in scenarios:
            for side in sides:
                try:
                    rows.append(
                        (scenario, side, n, _run_worker(side, n, scenario, args.sleep))
                    )
                finally:
                    _cleanup(torchx_net)
    finally:
        if created_image:
            _docker("rmi", "-f", IMAGE, check=False)

    header = (
        f"{'scenario':<10} {'side':<14} {'apps':>5} {'wall s':>8} {'submit s':>9} "
        f"{'x faster':>9} {'RSS MB':>8} {'calls/app':>10}  states"
    )
    print(header)
    print("-" * len(header))
    for scenario, side, n, res in rows:
        ours = next(r for s, sd, _, r in rows if s == scenario and sd == "asyncsched")
        ratio = res["wall"] / ours["wall"]
        print(
            f"{scenario:<10} {side:<14} {n:>5} {res['wall']:>8.2f} {res['submit']:>9.2f} "
            f"{ratio:>9.1f} {res['rss_mb']:>8.1f} {res['calls'] / n:>10.1f}  "
            f"{','.join(res['states'])}"
        )
    print("\n'x faster' = that side's wall time / asyncsched's wall time.")


if __name__ == "__main__":
    main()
