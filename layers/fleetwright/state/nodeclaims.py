"""NodeClaim records: every node Fleetwright decided to launch, from the decision to the running node.

A claim is written with status ``Launching`` *before* CreateFleet is called (its id is the ClientToken and
the ``fleetwright.io/nodeclaim`` tag), so a crash between the launch and the next write leaves a record
that the next run can match to the instance instead of launching again. ``launch_deadline`` says until
when its launcher may still be calling EC2. Status changes are conditional on the status the writer
expects, so two writers cannot both move a claim; a launcher's writes are also fenced by its lease
(``fence=``): they apply only while it still holds the lease, else :class:`LeaseLostError` is raised.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fleetwright.state.lease import Lease
from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable, Item, TransactOp


class ClaimStatus(enum.StrEnum):
    """Where a NodeClaim is in its life."""

    LAUNCHING = "Launching"  # recorded; CreateFleet is being (or was about to be) called
    LAUNCHED = "Launched"  # an instance exists; its node has not registered yet
    REGISTERED = "Registered"  # a Node with the instance's providerID exists
    INITIALIZED = "Initialized"  # the Node is Ready and its startup taints are gone
    FAILED = "Failed"  # nothing was launched (kept a while for inspection)
    TERMINATED = "Terminated"  # the instance was terminated (e.g. it never registered)


IN_FLIGHT = frozenset({ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED})
ACTIVE = frozenset({*IN_FLIGHT, ClaimStatus.REGISTERED, ClaimStatus.INITIALIZED})

# Python attribute → DynamoDB attribute (camelCase, as the rest of the table's documents).
_ATTRIBUTES = {
    "id": "id",
    "nodepool": "nodePool",
    "node_class": "nodeClass",
    "status": "status",
    "created_at": "createdAt",
    "holder": "holder",
    "instance_types": "instanceTypes",
    "zones": "zones",
    "capacity_types": "capacityTypes",
    "labels": "labels",
    "taints": "taints",
    "startup_taints": "startupTaints",
    "allocatable": "allocatable",
    "capacity": "capacity",
    "pods": "pods",
    "pod_count": "podCount",
    "expected_price": "expectedPrice",
    "instance_id": "instanceId",
    "instance_type": "instanceType",
    "zone": "zone",
    "capacity_type": "capacityType",
    "price": "price",
    "launched_at": "launchedAt",
    "registered_at": "registeredAt",
    "initialized_at": "initializedAt",
    "node_name": "nodeName",
    "reason": "reason",
    "expires_at": TTL_ATTRIBUTE,
    "nodepool_hash": "nodePoolHash",
    "nodeclass_hash": "nodeClassHash",
    "launch_deadline": "launchDeadline",
    "reservation_ids": "reservationIds",
    "annotations": "annotations",
}


@dataclass(slots=True)
class NodeClaimRecord:
    """One NodeClaim as stored.

    ``instance_types`` are the candidates, cheapest first; ``allocatable`` is what the claim offers pods
    while in flight (its cheapest candidate, less DaemonSet overhead) and ``capacity`` what it counts
    against its NodePool's limits (the largest candidate until the instance is known). Times are epoch
    seconds; ``launch_deadline`` is None on claims written before launches had deadlines. ``taints`` are
    rendered ``key=value:Effect``. ``pods`` keeps at most 50 pod keys
    (``pod_count`` has the number).
    """

    id: str
    nodepool: str
    status: str
    created_at: float
    node_class: str = ""
    holder: str = ""
    instance_types: list[str] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    capacity_types: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)
    startup_taints: list[str] = field(default_factory=list)
    allocatable: dict[str, int] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)
    pods: list[str] = field(default_factory=list)
    pod_count: int = 0
    expected_price: float | None = None
    instance_id: str = ""
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    price: float | None = None
    launched_at: float | None = None
    registered_at: float | None = None
    initialized_at: float | None = None
    node_name: str = ""
    reason: str = ""
    expires_at: int | None = None
    nodepool_hash: str = ""  # drift hashes of the NodePool and EC2NodeClass at launch ("" when unknown)
    nodeclass_hash: str = ""
    launch_deadline: float | None = None  # epoch seconds after which its launcher calls EC2 no more
    reservation_ids: list[str] = field(default_factory=list)  # reservations a reserved claim may use
    annotations: dict[str, str] = field(default_factory=dict)  # the NodePool template's, at launch

    @property
    def provider_id(self) -> str:
        """``aws:///<zone>/<instance id>`` once launched, else ``""``."""
        return f"aws:///{self.zone}/{self.instance_id}" if self.instance_id else ""

    @property
    def in_flight(self) -> bool:
        """Launching or launched, not registered yet."""
        return self.status in IN_FLIGHT

    @property
    def active(self) -> bool:
        """Neither failed nor terminated."""
        return self.status in ACTIVE

    def to_item(self, pk: str) -> Item:
        """The DynamoDB item (empty strings and None left out)."""
        item: Item = {PARTITION_KEY: pk, SORT_KEY: self.id}
        for name, value in asdict(self).items():
            if value is None or value == "":
                continue
            item[_ATTRIBUTES[name]] = value
        return item

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> NodeClaimRecord:
        """The record from a DynamoDB item (unknown attributes ignored)."""
        known = {f.name for f in fields(cls)}
        values = {name: item[attr] for name, attr in _ATTRIBUTES.items() if attr in item and name in known}
        values.setdefault("id", str(item.get(SORT_KEY, "")))
        return cls(**values)


def attribute(name: str) -> str:
    """The DynamoDB attribute name of a :class:`NodeClaimRecord` field."""
    return _ATTRIBUTES[name]


class NodeClaimStore:
    """The NodeClaims of one cluster: partition ``NODECLAIM#<cluster>``, sort key = claim id."""

    def __init__(self, table: DynamoTable, cluster: str) -> None:
        self.table = table
        self.cluster = cluster
        self.pk = f"NODECLAIM#{cluster}"

    def create(self, record: NodeClaimRecord, *, fence: Lease | None = None) -> bool:
        """Write a new claim; False when a claim with that id already exists. With ``fence``, only while
        that lease is held (else :class:`LeaseLostError`)."""
        op = self.table.put_op(
            record.to_item(self.pk), condition="attribute_not_exists(#pk)", names={"#pk": PARTITION_KEY}
        )
        return self._write(op, fence)

    def get(self, claim_id: str) -> NodeClaimRecord | None:
        """The claim, or None."""
        item = self.table.get(self.pk, claim_id)
        return NodeClaimRecord.from_item(item) if item else None

    def list(self) -> list[NodeClaimRecord]:
        """Every claim of the cluster (one Query, strongly consistent)."""
        return [NodeClaimRecord.from_item(item) for item in self.table.query(self.pk)]

    def transition(
        self,
        claim_id: str,
        expected: ClaimStatus | Iterable[ClaimStatus],
        status: ClaimStatus,
        *,
        fence: Lease | None = None,
        **changes: Any,
    ) -> bool:
        """Move a claim to ``status`` (setting ``changes``, record field names) only while its status is
        one of ``expected``; False otherwise (another writer got there first, or the claim is gone).
        With ``fence``, only while that lease is held (else :class:`LeaseLostError`)."""
        wanted = [expected] if isinstance(expected, ClaimStatus) else list(expected)
        values: dict[str, Any] = {f":s{i}": str(s) for i, s in enumerate(wanted)}
        condition = f"#status IN ({', '.join(values)})"
        set_fields = {attribute(name): value for name, value in changes.items()}
        set_fields["status"] = str(status)
        op = self.table.update_op(
            self.pk,
            claim_id,
            set_fields=set_fields,
            condition=f"attribute_exists(#pk) AND {condition}",
            names={"#pk": PARTITION_KEY, "#status": "status"},
            values=values,
        )
        return self._write(op, fence)

    def _write(self, op: TransactOp, fence: Lease | None) -> bool:
        """One conditional write, in a transaction with the lease's fence when there is one."""
        if fence is None:
            return self.table.write(op)
        result = self.table.transact([op, fence.check_op()])
        if 1 in result.failed:
            raise fence.lost()
        return result.applied

    def delete(self, claim_id: str) -> bool:
        """Remove the claim's record; False when it was already gone."""
        return self.table.delete(
            self.pk, claim_id, condition="attribute_exists(#pk)", names={"#pk": PARTITION_KEY}
        )
