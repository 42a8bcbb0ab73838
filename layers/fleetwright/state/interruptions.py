"""Interruption records: one item per interrupted instance and event kind, so one event leads to one
replacement and one termination workflow however many times (and however concurrently) it is delivered.

Partition ``INTERRUPTION#<cluster>``, sort key ``<instance id>#<kind>``. The delivery that creates the
record with a conditional put (``attribute_not_exists``) owns attempt 1; a later delivery may take over
only with a conditional update on the attempt number it read (a failed workflow, or an attempt whose
owner stopped answering), which makes it attempt N+1. The record keeps what is needed to drive the
workflow again without the event: the termination request, the replacement claims and the execution
name. The TTL collects records long after their instance is gone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable

# Where an attempt stands.
CLAIMED: Final = "Claimed"  # a delivery owns the attempt and is launching / starting the workflow
STARTED: Final = "Started"  # the attempt's workflow execution was started
GAVE_UP: Final = "GaveUp"  # attempts exhausted: the node was given back

RECORD_TTL_SECONDS: Final = 7 * 86400.0


@dataclass(slots=True)
class InterruptionRecord:
    """One interruption of one instance.

    ``claimed_at`` (epoch seconds) is when the current attempt was claimed; ``request`` the termination
    request as the workflow's JSON (empty until built); ``deadline`` its deadline in epoch seconds (0
    until known); ``node`` the Node's name.
    """

    instance_id: str
    kind: str
    attempt: int = 1
    status: str = CLAIMED
    claimed_at: float = 0.0
    execution: str = ""
    replacement_claims: list[str] = field(default_factory=list)
    request: dict[str, Any] = field(default_factory=dict)
    deadline: float = 0.0
    node: str = ""
    event_id: str = ""

    @property
    def key(self) -> str:
        """The sort key."""
        return record_key(self.instance_id, self.kind)

    def to_item(self, pk: str) -> dict[str, Any]:
        """The DynamoDB item."""
        return {
            PARTITION_KEY: pk,
            SORT_KEY: self.key,
            "instanceId": self.instance_id,
            "kind": self.kind,
            "attempt": self.attempt,
            "status": self.status,
            "claimedAt": self.claimed_at,
            "execution": self.execution,
            "replacementClaims": list(self.replacement_claims),
            "request": dict(self.request) or None,
            "deadline": self.deadline,
            "node": self.node,
            "eventId": self.event_id,
            TTL_ATTRIBUTE: math.ceil(self.claimed_at + RECORD_TTL_SECONDS),
        }

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> InterruptionRecord:
        """The record in an item."""
        return cls(
            instance_id=str(item.get("instanceId", "")),
            kind=str(item.get("kind", "")),
            attempt=int(item.get("attempt", 1)),
            status=str(item.get("status", CLAIMED)),
            claimed_at=float(item.get("claimedAt", 0.0)),
            execution=str(item.get("execution", "")),
            replacement_claims=[str(c) for c in item.get("replacementClaims") or []],
            request=dict(item.get("request") or {}),
            deadline=float(item.get("deadline", 0.0)),
            node=str(item.get("node", "")),
            event_id=str(item.get("eventId", "")),
        )


def record_key(instance_id: str, kind: str) -> str:
    """``<instance id>#<kind>``."""
    return f"{instance_id}#{kind}"


class InterruptionRecords:
    """The interruption records of one cluster."""

    def __init__(self, table: DynamoTable, cluster: str) -> None:
        self.table = table
        self.pk = f"INTERRUPTION#{cluster}"

    def create(self, record: InterruptionRecord) -> bool:
        """Write a new record; False when one exists already (another delivery owns the interruption)."""
        return self.table.put(
            record.to_item(self.pk), condition="attribute_not_exists(#pk)", names={"#pk": PARTITION_KEY}
        )

    def get(self, instance_id: str, kind: str) -> InterruptionRecord | None:
        """The record (strongly consistent), or None."""
        item = self.table.get(self.pk, record_key(instance_id, kind))
        return InterruptionRecord.from_item(item) if item else None

    def all(self) -> list[InterruptionRecord]:
        """Every record of the cluster."""
        return [InterruptionRecord.from_item(i) for i in self.table.query(self.pk)]

    def for_instance(self, instance_id: str) -> list[InterruptionRecord]:
        """The records about ``instance_id`` (one per event kind)."""
        return [r for r in self.all() if r.instance_id == instance_id]

    def take_over(self, record: InterruptionRecord, claimed_at: float) -> InterruptionRecord | None:
        """Claim attempt ``record.attempt + 1``; None when someone else changed the attempt first."""
        taken = InterruptionRecord(
            instance_id=record.instance_id,
            kind=record.kind,
            attempt=record.attempt + 1,
            status=CLAIMED,
            claimed_at=claimed_at,
            execution="",
            replacement_claims=list(record.replacement_claims),
            request=dict(record.request),
            deadline=record.deadline,
            node=record.node,
            event_id=record.event_id,
        )
        written = self.table.put(
            taken.to_item(self.pk),
            condition="#attempt = :attempt",
            names={"#attempt": "attempt"},
            values={":attempt": record.attempt},
        )
        return taken if written else None

    def update(self, record: InterruptionRecord, **fields: Any) -> bool:
        """Set attributes (camelCase names) of the attempt ``record.attempt``; False when the attempt was
        taken over meanwhile (nothing changed then)."""
        return self.table.update(
            self.pk,
            record.key,
            set_fields=fields,
            condition="#attempt = :attempt",
            names={"#attempt": "attempt"},
            values={":attempt": record.attempt},
        )

    def delete(self, instance_id: str, kind: str) -> bool:
        """Forget the record; False when there was none."""
        return self.table.delete(
            self.pk,
            record_key(instance_id, kind),
            condition="attribute_exists(#pk)",
            names={"#pk": PARTITION_KEY},
        )
