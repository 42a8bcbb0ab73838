"""Security groups from EC2NodeClass selector terms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleetwright.aws.clients import AwsClients
from fleetwright.aws.selectors import tag_filters
from fleetwright.aws.ttlcache import TtlCache
from fleetwright.model.ec2nodeclass import SecurityGroupSelectorTerm

_CACHE: TtlCache[list[str]] = TtlCache()


def _describe(clients: AwsClients, filters: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for page in clients.ec2.get_paginator("describe_security_groups").paginate(Filters=filters):
        found.extend(str(group["GroupId"]) for group in page.get("SecurityGroups", []))
    return found


def resolve_security_groups(clients: AwsClients, terms: Sequence[SecurityGroupSelectorTerm]) -> list[str]:
    """Ids of the security groups matching any term (by id, by group name, or by tags), sorted."""
    key = (clients.region, tuple(term.model_dump_json() for term in terms))

    def compute() -> list[str]:
        found: set[str] = set()
        ids = [term.id for term in terms if term.id]
        if ids:
            found.update(_describe(clients, [{"Name": "group-id", "Values": ids}]))
        names = [term.name for term in terms if term.name]
        if names:
            found.update(_describe(clients, [{"Name": "group-name", "Values": names}]))
        for term in terms:
            if term.tags:
                found.update(_describe(clients, tag_filters(term.tags)))
        return sorted(found)

    return _CACHE.get_or_compute(key, compute)
