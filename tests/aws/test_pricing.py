"""On-demand prices from the Pricing API when it answers, and the unavailable-offerings cache's TTL."""

from __future__ import annotations

import json
from typing import Any

from fleetwright.aws.pricing import ondemand_prices, parse_price_list_item
from fleetwright.aws.unavailable import InMemoryUnavailableOfferings
from tests.aws.fakes import _http
from tests.support.aws import Aws


def _product(instance_type: str, usd: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": instance_type, "operatingSystem": "Linux"}},
            "terms": {
                "OnDemand": {
                    "SKU.TERM": {
                        "priceDimensions": {"SKU.TERM.DIM": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}
                    }
                }
            },
        }
    )


def test_price_list_entries_are_parsed_and_zero_prices_ignored() -> None:
    assert parse_price_list_item(_product("m5.large", "0.0960000000")) == ("m5.large", 0.096)
    assert parse_price_list_item(_product("m5.large", "0.0000000000")) is None
    assert parse_price_list_item(json.dumps({"product": {"attributes": {}}})) is None


def test_pricing_api_prices_win_over_the_static_table(aws: Aws) -> None:
    seen: list[dict[str, Any]] = []

    def answer(params: dict[str, Any], **_: Any) -> Any:
        seen.append(params)
        return _http(), {
            "PriceList": [_product("m5.large", "0.5"), _product("c5.large", "0.25")],
            "FormatVersion": "aws_v1",
        }

    aws.clients.pricing.meta.events.register_first("before-call.pricing.GetProducts", answer)
    prices, source = ondemand_prices(aws.clients)
    assert source == "pricing-api"
    assert prices == {"m5.large": 0.5, "c5.large": 0.25}
    assert b"regionCode" in seen[0]["body"]  # filtered to this region


def test_unavailable_offerings_expire_after_their_ttl() -> None:
    now = [1000.0]
    cache = InMemoryUnavailableOfferings(clock=lambda: now[0])
    cache.mark("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
    assert cache.is_unavailable("m5.large", "us-east-1a", "spot")
    assert not cache.is_unavailable("m5.large", "us-east-1a", "on-demand")
    now[0] += 179
    assert [e.reason for e in cache.entries()] == ["InsufficientInstanceCapacity"]
    now[0] += 2
    assert not cache.is_unavailable("m5.large", "us-east-1a", "spot")
    assert cache.entries() == []
