"""Capacity reservations counted over one simulation, so no more reserved nodes are planned than fit.

Reserved offerings are priced near zero, so claims pack onto them first. A claim opened where a
reservation could hold its first pod takes one instance of every compatible reservation that still has
room (as Karpenter does: the launch may land in any of them) and then refuses pods that would push it
past every reserved type; once the reservations are taken, new claims leave reserved capacity out.
When the claims are finished the count is made again over the final claims (re-packing may have changed
them): each is pinned to ``reserved`` and the reservations it took, or falls back to its other capacity
types; with none left its pods wait for the next pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.labels import CAPACITY_RESERVATION_ID, CAPACITY_TYPE, RESERVED
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.compat import instance_type_compatible, offering_allowed
from fleetwright.scheduling.pools import PreparedPool


def _reservation_capacity(instance_types: Iterable[InstanceType]) -> dict[str, int]:
    """Per reservation, the smallest count its reserved offerings say it still takes."""
    capacity: dict[str, int] = {}
    for instance_type in instance_types:
        for offering in instance_type.offerings:
            if not offering.reservation_id or offering.capacity_type != RESERVED:
                continue
            current = capacity.get(offering.reservation_id)
            if current is None or offering.reservation_capacity < current:
                capacity[offering.reservation_id] = offering.reservation_capacity
    return capacity


class _RecentCatalogs:
    """The reservation counts of the last few catalogs scanned, by the identity of their (frozen) instance
    types, which each entry holds (so the ids stay theirs): every simulation of a pass, and of a
    consolidation round, scans the same catalog (the emulator's kube-scheduler passes an empty one). A
    type whose reservation count changed is a new object."""

    SIZE = 4

    def __init__(self) -> None:
        self.entries: list[tuple[tuple[int, ...], list[InstanceType], dict[str, int]]] = []

    def capacity(self, instance_types: Iterable[InstanceType]) -> dict[str, int]:
        types = list(instance_types)
        key = tuple(map(id, types))
        entries = self.entries
        entry = next((e for e in entries if e[0] == key), None)
        if entry is None:
            entry = (key, types, _reservation_capacity(types))
            self.entries = [entry, *entries[: self.SIZE - 1]]
        return dict(entry[2])


_RECENT_CATALOGS = _RecentCatalogs()


class ReservationLedger:
    """Instances each reservation can still take in this simulation (its offerings' smallest count)."""

    def __init__(self, instance_types: Iterable[InstanceType]) -> None:
        self.capacity: dict[str, int] = _RECENT_CATALOGS.capacity(instance_types)

    @property
    def empty(self) -> bool:
        """True when the catalog has no reserved offering at all (none to look for)."""
        return not self.capacity

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


class ReservationPlanner:
    """The reservations taken by claims as the simulation opens them."""

    def __init__(self, ledger: ReservationLedger) -> None:
        self.ledger = ledger
        self.capacity = ledger.capacity
        self._without: dict[tuple[int, int], tuple[Requirements, Requirements, list[int], list[int]]] = {}

    def choose(
        self, pool: PreparedPool, requirements: Requirements, indices: list[int], need: vec.Vector
    ) -> tuple[Requirements, list[int], bool] | str:
        """The requirements and candidates a new claim opens with, and whether it took reservations;
        a string says why the pool cannot open it (its reservations are taken and it allows nothing
        else)."""
        holding = [pool.types[i] for i in indices if vec.fits(need, pool.capacity[i])]
        offered = reserved_offerings(holding, requirements)
        if not offered:
            return requirements, indices, False
        ids = sorted({o.reservation_id for _, o in offered})
        if self.ledger.take(ids):
            return requirements, indices, True
        narrowed, kept = self._without_reserved(pool, requirements, indices)
        if not any(vec.fits(need, pool.capacity[i]) for i in kept):
            return (
                f"capacity reservations {', '.join(ids)} are taken by nodes planned before it, "
                "and the NodePool allows no other capacity type"
            )
        return narrowed, kept, False

    def _without_reserved(
        self, pool: PreparedPool, requirements: Requirements, indices: list[int]
    ) -> tuple[Requirements, list[int]]:
        """The requirements without reserved capacity and the candidates left (cached per pair of
        objects: claims opened alike share them, and the scheduler's caches key on them)."""
        key = (id(requirements), id(indices))
        cached = self._without.get(key)
        if cached is not None and cached[0] is requirements and cached[3] is indices:
            return cached[1], cached[2]
        narrowed = without_reserved(requirements)
        kept = [i for i in indices if instance_type_compatible(pool.types[i], narrowed)]
        self._without[key] = (requirements, narrowed, kept, indices)
        return narrowed, kept
