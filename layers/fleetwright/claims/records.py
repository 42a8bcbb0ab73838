"""From the scheduler's NodeClaims to stored records and launch requests, and back to in-flight nodes."""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterable, Mapping, Sequence

from fleetwright.catalog.os_family import as_windows
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.model import labels as wk
from fleetwright.model import resources as res
from fleetwright.model.allocatable import instance_type_allocatable
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.node import Node
from fleetwright.model.taints import Taint
from fleetwright.scheduling.types import NewNodeClaim, NodePoolTemplate
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

ID_ALPHABET = string.ascii_lowercase + string.digits
MAX_POD_KEYS = 50


def new_claim_id(nodepool: str) -> str:
    """``<nodepool>-<8 random characters>``: unique, and valid as an EC2 ClientToken (≤ 64 characters)."""
    suffix = "".join(secrets.choice(ID_ALPHABET) for _ in range(8))
    return f"{nodepool[:50]}-{suffix}"


def render_taints(taints: Iterable[Taint]) -> list[str]:
    """``key=value:Effect`` strings."""
    return [t.render() for t in taints]


def parse_taint(text: str) -> Taint:
    """The inverse of :meth:`Taint.render`."""
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    return Taint(key=key, effect=effect, value=value)


def claim_record(
    claim: NewNodeClaim,
    claim_id: str,
    template: NodePoolTemplate,
    instance_types: Sequence[InstanceType],
    *,
    holder: str,
    now: float,
) -> NodeClaimRecord:
    """The record written before launching ``claim`` (status Launching).

    ``instance_types`` are the candidates actually offered to EC2 (cheapest first). While in flight the
    claim offers the cheapest candidate's allocatable less the DaemonSets' requests, and counts against
    the NodePool's limits at the largest candidate's capacity, as the scheduler counted it.
    """
    cheapest = instance_types[0]
    allocatable = res.subtract(instance_type_allocatable(cheapest, template.kubelet), claim.daemon_requests)
    capacity: dict[str, int] = {}
    for instance_type in instance_types:
        for name, amount in instance_type.capacity.items():
            capacity[name] = max(capacity.get(name, 0), amount)
    pod_keys = [p.key for p in claim.pods]
    return NodeClaimRecord(
        id=claim_id,
        nodepool=claim.nodepool,
        status=str(ClaimStatus.LAUNCHING),
        created_at=now,
        node_class=template.node_class,
        holder=holder,
        instance_types=[t.name for t in instance_types],
        zones=list(claim.zones),
        capacity_types=list(claim.capacity_types),
        labels=dict(claim.labels),
        taints=render_taints(claim.taints),
        startup_taints=render_taints(template.startup_taints),
        allocatable={k: max(0, v) for k, v in allocatable.items()},
        capacity=capacity,
        pods=pod_keys[:MAX_POD_KEYS],
        pod_count=len(pod_keys),
        expected_price=claim.price,
        reservation_ids=reservation_ids(claim),
        requests={k: v for k, v in claim.requests.items() if v > 0},
    )


def reservation_ids(claim: NewNodeClaim) -> list[str]:
    """The capacity reservations the scheduler pinned a reserved claim to (none for other claims)."""
    if list(claim.capacity_types) != [wk.RESERVED]:
        return []
    pinned = claim.requirements.get(wk.CAPACITY_RESERVATION_ID)
    if pinned is None or pinned.complement:
        return []
    return sorted(pinned.values)


def launch_request(
    record: NodeClaimRecord,
    instance_types: Sequence[InstanceType],
    node_class: EC2NodeClass | None,
    *,
    efa: bool = False,
) -> LaunchRequest:
    """The provider's request for a recorded claim (``efa``: its pods request EFA devices)."""
    return LaunchRequest(
        nodeclaim=record.id,
        nodepool=record.nodepool,
        instance_types=tuple(instance_types),
        zones=tuple(record.zones),
        capacity_types=tuple(record.capacity_types),
        labels=dict(record.labels),
        taints=tuple(parse_taint(t) for t in record.taints),
        startup_taints=tuple(parse_taint(t) for t in record.startup_taints),
        node_class=node_class,
        node_class_name=record.node_class,
        reservation_ids=tuple(record.reservation_ids),
        efa=efa,
    )


def launched_fields(
    instance: LaunchedInstance, now: float, price: float | None, labels: Mapping[str, str] | None = None
) -> dict[str, object]:
    """The record fields set once the instance exists; the labels the launch decided (tenancy,
    placement group, a capacity reservation's) join the claim's ``labels``."""
    fields: dict[str, object] = {
        "instance_id": instance.instance_id,
        "instance_type": instance.instance_type,
        "zone": instance.zone,
        "capacity_type": instance.capacity_type,
        "price": instance.price if instance.price is not None else price,
        "launched_at": now,
    }
    decided = {k: v for k, v in instance.labels.items() if (labels or {}).get(k) != v}
    if decided:
        fields["labels"] = {**(labels or {}), **decided}
    return fields


def offering_price(
    instance_types: Mapping[str, InstanceType], name: str, zone: str, capacity_type: str
) -> float | None:
    """The catalog price of one offering (for instances whose launch did not report one)."""
    instance_type = instance_types.get(name)
    if instance_type is None:
        return None
    for offering in instance_type.offerings:
        if offering.zone == zone and offering.capacity_type == capacity_type:
            return offering.price
    return None


def in_flight_node(record: NodeClaimRecord, instance_types: Mapping[str, InstanceType]) -> Node:
    """The claim as a node the scheduler can place pending pods on (it will exist soon).

    Labels: the claim's, plus what the launched instance fixed (type, zone, capacity type) and the type's
    well-known labels once known (as the claim's OS sees the type: a Windows claim stays Windows).
    """
    labels = dict(record.labels)
    labels[wk.NODEPOOL] = record.nodepool
    capacity = dict(record.capacity)
    if record.instance_type:
        known = instance_types.get(record.instance_type)
        build = record.labels.get(wk.WINDOWS_BUILD)
        if known is not None and build:
            known = as_windows(known, build) or known  # the catalog's view is the Linux one
        if known is not None:
            labels.update(known.labels)
            capacity = dict(known.capacity)
        labels[wk.INSTANCE_TYPE] = record.instance_type
        labels[wk.ZONE] = record.zone
        labels[wk.CAPACITY_TYPE] = record.capacity_type
    labels.setdefault(wk.HOSTNAME, record.id)
    return Node(
        name=record.id,
        labels=labels,
        allocatable=dict(record.allocatable),
        taints=tuple(parse_taint(t) for t in record.taints),
        capacity=capacity,
        provider_id=record.provider_id,
        ready=False,
        in_flight=True,
    )
