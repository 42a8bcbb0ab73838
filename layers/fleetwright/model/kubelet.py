"""Kubelet settings that change a node's allocatable resources (from an EC2NodeClass ``kubelet``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model.resources import ResourceList


@dataclass(frozen=True, slots=True)
class KubeletOverrides:
    """The subset of ``EC2NodeClass.spec.kubelet`` that affects scheduling.

    ``None`` / empty means "use the EKS default". ``eviction_hard`` keeps the raw threshold strings
    (``{"memory.available": "5%"}``) because percentages depend on the instance's capacity.
    ``instance_store_raid0`` carries the node class's ``instanceStorePolicy: RAID0``: the kubelet's
    ephemeral storage is then the instance store, not the root volume.
    """

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: ResourceList = field(default_factory=dict)
    system_reserved: ResourceList = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)
    eviction_soft: dict[str, str] = field(default_factory=dict)
    instance_store_raid0: bool = False
