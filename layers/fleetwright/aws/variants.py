"""Which AMI variant (architecture × standard/NVIDIA/Neuron) an instance type needs, per AMI family.

EKS publishes separate optimized AMIs for plain instances, NVIDIA GPU instances and AWS Neuron
(Inferentia/Trainium) instances; an instance type can only run with an AMI of its own variant.
"""

from __future__ import annotations

from fleetwright.model import labels as wk
from fleetwright.model.instancetype import InstanceType

STANDARD = "standard"
NVIDIA = "nvidia"
NEURON = "neuron"

AMD64 = "amd64"
ARM64 = "arm64"
KUBE_TO_EC2_ARCH = {AMD64: "x86_64", ARM64: "arm64"}
EC2_TO_KUBE_ARCH = {"x86_64": AMD64, "arm64": ARM64}

# (kubernetes arch, variant) pairs each family publishes an EKS-optimized AMI for.
FAMILY_VARIANTS: dict[str, frozenset[tuple[str, str]]] = {
    "al2023": frozenset(
        {(AMD64, STANDARD), (AMD64, NVIDIA), (AMD64, NEURON), (ARM64, STANDARD), (ARM64, NVIDIA)}
    ),
    # The AL2 "gpu" AMI carries both the NVIDIA driver and the Neuron driver; no arm64 GPU AMI exists.
    "al2": frozenset({(AMD64, STANDARD), (AMD64, NVIDIA), (AMD64, NEURON), (ARM64, STANDARD)}),
    "bottlerocket": frozenset({(AMD64, STANDARD), (AMD64, NVIDIA), (ARM64, STANDARD), (ARM64, NVIDIA)}),
}

_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi")
_NEURON_RESOURCES = ("aws.amazon.com/neuron",)


def variant_of(instance_type: InstanceType) -> str:
    """``nvidia`` for GPU instance types, ``neuron`` for Inferentia/Trainium, else ``standard``."""
    labels = instance_type.labels
    if wk.INSTANCE_GPU_COUNT in labels or any(instance_type.capacity.get(r) for r in _GPU_RESOURCES):
        return NVIDIA
    if wk.INSTANCE_ACCELERATOR_COUNT in labels or any(
        instance_type.capacity.get(r) for r in _NEURON_RESOURCES
    ):
        return NEURON
    return STANDARD


def arch_of(instance_type: InstanceType) -> str:
    """The ``kubernetes.io/arch`` of an instance type (amd64 when unlabelled)."""
    return instance_type.labels.get(wk.ARCH, AMD64)


def family_supports(family: str, instance_type: InstanceType) -> bool:
    """True when the AMI family publishes an AMI for this instance type's architecture and variant.

    Families without a table (``custom``) accept every type: the user's AMIs decide.
    """
    if family.lower().startswith("windows"):
        return arch_of(instance_type) == AMD64  # one Windows AMI boots every amd64 type
    variants = FAMILY_VARIANTS.get(family.lower())
    if variants is None:
        return True
    return (arch_of(instance_type), variant_of(instance_type)) in variants
