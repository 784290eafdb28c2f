"""Resource requests (cpu, gpu, memory) and the library of named resources.

Example:
    >>> from asyncsched.specs import named_resources, resource
    >>> resource(cpu=4).cpu
    4
    >>> named_resources["gpu.small"].gpu
    1
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from asyncsched.errors import UnknownNamedResourceError, UnsupportedOperationError

__all__ = ["GiB", "NULL_RESOURCE", "Resource", "named_resources", "resource"]

GiB: int = 1024
"""One gibibyte expressed in ``memMB`` units."""

ENTRY_POINT_GROUP = "asyncsched.named_resources"

ResourceFactory = Callable[[], "Resource"]


@dataclass
class Resource:
    """What one replica of a role asks the scheduler for.

    Args:
        cpu: Logical CPU cores; what a core is depends on the scheduler.
        gpu: Number of GPUs.
        memMB: Memory in MB (use :data:`GiB` for gibibytes).
        capabilities: Scheduler-interpreted constraints (e.g. an instance type).
        devices: Extra devices by name and count (e.g. EFA interfaces).
        tags: Free-form, non-functional labels.
    """

    cpu: int
    gpu: int
    memMB: int
    capabilities: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, int] = field(default_factory=dict)
    tags: dict[str, object] = field(default_factory=dict)

    @staticmethod
    def copy(original: Resource, **capabilities: Any) -> Resource:
        """Return a copy of ``original`` with ``capabilities`` laid over its own.

        ``tags`` are not carried over (TorchX behaves the same way); the original
        is left untouched.
        """
        return Resource(
            cpu=original.cpu,
            gpu=original.gpu,
            memMB=original.memMB,
            capabilities={**original.capabilities, **capabilities},
            devices=dict(original.devices),
        )


NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)
"""The "no resource requested" sentinel; one shared instance."""


def resource(
    cpu: int | None = None,
    gpu: int | None = None,
    memMB: int | None = None,
    h: str | None = None,
) -> Resource:
    """Build a :class:`Resource`, or look one up by name.

    When ``h`` is given the named resource is returned and the other arguments
    are ignored. Otherwise unset (or zero) values default to 2 cpus, 0 gpus and
    1024 MB.
    """
    if h:
        return named_resources[h]
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)


# -- built-in named resources -------------------------------------------------

_GENERIC: dict[str, tuple[int, int, int]] = {
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

K8S_ITYPE = "node.kubernetes.io/instance-type"
EFA_DEVICE = "vpc.amazonaws.com/efa"
NEURON_DEVICE = "aws.amazon.com/neurondevice"
# The OS and daemons keep part of an instance's memory; ask for 96% of it.
_AWS_GiB = int(GiB * 0.96)

# instance type -> (vCPUs, GPUs, memory GiB, devices)
_AWS: dict[str, tuple[int, int, int, dict[str, int]]] = {
    "t3.medium": (2, 0, 4, {}),
    "m5.2xlarge": (8, 0, 32, {}),
    "c5.18xlarge": (72, 0, 144, {}),
    "p3.2xlarge": (8, 1, 61, {}),
    "p3.8xlarge": (32, 4, 244, {}),
    "p3.16xlarge": (64, 8, 488, {}),
    "p3dn.24xlarge": (96, 8, 768, {EFA_DEVICE: 1}),
    "p4d.24xlarge": (96, 8, 1152, {EFA_DEVICE: 4}),
    "p5.48xlarge": (192, 8, 2048, {EFA_DEVICE: 32}),
    "g4dn.xlarge": (4, 1, 16, {}),
    "g4dn.12xlarge": (48, 4, 192, {EFA_DEVICE: 1}),
    "g5.xlarge": (4, 1, 16, {}),
    "g5.2xlarge": (8, 1, 32, {}),
    "g5.4xlarge": (16, 1, 64, {}),
    "g5.12xlarge": (48, 4, 192, {EFA_DEVICE: 1}),
    "g5.48xlarge": (192, 8, 768, {EFA_DEVICE: 1}),
    "trn1.2xlarge": (8, 0, 32, {NEURON_DEVICE: 1}),
    "trn1.32xlarge": (128, 0, 512, {EFA_DEVICE: 8, NEURON_DEVICE: 16}),
}


def _generic_factory(cpu: int, gpu: int, mem: int) -> ResourceFactory:
    return lambda: Resource(cpu=cpu, gpu=gpu, memMB=mem)


def _aws_factory(
    itype: str, cpu: int, gpu: int, mem_gib: int, devices: dict[str, int]
) -> ResourceFactory:
    return lambda: Resource(
        cpu=cpu,
        gpu=gpu,
        memMB=mem_gib * _AWS_GiB,
        capabilities={K8S_ITYPE: itype},
        devices=dict(devices),
    )


def _builtin_factories() -> dict[str, ResourceFactory]:
    factories = {name: _generic_factory(*spec) for name, spec in _GENERIC.items()}
    for itype, (cpu, gpu, mem, devices) in _AWS.items():
        factories[f"aws_{itype}"] = _aws_factory(itype, cpu, gpu, mem, devices)
    return factories


_NULL_NAMES = frozenset({"NULL", "MISSING"})


class _NamedResourceLibrary:
    """Read-only, mapping-like view of every named resource.

    Plugins registered under the entry-point group ``asyncsched.named_resources``
    (name -> zero-argument callable returning a :class:`Resource`) override
    built-ins of the same name. They are discovered on first use and each is
    imported only when its name is looked up.
    """

    def __init__(
        self,
        builtins: dict[str, ResourceFactory],
        group: str = ENTRY_POINT_GROUP,
    ) -> None:
        self._builtins = builtins
        self._group = group
        self._plugins: dict[str, metadata.EntryPoint] | None = None
        self._loaded: dict[str, ResourceFactory] = {}

    def _plugin_entry_points(self) -> dict[str, metadata.EntryPoint]:
        if self._plugins is None:
            eps = metadata.entry_points(group=self._group)
            self._plugins = {ep.name: ep for ep in eps}
        return self._plugins

    def _factory(self, key: str) -> ResourceFactory | None:
        if key in self._loaded:
            return self._loaded[key]
        ep = self._plugin_entry_points().get(key)
        if ep is not None:
            factory: ResourceFactory = ep.load()
            self._loaded[key] = factory
            return factory
        return self._builtins.get(key)

    def names(self) -> list[str]:
        """Sorted names of every registered named resource."""
        return sorted({*self._builtins, *self._plugin_entry_points()})

    def __getitem__(self, key: str) -> Resource:
        if key in _NULL_NAMES:
            return NULL_RESOURCE
        factory = self._factory(key)
        if factory is None:
            raise UnknownNamedResourceError(self._unknown_message(key))
        return factory()

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return key in _NULL_NAMES or self._factory(key) is not None

    def __iter__(self) -> Iterator[str]:
        raise UnsupportedOperationError(
            "named resources are loaded lazily and cannot be iterated;"
            " look names up directly"
        )

    def _unknown_message(self, key: str) -> str:
        names = self.names()
        msg = f"No named resource found for `{key}`."
        close = difflib.get_close_matches(key, names, n=1)
        if close:
            return f"{msg} Did you mean `{close[0]}`?"
        return f"{msg} Registered named resources: {names}"


named_resources = _NamedResourceLibrary(_builtin_factories())
"""Named resources: ``named_resources["gpu.small"]`` returns a fresh Resource."""
