"""Host device mounts for named devices (TorchX's ``schedulers.devices``).

``Resource.devices`` names devices by their device-plugin name and count;
container backends without device plugins mount the matching host device
files instead: ``vpc.amazonaws.com/efa: N`` gives ``/dev/infiniband/uverbs0``
... ``uverbs{N-1}``, ``aws.amazon.com/neurondevice: N`` gives ``/dev/neuron0``
... ``neuron{N-1}``, each mounted at the same path with ``rwm`` permissions.

Example:
    >>> [m.src_path for m in get_device_mounts({"vpc.amazonaws.com/efa": 2})]
    ['/dev/infiniband/uverbs0', '/dev/infiniband/uverbs1']
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

from asyncsched.errors import AsyncschedWarning
from asyncsched.specs import DeviceMount
from asyncsched.specs.resources import EFA_DEVICE, NEURON_DEVICE

__all__ = [
    "DEVICES",
    "efa_to_devicemounts",
    "get_device_mounts",
    "neuron_to_devicemounts",
    "to_devicemounts",
]


def to_devicemounts(num_devices: int, device_type: str) -> list[DeviceMount]:
    """``num_devices`` mounts of ``<device_type><i>`` onto the same path."""
    return [
        DeviceMount(src_path=f"{device_type}{i}", dst_path=f"{device_type}{i}")
        for i in range(num_devices)
    ]


def efa_to_devicemounts(num_devices: int) -> list[DeviceMount]:
    """EFA interfaces: ``/dev/infiniband/uverbs<i>``."""
    return to_devicemounts(num_devices, "/dev/infiniband/uverbs")


def neuron_to_devicemounts(num_devices: int) -> list[DeviceMount]:
    """Neuron devices: ``/dev/neuron<i>``."""
    return to_devicemounts(num_devices, "/dev/neuron")


DEVICES: Mapping[str, Callable[[int], list[DeviceMount]]] = {
    EFA_DEVICE: efa_to_devicemounts,
    NEURON_DEVICE: neuron_to_devicemounts,
}
"""Device name -> function giving the mounts for a count."""


def get_device_mounts(devices: Mapping[str, int]) -> list[DeviceMount]:
    """The host device mounts for ``devices`` (name -> count), in their order.

    An unknown device name is skipped with an :class:`AsyncschedWarning`.
    """
    mounts: list[DeviceMount] = []
    for name, count in devices.items():
        to_mounts = DEVICES.get(name)
        if to_mounts is None:
            warnings.warn(
                f"Could not find named device: {name}; it is not mounted",
                AsyncschedWarning,
                stacklevel=2,
            )
            continue
        mounts.extend(to_mounts(count))
    return mounts
