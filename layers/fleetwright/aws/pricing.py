"""Hourly prices: on-demand from the Pricing API (with a shipped table as fallback), spot from EC2.

Spot prices are the latest ``DescribeSpotPriceHistory`` entry per (instance type, zone). On-demand
prices come from the AWS Pricing API; when it cannot be reached (no permission, not emulated, an
isolated region) the static table shipped in ``fleetwright/catalog/data/ondemand-prices.json`` is used.
Both are cached for five minutes per region at module scope.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwright.aws.clients import AwsClients, error_code
from fleetwright.aws.ttlcache import TtlCache
from fleetwright.catalog.loader import ondemand_prices as static_ondemand_prices
from fleetwright.model.labels import ON_DEMAND, SPOT

log = logging.getLogger(__name__)

SPOT_PRODUCT_DESCRIPTIONS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")

_ONDEMAND: TtlCache[tuple[dict[str, float], str]] = TtlCache()
_SPOT: TtlCache[dict[tuple[str, str], float]] = TtlCache()


@dataclass(slots=True)
class PriceBook:
    """Prices of one region: on-demand per type, spot per (type, zone), and where they came from."""

    region: str
    ondemand: dict[str, float] = field(default_factory=dict)
    spot: dict[tuple[str, str], float] = field(default_factory=dict)
    ondemand_source: str = "pricing-api"

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        """USD per hour of one offering, or None when unknown."""
        if capacity_type == SPOT:
            return self.spot.get((instance_type, zone))
        if capacity_type == ON_DEMAND:
            return self.ondemand.get(instance_type)
        return None


def load_static_prices(region: str) -> dict[str, float]:
    """The shipped on-demand table for ``region`` (empty when the region is not in it)."""
    return static_ondemand_prices(region)


def parse_price_list_item(item: str | Mapping[str, Any]) -> tuple[str, float] | None:
    """``(instance type, USD per hour)`` from one Pricing API ``PriceList`` entry, None when unusable."""
    product = json.loads(item) if isinstance(item, str) else item
    name = ((product.get("product") or {}).get("attributes") or {}).get("instanceType")
    if not name:
        return None
    for term in ((product.get("terms") or {}).get("OnDemand") or {}).values():
        for dimension in (term.get("priceDimensions") or {}).values():
            usd = (dimension.get("pricePerUnit") or {}).get("USD")
            if usd is not None and float(usd) > 0:
                return str(name), float(usd)
    return None


def ondemand_prices_from_api(clients: AwsClients, region: str) -> dict[str, float]:
    """Linux, shared-tenancy on-demand prices of ``region`` from the Pricing API (raises on API errors)."""
    filters = [
        {"Type": "TERM_MATCH", "Field": field_name, "Value": value}
        for field_name, value in (
            ("regionCode", region),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
            ("productFamily", "Compute Instance"),
        )
    ]
    prices: dict[str, float] = {}
    paginator = clients.pricing.get_paginator("get_products")
    for page in paginator.paginate(ServiceCode="AmazonEC2", Filters=filters):
        for item in page.get("PriceList", []):
            parsed = parse_price_list_item(item)
            if parsed:
                prices[parsed[0]] = parsed[1]
    return prices


def ondemand_prices(clients: AwsClients) -> tuple[dict[str, float], str]:
    """On-demand prices of the clients' region and their source (``pricing-api`` or ``static``), cached."""
    prices, source = _ondemand_entry(clients)
    return dict(prices), source


def _ondemand_entry(clients: AwsClients) -> tuple[dict[str, float], str]:
    """The cache's own on-demand entry (the same object until it is fetched again; not to be modified)."""
    region = clients.region

    def compute() -> tuple[dict[str, float], str]:
        try:
            prices = ondemand_prices_from_api(clients, region)
        except Exception as error:  # any failure of the optional API falls back to the shipped table
            log.warning(
                "Pricing API unavailable (%s); using the static on-demand table", error_code(error) or error
            )
            prices = {}
        if not prices:
            return load_static_prices(region), "static"
        return prices, "pricing-api"

    return _ONDEMAND.get_or_compute(region, compute)


def spot_prices(clients: AwsClients, instance_types: Iterable[str] = ()) -> dict[tuple[str, str], float]:
    """Latest spot price per (instance type, zone), cached per region.

    ``instance_types`` narrows the query; the cache only holds full-region listings.
    """
    names = sorted(set(instance_types))
    if names:
        return _fetch_spot_prices(clients, names)
    return dict(_spot_entry(clients))


def _spot_entry(clients: AwsClients) -> dict[tuple[str, str], float]:
    """The cache's own full-region spot entry (the same object until it is fetched again; not to be
    modified)."""
    return _SPOT.get_or_compute(clients.region, lambda: _fetch_spot_prices(clients, []))


def _fetch_spot_prices(clients: AwsClients, names: list[str]) -> dict[tuple[str, str], float]:
    """The latest spot price per (instance type, zone) from ``DescribeSpotPriceHistory`` (of ``names``,
    or of every type when empty)."""
    latest: dict[tuple[str, str], tuple[datetime.datetime | str, float]] = {}
    params: dict[str, Any] = {
        "ProductDescriptions": list(SPOT_PRODUCT_DESCRIPTIONS),
        # StartTime=now asks EC2 for the price in force now, not the whole 90-day history.
        "StartTime": datetime.datetime.now(datetime.UTC),
    }
    if names:
        params["InstanceTypes"] = names
    for page in clients.ec2.get_paginator("describe_spot_price_history").paginate(**params):
        for entry in page.get("SpotPriceHistory", []):
            key = (str(entry["InstanceType"]), str(entry["AvailabilityZone"]))
            stamp = entry.get("Timestamp") or ""
            previous = latest.get(key)
            if previous is None or _later(stamp, previous[0]):
                latest[key] = (stamp, float(entry["SpotPrice"]))
    return {key: value for key, (_, value) in latest.items()}


def _later(left: datetime.datetime | str, right: datetime.datetime | str) -> bool:
    if isinstance(left, datetime.datetime) and isinstance(right, datetime.datetime):
        return left >= right
    return str(left) >= str(right)


def price_book(clients: AwsClients) -> PriceBook:
    """On-demand and spot prices of the clients' region."""
    ondemand, source = ondemand_prices(clients)
    return PriceBook(clients.region, ondemand, spot_prices(clients), source)


_SHARED: dict[str, tuple[object, object, PriceBook]] = {}


def shared_price_book(clients: AwsClients) -> PriceBook:
    """The region's prices as one object that stays the same until either listing is fetched again, so
    what is derived from it can be kept as long (the converted instance types). Read it, never modify
    it: it holds the caches' own entries."""
    ondemand = _ondemand_entry(clients)
    spot = _spot_entry(clients)
    kept = _SHARED.get(clients.region)
    if kept is not None and kept[0] is ondemand and kept[1] is spot:
        return kept[2]
    book = PriceBook(clients.region, ondemand[0], spot, ondemand[1])
    _SHARED[clients.region] = (ondemand, spot, book)
    return book
