"""NodeClaim records: every node Fleetwright decided to launch, from the decision to the running node.

A claim is written with status ``Launching`` *before* CreateFleet is called (its id is the ClientToken and
the ``fleetwright.io/nodeclaim`` tag), so a crash between the launch and the next write leaves a record
that the next run can match to the instance instead of launching again. ``launch_deadline`` says until
when its launcher may still be calling EC2. Status changes are conditional on the status the writer
expects, so two writers cannot both move a claim; a launcher's writes are also fenced by its lease
(``fence=``): they apply only while it still holds the lease, else :class:`LeaseLostError` is raised.

Every write also adds one to the cluster's claim revision (``REVISION#<cluster>`` / ``nodeclaims``) in
the same transaction, so the revision changes exactly when a claim record does. :meth:`NodeClaimStore.list`
reads the revision (a consistent GetItem) before anything else and Queries the records only when it
differs from the one its copy was read at; the store's own writes are applied to the copy as they commit,
so a process reading mostly its own writes keeps reading only the revision (docs/state.md).
"""

from __future__ import annotations

import enum
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fleetwright.state.lease import Lease
from fleetwright.state.table import (
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    DynamoTable,
    Item,
    TransactionConflictError,
    TransactOp,
    _from_dynamo,
    _to_dynamo,
)


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
    "hash_version": "hashVersion",
    "expire_after": "expireAfter",
    "termination_grace_period": "terminationGracePeriod",
    "requests": "requests",
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
    hash_version: str = ""  # the drift hashes' version ("" on claims recorded before versions were)
    # The NodePool template's expireAfter ("Never" or a duration) and terminationGracePeriod ("" when it set
    # none) at launch, as Karpenter copies them onto each NodeClaim; expire_after is "" on claims recorded
    # before they were copied (their NodePool's current values apply).
    expire_after: str = ""
    termination_grace_period: str = ""
    # The pods' and DaemonSets' requests the scheduler packed onto the claim (NodeClaim
    # spec.resources.requests): its node is initialized only once the extended ones are registered.
    requests: dict[str, int] = field(default_factory=dict)

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
        """The record from a DynamoDB item (unknown attributes ignored); lists and maps are copied, so
        changing the record leaves ``item`` alone."""
        # Over the item's attributes (fewer than the record's fields: empty ones are left out).
        fields_of = _FIELDS
        values: dict[str, Any] = {
            fields_of[attr]: (value.copy() if isinstance(value, (list, dict)) else value)
            for attr, value in item.items()
            if attr in fields_of
        }
        values.setdefault("id", str(item.get(SORT_KEY, "")))
        return cls(**values)


_FIELDS = {attr: name for name, attr in _ATTRIBUTES.items()}  # DynamoDB attribute → Python attribute
assert set(_ATTRIBUTES) == {f.name for f in fields(NodeClaimRecord)}
assert len(_FIELDS) == len(_ATTRIBUTES)


def attribute(name: str) -> str:
    """The DynamoDB attribute name of a :class:`NodeClaimRecord` field."""
    return _ATTRIBUTES[name]


REVISION_SORT_KEY = "nodeclaims"
REVISION_ATTRIBUTE = "revision"
CONFLICT_RETRIES = 6  # a write cancelled by a concurrent transaction on the revision item is sent again
_CLAIM_LOCKS = 64


def _stored(item: Mapping[str, Any]) -> Item:
    """``item`` as a Query would return it (floats that are whole numbers come back as ints)."""
    stored: Item = _from_dynamo(_to_dynamo(item))
    return stored


_STATUS = _ATTRIBUTES["status"]


def _active_item(item: Mapping[str, Any]) -> bool:
    """True for the item of an active claim, or one without a status (its conversion reports it)."""
    status = item.get(_STATUS)
    return status is None or status in ACTIVE


def _converted(
    items: Iterable[Mapping[str, Any]], keep: Callable[[Mapping[str, Any]], bool] | None
) -> list[NodeClaimRecord]:
    """The records of ``items`` (those ``keep`` accepts, when given)."""
    if keep is None:
        return [NodeClaimRecord.from_item(item) for item in items]
    return [NodeClaimRecord.from_item(item) for item in items if keep(item)]


class _UnknownClaimError(Exception):
    """A write applied that the cached copy cannot follow (it lacks the claim)."""


class NodeClaimStore:
    """The NodeClaims of one cluster: partition ``NODECLAIM#<cluster>``, sort key = claim id.

    ``reuse``: keep the records between :meth:`list` calls and read them again only when the claim
    revision changed (default); False Queries every time. ``queries`` and ``reused`` count the lists that
    Queried and those served from the copy.
    """

    def __init__(
        self,
        table: DynamoTable,
        cluster: str,
        *,
        reuse: bool = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.table = table
        self.cluster = cluster
        self.pk = f"NODECLAIM#{cluster}"
        self.revision_pk = f"REVISION#{cluster}"
        self.reuse = reuse
        self.sleep = sleep
        self.queries = 0
        self.reused = 0
        self._lock = threading.Lock()  # guards the copy, its revision and the epoch
        self._read_lock = threading.Lock()  # one list() Queries at a time
        self._claim_locks = [threading.Lock() for _ in range(_CLAIM_LOCKS)]
        self._items: dict[str, Item] | None = None  # claim id → item, exactly as of ``_revision``
        self._revision: int | None = None
        self._unsorted = False  # a create added a claim at the end of the copy; list() sorts it by id
        # Grows when a Query starts and when its result replaces the copy: a write that saw the epoch
        # change while it was under way cannot tell whether the Query saw it, and drops the copy.
        self._epoch = 0

    def create(self, record: NodeClaimRecord, *, fence: Lease | None = None) -> bool:
        """Write a new claim; False when a claim with that id already exists. With ``fence``, only while
        that lease is held (else :class:`LeaseLostError`)."""
        item = record.to_item(self.pk)
        op = self.table.put_op(item, condition="attribute_not_exists(#pk)", names={"#pk": PARTITION_KEY})
        stored = _stored(item)
        return self._write(record.id, op, fence, lambda _old: dict(stored))

    def get(self, claim_id: str) -> NodeClaimRecord | None:
        """The claim, or None."""
        item = self.table.get(self.pk, claim_id)
        return NodeClaimRecord.from_item(item) if item else None

    def revision(self) -> int | None:
        """The claim revision (consistent read); None before the first write of a version that keeps it."""
        item = self.table.get(self.revision_pk, REVISION_SORT_KEY)
        return int(item[REVISION_ATTRIBUTE]) if item and REVISION_ATTRIBUTE in item else None

    def list_active(self) -> list[NodeClaimRecord]:
        """The claims of :meth:`list` still active (launching to initialized), read alike; the others
        (failed and terminated claims, kept a day) are not converted. An item without a status is
        converted (and fails) as :meth:`list` would."""
        return self._records(_active_item)

    def _records(self, keep: Callable[[Mapping[str, Any]], bool] | None) -> list[NodeClaimRecord]:
        if not self.reuse:
            self.queries += 1
            return _converted(self.table.query(self.pk), keep)
        with self._read_lock:
            revision = self.revision()
            with self._lock:
                if revision is not None and self._items is not None and self._revision == revision:
                    self.reused += 1
                    if self._unsorted:
                        self._items, self._unsorted = dict(sorted(self._items.items())), False
                    return _converted(self._items.values(), keep)
                self._epoch += 1
            # The revision was read before the Query, so the copy is at least as new as ``revision``;
            # a write after it makes the next revision read differ.
            items = self.table.query(self.pk)
            self.queries += 1
            with self._lock:
                self._epoch += 1
                if revision is None:
                    self._items, self._revision = None, None
                else:
                    self._items = {str(i.get(SORT_KEY, "")): i for i in items}
                    self._revision, self._unsorted = revision, False
            return _converted(items, keep)

    def list(self) -> list[NodeClaimRecord]:
        """Every claim of the cluster, by id, as of this call: the revision is read first (strongly
        consistent), and the records are Queried (strongly consistent, paged) only when it differs from
        the revision the kept copy is exact at."""
        return self._records(None)

    def forget(self) -> None:
        """Drop the kept copy: the next :meth:`list` Queries."""
        with self._lock:
            self._epoch += 1
            self._items, self._revision = None, None

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
        stored = _stored({k: v for k, v in set_fields.items() if v is not None})
        removed = [k for k, v in set_fields.items() if v is None]

        def apply(old: Item | None) -> Item:
            if old is None:
                raise _UnknownClaimError(claim_id)
            new = {k: v for k, v in old.items() if k not in removed}
            new.update(stored)
            return new

        op = self.table.update_op(
            self.pk,
            claim_id,
            set_fields=set_fields,
            condition=f"attribute_exists(#pk) AND {condition}",
            names={"#pk": PARTITION_KEY, "#status": "status"},
            values=values,
        )
        return self._write(claim_id, op, fence, apply)

    def delete(self, claim_id: str) -> bool:
        """Remove the claim's record; False when it was already gone."""
        op = self.table.delete_op(
            self.pk, claim_id, condition="attribute_exists(#pk)", names={"#pk": PARTITION_KEY}
        )
        return self._write(claim_id, op, None, lambda _old: None)

    def _write(
        self,
        claim_id: str,
        op: TransactOp,
        fence: Lease | None,
        apply: Callable[[Item | None], Item | None],
    ) -> bool:
        """One conditional write of a claim, in a transaction with the revision's increment and, when
        there is one, the lease's fence; then the same change to the kept copy."""
        with self._claim_locks[hash(claim_id) % _CLAIM_LOCKS]:  # writes of one claim reach the copy in order
            with self._lock:
                epoch = self._epoch
            try:
                applied = self._transact(op, fence)
            except BaseException:
                self.forget()  # the write may or may not have applied
                raise
            if applied:
                self._follow(claim_id, epoch, apply)
            return applied

    def _transact(self, op: TransactOp, fence: Lease | None) -> bool:
        ops = [op, self.table.add_op(self.revision_pk, REVISION_SORT_KEY, REVISION_ATTRIBUTE)]
        if fence is not None:
            ops.append(fence.check_op())
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                result = self.table.transact(ops)
            except TransactionConflictError:
                # Nothing was written (another transaction held the revision or the claim): send again.
                if attempt == CONFLICT_RETRIES:
                    raise
                self.sleep(random.uniform(0.02, 0.05) * 2**attempt)
                if fence is not None:
                    ops[2] = fence.check_op()  # the fence's "not expired" is checked against now
                continue
            if fence is not None and 2 in result.failed:
                raise fence.lost()
            return result.applied
        raise AssertionError("unreachable")

    def _follow(self, claim_id: str, epoch: int, apply: Callable[[Item | None], Item | None]) -> None:
        """Apply a committed write to the copy, which is then exact at the next revision, unless a Query
        overlapped the write (the copy is dropped: that Query may or may not have seen it)."""
        with self._lock:
            if self._items is None or self._revision is None:
                return
            if epoch != self._epoch:
                self._items, self._revision = None, None
                return
            try:
                item = apply(self._items.get(claim_id))
            except _UnknownClaimError:
                self._items, self._revision = None, None
                return
            if item is None:
                self._items.pop(claim_id, None)
            else:
                item[PARTITION_KEY], item[SORT_KEY] = self.pk, claim_id
                self._unsorted = self._unsorted or claim_id not in self._items
                self._items[claim_id] = item
            self._revision += 1
