"""Scheduler-neutral named resources (TorchX's ``named_resources_generic``).

``gpu.{small,medium,large,xlarge}`` and ``cpu.{nano,micro,small,medium,large,
xlarge}``, sized in plain gibibytes (:data:`GiB` = 1024 MB). All are
registered in :data:`asyncsched.specs.named_resources`.

Example:
    >>> NAMED_RESOURCES["gpu.small"]().gpu
    1
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from asyncsched.specs.resources import GiB, Resource

__all__ = ["GiB", "NAMED_RESOURCES"]

# name -> (cpu, gpu, memMB)
_SIZES: dict[str, tuple[int, int, int]] = {
    "gpu.small": (8, 1, 32 * GiB),
    "gpu.medium": (16, 2, 64 * GiB),
    "gpu.large": (32, 4, 128 * GiB),
    "gpu.xlarge": (64, 8, 256 * GiB),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1 * GiB),
    "cpu.small": (1, 0, 2 * GiB),
    "cpu.medium": (2, 0, 4 * GiB),
    "cpu.large": (2, 0, 8 * GiB),
    "cpu.xlarge": (8, 0, 32 * GiB),
}


def _factory(cpu: int, gpu: int, memMB: int) -> Callable[[], Resource]:
    def make() -> Resource:
        return Resource(cpu=cpu, gpu=gpu, memMB=memMB)

    return make


NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    name: _factory(*size) for name, size in _SIZES.items()
}
"""Name -> factory returning a fresh :class:`Resource`."""
