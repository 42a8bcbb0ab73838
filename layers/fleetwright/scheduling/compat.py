"""Compatibility checks between pods, NodePools, instance types and nodes (with reasons)."""

from __future__ import annotations

from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.labels import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE,
    INSTANCE_TYPE_LABELS,
    OFFERING_LABELS,
    WELL_KNOWN_LABELS,
    ZONE,
    ZONE_ID,
)
from fleetwright.model.requirements import Requirement, Requirements


def undefined_label_conflicts(pod_requirements: Requirements, node_requirements: Requirements) -> list[str]:
    """Pod requirements on custom labels a NodePool never sets (so its nodes will not carry them).

    A NodePool's node gets a custom label only from its template labels or its requirements; a pod that
    needs such a label to exist cannot land there.
    """
    problems = []
    for req in pod_requirements:
        if req.key in node_requirements or req.key in WELL_KNOWN_LABELS:
            continue
        if not req.absent_ok:
            problems.append(
                f'label "{req.key}" is not set by the NodePool (add it to template labels or requirements)'
            )
    return problems


def requirement_conflicts(pod_requirements: Requirements, node_requirements: Requirements) -> list[str]:
    """Every reason why a pod's requirements cannot be met by a NodePool's requirements."""
    return pod_requirements.conflicts(node_requirements) + undefined_label_conflicts(
        pod_requirements, node_requirements
    )


def requirements_compatible(pod_requirements: Requirements, node_requirements: Requirements) -> bool:
    """Fast form of :func:`requirement_conflicts` (no messages)."""
    return pod_requirements.compatible(node_requirements) and labels_defined(
        pod_requirements, node_requirements
    )


def labels_defined(pod_requirements: Requirements, pool_requirements: Requirements) -> bool:
    """True when every label the pod needs present is one the NodePool's nodes can carry.

    Checked against the NodePool's own requirements, not a claim's: a claim also holds its pods'
    requirements, and a ``NotIn`` one from an earlier pod puts no label on the node.
    """
    for req in pod_requirements:
        if req.key not in pool_requirements and req.key not in WELL_KNOWN_LABELS and not req.absent_ok:
            return False
    return True


def _offering_allowed(
    zone_req: Requirement | None, ct_req: Requirement | None, zone_id_req: Requirement | None, o: Offering
) -> bool:
    return (
        (zone_req is None or zone_req.has(o.zone))
        and (ct_req is None or ct_req.has(o.capacity_type))
        and (zone_id_req is None or zone_id_req.has(o.zone_id))
    )


def _reservation_requirements(requirements: Requirements) -> list[tuple[Requirement, str]]:
    """Requirements on the capacity-reservation labels, with the offering field each one reads."""
    fields = (
        (CAPACITY_RESERVATION_ID, "id"),
        (CAPACITY_RESERVATION_TYPE, "type"),
        (CAPACITY_RESERVATION_INTERRUPTIBLE, "interruptible"),
    )
    found = []
    for key, name in fields:
        req = requirements.get(key)
        if req is not None:
            found.append((req, name))
    return found


def _reservation_value(offering: Offering, field: str) -> str:
    if field == "id":
        return offering.reservation_id
    if field == "type":
        return offering.reservation_type
    return "true" if offering.reservation_interruptible else "false"


def _reservation_allowed(reqs: list[tuple[Requirement, str]], offering: Offering) -> bool:
    """A reserved offering carries the reservation labels; any other offering lacks them."""
    if not offering.reservation_id:
        return all(req.absent_ok for req, _ in reqs)
    return all(req.has(_reservation_value(offering, name)) for req, name in reqs)


def offering_allowed(offering: Offering, requirements: Requirements) -> bool:
    """True when the requirements allow the offering's zone, zone id, capacity type and reservation labels."""
    return _offering_allowed(
        requirements.get(ZONE), requirements.get(CAPACITY_TYPE), requirements.get(ZONE_ID), offering
    ) and _reservation_allowed(_reservation_requirements(requirements), offering)


def instance_type_compatible(instance_type: InstanceType, requirements: Requirements) -> bool:
    """True when the type's labels and at least one available offering satisfy the requirements.

    Only labels an instance type or offering decides are checked here; custom labels come from the
    NodePool and are checked against the pod separately.
    """
    labels = instance_type.labels
    for req in requirements:
        key = req.key
        if key in OFFERING_LABELS:
            continue
        value = labels.get(key)
        if value is not None:
            if not req.has(value):
                return False
        elif key in INSTANCE_TYPE_LABELS and not req.absent_ok:
            return False
    zone_req = requirements.get(ZONE)
    ct_req = requirements.get(CAPACITY_TYPE)
    zone_id_req = requirements.get(ZONE_ID)
    reserved = _reservation_requirements(requirements)
    return any(
        o.available
        and _offering_allowed(zone_req, ct_req, zone_id_req, o)
        and (not reserved or _reservation_allowed(reserved, o))
        for o in instance_type.offerings
    )


def allowed_offerings(
    instance_type: InstanceType, requirements: Requirements
) -> list[tuple[str, str, float]]:
    """``(zone, capacity type, price)`` of the available offerings the requirements allow."""
    zone_req = requirements.get(ZONE)
    ct_req = requirements.get(CAPACITY_TYPE)
    zone_id_req = requirements.get(ZONE_ID)
    reserved = _reservation_requirements(requirements)
    return [
        (o.zone, o.capacity_type, o.price)
        for o in instance_type.offerings
        if o.available
        and _offering_allowed(zone_req, ct_req, zone_id_req, o)
        and (not reserved or _reservation_allowed(reserved, o))
    ]
