"""What one node costs per hour, all of it: the instance, its EBS volumes, its public IPv4 address and,
on burstable types, the CPU credits its pods' requests spend above the type's baseline.

One model for every user of a node's cost: the scheduler's packing objective
(``fleetwright.scheduling.costs``), consolidation's savings, ``fleetwright plan``'s columns and offline
simulators, which call :func:`node_bill` per node. The prices, with their sources and dates, are in
``data/node-costs.json`` (``data/README.md``); ``docs/scheduling.md`` ("The node bill") explains the rules.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fleetwright.catalog.os_family import is_windows
from fleetwright.model.ec2nodeclass import BlockDeviceMapping, EC2NodeClass

NODE_COSTS_FILE = Path(__file__).resolve().parent / "data" / "node-costs.json"
HOURS_PER_MONTH = 730  # AWS's convention for monthly prices
DEFAULT_REGION = "us-east-1"
GIB = 2**30
DEFAULT_ROOT_GIB = 20  # Karpenter's root volume for AL2, AL2023 and Custom, and Bottlerocket's data volume
BOTTLEROCKET_OS_GIB = 4
WINDOWS_ROOT_GIB = 50


@dataclass(frozen=True, slots=True)
class Volume:
    """One EBS volume a node is launched with: type, size in GiB, provisioned IOPS and MiB/s (None: the
    type's baseline)."""

    volume_type: str = "gp3"
    size_gib: int = DEFAULT_ROOT_GIB
    iops: int | None = None
    throughput: int | None = None


@dataclass(frozen=True, slots=True)
class NodeClassView:
    """What of an EC2NodeClass (and its subnets) a node's bill depends on: its volumes, whether it gets a
    public IPv4 address, and the region whose prices apply."""

    volumes: tuple[Volume, ...] = (Volume(),)
    public_ipv4: bool = False
    region: str = DEFAULT_REGION

    def volumes_per_hour(self) -> float:
        """USD per hour of the volumes."""
        return _volumes_per_hour(self.volumes, self.region)

    def address_per_hour(self) -> float:
        """USD per hour of the public IPv4 address (0 without one)."""
        return public_ipv4_per_hour() if self.public_ipv4 else 0.0

    def fixed_per_hour(self) -> float:
        """What every node of this class costs beyond its instance and credits, USD per hour."""
        return self.volumes_per_hour() + self.address_per_hour()


DEFAULT_VIEW = NodeClassView()


@dataclass(frozen=True, slots=True)
class Burst:
    """A burstable type's CPU credits: the CPU it runs on its own credits (``baseline`` millicores, the
    credits it earns per hour / 60) and the price of each vCPU-hour above it (surplus credits)."""

    baseline: float
    rate: float  # USD per vCPU-hour

    def credits(self, cpu_millicores: float) -> float:
        """USD per hour of surplus credits when the node's pods use ``cpu_millicores`` all the time."""
        return self.rate * max(0.0, cpu_millicores - self.baseline) / 1000


@dataclass(frozen=True, slots=True)
class NodeBill:
    """One node's hourly bill in USD, by part."""

    instance: float
    volumes: float = 0.0
    address: float = 0.0
    credits: float = 0.0

    @property
    def total(self) -> float:
        """The whole hourly bill."""
        return self.instance + self.volumes + self.address + self.credits

    def __add__(self, other: NodeBill) -> NodeBill:
        return NodeBill(
            self.instance + other.instance,
            self.volumes + other.volumes,
            self.address + other.address,
            self.credits + other.credits,
        )


ZERO_BILL = NodeBill(0.0)


@cache
def _data() -> dict[str, Any]:
    with NODE_COSTS_FILE.open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def ebs_prices_known(region: str) -> bool:
    """True when the price table has the region's EBS prices (otherwise us-east-1's are used)."""
    return region in _data()["ebs"]


def _ebs(region: str, volume_type: str) -> dict[str, Any]:
    table = _data()["ebs"]
    prices: dict[str, Any] = table.get(region, table[DEFAULT_REGION])
    if volume_type not in prices:
        raise ValueError(f"no EBS price for volume type {volume_type!r}")
    return dict(prices[volume_type])


def _io2_iops_month(iops: int, tiers: Sequence[Sequence[Any]]) -> float:
    """io2's provisioned IOPS are priced in tiers (up to 32,000, up to 64,000, above)."""
    cost, below = 0.0, 0
    for upper, price in tiers:
        top = iops if upper is None else min(iops, int(upper))
        if top > below:
            cost += (top - below) * float(price)
            below = top
    return cost


def volume_per_hour(volume: Volume, region: str = DEFAULT_REGION) -> float:
    """USD per hour of one volume: storage per GB-month (EBS sizes are GiB, billed as "GB"), plus
    provisioned IOPS (io1, io2; gp3 above 3,000) and throughput (gp3 above 125 MiB/s)."""
    prices = _ebs(region, volume.volume_type)
    monthly = volume.size_gib * float(prices["gbMonth"])
    iops = volume.iops or 0
    if "freeIops" in prices:
        monthly += max(0, iops - int(prices["freeIops"])) * float(prices["iopsMonth"])
        monthly += max(0, (volume.throughput or 0) - int(prices["freeThroughput"])) * float(
            prices["throughputMonth"]
        )
    elif "iopsTiers" in prices:
        monthly += _io2_iops_month(iops, prices["iopsTiers"])
    elif "iopsMonth" in prices:
        monthly += iops * float(prices["iopsMonth"])
    return monthly / HOURS_PER_MONTH


@cache
def _volumes_per_hour(volumes: tuple[Volume, ...], region: str) -> float:
    return sum(volume_per_hour(v, region) for v in volumes)


def public_ipv4_per_hour() -> float:
    """USD per hour of one public IPv4 address (every region)."""
    return float(_data()["publicIpv4PerHour"])


@cache
def burst(instance_type: str) -> Burst | None:
    """The type's CPU credits when it is burstable (T2, T3, T3a, T4g), else None."""
    earned = _data()["creditsEarnedPerHour"].get(instance_type)
    if earned is None:
        return None
    family = instance_type.split(".", 1)[0]
    return Burst(baseline=float(earned) / 60 * 1000, rate=float(_data()["surplusCreditsPerVcpuHour"][family]))


def default_volumes(ami_family: str) -> tuple[Volume, ...]:
    """The volumes a node gets when its EC2NodeClass has no ``blockDeviceMappings`` (Karpenter's
    defaults, as the launch template sets them): a 20 GiB gp3 root volume; Bottlerocket's 4 GiB OS
    volume and 20 GiB data volume; Windows' 50 GiB root volume."""
    if is_windows(ami_family):
        return (Volume(size_gib=WINDOWS_ROOT_GIB),)
    if ami_family.lower() == "bottlerocket":
        return (Volume(size_gib=BOTTLEROCKET_OS_GIB), Volume())
    return (Volume(),)


def _volume(mapping: BlockDeviceMapping) -> Volume | None:
    """The EBS volume of one mapping (None for a mapping without EBS). A size left to the snapshot
    counts 20 GiB, a type left to the AMI counts as gp3 (the EKS AMIs' root volume type)."""
    ebs = mapping.ebs
    if ebs is None:
        return None
    size = ebs.volume_size_bytes()
    return Volume(
        volume_type=ebs.volume_type or "gp3",
        size_gib=math.ceil(size / GIB) if size else DEFAULT_ROOT_GIB,
        iops=ebs.iops,
        throughput=ebs.throughput,
    )


def node_class_view(
    nodeclass: EC2NodeClass | None, region: str = DEFAULT_REGION, subnets_public: bool = False
) -> NodeClassView:
    """The bill's view of an EC2NodeClass: its ``blockDeviceMappings`` (else its AMI family's defaults)
    and a public IPv4 address when ``associatePublicIPAddress`` is true, or when it is unset and the
    subnets assign one on launch (``subnets_public``: ``MapPublicIpOnLaunch``)."""
    if nodeclass is None:
        return NodeClassView(region=region, public_ipv4=subnets_public)
    spec = nodeclass.spec
    mappings = spec.block_device_mappings
    if mappings:
        volumes = tuple(v for v in map(_volume, mappings) if v is not None)
    else:
        volumes = default_volumes(spec.resolved_ami_family())
    public = spec.associate_public_ip_address
    return NodeClassView(volumes, subnets_public if public is None else public, region)


def node_bill(
    instance_type: str, price: float, view: NodeClassView = DEFAULT_VIEW, cpu_millicores: float = 0
) -> NodeBill:
    """One node's hourly bill: ``instance_type`` bought at ``price`` (USD per hour, the offering's),
    launched from the node class ``view``, running pods (DaemonSets included) that request
    ``cpu_millicores`` of CPU and are assumed to use it all the time (what burstable types bill as
    surplus credits above their baseline)."""
    kind = burst(instance_type)
    return NodeBill(
        instance=price,
        volumes=view.volumes_per_hour(),
        address=view.address_per_hour(),
        credits=kind.credits(cpu_millicores) if kind is not None else 0.0,
    )
