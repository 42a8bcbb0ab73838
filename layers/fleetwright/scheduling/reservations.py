"""Capacity reservations counted over one simulation, so no more reserved nodes are planned than fit.

Reserved offerings are priced near zero, so claims pack onto them first. When the claims are finished,
each one that could use a reservation takes one instance of every compatible reservation that still has
room (as Karpenter does: the launch may land in any of them) and is pinned to ``reserved`` and those
reservation ids. A claim whose reservations are all taken falls back to its other capacity types; with
none left its pods wait for the next pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.labels import CAPACITY_RESERVATION_ID, CAPACITY_TYPE, RESERVED
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.scheduling.compat import offering_allowed


class ReservationLedger:
    """Instances each reservation can still take in this simulation (its offerings' smallest count)."""

    def __init__(self, instance_types: Iterable[InstanceType]) -> None:
        self.capacity: dict[str, int] = {}
        for instance_type in instance_types:
            for offering in instance_type.offerings:
                if not offering.reservation_id or offering.capacity_type != RESERVED:
                    continue
                current = self.capacity.get(offering.reservation_id)
                if current is None or offering.reservation_capacity < current:
                    self.capacity[offering.reservation_id] = offering.reservation_capacity

    def take(self, reservation_ids: Iterable[str]) -> list[str]:
        """One instance of each of these reservations that has room; the ids taken."""
        taken = []
        for rid in sorted(set(reservation_ids)):
            if self.capacity.get(rid, 0) > 0:
                self.capacity[rid] -= 1
                taken.append(rid)
        return taken


def reserved_offerings(
    instance_types: Sequence[InstanceType], requirements: Requirements
) -> list[tuple[InstanceType, Offering]]:
    """The available reserved offerings of ``instance_types`` the requirements allow."""
    return [
        (instance_type, offering)
        for instance_type in instance_types
        for offering in instance_type.offerings
        if offering.available
        and offering.capacity_type == RESERVED
        and offering.reservation_id
        and offering_allowed(offering, requirements)
    ]


def pinned(requirements: Requirements, reservation_ids: Sequence[str]) -> Requirements:
    """The requirements narrowed to reserved capacity in these reservations."""
    return requirements.intersect(
        Requirements.of(
            [
                Requirement.single(CAPACITY_TYPE, RESERVED),
                Requirement.create(CAPACITY_RESERVATION_ID, "In", sorted(reservation_ids)),
            ]
        )
    )


def without_reserved(requirements: Requirements) -> Requirements:
    """The requirements with reserved capacity ruled out."""
    return requirements.intersect(Requirements.of([Requirement.create(CAPACITY_TYPE, "NotIn", [RESERVED])]))
