"""Resource lists: ``{resource name: integer amount}`` (cpu in milli-cores, the rest in base units)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleetwright.model.quantity import format_resource, parse_resource

ResourceList = dict[str, int]


def parse_resources(raw: Mapping[str, str | int | float] | None) -> ResourceList:
    """Parse a Kubernetes resource list (``{"cpu": "500m", "memory": "1Gi"}``)."""
    if not raw:
        return {}
    return {str(name): parse_resource(str(name), value) for name, value in raw.items()}


def add(*lists: Mapping[str, int]) -> ResourceList:
    """Sum resource lists key by key."""
    total: ResourceList = {}
    for item in lists:
        for name, amount in item.items():
            total[name] = total.get(name, 0) + amount
    return total


def subtract(left: Mapping[str, int], right: Mapping[str, int]) -> ResourceList:
    """``left - right`` key by key (keys of either side)."""
    result = dict(left)
    for name, amount in right.items():
        result[name] = result.get(name, 0) - amount
    return result


def maximum(lists: Iterable[Mapping[str, int]]) -> ResourceList:
    """Key-by-key maximum of resource lists."""
    result: ResourceList = {}
    for item in lists:
        for name, amount in item.items():
            if amount > result.get(name, 0) or name not in result:
                result[name] = max(amount, result.get(name, amount))
    return result


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """True when every requested amount is within what is available (missing means zero)."""
    return all(amount <= available.get(name, 0) for name, amount in requests.items() if amount > 0)


def render(resources: Mapping[str, int]) -> str:
    """``cpu=1930m, memory=6.9Gi, pods=29`` for messages."""
    return ", ".join(f"{name}={format_resource(name, amount)}" for name, amount in sorted(resources.items()))
