"""What the kubelet on an EKS node will offer to pods: capacity minus reservations and overheads.

The defaults follow the EKS-optimized AMIs (AL2023) as Karpenter's AWS provider models them:

* max pods: ``ENIs × (IPv4 addresses per ENI − 1) + 2`` (VPC CNI without prefix delegation), or the
  capacity's ``pods`` when the ENI limits are unknown; ``maxPods`` replaces it and ``podsPerCore``
  caps it at ``vCPUs × podsPerCore``.
* kube-reserved: memory ``11Mi × pods + 255Mi`` (pods = the ENI-limited default, not a ``maxPods``
  override — the AMI sizes the reservation from its own default), ephemeral-storage ``1Gi`` and cpu
  6% of the first core, 1% of the second, 0.5% of cores 3–4 and 0.25% of every further core.
* eviction threshold: ``memory.available`` 100Mi and ``nodefs.available`` 10% of the root volume.
* memory the VM never shows the kubelet: 7.5% of memory (hypervisor overhead) and, on Graviton, 64Mi
  of CMA memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from fleetwright.model.instancetype import InstanceType
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.labels import ARCH, INSTANCE_LOCAL_NVME
from fleetwright.model.quantity import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, parse_resource
from fleetwright.model.resources import ResourceList

MIB = 2**20
GIB = 2**30
GB = 10**9

VM_MEMORY_OVERHEAD_PERCENT = 0.075  # Karpenter's --vm-memory-overhead-percent default
GRAVITON_CMA_MIB = 64
DEFAULT_ROOT_VOLUME = 20 * GIB  # AL2023 root volume Karpenter assumes without blockDeviceMappings
DEFAULT_MAX_PODS = 110  # kubelet default when nothing else is known
KUBE_RESERVED_EPHEMERAL_STORAGE = 1 * GIB
EVICTION_MEMORY_AVAILABLE = 100 * MIB
EVICTION_NODEFS_AVAILABLE_PERCENT = 10

MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE = "nodefs.available"

# (start, end, fraction) in milli-cores: the kube-reserved cpu ladder of the EKS AMIs.
_CPU_LADDER = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))


def eni_limited_pods(interfaces: int, ipv4_per_interface: int) -> int:
    """Max pods the VPC CNI can address: ``interfaces × (ipv4_per_interface − 1) + 2`` (0 without ENIs)."""
    if interfaces <= 0:
        return 0
    return interfaces * (ipv4_per_interface - 1) + 2


def default_max_pods(capacity: Mapping[str, int], eni_limits: tuple[int, int] | None) -> int:
    """Max pods before kubelet overrides: from the ENI limits when known, else the capacity's pods."""
    if eni_limits is not None:
        return eni_limited_pods(*eni_limits)
    return capacity.get(PODS, DEFAULT_MAX_PODS)


def max_pods(
    capacity: Mapping[str, int], kubelet: KubeletOverrides | None, eni_limits: tuple[int, int] | None
) -> int:
    """Max pods after ``maxPods`` (replaces the default) and ``podsPerCore`` (caps it)."""
    count = default_max_pods(capacity, eni_limits)
    if kubelet is not None and kubelet.max_pods is not None:
        count = kubelet.max_pods
    if kubelet is not None and kubelet.pods_per_core:
        cores = math.ceil(capacity.get(CPU, 0) / 1000)
        count = min(count, cores * kubelet.pods_per_core)
    return count


def kube_reserved_cpu(cpu_milli: int) -> int:
    """Default kube-reserved cpu in milli-cores (m5.large, 2 vCPUs: 60 + 10 = 70m)."""
    reserved = 0
    for start, end, fraction in _CPU_LADDER:
        if cpu_milli < start:
            break
        span = min(cpu_milli, end) - start
        # Truncated per step, in floating point, as Karpenter does, so results match it exactly.
        reserved += int(span * fraction)
    return reserved


def kube_reserved_defaults(cpu_milli: int, pods: int) -> ResourceList:
    """Default kube-reserved cpu, memory and ephemeral-storage for a node sized for ``pods`` pods."""
    return {
        CPU: kube_reserved_cpu(cpu_milli),
        MEMORY: (11 * pods + 255) * MIB,
        EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL_STORAGE,
    }


def node_memory(
    capacity_memory: int, *, arch: str | None = None, overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT
) -> int:
    """Memory the kubelet sees: EC2 memory minus Graviton CMA memory and the VM overhead.

    The overhead is a whole number of MiB, rounded up, computed on the memory after the CMA cut.
    """
    memory = capacity_memory - (GRAVITON_CMA_MIB * MIB if arch == "arm64" else 0)
    # Float arithmetic on purpose: it reproduces Karpenter's rounding bit for bit.
    overhead_mib = math.ceil(float(memory) * overhead_percent / MIB)
    return max(memory - overhead_mib * MIB, 0)


def eviction_amount(capacity: int, threshold: str) -> int:
    """An eviction threshold in base units: absolute (``500Mi``) or a percentage of ``capacity``.

    ``100%`` disables the threshold (the kubelet's convention), giving 0.
    """
    text = threshold.strip()
    if text.endswith("%"):
        percent = float(text[:-1])
        if percent == 100:
            percent = 0.0
        return math.ceil(float(capacity) / 100 * percent)
    return parse_resource(MEMORY, text)


def eviction_threshold(memory: int, storage: int, kubelet: KubeletOverrides | None) -> ResourceList:
    """Memory and ephemeral-storage held back for eviction: defaults, replaced by the node class's
    ``evictionHard``/``evictionSoft`` (the larger of the two when both set a signal)."""
    result: ResourceList = {
        MEMORY: EVICTION_MEMORY_AVAILABLE,
        EPHEMERAL_STORAGE: math.ceil(float(storage) / 100 * EVICTION_NODEFS_AVAILABLE_PERCENT),
    }
    if kubelet is None:
        return result
    overrides: ResourceList = {}
    for signals in (kubelet.eviction_hard, kubelet.eviction_soft):
        for signal, resource, base in (
            (MEMORY_AVAILABLE, MEMORY, memory),
            (NODEFS_AVAILABLE, EPHEMERAL_STORAGE, storage),
        ):
            if signal in signals:
                amount = eviction_amount(base, signals[signal])
                overrides[resource] = max(amount, overrides.get(resource, amount))
    result.update(overrides)
    return result


def allocatable_for(
    capacity: Mapping[str, int],
    kubelet: KubeletOverrides | None = None,
    eni_limits: tuple[int, int] | None = None,
    *,
    arch: str | None = None,
    vm_memory_overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT,
) -> ResourceList:
    """Allocatable resources of a node with this EC2 ``capacity`` under the node class's kubelet settings.

    ``capacity`` is the raw EC2 view (memory as EC2 reports it, no overhead applied). ``arch`` set to
    ``arm64`` also removes Graviton's CMA memory. Resources other than cpu, memory, pods and
    ephemeral-storage (GPUs, pod ENIs, ...) are allocatable in full.
    """
    cpu = capacity.get(CPU, 0)
    memory = node_memory(capacity.get(MEMORY, 0), arch=arch, overhead_percent=vm_memory_overhead_percent)
    storage = capacity.get(EPHEMERAL_STORAGE, DEFAULT_ROOT_VOLUME)

    kube_reserved = kube_reserved_defaults(cpu, default_max_pods(capacity, eni_limits))
    system_reserved: ResourceList = {}
    if kubelet is not None:
        kube_reserved.update(kubelet.kube_reserved)
        system_reserved = dict(kubelet.system_reserved)
    eviction = eviction_threshold(memory, storage, kubelet)

    allocatable = dict(capacity)
    allocatable[MEMORY] = memory
    allocatable[EPHEMERAL_STORAGE] = storage
    allocatable[PODS] = max_pods(capacity, kubelet, eni_limits)
    for held_back in (kube_reserved, system_reserved, eviction):
        for name, amount in held_back.items():
            if name in allocatable:
                allocatable[name] = max(allocatable[name] - amount, 0)
    return allocatable


def node_capacity(instance_type: InstanceType, kubelet: KubeletOverrides | None) -> ResourceList:
    """The type's capacity on a node class's nodes: under ``instanceStorePolicy: RAID0`` ephemeral-storage
    is the instance store's total size (decimal GB, as EC2 and Karpenter count it) on types that have one."""
    capacity = dict(instance_type.capacity)
    local = instance_type.labels.get(INSTANCE_LOCAL_NVME)
    if kubelet is not None and kubelet.instance_store_raid0 and local:
        capacity[EPHEMERAL_STORAGE] = int(local) * GB
    return capacity


def instance_type_allocatable(instance_type: InstanceType, kubelet: KubeletOverrides | None) -> ResourceList:
    """Allocatable of ``instance_type`` under a node class's kubelet settings.

    The catalog's verbatim allocatable wins; otherwise :func:`allocatable_for` with the type's ENI limits
    and architecture (so Graviton's CMA memory is taken off), on :func:`node_capacity`.
    """
    if instance_type.explicit_allocatable or kubelet is None:
        return dict(instance_type.allocatable)
    return allocatable_for(
        node_capacity(instance_type, kubelet),
        kubelet,
        instance_type.eni_limits,
        arch=instance_type.labels.get(ARCH),
    )
