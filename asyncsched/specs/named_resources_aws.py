"""Named resources for AWS EC2 instance types (TorchX's ``named_resources_aws``).

Each ``aws_<family>_<size>()`` returns a fresh :class:`Resource` sized for one
whole instance. Memory is what the instance has minus a tax for the OS and the
node daemons (:data:`MEM_TAX`), so in this module :data:`GiB` is the *taxed*
gibibyte (983 MB), as in TorchX. The instance type is recorded as the
capability :data:`K8S_ITYPE` (Kubernetes' well-known node label) and EFA or
Neuron devices under their device-plugin names.

Every factory is registered in :data:`asyncsched.specs.named_resources` under
``"aws_<instance type>"``.

Example:
    >>> from asyncsched.specs import named_resources
    >>> named_resources["aws_p4d.24xlarge"].devices
    {'vpc.amazonaws.com/efa': 4}
    >>> aws_g5_4xlarge().capabilities[K8S_ITYPE]
    'g5.4xlarge'
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

from asyncsched.errors import AsyncschedWarning
from asyncsched.specs.resources import (
    EFA_DEVICE,
    K8S_ITYPE,
    NEURON_DEVICE,
    Resource,
)

__all__ = [
    "EFA_DEVICE",
    "GiB",
    "K8S_ITYPE",
    "MEM_TAX",
    "NAMED_RESOURCES",
    "NEURON_DEVICE",
    "aws_g4dn_12xlarge",
    "aws_g4dn_16xlarge",
    "aws_g4dn_2xlarge",
    "aws_g4dn_4xlarge",
    "aws_g4dn_8xlarge",
    "aws_g4dn_metal",
    "aws_g4dn_xlarge",
    "aws_g5_12xlarge",
    "aws_g5_16xlarge",
    "aws_g5_24xlarge",
    "aws_g5_2xlarge",
    "aws_g5_48xlarge",
    "aws_g5_4xlarge",
    "aws_g5_8xlarge",
    "aws_g5_xlarge",
    "aws_m5_2xlarge",
    "aws_p3_16xlarge",
    "aws_p3_2xlarge",
    "aws_p3_8xlarge",
    "aws_p3dn_24xlarge",
    "aws_p4d_24xlarge",
    "aws_p4de_24xlarge",
    "aws_p5_48xlarge",
    "aws_t3_medium",
    "aws_trn1_2xlarge",
    "aws_trn1_32xlarge",
    "instance_type_from_resource",
]

MEM_TAX: float = 0.96
"""Share of an instance's memory a replica may ask for (the rest is the OS's)."""

GiB: int = int(1024 * MEM_TAX)
"""A taxed gibibyte in ``memMB`` units (983); use it for instance sizes only."""


def instance_type_from_resource(resource: Resource) -> str | None:
    """The instance type a resource asks for, or ``None`` (with a warning).

    Example:
        >>> instance_type_from_resource(aws_t3_medium())
        't3.medium'
    """
    instance_type = resource.capabilities.get(K8S_ITYPE)
    if instance_type is None:
        warnings.warn(
            f"the resource has no {K8S_ITYPE!r} capability, so its instance type"
            " is unknown; multi-node jobs on mixed instance types may misbehave."
            " Use an aws_* named resource or set the capability.",
            AsyncschedWarning,
            stacklevel=2,
        )
        return None
    return str(instance_type)


# instance type -> (cpu, gpu, memory in taxed GiB, EFA devices, Neuron devices),
# in TorchX's order
_INSTANCES: dict[str, tuple[int, int, int, int, int]] = {
    "t3.medium": (2, 0, 4, 0, 0),
    "m5.2xlarge": (8, 0, 32, 0, 0),
    "p3.2xlarge": (8, 1, 61, 0, 0),
    "p3.8xlarge": (32, 4, 244, 0, 0),
    "p3.16xlarge": (64, 8, 488, 0, 0),
    "p3dn.24xlarge": (96, 8, 768, 1, 0),
    "p4d.24xlarge": (96, 8, 1152, 4, 0),
    "p4de.24xlarge": (96, 8, 1152, 4, 0),
    "p5.48xlarge": (192, 8, 2048, 32, 0),
    "g4dn.xlarge": (4, 1, 16, 0, 0),
    "g4dn.2xlarge": (8, 1, 32, 0, 0),
    "g4dn.4xlarge": (16, 1, 64, 0, 0),
    "g4dn.8xlarge": (32, 1, 128, 1, 0),
    "g4dn.16xlarge": (64, 1, 256, 1, 0),
    "g4dn.12xlarge": (48, 4, 192, 1, 0),
    "g4dn.metal": (96, 8, 384, 1, 0),
    "g5.xlarge": (4, 1, 16, 0, 0),
    "g5.2xlarge": (8, 1, 32, 0, 0),
    "g5.4xlarge": (16, 1, 64, 0, 0),
    "g5.8xlarge": (32, 1, 128, 1, 0),
    "g5.16xlarge": (64, 1, 256, 1, 0),
    "g5.12xlarge": (48, 4, 192, 1, 0),
    "g5.24xlarge": (96, 4, 384, 1, 0),
    "g5.48xlarge": (192, 8, 768, 1, 0),
    "trn1.2xlarge": (8, 0, 32, 0, 1),
    "trn1.32xlarge": (128, 0, 512, 8, 16),
}


def _factory(itype: str) -> Callable[[], Resource]:
    """The ``aws_<family>_<size>`` factory of one instance type: a fresh
    :class:`Resource` a call."""
    cpu, gpu, mem_gib, efa, neuron = _INSTANCES[itype]
    devices = {EFA_DEVICE: efa, NEURON_DEVICE: neuron}

    def instance() -> Resource:
        return Resource(
            cpu=cpu,
            gpu=gpu,
            memMB=mem_gib * GiB,
            capabilities={K8S_ITYPE: itype},
            devices={name: n for name, n in devices.items() if n},
        )

    instance.__name__ = instance.__qualname__ = "aws_" + itype.replace(".", "_")
    instance.__doc__ = f"One whole ``{itype}`` instance."
    return instance


NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    f"aws_{itype}": _factory(itype) for itype in _INSTANCES
}
"""``"aws_<instance type>"`` -> factory, in TorchX's order."""

aws_t3_medium = NAMED_RESOURCES["aws_t3.medium"]
aws_m5_2xlarge = NAMED_RESOURCES["aws_m5.2xlarge"]
aws_p3_2xlarge = NAMED_RESOURCES["aws_p3.2xlarge"]
aws_p3_8xlarge = NAMED_RESOURCES["aws_p3.8xlarge"]
aws_p3_16xlarge = NAMED_RESOURCES["aws_p3.16xlarge"]
aws_p3dn_24xlarge = NAMED_RESOURCES["aws_p3dn.24xlarge"]
aws_p4d_24xlarge = NAMED_RESOURCES["aws_p4d.24xlarge"]
aws_p4de_24xlarge = NAMED_RESOURCES["aws_p4de.24xlarge"]
aws_p5_48xlarge = NAMED_RESOURCES["aws_p5.48xlarge"]
aws_g4dn_xlarge = NAMED_RESOURCES["aws_g4dn.xlarge"]
aws_g4dn_2xlarge = NAMED_RESOURCES["aws_g4dn.2xlarge"]
aws_g4dn_4xlarge = NAMED_RESOURCES["aws_g4dn.4xlarge"]
aws_g4dn_8xlarge = NAMED_RESOURCES["aws_g4dn.8xlarge"]
aws_g4dn_16xlarge = NAMED_RESOURCES["aws_g4dn.16xlarge"]
aws_g4dn_12xlarge = NAMED_RESOURCES["aws_g4dn.12xlarge"]
aws_g4dn_metal = NAMED_RESOURCES["aws_g4dn.metal"]
aws_g5_xlarge = NAMED_RESOURCES["aws_g5.xlarge"]
aws_g5_2xlarge = NAMED_RESOURCES["aws_g5.2xlarge"]
aws_g5_4xlarge = NAMED_RESOURCES["aws_g5.4xlarge"]
aws_g5_8xlarge = NAMED_RESOURCES["aws_g5.8xlarge"]
aws_g5_16xlarge = NAMED_RESOURCES["aws_g5.16xlarge"]
aws_g5_12xlarge = NAMED_RESOURCES["aws_g5.12xlarge"]
aws_g5_24xlarge = NAMED_RESOURCES["aws_g5.24xlarge"]
aws_g5_48xlarge = NAMED_RESOURCES["aws_g5.48xlarge"]
aws_trn1_2xlarge = NAMED_RESOURCES["aws_trn1.2xlarge"]
aws_trn1_32xlarge = NAMED_RESOURCES["aws_trn1.32xlarge"]
