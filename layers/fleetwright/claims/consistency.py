"""Karpenter's node shape check: a claim's node that registers with much less CPU or memory than the instance
type it was launched as (a wrong AMI, a kubelet reserving too much, a mislabelled type) is reported on the
NodeClaim (``FailedConsistencyCheck``), since every scheduling simulation counts on that room.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fleetwright.model.quantity import CPU, MEMORY, format_resource, parse_resource

# Below this fraction of the expected capacity a resource is reported (Karpenter's threshold).
MIN_FRACTION: Final = 0.90
CHECKED: Final = (CPU, MEMORY)


def shape_issues(node: Mapping[str, Any], expected: Mapping[str, int]) -> list[str]:
    """One message per checked resource the Node's ``status.capacity`` holds less than 90 % of
    ``expected`` (the launched instance type's capacity), in Karpenter's words: ``expected 4 of resource
    cpu, but found 2 (50.0% of expected)``. A resource the Node does not report is not judged."""
    capacity = (node.get("status") or {}).get("capacity") or {}
    issues: list[str] = []
    for name in CHECKED:
        want = expected.get(name, 0)
        raw = capacity.get(name)
        if not want or raw is None:
            continue
        try:
            found = parse_resource(name, raw)
        except (TypeError, ValueError):
            issues.append(f"expected {format_resource(name, want)} of resource {name}, but found {raw!r}")
            continue
        fraction = found / want
        if fraction < MIN_FRACTION:
            issues.append(
                f"expected {format_resource(name, want)} of resource {name}, but found {raw} "
                f"({fraction * 100:.1f}% of expected)"
            )
    return issues
