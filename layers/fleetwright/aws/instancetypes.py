"""Instance types from EC2: what exists, where it is offered, and at what price.

``DescribeInstanceTypes`` and ``DescribeInstanceTypeOfferings`` change rarely and cost seconds, so
their results are kept for five minutes at module scope (a warm Lambda reuses them); prices are cached
separately in :mod:`fleetwright.aws.pricing`. The unavailable-offerings cache is applied on every call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleetwright.aws.capacityreservations import EXPIRING, CapacityReservation
from fleetwright.aws.clients import AwsClients
from fleetwright.aws.pricing import PriceBook, shared_price_book
from fleetwright.aws.ttlcache import TtlCache
from fleetwright.aws.unavailable import InMemoryUnavailableOfferings, default_cache
from fleetwright.catalog.from_ec2 import UnsupportedInstanceType, instance_type_from_ec2
from fleetwright.catalog.loader import vpc_limits, with_kubelet
from fleetwright.cloud.offerings import UnavailableOfferings
from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.labels import ON_DEMAND, RESERVED, SPOT

log = logging.getLogger(__name__)

_TYPES: TtlCache[list[dict[str, Any]]] = TtlCache()
_OFFERINGS: TtlCache[dict[str, frozenset[str]]] = TtlCache()
_ZONE_IDS: TtlCache[dict[str, str]] = TtlCache()

CAPACITY_TYPES_BY_USAGE_CLASS = {"spot": SPOT, "on-demand": ON_DEMAND}
# Reserved capacity is already paid for: its offerings cost the on-demand price divided by this, so they
# are always chosen first while prices still order them (as Karpenter prices them).
RESERVED_PRICE_DIVISOR = 10_000_000.0


def describe_instance_types(clients: AwsClients) -> list[dict[str, Any]]:
    """Every ``DescribeInstanceTypes`` entry of the region (cached five minutes)."""

    def compute() -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        for page in clients.ec2.get_paginator("describe_instance_types").paginate():
            entries.extend(page.get("InstanceTypes", []))
        return entries

    return _TYPES.get_or_compute(clients.region, compute)


def describe_zone_offerings(clients: AwsClients) -> dict[str, frozenset[str]]:
    """Zones where each instance type is offered (``DescribeInstanceTypeOfferings``, cached)."""

    def compute() -> dict[str, frozenset[str]]:
        zones: dict[str, set[str]] = {}
        paginator = clients.ec2.get_paginator("describe_instance_type_offerings")
        for page in paginator.paginate(LocationType="availability-zone"):
            for entry in page.get("InstanceTypeOfferings", []):
                zones.setdefault(str(entry["InstanceType"]), set()).add(str(entry["Location"]))
        return {name: frozenset(found) for name, found in zones.items()}

    return _OFFERINGS.get_or_compute(clients.region, compute)


def describe_zone_ids(clients: AwsClients) -> dict[str, str]:
    """Zone name → zone id of this account's zones (``DescribeAvailabilityZones``, cached)."""

    def compute() -> dict[str, str]:
        zones = clients.ec2.describe_availability_zones().get("AvailabilityZones", [])
        return {str(z["ZoneName"]): str(z.get("ZoneId", "")) for z in zones}

    return _ZONE_IDS.get_or_compute(clients.region, compute)


def build_offerings(
    name: str,
    usage_classes: Iterable[str],
    zones: Iterable[str],
    prices: PriceBook,
    unavailable: UnavailableOfferings,
    zone_ids: Mapping[str, str] | None = None,
) -> tuple[Offering, ...]:
    """One offering per zone × capacity type that has a price; refused ones are marked unavailable.

    Offerings without a known price are left out: the scheduler could not compare them.
    """
    offerings = []
    for usage in usage_classes:
        capacity_type = CAPACITY_TYPES_BY_USAGE_CLASS.get(usage)
        if capacity_type is None:
            continue
        for zone in sorted(zones):
            price = prices.price(name, zone, capacity_type)
            if price is None:
                continue
            available = not unavailable.is_unavailable(name, zone, capacity_type)
            offerings.append(Offering(zone, capacity_type, price, available, (zone_ids or {}).get(zone, "")))
    return tuple(offerings)


def reserved_offerings(
    name: str,
    reservations: Iterable[CapacityReservation],
    zones: Iterable[str],
    prices: PriceBook,
    unavailable: UnavailableOfferings,
    zone_ids: Mapping[str, str] | None = None,
) -> tuple[Offering, ...]:
    """One ``reserved`` offering per capacity reservation of this type.

    It is available while the reservation takes more instances, the type is offered in its zone, it is
    not a Capacity Block about to end, and EC2 has not just refused it.
    """
    offered = set(zones)
    found = []
    for reservation in reservations:
        if reservation.instance_type != name:
            continue
        ondemand = prices.price(name, reservation.zone, ON_DEMAND)
        available = (
            reservation.available > 0
            and reservation.zone in offered
            and reservation.state != EXPIRING
            and not unavailable.is_unavailable(name, reservation.zone, RESERVED)
        )
        found.append(
            Offering(
                reservation.zone,
                RESERVED,
                (ondemand or 0.0) / RESERVED_PRICE_DIVISOR,
                available,
                (zone_ids or {}).get(reservation.zone, ""),
                reservation_id=reservation.id,
                reservation_type=reservation.reservation_type,
                reservation_interruptible=reservation.interruptible,
                reservation_capacity=reservation.available,
            )
        )
    return tuple(found)


def convert_instance_types(
    entries: Iterable[Mapping[str, Any]],
    zone_offerings: Mapping[str, Iterable[str]],
    prices: PriceBook,
    unavailable: UnavailableOfferings,
    reservations: Iterable[CapacityReservation] = (),
    zone_ids: Mapping[str, str] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> list[InstanceType]:
    """Instance types with offerings from raw EC2 entries; types nobody offers or sells are dropped.

    ``reservations`` add a reserved offering to their instance type; ``limits`` is the bundled VPC limits
    table (read from the layer when not given)."""
    limits = limits if limits is not None else vpc_limits()
    reserved = list(reservations)
    result = []
    for entry in entries:
        name = str(entry["InstanceType"])
        offerings = build_offerings(
            name,
            entry.get("SupportedUsageClasses", ()),
            zone_offerings.get(name, ()),
            prices,
            unavailable,
            zone_ids,
        )
        if reserved:
            offerings += reserved_offerings(
                name, reserved, zone_offerings.get(name, ()), prices, unavailable, zone_ids
            )
        if not offerings:
            continue
        try:
            result.append(instance_type_from_ec2(entry, limits.get(name), offerings))
        except UnsupportedInstanceType as error:
            log.debug("skipping %s", error)
    return result


def list_instance_types(
    clients: AwsClients,
    *,
    accept: Callable[[InstanceType], bool] | None = None,
    kubelet: KubeletOverrides | None = None,
    unavailable: UnavailableOfferings | None = None,
    reservations: Iterable[CapacityReservation] = (),
) -> list[InstanceType]:
    """The region's instance types with priced offerings, sorted by name.

    ``accept`` filters them (for an EC2NodeClass: :func:`fleetwright.aws.nodeclass.instance_type_filter`);
    ``kubelet`` adjusts pods and allocatable for the node class's kubelet settings; offerings in the
    unavailable-offerings cache come back with ``available=False``; ``reservations`` (the node class's
    capacity reservations) add reserved offerings.

    The conversion of the listings is kept while they are (:class:`ConvertedListing`); only the types
    with an unavailable offering or a reservation are converted again on each call.
    """
    unavailable = unavailable if unavailable is not None else default_cache()
    reserved = list(reservations)
    listing = converted_listing(clients)
    special = {e.instance_type for e in unavailable.entries()} | {r.instance_type for r in reserved}
    types: list[InstanceType] = []
    for entry, base in listing.entries:
        name = base.name if base is not None else str(entry["InstanceType"])
        if name in special:
            fresh = listing.convert(entry, unavailable, reserved)
            types.extend(with_kubelet([t for t in fresh if accept is None or accept(t)], kubelet))
        elif base is not None and (accept is None or accept(base)):
            types.append(listing.with_kubelet(base, kubelet))
    return sorted(types, key=lambda t: t.name)


class ConvertedListing:
    """The region's EC2 listings converted once: every type with each priced offering available and no
    reserved offering, kept while the listings and prices it was made from are the cached ones (a warm
    process converts ~1,000 types once per listing, not once per pass). Types adjusted for a node class's
    kubelet settings are kept per setting. The types it hands out are shared between calls: never modify
    them.
    """

    MAX_KUBELET_SETTINGS = 16

    def __init__(
        self,
        sources: tuple[object, ...],
        entries: list[dict[str, Any]],
        zone_offerings: Mapping[str, Iterable[str]],
        prices: PriceBook,
        zone_ids: Mapping[str, str],
    ) -> None:
        self.sources = sources
        self.zone_offerings = zone_offerings
        self.prices = prices
        self.zone_ids = zone_ids
        self.limits = vpc_limits()
        everything_available = InMemoryUnavailableOfferings()
        self.entries: list[tuple[dict[str, Any], InstanceType | None]] = []
        for entry in entries:
            found = self.convert(entry, everything_available, [])
            self.entries.append((entry, found[0] if found else None))
        self._adjusted: list[tuple[KubeletOverrides, dict[str, InstanceType]]] = []
        self._lock = threading.Lock()

    def convert(
        self, entry: dict[str, Any], unavailable: UnavailableOfferings, reserved: list[CapacityReservation]
    ) -> list[InstanceType]:
        """One entry converted as :func:`convert_instance_types` converts it (empty when it is dropped)."""
        return convert_instance_types(
            [entry], self.zone_offerings, self.prices, unavailable, reserved, self.zone_ids, self.limits
        )

    def with_kubelet(self, base: InstanceType, kubelet: KubeletOverrides | None) -> InstanceType:
        """``base`` adjusted for ``kubelet`` (:func:`with_kubelet`), computed once per setting and type."""
        if kubelet is None or base.explicit_allocatable:
            return base
        with self._lock:
            adjusted = next((done for setting, done in self._adjusted if setting == kubelet), None)
            if adjusted is None:
                if len(self._adjusted) >= self.MAX_KUBELET_SETTINGS:
                    self._adjusted.clear()
                adjusted = {}
                self._adjusted.append((kubelet, adjusted))
            found = adjusted.get(base.name)
        if found is None:
            found = with_kubelet([base], kubelet)[0]
            with self._lock:
                adjusted[base.name] = found
        return found


_CONVERTED: dict[str, ConvertedListing] = {}


def converted_listing(clients: AwsClients) -> ConvertedListing:
    """The region's converted listing; converted again when a listing or a price list was fetched
    again (their five-minute caches expired, or were invalidated)."""
    entries = describe_instance_types(clients)
    zone_offerings = describe_zone_offerings(clients)
    prices = shared_price_book(clients)
    zone_ids = describe_zone_ids(clients)
    sources = (entries, zone_offerings, prices, zone_ids)
    kept = _CONVERTED.get(clients.region)
    if kept is not None and all(a is b for a, b in zip(kept.sources, sources, strict=True)):
        return kept
    listing = ConvertedListing(sources, entries, zone_offerings, prices, zone_ids)
    _CONVERTED[clients.region] = listing
    return listing


def prime_cache(
    region: str,
    entries: list[dict[str, Any]] | None = None,
    zone_offerings: dict[str, frozenset[str]] | None = None,
) -> None:
    """Seed the module-scope caches with listings already at hand (a snapshot, or a test fixture)."""
    if entries is not None:
        _TYPES.put(region, entries)
    if zone_offerings is not None:
        _OFFERINGS.put(region, zone_offerings)
