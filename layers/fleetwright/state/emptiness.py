""" "Empty since" markers: when the disruption controller first saw each node holding no pod that would
need a new home, so ``consolidateAfter`` is measured across invocations.

One item per node, partition ``EMPTY#<cluster>``, sort key = node name. The first writer wins
(``attribute_not_exists``), so two passes racing keep the earlier time; a marker left by an earlier node
of the same name (node names are host names and can come back) is replaced because its instance id
differs. The controller deletes a marker when the node holds a pod again or is gone; the TTL only
collects what a crash leaves behind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable

# A marker nobody refreshes or deletes for this long belongs to a node long gone.
MARKER_TTL_SECONDS: Final = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class EmptyMarker:
    """A node seen empty since ``since`` (epoch seconds); ``instance_id`` tells node names reused apart."""

    node: str
    since: float
    instance_id: str = ""


class EmptinessStore:
    """The "empty since" markers of one cluster."""

    def __init__(self, table: DynamoTable, cluster: str) -> None:
        self.table = table
        self.pk = f"EMPTY#{cluster}"

    def list(self) -> dict[str, EmptyMarker]:
        """Every marker, by node name (one Query, strongly consistent)."""
        markers: dict[str, EmptyMarker] = {}
        for item in self.table.query(self.pk):
            node = str(item.get(SORT_KEY, ""))
            markers[node] = EmptyMarker(node, float(item.get("since", 0.0)), str(item.get("instanceId", "")))
        return markers

    def get(self, node: str) -> EmptyMarker | None:
        """The node's marker, or None."""
        item = self.table.get(self.pk, node)
        if item is None:
            return None
        return EmptyMarker(node, float(item.get("since", 0.0)), str(item.get("instanceId", "")))

    def mark(self, node: str, since: float, instance_id: str = "") -> bool:
        """Record that ``node`` is empty since ``since``; False when a marker of the same instance exists
        already (the earlier time stands)."""
        return self.table.put(
            {
                PARTITION_KEY: self.pk,
                SORT_KEY: node,
                "since": since,
                "instanceId": instance_id,
                TTL_ATTRIBUTE: math.ceil(since + MARKER_TTL_SECONDS),
            },
            condition="attribute_not_exists(#pk) OR #iid <> :iid",
            names={"#pk": PARTITION_KEY, "#iid": "instanceId"},
            values={":iid": instance_id},
        )

    def clear(self, node: str) -> bool:
        """Forget the node's marker; False when there was none."""
        return self.table.delete(
            self.pk, node, condition="attribute_exists(#pk)", names={"#pk": PARTITION_KEY}
        )
