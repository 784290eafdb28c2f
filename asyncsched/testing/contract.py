"""The Scheduler contract as a pytest suite: one test per applicable case.

A backend's test module (a plugin's too) subclasses :class:`SchedulerContract`,
names the backend's declared ``capabilities`` and provides a ``target``
fixture returning a :class:`ContractTarget` (an open scheduler plus how to
build an app that runs a POSIX ``sh -c`` script on it)::

    from asyncsched.testing import ContractTarget, SchedulerContract

    class TestLocalContract(SchedulerContract):
        capabilities = LocalScheduler.capabilities

        @pytest.fixture
        async def target(self, tmp_path):
            async with LocalScheduler("contract") as sched:
                yield ContractTarget(sched, cfg={"log_dir": str(tmp_path)})

Each case of :mod:`asyncsched.testing.cases` becomes a test method
``test_<case name>``, only for the cases the declared capabilities make
apply (a case of a capability not declared is not collected, not even
skipped), and each is collected once per event loop of
``capabilities.event_loops`` (or of :attr:`SchedulerContract.event_loops`).
Without ``capabilities`` every case is collected, on the loops of the
``anyio_backend`` fixture, and those that do not apply are skipped at run
time. The same cases run without pytest through
:func:`asyncsched.testing.check_scheduler`.

The tests are ``@pytest.mark.anyio``: they need pytest and anyio's pytest
plugin (it comes with anyio).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from asyncsched.schedulers.api import Capabilities

from .cases import CASES, Case, CaseFn
from .target import ContractTarget

__all__ = ("ContractTarget", "SchedulerContract")


def _test_of(case: Case) -> CaseFn:
    async def test(self: SchedulerContract, target: ContractTarget) -> None:
        declared = type(self).capabilities
        actual = target.scheduler.capabilities
        if declared is not None and declared != actual:
            pytest.fail(
                f"{type(self).__name__}.capabilities is not what"
                f" {type(target.scheduler).__name__} declares: {declared} != {actual}"
            )
        why = case.not_applicable(target)
        if why:
            pytest.skip(why)
        await case.check(target)

    test.__name__ = test.__qualname__ = f"test_{case.name}"
    test.__doc__ = case.doc
    return test  # type: ignore[return-value]


class SchedulerContract:
    """Behaviour every scheduler backend must show, one pytest test per case.

    Set :attr:`capabilities` to the backend's declared capabilities: only
    the cases they make apply are collected, on their ``event_loops``. App
    states follow :func:`asyncsched.specs.rollup_state`.
    """

    pytestmark = pytest.mark.anyio

    #: the backend's declared capabilities (e.g. ``MyScheduler.capabilities``);
    #: None: every case is collected, and skipped at run time if it does not
    #: apply
    capabilities: ClassVar[Capabilities | None] = None
    #: the event loops to run on; None: ``capabilities.event_loops``, or
    #: without capabilities the loops of the ``anyio_backend`` fixture
    event_loops: ClassVar[tuple[str, ...] | None] = None
    #: True: the ``anyio_backend`` fixture in scope picks the loop of each
    #: test (e.g. one loop per test cluster), whatever the capabilities say
    event_loops_from_fixture: ClassVar[bool] = False
    #: False when no target of this class runs replicas in a POSIX shell:
    #: the cases that need one are not collected
    posix_shell: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        caps = cls.capabilities
        for case in CASES:
            name = f"test_{case.name}"
            if name in vars(cls):
                continue  # the subclass wrote its own
            shell_ok = cls.posix_shell or not case.posix_shell
            if shell_ok and (caps is None or case.applies_to(caps)):
                setattr(cls, name, _test_of(case))
            elif hasattr(cls, name):
                setattr(cls, name, None)  # a parent's, not for this backend

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Collect each case once per event loop the backend runs on."""
        loops = self.event_loops
        if self.event_loops_from_fixture:
            return
        if loops is None and self.capabilities is not None:
            loops = self.capabilities.event_loops
        if loops is not None and "anyio_backend" in metafunc.fixturenames:
            metafunc.parametrize("anyio_backend", loops)
