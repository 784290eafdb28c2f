"""Without kubernetes_asyncio installed, the module imports and says what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes import _client as kube_client
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, Role
from tests.import_threads import assert_imported_outside_the_loop_thread

_BLOCK = """
import sys

class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == "kubernetes_asyncio" or name.startswith("kubernetes_asyncio."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Blocker())
import asyncsched.schedulers.kubernetes_scheduler as k
opts = k.KubernetesScheduler("s").run_opts()
assert opts.get("queue") is not None and opts.get("job_api") is not None
assert "kubernetes_asyncio" not in sys.modules
print("ok")
"""


def test_module_imports_and_run_opts_work_without_the_client() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _BLOCK], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.fixture
def no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "kubernetes_asyncio" or name.startswith("kubernetes_asyncio."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kubernetes_asyncio", None)
    monkeypatch.setattr(kube_client, "_client_module", None)  # forget the import


@pytest.mark.usefixtures("no_client")
async def test_describe_and_dryrun_name_the_extra_without_the_client() -> None:
    app = AppDef("a", roles=[Role("r", image="busybox", entrypoint="true")])
    async with KubernetesScheduler("s") as sched:
        with pytest.raises(
            SchedulerUnavailableError, match=r"asyncsched\[kubernetes\]"
        ):
            await sched.describe("ns:name")
        with pytest.raises(
            SchedulerUnavailableError, match=r"asyncsched\[kubernetes\]"
        ):
            await sched.submit_dryrun(app, {"queue": "q"})


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
