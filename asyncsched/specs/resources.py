"""Resource requests (cpu, gpu, memory) and the library of named resources.

Example:
    >>> from asyncsched.specs import named_resources, resource
    >>> resource(cpu=4).cpu
    4
    >>> named_resources["gpu.small"].gpu
    1
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asyncsched.errors import UnknownNamedResourceError, UnsupportedOperationError

from ._copying import copy_instance

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "EFA_DEVICE",
    "ENTRY_POINT_GROUP",
    "GiB",
    "K8S_ITYPE",
    "NEURON_DEVICE",
    "NULL_RESOURCE",
    "Resource",
    "ResourceFactory",
    "get_named_resources",
    "named_resources",
    "resource",
]

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

    def __deepcopy__(self, memo: dict[int, Any]) -> Resource:
        return copy_instance(self, memo)

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


# -- capability and device keys ------------------------------------------------

K8S_ITYPE = "node.kubernetes.io/instance-type"
"""Capability key naming the instance type (Kubernetes' well-known node label)."""
EFA_DEVICE = "vpc.amazonaws.com/efa"
"""Device name of AWS Elastic Fabric Adapter interfaces (``Resource.devices``)."""
NEURON_DEVICE = "aws.amazon.com/neurondevice"
"""Device name of AWS Neuron (Trainium/Inferentia) devices (``Resource.devices``)."""


def _builtin_factories() -> dict[str, ResourceFactory]:
    """Generic, then AWS named resources (later sources win by name, as in TorchX)."""
    # imported here: both modules import Resource from this one
    from asyncsched.specs.named_resources_aws import NAMED_RESOURCES as AWS
    from asyncsched.specs.named_resources_generic import NAMED_RESOURCES as GENERIC

    return {**GENERIC, **AWS}


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
        builtins: Mapping[str, ResourceFactory]
        | Callable[[], Mapping[str, ResourceFactory]],
        group: str = ENTRY_POINT_GROUP,
    ) -> None:
        self._builtins_source = builtins
        self._builtins_loaded: Mapping[str, ResourceFactory] | None = None
        self._group = group
        self._plugins: dict[str, EntryPoint] | None = None
        self._loaded: dict[str, ResourceFactory] = {}

    @property
    def _builtins(self) -> Mapping[str, ResourceFactory]:
        if self._builtins_loaded is None:
            source = self._builtins_source
            self._builtins_loaded = source if isinstance(source, Mapping) else source()
        return self._builtins_loaded

    def _plugin_entry_points(self) -> dict[str, EntryPoint]:
        if self._plugins is None:
            from importlib.metadata import entry_points  # slow to import

            eps = entry_points(group=self._group)
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
        import difflib  # only for this error's hint

        close = difflib.get_close_matches(key, names, n=1)
        if close:
            return f"{msg} Did you mean `{close[0]}`?"
        return f"{msg} Registered named resources: {names}"


named_resources = _NamedResourceLibrary(_builtin_factories)
"""Named resources: ``named_resources["gpu.small"]`` returns a fresh Resource."""


def get_named_resources(res: str) -> Resource:
    """TorchX's function form of ``named_resources[res]``.

    Example:
        >>> get_named_resources("cpu.small").memMB
        2048
    """
    return named_resources[res]
