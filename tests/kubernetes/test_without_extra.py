"""Without kubernetes_asyncio installed, the module imports and says what to install."""

from __future__ import annotations

import subprocess
import sys

from tests.import_threads import assert_imported_outside_the_loop_thread

#: makes ``kubernetes_asyncio`` look uninstalled in a fresh interpreter
_BLOCKER = """
import sys

class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == "kubernetes_asyncio" or name.startswith("kubernetes_asyncio."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Blocker())
"""

_RUN_OPTS = """
import asyncsched.schedulers.kubernetes_scheduler as k
opts = k.KubernetesScheduler("s").run_opts()
assert opts.get("queue") is not None and opts.get("job_api") is not None
assert "kubernetes_asyncio" not in sys.modules
print("ok")
"""

_DESCRIBE_AND_DRYRUN = """
import asyncio
import re

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, Role

async def main() -> None:
    app = AppDef("a", roles=[Role("r", image="busybox", entrypoint="true")])
    async with KubernetesScheduler("s") as sched:
        for call in (
            lambda: sched.describe("ns:name"),
            lambda: sched.submit_dryrun(app, {"queue": "q"}),
        ):
            try:
                await call()
            except SchedulerUnavailableError as exc:
                assert re.search(r"asyncsched\\[kubernetes\\]", str(exc)), exc
            else:
                raise AssertionError("no SchedulerUnavailableError")
    print("ok")

asyncio.run(main())
"""


def _run_without_the_client(script: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _BLOCKER + script],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_module_imports_and_run_opts_work_without_the_client() -> None:
    _run_without_the_client(_RUN_OPTS)


def test_describe_and_dryrun_name_the_extra_without_the_client() -> None:
    _run_without_the_client(_DESCRIBE_AND_DRYRUN)


def test_first_use_imports_the_client_outside_the_event_loop_thread() -> None:
    # the import costs ~0.6 s of CPU: in the loop thread it would stall every task
    assert_imported_outside_the_loop_thread(
        {"kubernetes_asyncio"},
        """
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, Role

app = AppDef("a", roles=[Role("r", image="busybox", entrypoint="true")])
async with KubernetesScheduler("s") as sched:
    await sched.submit_dryrun(app, {"queue": "q"})
""",
    )
