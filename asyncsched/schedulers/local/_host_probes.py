"""What a local scheduler asks of its host once: GPU count and ``prlimit``.

Both probes block (a ``nvidia-smi`` run, a PATH lookup), so they run off the
event loop, once per scheduler; later calls return the cached answer.

Example:
    >>> probes = HostProbes()
    >>> probes.gpu_count is None  # not probed yet
    True
"""

from __future__ import annotations

import logging

import anyio

from asyncsched.schedulers.local._gpus import count_gpus
from asyncsched.schedulers.local._limits import find_prlimit, original_nofile

__all__ = ("HostProbes",)

logger = logging.getLogger(__name__)


class HostProbes:
    """The host facts one scheduler probes once (then caches)."""

    def __init__(self) -> None:
        #: this host's GPU count, once probed
        self.gpu_count: int | None = None
        self._prlimit: str | None = None
        self._prlimit_probed = False

    async def gpus(self) -> int:
        """This host's GPU count: probed once, then cached."""
        if self.gpu_count is None:
            self.gpu_count = await count_gpus()
        return self.gpu_count

    async def limit_tool(self) -> str | None:
        """util-linux ``prlimit`` (sets replicas' limits): looked up once."""
        if not self._prlimit_probed:
            self._prlimit = await anyio.to_thread.run_sync(find_prlimit)
            self._prlimit_probed = True
            if self._prlimit is None and original_nofile() is not None:
                logger.warning(
                    "prlimit (util-linux) not found: replicas inherit the raised"
                    " open-file limit and memory limits (resource.memMB) are not"
                    " enforced"
                )
        return self._prlimit
