"""The placement group an EC2NodeClass's ``placementGroupSelector`` names, from DescribePlacementGroups.

Only groups in state ``available`` count. Lookups are cached for a minute like Karpenter's; the last
answer found is kept a day longer and served when EC2 cannot be asked, so a throttled lookup does not
stop launches into a group that existed a minute ago.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fleetwright.aws.clients import AwsClients, error_code
from fleetwright.aws.ttlcache import TtlCache
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import PlacementGroupSelector
from fleetwright.model.requirements import Requirement, Requirements

log = logging.getLogger(__name__)

CLUSTER = "cluster"
PARTITION = "partition"
SPREAD = "spread"
NOT_FOUND_CODES = frozenset({"InvalidPlacementGroup.Unknown", "InvalidPlacementGroupId.NotFound"})

_FRESH: TtlCache[PlacementGroup | None] = TtlCache(ttl=60.0)
_LAST_FOUND: TtlCache[PlacementGroup] = TtlCache(ttl=24 * 3600.0)


@dataclass(frozen=True, slots=True)
class PlacementGroup:
    """A resolved placement group; ``partition_count`` only for the partition strategy."""

    id: str
    name: str
    strategy: str
    partition_count: int = 0
    spread_level: str = ""

    def partitions(self) -> list[str]:
        """Partition numbers as label values (``"1"`` … ``"N"``); empty for other strategies."""
        if self.strategy != PARTITION:
            return []
        return [str(n) for n in range(1, self.partition_count + 1)]


def placement_group_requirements(group: PlacementGroup | None) -> Requirements:
    """What a node class's placement group offers the scheduler: its id and, for the partition strategy,
    its partitions, so pods may select either (nothing without a group)."""
    if group is None:
        return Requirements()
    offered = [Requirement.single(wk.PLACEMENT_GROUP_ID, group.id)]
    if group.partitions():
        offered.append(Requirement.create(wk.PLACEMENT_GROUP_PARTITION, "In", group.partitions()))
    return Requirements.of(offered)


def _from_ec2(entry: dict[str, Any]) -> PlacementGroup:
    return PlacementGroup(
        id=str(entry.get("GroupId", "")),
        name=str(entry.get("GroupName", "")),
        strategy=str(entry.get("Strategy", "")),
        partition_count=int(entry.get("PartitionCount") or 0),
        spread_level=str(entry.get("SpreadLevel", "")),
    )


def describe_request(selector: PlacementGroupSelector) -> dict[str, Any]:
    """The DescribePlacementGroups parameters for a selector: by id or by name, available groups only."""
    params: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["available"]}]}
    if selector.id:
        params["GroupIds"] = [selector.id]
    else:
        params["GroupNames"] = [selector.name]
    return params


def resolve_placement_group(
    clients: AwsClients, selector: PlacementGroupSelector | None
) -> PlacementGroup | None:
    """The selected placement group, or None when none is selected or it does not exist (any more).

    API errors other than "not found" propagate unless an earlier answer is at hand.
    """
    if selector is None:
        return None
    key = (clients.region, selector.id or "", selector.name or "")

    def compute() -> PlacementGroup | None:
        try:
            answer = clients.ec2.describe_placement_groups(**describe_request(selector))
        except Exception as error:
            if error_code(error) in NOT_FOUND_CODES:
                return None
            remembered = _remembered(key, error)
            log.warning("DescribePlacementGroups failed, using the group found before: %s", error)
            return remembered
        groups = answer.get("PlacementGroups") or []
        if not groups:
            return None
        group = _from_ec2(groups[0])
        _LAST_FOUND.put(key, group)
        return group

    return _FRESH.get_or_compute(key, compute)


def _remembered(key: tuple[str, str, str], error: Exception) -> PlacementGroup:
    """The group found for ``key`` within the last day; re-raises ``error`` when there is none."""

    def fail() -> PlacementGroup:
        raise error

    return _LAST_FOUND.get_or_compute(key, fail)
