"""What an EC2NodeClass's selector terms resolve to in the cloud right now, part by part, for the node
class's ``status`` (subnets, security groups, AMIs, instance profile, capacity reservations): each part is
what was found, or why it could not be looked up, so the status shows every part's own condition.

The provider resolves (:meth:`~fleetwright.cloud.provider.NodeClassStatusCloud.node_class_status`); the
status writer (``fleetwright.provisioning.nodepool_status``) turns the answer into Karpenter's fields and
conditions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Lookup(Generic[T]):
    """One part of a node class resolved: ``found`` (empty when nothing matched), or ``error`` (the lookup
    failed: ``"<ErrorType>: <message>"``; then ``found`` is empty too)."""

    found: T
    error: str = ""

    @classmethod
    def failed(cls, empty: T, error: BaseException) -> Lookup[T]:
        """A lookup that raised ``error``."""
        return cls(empty, f"{type(error).__name__}: {error}")


@dataclass(frozen=True, slots=True)
class SubnetFound:
    """A subnet the node class selects; ``zone_id`` is "" when the provider did not say."""

    id: str
    zone: str
    zone_id: str = ""


@dataclass(frozen=True, slots=True)
class ImageFound:
    """An image (AMI) the node class selects and the instance types it boots: ``arch`` (amd64/arm64) and
    ``variant`` (``standard``, ``nvidia``, ``neuron``; None: every type of its architecture)."""

    id: str
    arch: str
    variant: str | None = None
    name: str = ""


@dataclass(frozen=True, slots=True)
class ReservationFound:
    """A capacity reservation the node class selects (one instance type in one zone); ``end_time`` in
    epoch seconds (None when open-ended); ``state`` ``active`` or ``expiring``."""

    id: str
    instance_type: str
    zone: str
    owner_id: str
    instance_match_criteria: str
    reservation_type: str
    interruptible: bool
    state: str
    end_time: float | None = None


@dataclass(frozen=True, slots=True)
class NodeClassResolution:
    """Every part of a node class as the cloud resolves it now."""

    subnets: Lookup[tuple[SubnetFound, ...]]
    security_groups: Lookup[tuple[str, ...]]
    amis: Lookup[tuple[ImageFound, ...]]
    instance_profile: Lookup[str]  # "" found: neither role nor instanceProfile is set
    capacity_reservations: Lookup[tuple[ReservationFound, ...]]  # none found is no fault
