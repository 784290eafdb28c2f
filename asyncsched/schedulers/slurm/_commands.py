"""Run Slurm commands as async subprocesses, with a timeout and clear errors.

Every invocation is counted (``SlurmCli.counts``, by program name) so that
benchmarks can show how many commands a workload costs.

Example:
    >>> async def main() -> None:
    ...     cli = SlurmCli()
    ...     out = await cli.run(["sinfo", "--version"])
    ...     print(out, cli.counts["sinfo"])
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence

import anyio

from asyncsched.errors import SchedulerError, SchedulerUnavailableError

__all__ = ["BACKEND", "CommandFailed", "SlurmCli"]

BACKEND = "slurm"

# what client commands print when slurmctld (or munge) cannot be reached
_DOWN_MARKERS = (
    "unable to contact slurm controller",
    "connection refused",
    "zero bytes were transmitted",
    "socket timed out",
    "munge",
    "could not establish a configuration source",
    "unable to establish a configuration source",
    "slurm_persist_conn_open",
)


class CommandFailed(SchedulerError):
    """A Slurm command exited non-zero; ``returncode`` and ``stderr`` say how."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(
            f"{' '.join(argv[:2])} failed (exit {returncode}): {stderr.strip()}"
        )
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.argv, self.returncode, self.stderr))


class SlurmCli:
    """Runs Slurm client commands for one scheduler.

    Args:
        env: Variables added to the inherited environment (e.g. ``SLURM_CONF``).
        timeout: Seconds any one command may take.
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        self.env = dict(env or {})
        self.timeout = timeout
        self.counts: Counter[str] = Counter()

    @property
    def total(self) -> int:
        """Commands run so far."""
        return sum(self.counts.values())

    async def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        cwd: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 -- a per-command limit
    ) -> str:
        """Run ``argv``; return its stdout (``timeout``: instead of the default).

        Raises:
            SchedulerUnavailableError: the program is missing, timed out, or
                the controller cannot be reached.
            CommandFailed: any other non-zero exit.
        """
        program = os.path.basename(argv[0])
        self.counts[program] += 1
        env = (
            {**os.environ, **self.env, **(extra_env or {})}
            if self.env or extra_env
            else None
        )
        limit = self.timeout if timeout is None else timeout
        try:
            with anyio.fail_after(limit):
                proc = await anyio.run_process(
                    list(argv), input=input, check=False, env=env, cwd=cwd
                )
        except FileNotFoundError:
            raise SchedulerUnavailableError(
                BACKEND,
                f"{program} is not installed (not found on PATH)",
                "install Slurm's client commands, e.g. apt-get install slurm-client",
            ) from None
        except TimeoutError:
            raise SchedulerUnavailableError(
                BACKEND,
                f"{program} did not answer within {limit:g}s",
                "is slurmctld running and reachable?",
            ) from None
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            lowered = stderr.lower()
            if any(marker in lowered for marker in _DOWN_MARKERS):
                raise SchedulerUnavailableError(
                    BACKEND,
                    f"{program} cannot reach the Slurm controller: {stderr.strip()}",
                    "is slurmctld running? check SLURM_CONF and munged",
                )
            raise CommandFailed(argv, proc.returncode, stderr)
        return proc.stdout.decode(errors="replace")
