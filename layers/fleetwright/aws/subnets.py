"""Subnets from EC2NodeClass selector terms, and the one subnet per zone a launch uses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwright.aws.clients import AwsClients
from fleetwright.aws.selectors import tag_filters
from fleetwright.aws.tags import from_aws
from fleetwright.aws.ttlcache import TtlCache
from fleetwright.model.ec2nodeclass import SubnetSelectorTerm

_CACHE: TtlCache[list[Subnet]] = TtlCache(ttl=60.0)


@dataclass(frozen=True, slots=True)
class Subnet:
    """A subnet a node may be launched in."""

    id: str
    zone: str
    zone_id: str
    available_ips: int
    vpc_id: str = ""
    tags: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


def _subnet(entry: dict[str, Any]) -> Subnet:
    return Subnet(
        id=str(entry["SubnetId"]),
        zone=str(entry.get("AvailabilityZone", "")),
        zone_id=str(entry.get("AvailabilityZoneId", "")),
        available_ips=int(entry.get("AvailableIpAddressCount", 0)),
        vpc_id=str(entry.get("VpcId", "")),
        tags=from_aws(entry.get("Tags")),
    )


def _describe(clients: AwsClients, filters: list[dict[str, Any]]) -> list[Subnet]:
    found: list[Subnet] = []
    for page in clients.ec2.get_paginator("describe_subnets").paginate(Filters=filters):
        found.extend(_subnet(entry) for entry in page.get("Subnets", []))
    return found


def resolve_subnets(clients: AwsClients, terms: Sequence[SubnetSelectorTerm]) -> list[Subnet]:
    """Subnets matching any term (tags ANDed within a term), available state only, sorted by id.

    Cached for a minute: free address counts change as nodes come and go.
    """
    key = (clients.region, tuple(term.model_dump_json() for term in terms))

    def compute() -> list[Subnet]:
        found: dict[str, Subnet] = {}
        ids = [term.id for term in terms if term.id]
        state = {"Name": "state", "Values": ["available"]}
        if ids:
            found.update({s.id: s for s in _describe(clients, [{"Name": "subnet-id", "Values": ids}, state])})
        for term in terms:
            if term.tags:
                found.update({s.id: s for s in _describe(clients, [*tag_filters(term.tags), state])})
        return sorted(found.values(), key=lambda s: s.id)

    return _CACHE.get_or_compute(key, compute)


def subnets_by_zone(subnets: Iterable[Subnet]) -> dict[str, Subnet]:
    """One subnet per zone: the one with the most free addresses (ties: lowest id)."""
    best: dict[str, Subnet] = {}
    for subnet in sorted(subnets, key=lambda s: s.id):
        current = best.get(subnet.zone)
        if current is None or subnet.available_ips > current.available_ips:
            best[subnet.zone] = subnet
    return best
