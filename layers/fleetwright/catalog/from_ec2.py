"""Turn one EC2 ``DescribeInstanceTypes`` entry into an :class:`InstanceType` (pure, no AWS calls).

Used by the catalog generator (moto's stored copy of the API output) and by the AWS provider (live
output from boto3); both hand over the same dict shape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from fleetwright.model import labels as wk
from fleetwright.model.allocatable import DEFAULT_ROOT_VOLUME, allocatable_for, eni_limited_pods
from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.quantity import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from fleetwright.model.resources import ResourceList

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
HABANA_GAUDI = "habana.ai/gaudi"
AWS_NEURON = "aws.amazon.com/neuron"
AWS_NEURON_CORE = "aws.amazon.com/neuroncore"
AWS_POD_ENI = "vpc.amazonaws.com/pod-eni"
AWS_EFA = "vpc.amazonaws.com/efa"

MIB = 2**20

# EC2 architecture names → kubernetes.io/arch values. Mac architectures are deliberately absent:
# EKS cannot run Mac instances as nodes.
EC2_TO_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}

# "m5.large", "c7gn.16xlarge", "u-6tb1.112xlarge", "p6-b200.48xlarge": category letters, an optional
# "-Ntb" memory tag, the generation digits, then anything up to the dot.
_NAME = re.compile(r"^(?P<category>[a-z]+)(?:-\d+tb)?(?P<generation>\d+)(?P<suffix>[^.]*)\.(?P<size>.+)$")


class UnsupportedInstanceTypeError(ValueError):
    """An EC2 entry Fleetwright cannot model (missing vCPU/memory data, unknown architecture, ...)."""


UnsupportedInstanceType = UnsupportedInstanceTypeError  # earlier name, kept for existing callers


def name_labels(name: str) -> dict[str, str]:
    """Labels that follow from the instance type name alone: type, family, size, category, generation,
    and whether it is a flex type (``-flex`` in the family, as Karpenter decides it)."""
    result = {wk.INSTANCE_TYPE: name}
    family, dot, size = name.partition(".")
    result[wk.INSTANCE_CAPABILITY_FLEX] = "true" if "-flex" in family else "false"
    if dot and family and size:
        result[wk.INSTANCE_FAMILY] = family
        result[wk.INSTANCE_SIZE] = size
    match = _NAME.match(name)
    if match:
        result[wk.INSTANCE_CATEGORY] = match["category"]
        result[wk.INSTANCE_GENERATION] = match["generation"]
    result[wk.INSTANCE_CAPABILITY_FLEX] = "true" if "-flex" in family else "false"
    return result


def arch_from_name(name: str) -> str:
    """Best guess of ``kubernetes.io/arch`` from a name: Graviton families (a1, m6g, c7gn, r8g, t4g,
    im4gn, is4gen, ...) carry a ``g`` right after the generation digits; everything else is amd64."""
    match = _NAME.match(name)
    if match and (match["category"] == "a" or match["suffix"].startswith("g")):
        return "arm64"
    return "amd64"


def _kebab(text: str) -> str:
    return text.strip().replace(" ", "-").lower()


def _bool(value: object) -> str:
    return "true" if value is True else "false"


def _arch(info: Mapping[str, Any]) -> str:
    supported = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    for architecture in supported:
        if architecture in EC2_TO_KUBE_ARCH:
            return EC2_TO_KUBE_ARCH[architecture]
    raise UnsupportedInstanceTypeError(
        f"{info.get('InstanceType')}: no supported architecture in {supported}"
    )


def eni_limits_from_ec2(
    info: Mapping[str, Any], vpc_limits: Mapping[str, Any] | None = None
) -> tuple[int, int] | None:
    """``(interfaces, ipv4 per interface)`` usable by the VPC CNI.

    The CNI only uses the default network card, so multi-card types count that card's interfaces, not
    the instance total. Falls back to the VPC limits table entry when EC2 data lacks the fields.
    """
    network = info.get("NetworkInfo") or {}
    ipv4 = network.get("Ipv4AddressesPerInterface")
    interfaces = network.get("MaximumNetworkInterfaces")
    cards = network.get("NetworkCards") or []
    default_index = network.get("DefaultNetworkCardIndex", 0)
    for card in cards:
        if card.get("NetworkCardIndex", 0) == default_index and "MaximumNetworkInterfaces" in card:
            interfaces = card["MaximumNetworkInterfaces"]
            break
    if isinstance(interfaces, int) and isinstance(ipv4, int):
        return interfaces, ipv4
    if vpc_limits is not None:
        return int(vpc_limits["interfaces"]), int(vpc_limits["ipv4_per_interface"])
    return None


def _accelerators(info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    # Newer API output describes Inferentia/Trainium under NeuronInfo; older under InferenceAcceleratorInfo.
    neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices")
    if neuron:
        return list(neuron)
    return list((info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or [])


def capacity_from_ec2(
    info: Mapping[str, Any], vpc_limits: Mapping[str, Any] | None = None
) -> tuple[ResourceList, tuple[int, int] | None]:
    """EC2 capacity (no VM overhead applied) and the ENI limits it was derived from."""
    name = info.get("InstanceType", "?")
    vcpus = (info.get("VCpuInfo") or {}).get("DefaultVCpus")
    memory_mib = (info.get("MemoryInfo") or {}).get("SizeInMiB")
    if not isinstance(vcpus, int) or vcpus <= 0 or not isinstance(memory_mib, int) or memory_mib <= 0:
        raise UnsupportedInstanceTypeError(f"{name}: missing VCpuInfo.DefaultVCpus or MemoryInfo.SizeInMiB")
    eni_limits = eni_limits_from_ec2(info, vpc_limits)
    capacity: ResourceList = {
        CPU: vcpus * 1000,
        MEMORY: memory_mib * MIB,
        EPHEMERAL_STORAGE: DEFAULT_ROOT_VOLUME,
        PODS: eni_limited_pods(*eni_limits) if eni_limits else 110,
    }
    gpus_by_maker: dict[str, int] = {}
    for gpu in (info.get("GpuInfo") or {}).get("Gpus") or []:
        maker = str(gpu.get("Manufacturer", "")).lower()
        gpus_by_maker[maker] = gpus_by_maker.get(maker, 0) + int(gpu.get("Count", 0))
    for maker, resource in (("nvidia", NVIDIA_GPU), ("amd", AMD_GPU), ("habana", HABANA_GAUDI)):
        if gpus_by_maker.get(maker):
            capacity[resource] = gpus_by_maker[maker]
    accelerators = _accelerators(info)
    neurons = sum(int(device.get("Count", 0)) for device in accelerators)
    if neurons:
        capacity[AWS_NEURON] = neurons
    cores = sum(
        int(device.get("Count", 0)) * int((device.get("CoreInfo") or {}).get("Count", 0))
        for device in accelerators
    )
    if cores:
        capacity[AWS_NEURON_CORE] = cores
    efa = ((info.get("NetworkInfo") or {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    if efa:
        capacity[AWS_EFA] = int(efa)
    if vpc_limits and vpc_limits.get("trunking") and vpc_limits.get("branch_interfaces"):
        capacity[AWS_POD_ENI] = int(vpc_limits["branch_interfaces"])
    return capacity, eni_limits


def labels_from_ec2(info: Mapping[str, Any]) -> dict[str, str]:
    """Well-known labels of an EC2 instance type, formatted as Karpenter's AWS provider does
    (lowercase kebab-case names, integers as decimal strings, memory in MiB, bandwidth in Mbps)."""
    name = str(info["InstanceType"])
    result = name_labels(name)
    result[wk.ARCH] = _arch(info)
    result[wk.OS] = "linux"
    result[wk.INSTANCE_CPU] = str(info["VCpuInfo"]["DefaultVCpus"])
    result[wk.INSTANCE_MEMORY] = str(info["MemoryInfo"]["SizeInMiB"])
    manufacturer = (info.get("ProcessorInfo") or {}).get("Manufacturer")
    if manufacturer:
        result[wk.INSTANCE_CPU_MANUFACTURER] = _kebab(manufacturer)
    if info.get("ProcessorInfo"):
        # GHz to whole MHz, so Gt/Lt work; Karpenter writes 0 when EC2 gives no sustained clock speed.
        ghz = float(info["ProcessorInfo"].get("SustainedClockSpeedInGhz") or 0)
        result[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] = str(math.floor(ghz * 1000 + 0.5))
    network = info.get("NetworkInfo") or {}
    result[wk.INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED] = _bool(network.get("EncryptionInTransitSupported"))
    if "NitroEnclavesSupport" in info:
        result[wk.NITRO_SANDBOX] = _bool(info["NitroEnclavesSupport"] == "supported")
    # Bare metal has no hypervisor: Karpenter labels it with the empty value.
    result[wk.INSTANCE_HYPERVISOR] = str(info.get("Hypervisor") or "")
    cards = (info.get("NetworkInfo") or {}).get("NetworkCards") or []
    baseline_gbps = sum(float(card.get("BaselineBandwidthInGbps") or 0) for card in cards)
    if baseline_gbps > 0:
        result[wk.INSTANCE_NETWORK_BANDWIDTH] = str(round(baseline_gbps * 1000))
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if len(gpus) == 1:  # the GPU labels only make sense for a single kind of GPU
        gpu = gpus[0]
        result[wk.INSTANCE_GPU_NAME] = _kebab(str(gpu.get("Name", "")))
        result[wk.INSTANCE_GPU_MANUFACTURER] = _kebab(str(gpu.get("Manufacturer", "")))
        result[wk.INSTANCE_GPU_COUNT] = str(int(gpu.get("Count", 0)))
        gpu_memory = (gpu.get("MemoryInfo") or {}).get("SizeInMiB")
        if gpu_memory:
            result[wk.INSTANCE_GPU_MEMORY] = str(int(gpu_memory))
    accelerators = _accelerators(info)
    if len(accelerators) == 1:
        accelerator = accelerators[0]
        result[wk.INSTANCE_ACCELERATOR_NAME] = _kebab(str(accelerator.get("Name", "")))
        result[wk.INSTANCE_ACCELERATOR_MANUFACTURER] = _kebab(str(accelerator.get("Manufacturer", "AWS")))
        result[wk.INSTANCE_ACCELERATOR_COUNT] = str(int(accelerator.get("Count", 0)))
    storage = info.get("InstanceStorageInfo") or {}
    if storage.get("TotalSizeInGB") and storage.get("NvmeSupport", "unsupported") != "unsupported":
        result[wk.INSTANCE_LOCAL_NVME] = str(int(storage["TotalSizeInGB"]))
    ebs = info.get("EbsInfo") or {}
    optimized = ebs.get("EbsOptimizedInfo") or {}
    if ebs.get("EbsOptimizedSupport") == "default" and optimized.get("MaximumBandwidthInMbps"):
        result[wk.INSTANCE_EBS_BANDWIDTH] = str(int(optimized["MaximumBandwidthInMbps"]))
    return result


def instance_type_from_ec2(
    info: Mapping[str, Any],
    vpc_limits: Mapping[str, Any] | None = None,
    offerings: Iterable[Offering] = (),
) -> InstanceType:
    """An :class:`InstanceType` from one ``DescribeInstanceTypes`` entry.

    ``vpc_limits`` is this type's entry of the VPC limits table (``interfaces``, ``ipv4_per_interface``,
    ``trunking``, ``branch_interfaces``); it supplies ``vpc.amazonaws.com/pod-eni``. Allocatable is
    computed for the default kubelet settings. Raises :class:`UnsupportedInstanceTypeError` for entries
    that cannot be a Linux EKS node.
    """
    virtualization = info.get("SupportedVirtualizationTypes")
    if virtualization and "hvm" not in virtualization:
        # EKS-optimized AMIs are HVM images: they boot on Nitro, Xen (HVM) and bare metal, not on
        # paravirtual-only Xen types.
        raise UnsupportedInstanceTypeError(
            f"{info.get('InstanceType')}: no HVM virtualization (paravirtual only)"
        )
    capacity, eni_limits = capacity_from_ec2(info, vpc_limits)
    type_labels = labels_from_ec2(info)
    return InstanceType(
        name=str(info["InstanceType"]),
        capacity=capacity,
        allocatable=allocatable_for(capacity, None, eni_limits, arch=type_labels[wk.ARCH]),
        labels=type_labels,
        offerings=tuple(offerings),
        eni_limits=eni_limits,
    )
