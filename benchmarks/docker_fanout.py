"""Fan-out benchmark: asyncsched's DockerScheduler vs TorchX 0.7.0's (docker-py).

Scenarios, each side in its own subprocess (so RSS is its own):

* ``echo``: N apps (default 50) running ``echo``, submitted and awaited;
* ``running``: M apps (default 200) running ``sleep 5``, all alive at once;
* ``lifecycle``: L apps (default 200) running ``true``, each one started,
  awaited and removed: asyncsched through ``Runner.run_many`` + ``wait_all``
  then ``delete`` (the scheduler's ``max_concurrency`` bounds its Engine API
  calls), beside raw aiodocker doing the same with a semaphore of the same
  bound around create, start and remove (``POST /containers/{id}/wait`` is a
  long poll per container and not bounded). Reported: wall time, the ratio
  to raw aiodocker, API calls, the most calls in flight at once (request
  sent until its response headers), event-loop lag and peak RSS.

asyncsched submits every app concurrently and awaits them (event-driven
``wait``); TorchX is used as its API allows: ``submit`` one app after the other,
then ``describe`` each pending app every 0.1 s (its tests' ``wait`` helper).
``torchx-nopull`` is TorchX with its unconditional pre-submit ``images.pull``
disabled, to show what that registry round-trip costs. API calls are counted
by wrapping aiohttp's request (trace config) and docker-py's ``requests``
session ``send``.

Needs a Docker engine (``$DOCKER_HOST`` or the standard socket) and
``/bin/busybox`` (static) to import the test image when it is missing; no
registry access. With ``--private-daemon`` (or when no engine answers and we
are root) the script starts its own ``dockerd`` (socket, data-root and
exec-root in a temp dir) and stops it at the end. Everything created is
removed.

Usage::

    python benchmarks/docker_fanout.py [--apps 50] [--running 200] [--skip-torchx]
    python benchmarks/docker_fanout.py --only-lifecycle --lifecycle 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _harness import LoopLagSampler

from tests.docker.daemon import answers, start_dockerd, stop_dockerd

if TYPE_CHECKING:
    import aiodocker
    import aiohttp

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


class _CallCounter:
    """Engine API calls of one aiohttp session: total and most in flight at once.

    A call is in flight from its request until its response headers (a
    stream, such as the events stream, counts only until it starts).
    """

    def __init__(self) -> None:
        self.calls = 0
        self.in_flight = 0
        self.peak = 0

    def trace(self) -> aiohttp.TraceConfig:
        import aiohttp

        async def start(*_: Any) -> None:
            self.calls += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

        async def end(*_: Any) -> None:
            self.in_flight -= 1

        trace = aiohttp.TraceConfig()
        trace.on_request_start.append(start)
        trace.on_request_end.append(end)
        trace.on_request_exception.append(end)
        return trace


@contextlib.asynccontextmanager
async def _counted_client() -> Any:
    """An aiodocker client on ``$DOCKER_HOST`` whose calls a ``_CallCounter`` counts."""
    import aiodocker
    import aiohttp

    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    counter = _CallCounter()
    connector = aiohttp.UnixConnector(host.removeprefix("unix://"))
    session_http = aiohttp.ClientSession(
        connector=connector, trace_configs=[counter.trace()]
    )
    client = aiodocker.Docker(
        url="unix://localhost", connector=connector, session=session_http
    )
    try:
        yield client, counter
    finally:
        await client.close()
        await session_http.close()


async def _left_behind(client: aiodocker.Docker, session: str) -> int:
    found = await client.containers.list(
        all=True, filters={"label": [f"asyncsched.io/session={session}"]}
    )
    return len(found)


def _lifecycle_result(
    n: int,
    bound: int,
    wall: float,
    submitted: float,
    awaited: float | None,
    calls: int,
    peak: int,
    ok: int,
    left: int,
    lag: LoopLagSampler,
) -> dict[str, Any]:
    """One lifecycle run's figures, the same keys for asyncsched and the floor."""
    return {
        "wall": wall,
        "submit": submitted,
        "awaited": awaited,
        "calls": calls,
        "peak_in_flight": peak,
        "bound": bound,
        "succeeded": ok,
        "left_behind": left,
        "lag_max_ms": lag.max_ms,
        "lag_p99_ms": lag.p99_ms,
        "rss_mb": _peak_rss_mb(),
        "states": ["SUCCEEDED"] if ok == n else ["lost"],
    }


async def _asyncsched_lifecycle(n: int, session: str, bound: int) -> dict[str, Any]:
    from asyncsched.runner import Runner
    from asyncsched.schedulers.docker_scheduler import DockerScheduler
    from asyncsched.specs import AppDef, AppState, Role

    role = Role("w", image=IMAGE, entrypoint="true")
    apps = [AppDef(f"a{i}", roles=[role]) for i in range(n)]
    async with _counted_client() as (client, counter):
        scheds: list[DockerScheduler] = []

        def factory(session_name: str, **_: Any) -> DockerScheduler:
            sched = DockerScheduler(
                session_name, client=client, network=NETWORK, max_concurrency=bound
            )
            scheds.append(sched)
            return sched

        async with LoopLagSampler() as lag:
            start = time.perf_counter()
            async with Runner(session, scheduler_factories={"docker": factory}) as run:
                handles = await run.run_many(apps, "docker")
                submitted = time.perf_counter() - start
                results = await run.wait_all(handles, timeout=1800)
                awaited = time.perf_counter() - start
                [sched] = scheds
                app_ids = [h.rsplit("/", 1)[-1] for h in handles]
                async with asyncio.TaskGroup() as tg:
                    for app_id in app_ids:
                        tg.create_task(sched.delete(app_id))
                wall = time.perf_counter() - start
        calls, peak = counter.calls, counter.peak
        left = await _left_behind(client, session)
    ok = sum(r is not None and r.state == AppState.SUCCEEDED for r in results.values())
    return _lifecycle_result(
        n, bound, wall, submitted, awaited, calls, peak, ok, left, lag
    )


async def _aiodocker_lifecycle(n: int, session: str, bound: int) -> dict[str, Any]:
    """The floor: create, start, wait and remove each container with aiodocker."""
    async with _counted_client() as (client, counter):
        nets = await client.networks.list(filters={"name": NETWORK})
        if not any(net.get("Name") == NETWORK for net in nets):
            await client.networks.create({"Name": NETWORK, "Driver": "bridge"})
        limit = asyncio.Semaphore(bound)
        ok = 0
        config = {
            "Image": IMAGE,
            "Cmd": ["true"],
            "Labels": {"asyncsched.io/session": session},
            "HostConfig": {"NetworkMode": NETWORK},
        }
        created = 0
        submitted = 0.0

        async def one(i: int) -> None:
            nonlocal ok, created, submitted
            async with limit:
                container = await client.containers.create(
                    config, name=f"{session}-raw-{i}"
                )
            async with limit:
                await container.start()
            created += 1
            if created == n:
                submitted = time.perf_counter() - start
            result = await container.wait(timeout=1800)
            ok += result.get("StatusCode") == 0
            async with limit:
                await container.delete(force=True, v=True)

        async with LoopLagSampler() as lag:
            start = time.perf_counter()
            async with asyncio.TaskGroup() as tg:
                for i in range(n):
                    tg.create_task(one(i))
            wall = time.perf_counter() - start
        calls, peak = counter.calls, counter.peak
        left = await _left_behind(client, session)
    return _lifecycle_result(
        n, bound, wall, submitted, None, calls, peak, ok, left, lag
    )


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


@contextlib.contextmanager
def _engine(private: bool) -> Iterator[None]:
    """Use ``$DOCKER_HOST``; or start a private ``dockerd`` (and stop it after)."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not private and answers(host):
        yield
        return
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        raise SystemExit(f"no Docker engine answers at {host}; cannot start dockerd")
    root = Path(tempfile.mkdtemp(prefix="bench-dockerd-"))
    try:
        proc, private_host = start_dockerd(root, deadline_s=60)
    except RuntimeError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise SystemExit(str(exc)) from None
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = private_host
    try:
        print(f"private dockerd at {private_host}", file=sys.stderr)
        yield
    finally:
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old
        stop_dockerd(proc, private_host)
        shutil.rmtree(root, ignore_errors=True)


def _run_worker(
    side: str, n: int, scenario: str, sleep: float, bound: int = 8
) -> dict[str, Any]:
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
            "--bound",
            str(bound),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{side} worker failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _print_lifecycle(rows: list[tuple[str, str, int, dict[str, Any]]]) -> None:
    life = [
        (side, n, res) for scenario, side, n, res in rows if scenario == "lifecycle"
    ]
    if not life:
        return
    floor = next((res for side, _, res in life if side == "aiodocker"), None)
    print(
        "\n| side | apps | wall (s) | / aiodocker | all started (s) | API calls"
        " | calls/app | most in flight (bound) | loop lag max / p99 (ms)"
        " | peak RSS (MB) | succeeded | left behind |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for side, n, res in life:
        ratio = f"{res['wall'] / floor['wall']:.2f}" if floor else "n/a"
        print(
            f"| {side} | {n} | {res['wall']:.2f} | {ratio} | {res['submit']:.2f}"
            f" | {res['calls']} | {res['calls'] / n:.1f}"
            f" | {res['peak_in_flight']} ({res['bound']})"
            f" | {res['lag_max_ms'] or 0:.0f} / {res['lag_p99_ms'] or 0:.1f}"
            f" | {res['rss_mb']:.1f} | {res['succeeded']}/{n}"
            f" | {res['left_behind']} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--running", type=int, default=200)
    parser.add_argument("--lifecycle", type=int, default=200)
    parser.add_argument(
        "--bound", type=int, default=8, help="max_concurrency (lifecycle)"
    )
    parser.add_argument("--sleep", type=float, default=5.0)
    parser.add_argument("--skip-torchx", action="store_true")
    parser.add_argument("--skip-running", action="store_true")
    parser.add_argument("--skip-lifecycle", action="store_true")
    parser.add_argument(
        "--only-lifecycle", action="store_true", help="only the lifecycle scenario"
    )
    parser.add_argument(
        "--private-daemon",
        action="store_true",
        help="start a private dockerd for the run (root)",
    )
    parser.add_argument("--json", type=Path, help="write every result as JSON here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--session", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        if args.scenario == "lifecycle":
            life = (
                _asyncsched_lifecycle
                if args.worker == "asyncsched"
                else _aiodocker_lifecycle
            )
            res = asyncio.run(life(args.n, args.session, args.bound))
        elif args.worker == "asyncsched":
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
    scenarios: list[tuple[str, int, list[str]]] = []
    if not args.only_lifecycle:
        scenarios.append(("echo", args.apps, sides))
        if not args.skip_running:
            scenarios.append(("running", args.running, sides))
    if not args.skip_lifecycle:
        scenarios.append(("lifecycle", args.lifecycle, ["aiodocker", "asyncsched"]))

    rows: list[tuple[str, str, int, dict[str, Any]]] = []
    with _engine(args.private_daemon):
        torchx_net = bool(
            _docker("network", "ls", "-q", "--filter", "name=^torchx$").strip()
        )
        created_image = _ensure_image()
        try:
            for scenario, n, scenario_sides in scenarios:
                for side in scenario_sides:
                    try:
                        res = _run_worker(side, n, scenario, args.sleep, args.bound)
                        rows.append((scenario, side, n, res))
                    finally:
                        _cleanup(torchx_net)
        finally:
            if created_image:
                _docker("rmi", "-f", IMAGE, check=False)

    fanout = [row for row in rows if row[0] != "lifecycle"]
    if fanout:
        header = (
            f"{'scenario':<10} {'side':<14} {'apps':>5} {'wall s':>8} {'submit s':>9} "
            f"{'x faster':>9} {'RSS MB':>8} {'calls/app':>10}  states"
        )
        print(header)
        print("-" * len(header))
        for scenario, side, n, res in fanout:
            ours = next(
                r for s, sd, _, r in fanout if s == scenario and sd == "asyncsched"
            )
            ratio = res["wall"] / ours["wall"]
            print(
                f"{scenario:<10} {side:<14} {n:>5} {res['wall']:>8.2f}"
                f" {res['submit']:>9.2f} {ratio:>9.1f} {res['rss_mb']:>8.1f}"
                f" {res['calls'] / n:>10.1f}  {','.join(res['states'])}"
            )
        print("\n'x faster' = that side's wall time / asyncsched's wall time.")
    _print_lifecycle(rows)
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {"scenario": sc, "side": sd, "apps": n, **res}
                    for sc, sd, n, res in rows
                ],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
