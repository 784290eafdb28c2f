"""GPU discovery (``nvidia-smi -L``) and the CUDA_VISIBLE_DEVICES split.

Example:
    >>> assign_cuda_devices([("a", 2, 1), ("b", 1, 0)], device_count=4)
    {('a', 0): '0', ('a', 1): '1'}
"""

from __future__ import annotations

import logging
import shutil
import subprocess

import anyio

__all__ = ["assign_cuda_devices", "count_gpus", "parse_gpu_list"]

logger = logging.getLogger(__name__)


def parse_gpu_list(output: str) -> int:
    """Number of devices in ``nvidia-smi -L`` output (its non-empty lines)."""
    return sum(1 for line in output.splitlines() if line.strip())


async def count_gpus() -> int:
    """Count this host's NVIDIA GPUs; 0 without ``nvidia-smi`` or when it fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        logger.warning("nvidia-smi not found: assuming this host has 0 GPUs")
        return 0
    try:
        result = await anyio.run_process(
            [exe, "-L"], check=True, stderr=subprocess.DEVNULL
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        logger.warning("nvidia-smi -L failed (%s): assuming 0 GPUs", exc)
        return 0
    return parse_gpu_list(result.stdout.decode(errors="replace"))


def assign_cuda_devices(
    roles: list[tuple[str, int, int]], device_count: int
) -> dict[tuple[str, int], str]:
    """Split ``device_count`` GPUs between replicas, all or nothing.

    ``roles`` holds ``(role_name, num_replicas, gpus_per_replica)`` in role
    order. Devices are handed out contiguously in role then replica order;
    roles asking for no GPU get nothing. When more GPUs are requested than
    exist, no replica gets any (a warning is logged).

    Returns:
        ``{(role_name, replica_id): "i,j,..."}`` for the replicas that get GPUs.
    """
    total = sum(n * g for _, n, g in roles if g > 0)
    if total <= 0:
        return {}
    if total > device_count:
        logger.warning(
            "%d GPUs requested but this host has %d: CUDA_VISIBLE_DEVICES is not set",
            total,
            device_count,
        )
        return {}
    result: dict[tuple[str, int], str] = {}
    next_device = 0
    for name, replicas, gpus in roles:
        if gpus <= 0:
            continue
        for i in range(replicas):
            devices = range(next_device, next_device + gpus)
            result[(name, i)] = ",".join(str(d) for d in devices)
            next_device += gpus
    return result
