"""Pod-set markers: the pods each node held when the disruption controller last saw them change, so the
time a pod *left* a node (which no object in the cluster records once the pod is gone) can be told across
invocations, and ``consolidateAfter`` counted from a node's last pod event as Karpenter counts it.

One item per node, partition ``PODSET#<cluster>``, sort key = node name: a fingerprint of the node's pods
(their uids), how many there were, when that set was first seen (``seen``) and when a pod was last seen
gone (``removed``, None when none has left since the marker began). The controller writes a marker only
when a node's pods change, and deletes it when the node is gone; the TTL only collects what a crash leaves
behind. A marker of an earlier node of the same name (node names are host names and can come back) is told
apart by its instance id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable

# A marker nobody rewrites or deletes for this long belongs to a node long gone.
MARKER_TTL_SECONDS: Final = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class PodSetMarker:
    """The pods ``node`` held (``fingerprint`` of ``count`` pods) since ``seen`` (epoch seconds); ``removed``:
    when a pod was last seen gone from it; ``instance_id`` tells node names reused apart."""

    node: str
    fingerprint: str
    count: int
    seen: float
    removed: float | None = None
    instance_id: str = ""


def _marker(node: str, item: dict[str, object]) -> PodSetMarker:
    removed = item.get("removed")
    return PodSetMarker(
        node=node,
        fingerprint=str(item.get("fingerprint", "")),
        count=int(str(item.get("count", 0))),
        seen=float(str(item.get("seen", 0.0))),
        removed=None if removed is None else float(str(removed)),
        instance_id=str(item.get("instanceId", "")),
    )


class PodSetStore:
    """The pod-set markers of one cluster."""

    def __init__(self, table: DynamoTable, cluster: str) -> None:
        self.table = table
        self.pk = f"PODSET#{cluster}"

    def list(self) -> dict[str, PodSetMarker]:
        """Every marker, by node name (one Query, strongly consistent)."""
        found: dict[str, PodSetMarker] = {}
        for item in self.table.query(self.pk):
            node = str(item.get(SORT_KEY, ""))
            found[node] = _marker(node, item)
        return found

    def get(self, node: str) -> PodSetMarker | None:
        """The node's marker, or None."""
        item = self.table.get(self.pk, node)
        return None if item is None else _marker(node, item)

    def put(self, marker: PodSetMarker) -> None:
        """Record ``marker`` (replacing the node's previous one)."""
        self.table.put(
            {
                PARTITION_KEY: self.pk,
                SORT_KEY: marker.node,
                "fingerprint": marker.fingerprint,
                "count": marker.count,
                "seen": marker.seen,
                "removed": marker.removed,
                "instanceId": marker.instance_id,
                TTL_ATTRIBUTE: math.ceil(marker.seen + MARKER_TTL_SECONDS),
            }
        )

    def clear(self, node: str) -> bool:
        """Forget the node's marker; False when there was none."""
        return self.table.delete(
            self.pk, node, condition="attribute_exists(#pk)", names={"#pk": PARTITION_KEY}
        )
