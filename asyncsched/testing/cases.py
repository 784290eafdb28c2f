"""The contract's cases: plain async functions of a :class:`ContractTarget`.

Each :class:`Case` names the capabilities it needs: a case whose capability
a backend does not declare does not apply (it is neither run nor collected),
and one whose capability is declared checks that the backend honours it, so
a declared capability the backend does not honour fails. The cases need no
test runner; :func:`asyncsched.testing.check_scheduler` runs them all, and
:class:`asyncsched.testing.SchedulerContract` collects one pytest test each.

Scripts stay within ``echo``, ``sleep``, ``exit`` and ``>&2`` so that the
in-memory scheduler of ``asyncsched.testing`` can run them too, except in the
cases that need a real shell (``trap``), which do not apply to a target made
with ``posix_shell=False``.
"""

from __future__ import annotations

# importing the case modules registers their cases in CASES, in this order
from . import (
    _cases_closing as _closing,  # noqa: F401
    _cases_input as _input,  # noqa: F401
    _cases_logs as _logs,  # noqa: F401
    _cases_outcomes as _outcomes,  # noqa: F401
)
from ._case_base import CASES, CLOSED_WAIT_ENDS_WITHIN, Case, CaseFn, ContractViolation

__all__ = ("CASES", "CLOSED_WAIT_ENDS_WITHIN", "Case", "CaseFn", "ContractViolation")
