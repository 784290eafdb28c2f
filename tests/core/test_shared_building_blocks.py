"""The small shared pieces backends build on behave as documented."""

from __future__ import annotations

import inspect
import logging

import anyio
import pytest

from asyncsched.errors import InvalidRunConfigException, SchedulerClosedError
from asyncsched.schedulers.shared.changes import ChangeSignal
from asyncsched.schedulers.shared.factory import keyword_params
from asyncsched.schedulers.shared.labels import (
    LABEL_APP_ID,
    LABEL_VERSION,
    ReplicaLabels,
)
from asyncsched.schedulers.shared.lifecycle import AsyncClosable
from asyncsched.schedulers.slurm import (
    SlurmScheduler,
    create_scheduler as slurm_factory,
)
from asyncsched.specs.runopts import choice
from asyncsched.sync import SyncRunner, SyncScheduler

pytestmark = pytest.mark.anyio


def test_a_registry_factory_passes_on_only_what_its_scheduler_takes() -> None:
    sched = slurm_factory(
        "s", command_timeout=5.0, docker_host="unix:///x", kubeconfig="/nope"
    )
    assert isinstance(sched, SlurmScheduler)
    assert sched.cli is not None
    assert keyword_params(
        SlurmScheduler, {"session_name": "x", "command_timeout": 5.0, "qps": 1}
    ) == {"command_timeout": 5.0}


def test_replica_labels_read_back_what_they_wrote() -> None:
    ids = ReplicaLabels("app-1", "app", "trainer", 1, 2, "demo")
    labels = ids.labels(version="9")
    assert labels[LABEL_APP_ID] == "app-1"
    assert labels[LABEL_VERSION] == "9"
    assert ReplicaLabels.read(labels) == ids
    assert ReplicaLabels.read({"other": "x"}) is None
    assert ReplicaLabels.read({**labels, "asyncsched.io/replica-id": "x"}) is None


def test_choice_names_the_option_and_the_choices() -> None:
    assert choice({}, "mode", ("a", "b"), "a") == "a"
    with pytest.raises(InvalidRunConfigException) as info:
        choice({"mode": "c"}, "mode", ("a", "b"), "a")
    assert info.value.cfg_key == "mode"
    assert "mode must be one of ['a', 'b'], got 'c'" in str(info.value)


async def test_a_change_signal_wakes_the_waiters_of_the_next_change_only() -> None:
    signal = ChangeSignal()
    first = signal.changed()
    assert signal.changed() is first
    signal.notify()
    assert first.is_set()
    second = signal.changed()
    assert second is not first
    assert not second.is_set()


class _Slow(AsyncClosable):
    def __init__(self) -> None:
        self.entered = self.released = False

    def __repr__(self) -> str:
        return "Slow()"

    def _close_timeout(self) -> float:
        return 0.05

    async def _aenter(self) -> None:
        self.entered = True

    async def _aclose(self) -> None:
        await anyio.sleep_forever()  # a close that never ends: the bound cuts it
        self.released = True


async def test_aclose_is_once_bounded_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    async with _Slow() as obj:
        assert obj.entered
    assert obj.closed
    assert not obj.released
    assert "Slow() did not close within 0.05s" in caplog.text
    await obj.aclose()  # idempotent
    with pytest.raises(SchedulerClosedError, match=r"Slow\(\) is closed"):
        await obj.__aenter__()


@pytest.mark.parametrize("name", ["submit", "wait", "log_iter", "resolve_cfg"])
def test_sync_scheduler_methods_carry_the_async_docs_and_parameters(name: str) -> None:
    from asyncsched.schedulers.api import Scheduler

    method = getattr(SyncScheduler, name)
    assert method.__qualname__ == f"SyncScheduler.{name}"
    assert (method.__doc__ or "").startswith(
        inspect.cleandoc(getattr(Scheduler, name).__doc__ or "")
    )
    assert "Blocking form of ``Scheduler." in (method.__doc__ or "")
    async_params = list(inspect.signature(getattr(Scheduler, name)).parameters)
    assert list(inspect.signature(method).parameters) == async_params


def test_sync_iterators_say_they_return_plain_iterators() -> None:
    assert inspect.signature(SyncRunner.log_lines).return_annotation == "Iterator[str]"
    assert "returns a plain iterator" in (SyncRunner.log_lines.__doc__ or "")
