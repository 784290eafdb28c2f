"""Counts of a runner's fan-out: submitting, submitted, running, done, failed.

:class:`ProgressCounter` is fed by the runner (each submission, each final
status it sees) and hands out immutable :class:`Progress` snapshots, cheap
enough to read many times a second from a progress display.

Example:
    >>> counter = ProgressCounter()
    >>> counter.submit_started()
    >>> counter.submit_ended("local_cwd://s/a1")
    >>> counter.snapshot().running
    1
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncsched.specs import AppHandle, AppState, AppStatus

__all__ = ["Progress", "ProgressCounter"]


@dataclass(frozen=True)
class Progress:
    """A snapshot of the apps a :class:`~asyncsched.runner.Runner` submitted.

    Attributes:
        submitting: ``run``/``schedule`` calls in flight (waiting for a
            submit slot or for the scheduler's room, or being launched).
        submitted: Apps submitted so far (a handle was returned).
        submit_failed: Submissions that raised (nothing was started).
        running: Submitted apps not seen final yet (PENDING ones included).
        succeeded: Apps seen final in ``SUCCEEDED``.
        failed: Apps seen final in ``FAILED``.
        cancelled: Apps seen final in ``CANCELLED``.
        unknown: Apps their scheduler no longer knows (final status None).

    Example:
        >>> p = Progress(submitted=10, running=4, succeeded=5, failed=1)
        >>> p.done, str(p)
        (6, 'submitted 10, running 4, done 6 (5 succeeded, 1 failed)')
    """

    submitting: int = 0
    submitted: int = 0
    submit_failed: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    unknown: int = 0

    @property
    def done(self) -> int:
        """Apps seen final, whatever their outcome."""
        return self.succeeded + self.failed + self.cancelled + self.unknown

    def __str__(self) -> str:
        parts = [f"submitted {self.submitted}"]
        if self.submitting:
            parts.append(f"submitting {self.submitting}")
        if self.submit_failed:
            parts.append(f"not submitted {self.submit_failed}")
        parts.append(f"running {self.running}")
        outcomes = [
            f"{count} {label}"
            for count, label in (
                (self.succeeded, "succeeded"),
                (self.failed, "failed"),
                (self.cancelled, "cancelled"),
                (self.unknown, "unknown"),
            )
            if count
        ]
        done = f"done {self.done}"
        parts.append(f"{done} ({', '.join(outcomes)})" if outcomes else done)
        return ", ".join(parts)


_OUTCOMES = {
    AppState.SUCCEEDED: "succeeded",
    AppState.FAILED: "failed",
    AppState.CANCELLED: "cancelled",
}


class ProgressCounter:
    """The runner's counts; every app it submitted is counted final once."""

    def __init__(self) -> None:
        self._submitting = 0
        self._submitted = 0
        self._submit_failed = 0
        self._unfinished: set[AppHandle] = set()
        self._final = dict.fromkeys(("succeeded", "failed", "cancelled", "unknown"), 0)

    def submit_started(self) -> None:
        """A submission began."""
        self._submitting += 1

    def submit_ended(self, handle: AppHandle | None) -> None:
        """A submission ended: with the app's handle, or None when it failed."""
        self._submitting -= 1
        if handle is None:
            self._submit_failed += 1
            return
        self._submitted += 1
        self._unfinished.add(handle)

    def saw(self, handle: AppHandle, status: AppStatus | None) -> None:
        """The runner saw ``handle``'s status (None: its scheduler forgot it)."""
        if handle not in self._unfinished:
            return
        if status is None:
            outcome = "unknown"
        elif status.state in _OUTCOMES:
            outcome = _OUTCOMES[status.state]
        else:
            return  # not final yet
        self._unfinished.discard(handle)
        self._final[outcome] += 1

    def snapshot(self) -> Progress:
        """The counts now."""
        return Progress(
            submitting=self._submitting,
            submitted=self._submitted,
            submit_failed=self._submit_failed,
            running=len(self._unfinished),
            **self._final,
        )
