"""AWS named resources have TorchX 0.7's names and values, at its module path.

The expected table was generated once from ``torchx==0.7.0``'s
``torchx.specs.named_resources_aws.NAMED_RESOURCES``; the values are the spec.
"""

from __future__ import annotations

import pytest

import asyncsched.specs.named_resources_aws as aws
from asyncsched.errors import AsyncschedWarning
from asyncsched.specs import Resource, get_named_resources, named_resources, resource

# name: (factory, cpu, gpu, memMB, instance type, devices); from TorchX 0.7.0
TORCHX_0_7_AWS: dict[str, tuple[str, int, int, int, str, dict[str, int]]] = {
    "aws_t3.medium": ("aws_t3_medium", 2, 0, 3932, "t3.medium", {}),
    "aws_m5.2xlarge": ("aws_m5_2xlarge", 8, 0, 31456, "m5.2xlarge", {}),
    "aws_p3.2xlarge": ("aws_p3_2xlarge", 8, 1, 59963, "p3.2xlarge", {}),
    "aws_p3.8xlarge": ("aws_p3_8xlarge", 32, 4, 239852, "p3.8xlarge", {}),
    "aws_p3.16xlarge": ("aws_p3_16xlarge", 64, 8, 479704, "p3.16xlarge", {}),
    "aws_p3dn.24xlarge": (
        "aws_p3dn_24xlarge",
        96,
        8,
        754944,
        "p3dn.24xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_p4d.24xlarge": (
        "aws_p4d_24xlarge",
        96,
        8,
        1132416,
        "p4d.24xlarge",
        {"vpc.amazonaws.com/efa": 4},
    ),
    "aws_p4de.24xlarge": (
        "aws_p4de_24xlarge",
        96,
        8,
        1132416,
        "p4de.24xlarge",
        {"vpc.amazonaws.com/efa": 4},
    ),
    "aws_p5.48xlarge": (
        "aws_p5_48xlarge",
        192,
        8,
        2013184,
        "p5.48xlarge",
        {"vpc.amazonaws.com/efa": 32},
    ),
    "aws_g4dn.xlarge": ("aws_g4dn_xlarge", 4, 1, 15728, "g4dn.xlarge", {}),
    "aws_g4dn.2xlarge": ("aws_g4dn_2xlarge", 8, 1, 31456, "g4dn.2xlarge", {}),
    "aws_g4dn.4xlarge": ("aws_g4dn_4xlarge", 16, 1, 62912, "g4dn.4xlarge", {}),
    "aws_g4dn.8xlarge": (
        "aws_g4dn_8xlarge",
        32,
        1,
        125824,
        "g4dn.8xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g4dn.16xlarge": (
        "aws_g4dn_16xlarge",
        64,
        1,
        251648,
        "g4dn.16xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g4dn.12xlarge": (
        "aws_g4dn_12xlarge",
        48,
        4,
        188736,
        "g4dn.12xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g4dn.metal": (
        "aws_g4dn_metal",
        96,
        8,
        377472,
        "g4dn.metal",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g5.xlarge": ("aws_g5_xlarge", 4, 1, 15728, "g5.xlarge", {}),
    "aws_g5.2xlarge": ("aws_g5_2xlarge", 8, 1, 31456, "g5.2xlarge", {}),
    "aws_g5.4xlarge": ("aws_g5_4xlarge", 16, 1, 62912, "g5.4xlarge", {}),
    "aws_g5.8xlarge": (
        "aws_g5_8xlarge",
        32,
        1,
        125824,
        "g5.8xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g5.16xlarge": (
        "aws_g5_16xlarge",
        64,
        1,
        251648,
        "g5.16xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g5.12xlarge": (
        "aws_g5_12xlarge",
        48,
        4,
        188736,
        "g5.12xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g5.24xlarge": (
        "aws_g5_24xlarge",
        96,
        4,
        377472,
        "g5.24xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_g5.48xlarge": (
        "aws_g5_48xlarge",
        192,
        8,
        754944,
        "g5.48xlarge",
        {"vpc.amazonaws.com/efa": 1},
    ),
    "aws_trn1.2xlarge": (
        "aws_trn1_2xlarge",
        8,
        0,
        31456,
        "trn1.2xlarge",
        {"aws.amazon.com/neurondevice": 1},
    ),
    "aws_trn1.32xlarge": (
        "aws_trn1_32xlarge",
        128,
        0,
        503296,
        "trn1.32xlarge",
        {"vpc.amazonaws.com/efa": 8, "aws.amazon.com/neurondevice": 16},
    ),
}


def test_module_lists_exactly_torchx_names_in_torchx_order() -> None:
    assert list(aws.NAMED_RESOURCES) == list(TORCHX_0_7_AWS)


def test_constants_match_torchx() -> None:
    assert aws.MEM_TAX == 0.96
    assert aws.GiB == 983
    assert aws.K8S_ITYPE == "node.kubernetes.io/instance-type"
    assert aws.EFA_DEVICE == "vpc.amazonaws.com/efa"
    assert aws.NEURON_DEVICE == "aws.amazon.com/neurondevice"


@pytest.mark.parametrize("name", list(TORCHX_0_7_AWS))
def test_factory_and_library_give_torchx_values(name: str) -> None:
    func_name, cpu, gpu, mem, itype, devices = TORCHX_0_7_AWS[name]
    expected = Resource(
        cpu=cpu,
        gpu=gpu,
        memMB=mem,
        capabilities={aws.K8S_ITYPE: itype},
        devices=devices,
    )
    factory = getattr(aws, func_name)
    assert aws.NAMED_RESOURCES[name] is factory
    assert factory() == expected
    assert named_resources[name] == expected
    assert resource(h=name) == expected
    assert get_named_resources(name) == expected
    assert name in named_resources


def test_factories_return_fresh_objects() -> None:
    first = aws.aws_p4d_24xlarge()
    first.devices[aws.EFA_DEVICE] = 0
    first.capabilities.clear()
    assert aws.aws_p4d_24xlarge().devices == {aws.EFA_DEVICE: 4}
    assert named_resources["aws_p4d.24xlarge"].capabilities == {
        aws.K8S_ITYPE: "p4d.24xlarge"
    }


def test_instance_type_from_resource_reads_the_capability() -> None:
    assert aws.instance_type_from_resource(aws.aws_g5_8xlarge()) == "g5.8xlarge"


def test_instance_type_from_resource_warns_when_unknown() -> None:
    with pytest.warns(AsyncschedWarning, match="instance type"):
        assert aws.instance_type_from_resource(Resource(cpu=1, gpu=0, memMB=1)) is None
