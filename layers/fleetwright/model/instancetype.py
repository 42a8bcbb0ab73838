"""Instance types and their offerings (zone × capacity type × price)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model.labels import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
)
from fleetwright.model.resources import ResourceList


@dataclass(frozen=True, slots=True)
class Offering:
    """Where and how an instance type can be bought, and its hourly price in USD.

    ``zone_id`` is the zone's account-independent id (``use1-az1``), "" when unknown.
    A ``reserved`` offering is one capacity reservation: its id, type (``default`` or
    ``capacity-block``), whether it is interruptible, and how many instances it still takes
    (``reservation_capacity``); other offerings leave these empty.
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    zone_id: str = ""
    reservation_id: str = ""
    reservation_type: str = ""
    reservation_interruptible: bool = False
    reservation_capacity: int = 0

    def reservation_labels(self) -> dict[str, str]:
        """The capacity-reservation labels a node launched from this offering carries (none when not
        reserved)."""
        if not self.reservation_id:
            return {}
        return {
            CAPACITY_RESERVATION_ID: self.reservation_id,
            CAPACITY_RESERVATION_TYPE: self.reservation_type,
            CAPACITY_RESERVATION_INTERRUPTIBLE: "true" if self.reservation_interruptible else "false",
        }


@dataclass(frozen=True, slots=True, eq=False)
class InstanceType:
    """An EC2 instance type: capacity, well-known labels and offerings.

    ``allocatable`` is what the kubelet will report (capacity minus reservations and VM overhead) for
    the default kubelet settings; use :func:`fleetwright.model.allocatable.allocatable_for` when an
    EC2NodeClass overrides kubelet settings. ``eni_limits`` is ``(interfaces, ipv4_per_interface)``
    when known, used to compute max pods.
    """

    name: str
    capacity: ResourceList
    allocatable: ResourceList
    labels: dict[str, str] = field(default_factory=dict)
    offerings: tuple[Offering, ...] = ()
    eni_limits: tuple[int, int] | None = None
    explicit_allocatable: bool = False  # allocatable given verbatim by the catalog

    def cheapest(
        self, zones: frozenset[str] | None = None, capacity_types: frozenset[str] | None = None
    ) -> Offering | None:
        """The cheapest available offering within the given zones and capacity types."""
        best: Offering | None = None
        for offering in self.offerings:
            if not offering.available:
                continue
            if zones is not None and offering.zone not in zones:
                continue
            if capacity_types is not None and offering.capacity_type not in capacity_types:
                continue
            if best is None or offering.price < best.price:
                best = offering
        return best
