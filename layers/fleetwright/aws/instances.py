"""Describe and terminate this cluster's instances; never touch one without our ownership tags.

Ownership is the cluster tag *and* the NodePool tag the controller's CreateFleet writes
(:func:`~fleetwright.aws.tags.is_owned`): an instance someone tagged with the cluster tag alone is left out
of descriptions and claim lookups, and terminating it is refused.

:class:`ClusterInstances` is the cloud contract's describe-and-terminate view on its own (what the
termination function needs, without the launch machinery ``AwsProvider`` imports and builds). EC2 throttling
and EC2-side failures of these calls come out as the contract's
:class:`~fleetwright.cloud.errors.ThrottledError` / :class:`~fleetwright.cloud.errors.TransientCloudError`;
other errors pass through unchanged."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from fleetwright.aws.clients import THROTTLING_CODES, AwsClients, error_code
from fleetwright.aws.tags import CLUSTER_TAG, INSTANCE_CONTROLLER_TAG, from_aws, is_owned, ownership_problem
from fleetwright.cloud.errors import (
    InstanceNotFoundError,
    NotOwnedError,
    ThrottledError,
    TransientCloudError,
)
from fleetwright.cloud.instances import LIVE_STATES, NODECLAIM_TAG, Instance, TerminateResult
from fleetwright.cloud.launch import LaunchedInstance
from fleetwright.model import labels as wk

log = logging.getLogger(__name__)

NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
BATCH = 200  # DescribeInstances/TerminateInstances take at most 1000 ids; keep requests small
# EC2 accepts at most 200 filter values in one DescribeInstances call, counted across its filters.
MAX_FILTER_VALUES = 200
# DescribeInstances is eventually consistent: an instance launched seconds ago may not be listed yet. An id
# it does not show is looked up once more after this pause before it counts as gone.
UNSEEN_RECHECK_SECONDS = 2.0


def placement_labels(placement: Mapping[str, Any]) -> dict[str, str]:
    """Node labels from an instance's ``Placement``: tenancy, placement group id and partition."""
    labels = {wk.INSTANCE_TENANCY: "dedicated" if placement.get("Tenancy") == "dedicated" else "default"}
    if placement.get("GroupId"):
        labels[wk.PLACEMENT_GROUP_ID] = str(placement["GroupId"])
        if placement.get("PartitionNumber"):
            labels[wk.PLACEMENT_GROUP_PARTITION] = str(placement["PartitionNumber"])
    return labels


def instance_from_ec2(entry: Mapping[str, Any]) -> Instance:
    """An :class:`Instance` from one ``DescribeInstances`` entry: spot, reserved (it runs in a capacity
    reservation) or on-demand."""
    lifecycle = entry.get("InstanceLifecycle")
    reservation = str(entry.get("CapacityReservationId") or "") if lifecycle != "spot" else ""
    if lifecycle == "spot":
        capacity_type = "spot"
    elif reservation:
        capacity_type = "reserved"
    else:
        capacity_type = "on-demand"
    return Instance(
        id=str(entry["InstanceId"]),
        instance_type=str(entry.get("InstanceType", "")),
        zone=str((entry.get("Placement") or {}).get("AvailabilityZone", "")),
        state=str((entry.get("State") or {}).get("Name", "")),
        capacity_type=capacity_type,
        image_id=str(entry.get("ImageId", "")),
        private_dns_name=str(entry.get("PrivateDnsName", "")),
        launch_time=str(entry.get("LaunchTime", "")),
        tags=from_aws(entry.get("Tags")),
        capacity_reservation_id=reservation,
        capacity_block=lifecycle == "capacity-block",
        placement=placement_labels(entry.get("Placement") or {}),
        subnet_id=str(entry.get("SubnetId", "")),
        security_group_ids=tuple(
            sorted(str(g["GroupId"]) for g in entry.get("SecurityGroups") or [] if g.get("GroupId"))
        ),
    )


def _describe(clients: AwsClients, **params: Any) -> list[Instance]:
    found: list[Instance] = []
    for page in clients.ec2.get_paginator("describe_instances").paginate(**params):
        for reservation in page.get("Reservations", []):
            found.extend(instance_from_ec2(entry) for entry in reservation.get("Instances", []))
    return found


def list_instances(clients: AwsClients, cluster: str, states: Sequence[str] = LIVE_STATES) -> list[Instance]:
    """Every instance carrying ``cluster``'s tag in the given states, impostors included (those without
    the controller's NodePool tag, ``Instance.nodepool`` empty): the garbage collector reports them, and
    nothing may act on one (``terminate_instances`` refuses it)."""
    return _describe(
        clients,
        Filters=[
            {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]},
            {"Name": "instance-state-name", "Values": list(states)},
        ],
    )


def describe_instances(clients: AwsClients, cluster: str, instance_ids: Iterable[str]) -> dict[str, Instance]:
    """The cluster's instances among ``instance_ids``; ids that are gone or not ours are left out."""
    result: dict[str, Instance] = {}
    ids = list(dict.fromkeys(instance_ids))
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        try:
            found = _describe(clients, InstanceIds=chunk)
        except Exception as error:
            if error_code(error) not in NOT_FOUND_CODES:
                raise
            # One unknown id fails the whole call: fall back to filtering by id, which ignores unknowns.
            found = _describe(clients, Filters=[{"Name": "instance-id", "Values": chunk}])
        # Filter values are patterns (``i-*`` matches every instance): keep only the ids asked for.
        result.update({i.id: i for i in found if i.id in chunk and is_owned(i.tags, cluster)})
    return result


def find_instances(clients: AwsClients, instance_ids: Iterable[str]) -> dict[str, Instance]:
    """Instances among ``instance_ids`` whoever owns them and whatever their state (terminated ones too,
    while EC2 still lists them); unknown ids are left out.

    For ownership checks only (e.g. "is this Node's instance gone, or just not ours?"): never act on an
    instance found here without :func:`~fleetwright.aws.tags.is_owned`.
    """
    ids = list(dict.fromkeys(instance_ids))
    result: dict[str, Instance] = {}
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        # The instance-id filter ignores unknown ids, where InstanceIds= would fail the whole call.
        found = _describe(clients, Filters=[{"Name": "instance-id", "Values": chunk}])
        # Filter values are patterns (``i-*`` matches every instance): keep only the ids asked for.
        result.update({i.id: i for i in found if i.id in chunk})
    return result


def find_claimed_instances(
    clients: AwsClients, cluster: str, nodeclaims: Iterable[str]
) -> dict[str, LaunchedInstance]:
    """Live instances already launched for these NodeClaims (found by their nodeclaim tag).

    This is what makes a launch idempotent across crashes and retries: a claim that already has an
    instance is not launched again.
    """
    names = sorted(set(nodeclaims))
    if not names:
        return {}
    result: dict[str, LaunchedInstance] = {}
    # The cluster and state filters use some of the call's filter values; the claim names get the rest.
    batch = MAX_FILTER_VALUES - 1 - len(LIVE_STATES)
    for start in range(0, len(names), batch):
        instances = _describe(
            clients,
            Filters=[
                {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]},
                {"Name": f"tag:{NODECLAIM_TAG}", "Values": names[start : start + batch]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ],
        )
        # An instance tagged with a claim by someone else's hand (no NodePool tag) is not the claim's.
        owned = [i for i in instances if is_owned(i.tags, cluster)]
        for instance in sorted(owned, key=lambda i: (i.launch_time, i.id)):
            result.setdefault(
                instance.nodeclaim,
                LaunchedInstance(
                    nodeclaim=instance.nodeclaim,
                    instance_id=instance.id,
                    instance_type=instance.instance_type,
                    zone=instance.zone,
                    capacity_type=instance.capacity_type,
                    image_id=instance.image_id,
                    reused=True,
                    labels={**instance.placement, **instance.reservation_labels},
                ),
            )
    return result


def _find_by_id(clients: AwsClients, ids: Sequence[str]) -> dict[str, Instance]:
    seen: dict[str, Instance] = {}
    for start in range(0, len(ids), BATCH):
        chunk = list(ids[start : start + BATCH])
        seen.update({i.id: i for i in _describe(clients, Filters=[{"Name": "instance-id", "Values": chunk}])})
    return seen


def terminate_instances(
    clients: AwsClients,
    cluster: str,
    instance_ids: Iterable[str],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> TerminateResult:
    """Terminate instances after checking each carries this cluster's ownership tags (the cluster tag and
    the controller's NodePool tag).

    Raises :class:`NotOwnedError` (and terminates nothing) when any existing instance is not ours.
    Instances that no longer exist, or are already terminated, count as gone. An id DescribeInstances does
    not list is looked up once more after a pause (a just-launched instance may not be listed yet): only an
    id still unknown then counts as gone, so an instance is never left running because EC2 was slow to
    show it.
    """
    ids = list(dict.fromkeys(instance_ids))
    result = TerminateResult()
    if not ids:
        return result
    seen = _find_by_id(clients, ids)
    unseen = [i for i in ids if i not in seen]
    if unseen:
        sleep(UNSEEN_RECHECK_SECONDS)
        seen.update(_find_by_id(clients, unseen))
    foreign = {i: ownership_problem(seen[i].tags, cluster) for i in ids if i in seen}
    foreign = {i: why for i, why in foreign.items() if why}
    if foreign:
        whys = "; ".join(f"{i}: {why}" for i, why in foreign.items())
        if any(INSTANCE_CONTROLLER_TAG in why for why in foreign.values()):
            log.warning("refused to terminate an instance tagged as this cluster's by someone else: %s", whys)
        raise NotOwnedError(f"refusing to terminate {whys}")
    targets = []
    for instance_id in ids:
        instance = seen.get(instance_id)
        if instance is None or instance.state == "terminated":
            result.already_gone.append(instance_id)
        else:
            targets.append(instance_id)
    for start in range(0, len(targets), BATCH):
        chunk = targets[start : start + BATCH]
        try:
            clients.ec2.terminate_instances(InstanceIds=chunk)
            result.terminating.extend(chunk)
        except Exception as error:
            if error_code(error) not in NOT_FOUND_CODES:
                raise
            # Raced with another terminator: retry one by one so the rest still goes.
            for instance_id in chunk:
                try:
                    clients.ec2.terminate_instances(InstanceIds=[instance_id])
                    result.terminating.append(instance_id)
                except Exception as inner:
                    if error_code(inner) not in NOT_FOUND_CODES:
                        raise
                    result.already_gone.append(instance_id)
    return result


T = TypeVar("T")

# EC2-side failures worth asking again for (besides any 5xx answer).
SERVER_ERROR_CODES = frozenset(
    {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "RequestTimeout"}
)


def _transient(error: Exception) -> TransientCloudError | None:
    """The contract's error for an EC2 failure worth retrying (None for any other error)."""
    code = error_code(error)
    if code in THROTTLING_CODES:
        return ThrottledError(f"EC2 throttled the request: {error}", code)
    response = getattr(error, "response", None)
    metadata = (response.get("ResponseMetadata") or {}) if isinstance(response, dict) else {}
    status = int(metadata.get("HTTPStatusCode", 0) or 0)
    if code in SERVER_ERROR_CODES or status >= 500:
        return TransientCloudError(f"EC2 failed: {error}", code)
    name, module = type(error).__name__, type(error).__module__
    if module.startswith("botocore") and ("Connection" in name or name.endswith("TimeoutError")):
        return TransientCloudError(f"cannot reach EC2: {error}")
    return None


@contextmanager
def _contract_errors() -> Iterator[None]:
    """Raise EC2's retryable failures as the contract's transient errors."""
    try:
        yield
    except Exception as error:
        transient = _transient(error)
        if transient is None:
            raise
        raise transient from error


def call_translating(fn: Callable[[], T]) -> T:
    """``fn()``, its retryable EC2 failures raised as the contract's transient errors."""
    with _contract_errors():
        return fn()


def get_one(instances: dict[str, Instance], instance_id: str) -> Instance:
    """The instance ``instance_id`` of a describe answer; InstanceNotFoundError when it is not there."""
    found = instances.get(instance_id)
    if found is None:
        raise InstanceNotFoundError(instance_id)
    return found


class ClusterInstances:
    """Describe and terminate this cluster's instances (the contract's ``InstanceCloud`` view), without
    the launch machinery :class:`AwsProvider` builds (and without its ``eks:DescribeCluster`` call): what
    the termination function needs. ``describe`` leaves out instances without the ownership tag,
    ``terminate`` refuses them (``NotOwnedError``)."""

    def __init__(self, clients: AwsClients, cluster: str) -> None:
        self.clients = clients
        self.cluster = cluster

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """This cluster's instances among ``instance_ids``."""
        return call_translating(lambda: describe_instances(self.clients, self.cluster, instance_ids))

    def get(self, instance_id: str) -> Instance:
        """This cluster's instance ``instance_id``; raises InstanceNotFoundError when gone or not ours."""
        return get_one(self.describe([instance_id]), instance_id)

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate this cluster's instances; raises NotOwnedError for one that is not ours."""
        return call_translating(lambda: terminate_instances(self.clients, self.cluster, instance_ids))
