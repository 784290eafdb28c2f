"""Generic named resources have TorchX 0.7's names and values, at its module path.

The expected table was generated once from ``torchx==0.7.0``'s
``torchx.specs.named_resources_generic.NAMED_RESOURCES``.
"""

from __future__ import annotations

import pytest

from asyncsched.specs import Resource, named_resources
from asyncsched.specs.named_resources_generic import NAMED_RESOURCES, GiB

# name: (cpu, gpu, memMB); from TorchX 0.7.0
TORCHX_0_7_GENERIC: dict[str, tuple[int, int, int]] = {
    "gpu.small": (8, 1, 32768),
    "gpu.medium": (16, 2, 65536),
    "gpu.large": (32, 4, 131072),
    "gpu.xlarge": (64, 8, 262144),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1024),
    "cpu.small": (1, 0, 2048),
    "cpu.medium": (2, 0, 4096),
    "cpu.large": (2, 0, 8192),
    "cpu.xlarge": (8, 0, 32768),
}


def test_module_lists_exactly_torchx_names() -> None:
    assert list(NAMED_RESOURCES) == list(TORCHX_0_7_GENERIC)
    assert GiB == 1024


@pytest.mark.parametrize("name", list(TORCHX_0_7_GENERIC))
def test_generic_resource_has_torchx_value(name: str) -> None:
    cpu, gpu, mem = TORCHX_0_7_GENERIC[name]
    expected = Resource(cpu=cpu, gpu=gpu, memMB=mem)
    assert NAMED_RESOURCES[name]() == expected
    assert named_resources[name] == expected
