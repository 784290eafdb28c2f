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


def _instance(
    itype: str,
    *,
    cpu: int,
    gpu: int,
    mem_gib: int,
    devices: dict[str, int] | None = None,
) -> Resource:
    return Resource(
        cpu=cpu,
        gpu=gpu,
        memMB=mem_gib * GiB,
        capabilities={K8S_ITYPE: itype},
        devices=dict(devices or {}),
    )


def aws_t3_medium() -> Resource:
    return _instance("t3.medium", cpu=2, gpu=0, mem_gib=4)


def aws_m5_2xlarge() -> Resource:
    return _instance("m5.2xlarge", cpu=8, gpu=0, mem_gib=32)


def aws_p3_2xlarge() -> Resource:
    return _instance("p3.2xlarge", cpu=8, gpu=1, mem_gib=61)


def aws_p3_8xlarge() -> Resource:
    return _instance("p3.8xlarge", cpu=32, gpu=4, mem_gib=244)


def aws_p3_16xlarge() -> Resource:
    return _instance("p3.16xlarge", cpu=64, gpu=8, mem_gib=488)


def aws_p3dn_24xlarge() -> Resource:
    return _instance(
        "p3dn.24xlarge", cpu=96, gpu=8, mem_gib=768, devices={EFA_DEVICE: 1}
    )


def aws_p4d_24xlarge() -> Resource:
    return _instance(
        "p4d.24xlarge", cpu=96, gpu=8, mem_gib=1152, devices={EFA_DEVICE: 4}
    )


def aws_p4de_24xlarge() -> Resource:
    return _instance(
        "p4de.24xlarge", cpu=96, gpu=8, mem_gib=1152, devices={EFA_DEVICE: 4}
    )


def aws_p5_48xlarge() -> Resource:
    return _instance(
        "p5.48xlarge", cpu=192, gpu=8, mem_gib=2048, devices={EFA_DEVICE: 32}
    )


def aws_g4dn_xlarge() -> Resource:
    return _instance("g4dn.xlarge", cpu=4, gpu=1, mem_gib=16)


def aws_g4dn_2xlarge() -> Resource:
    return _instance("g4dn.2xlarge", cpu=8, gpu=1, mem_gib=32)


def aws_g4dn_4xlarge() -> Resource:
    return _instance("g4dn.4xlarge", cpu=16, gpu=1, mem_gib=64)


def aws_g4dn_8xlarge() -> Resource:
    return _instance(
        "g4dn.8xlarge", cpu=32, gpu=1, mem_gib=128, devices={EFA_DEVICE: 1}
    )


def aws_g4dn_16xlarge() -> Resource:
    return _instance(
        "g4dn.16xlarge", cpu=64, gpu=1, mem_gib=256, devices={EFA_DEVICE: 1}
    )


def aws_g4dn_12xlarge() -> Resource:
    return _instance(
        "g4dn.12xlarge", cpu=48, gpu=4, mem_gib=192, devices={EFA_DEVICE: 1}
    )


def aws_g4dn_metal() -> Resource:
    return _instance("g4dn.metal", cpu=96, gpu=8, mem_gib=384, devices={EFA_DEVICE: 1})


def aws_g5_xlarge() -> Resource:
    return _instance("g5.xlarge", cpu=4, gpu=1, mem_gib=16)


def aws_g5_2xlarge() -> Resource:
    return _instance("g5.2xlarge", cpu=8, gpu=1, mem_gib=32)


def aws_g5_4xlarge() -> Resource:
    return _instance("g5.4xlarge", cpu=16, gpu=1, mem_gib=64)


def aws_g5_8xlarge() -> Resource:
    return _instance("g5.8xlarge", cpu=32, gpu=1, mem_gib=128, devices={EFA_DEVICE: 1})


def aws_g5_16xlarge() -> Resource:
    return _instance("g5.16xlarge", cpu=64, gpu=1, mem_gib=256, devices={EFA_DEVICE: 1})


def aws_g5_12xlarge() -> Resource:
    return _instance("g5.12xlarge", cpu=48, gpu=4, mem_gib=192, devices={EFA_DEVICE: 1})


def aws_g5_24xlarge() -> Resource:
    return _instance("g5.24xlarge", cpu=96, gpu=4, mem_gib=384, devices={EFA_DEVICE: 1})


def aws_g5_48xlarge() -> Resource:
    return _instance(
        "g5.48xlarge", cpu=192, gpu=8, mem_gib=768, devices={EFA_DEVICE: 1}
    )


def aws_trn1_2xlarge() -> Resource:
    return _instance(
        "trn1.2xlarge", cpu=8, gpu=0, mem_gib=32, devices={NEURON_DEVICE: 1}
    )


def aws_trn1_32xlarge() -> Resource:
    return _instance(
        "trn1.32xlarge",
        cpu=128,
        gpu=0,
        mem_gib=512,
        devices={EFA_DEVICE: 8, NEURON_DEVICE: 16},
    )


NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    "aws_t3.medium": aws_t3_medium,
    "aws_m5.2xlarge": aws_m5_2xlarge,
    "aws_p3.2xlarge": aws_p3_2xlarge,
    "aws_p3.8xlarge": aws_p3_8xlarge,
    "aws_p3.16xlarge": aws_p3_16xlarge,
    "aws_p3dn.24xlarge": aws_p3dn_24xlarge,
    "aws_p4d.24xlarge": aws_p4d_24xlarge,
    "aws_p4de.24xlarge": aws_p4de_24xlarge,
    "aws_p5.48xlarge": aws_p5_48xlarge,
    "aws_g4dn.xlarge": aws_g4dn_xlarge,
    "aws_g4dn.2xlarge": aws_g4dn_2xlarge,
    "aws_g4dn.4xlarge": aws_g4dn_4xlarge,
    "aws_g4dn.8xlarge": aws_g4dn_8xlarge,
    "aws_g4dn.16xlarge": aws_g4dn_16xlarge,
    "aws_g4dn.12xlarge": aws_g4dn_12xlarge,
    "aws_g4dn.metal": aws_g4dn_metal,
    "aws_g5.xlarge": aws_g5_xlarge,
    "aws_g5.2xlarge": aws_g5_2xlarge,
    "aws_g5.4xlarge": aws_g5_4xlarge,
    "aws_g5.8xlarge": aws_g5_8xlarge,
    "aws_g5.16xlarge": aws_g5_16xlarge,
    "aws_g5.12xlarge": aws_g5_12xlarge,
    "aws_g5.24xlarge": aws_g5_24xlarge,
    "aws_g5.48xlarge": aws_g5_48xlarge,
    "aws_trn1.2xlarge": aws_trn1_2xlarge,
    "aws_trn1.32xlarge": aws_trn1_32xlarge,
}
"""``"aws_<instance type>"`` -> factory, in TorchX's order."""
