"""The operating system an EC2NodeClass's AMI family gives its nodes, and instance types as that OS sees them.

As in Karpenter, the OS is not a property of the instance type but of the AMI family: with a Windows
family every amd64 type is ``kubernetes.io/os=windows`` with that release's
``node.kubernetes.io/windows-build``, arm64 types run no Windows, and the kubelet runs 110 pods at most
(no ENI-limited pod density) with ``vpc.amazonaws.com/PrivateIPv4Address`` addresses for them (the VPC
resource controller gives Windows pods one each: the primary interface's addresses but its own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fleetwright.catalog.loader import vpc_limits
from fleetwright.model import labels as wk
from fleetwright.model.allocatable import allocatable_for
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.quantity import EPHEMERAL_STORAGE, PODS

LINUX = "linux"
WINDOWS = "windows"
PRIVATE_IPV4_ADDRESS = "vpc.amazonaws.com/PrivateIPv4Address"
WINDOWS_MAX_PODS = 110
WINDOWS_ROOT_VOLUME = 50 * 2**30  # the Windows AMIs' default root volume (/dev/sda1)

# Karpenter's Windows families: the Windows Server release and its build number.
WINDOWS_RELEASES = {
    "windows2019": ("2019", "10.0.17763"),
    "windows2022": ("2022", "10.0.20348"),
    "windows2025": ("2025", "10.0.26100"),
}


def is_windows(family: str) -> bool:
    """True for ``Windows2019``, ``Windows2022`` and ``Windows2025``."""
    return family.lower() in WINDOWS_RELEASES


def windows_build(family: str) -> str | None:
    """The ``node.kubernetes.io/windows-build`` of a Windows family (None for the others)."""
    release = WINDOWS_RELEASES.get(family.lower())
    return release[1] if release else None


def os_labels(family: str) -> dict[str, str]:
    """The OS labels every node of this family carries (``kubernetes.io/os``, and the Windows build)."""
    build = windows_build(family)
    if build is None:
        return {wk.OS: LINUX}
    return {wk.OS: WINDOWS, wk.WINDOWS_BUILD: build}


def as_windows(instance_type: InstanceType, build: str) -> InstanceType | None:
    """``instance_type`` running Windows ``build``; None when it cannot (arm64)."""
    if instance_type.labels.get(wk.ARCH, "amd64") != "amd64":
        return None
    labels = {**instance_type.labels, wk.OS: WINDOWS, wk.WINDOWS_BUILD: build}
    if instance_type.explicit_allocatable:
        return dataclasses.replace(instance_type, labels=labels)
    capacity = dict(instance_type.capacity)
    capacity[PODS] = WINDOWS_MAX_PODS
    capacity[EPHEMERAL_STORAGE] = WINDOWS_ROOT_VOLUME
    limits = vpc_limits().get(instance_type.name)
    ipv4_per_interface = (
        instance_type.eni_limits[1] if instance_type.eni_limits else (limits or {}).get("ipv4_per_interface")
    )
    if ipv4_per_interface:
        capacity[PRIVATE_IPV4_ADDRESS] = int(ipv4_per_interface) - 1
    return dataclasses.replace(
        instance_type,
        labels=labels,
        capacity=capacity,
        allocatable=allocatable_for(capacity, None, None, arch="amd64"),
        eni_limits=None,  # pods no longer follow the ENI limits
    )


def for_ami_family(types: Sequence[InstanceType], family: str) -> list[InstanceType]:
    """``types`` as nodes of ``family`` boot them: unchanged for Linux families, Windows views (arm64
    types left out) for Windows ones. The views of the last catalog seen per build are kept (reused only
    while it holds the very same type objects): simulations prepare the same NodePools over the same
    catalog many times."""
    build = windows_build(family)
    if build is None:
        return list(types)
    cached = _VIEWS.get(build)
    if cached is not None and _same_items(cached[0], types):
        return list(cached[1])
    result = []
    for item in types:
        windows = as_windows(item, build)
        if windows is not None:
            result.append(windows)
    _VIEWS[build] = (tuple(types), result)
    return list(result)


def _same_items(seen: Sequence[InstanceType], types: Sequence[InstanceType]) -> bool:
    """True when ``types`` holds exactly the objects ``seen`` held, in order (a catalog refreshed or
    edited in place is recomputed)."""
    return len(seen) == len(types) and all(a is b for a, b in zip(seen, types, strict=True))


_VIEWS: dict[str, tuple[tuple[InstanceType, ...], list[InstanceType]]] = {}
