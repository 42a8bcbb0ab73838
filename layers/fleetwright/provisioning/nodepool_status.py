"""The ``status`` of NodePools and EC2NodeClasses read from the cluster, as ``kubectl get`` shows it.

NodePool: ``resources`` (the summed capacity of its nodes, plus ``nodes``, their number; as Karpenter counts
them, a claim whose instance is launched counts from then, at that instance's capacity, before its Node
registers) and the conditions ``ValidationSucceeded``, ``NodeClassReady`` and ``Ready``, and two that
``Ready`` does not depend on: ``LimitsConfigured`` (False for a NodePool without ``spec.limits``) and
Karpenter's ``NodeRegistrationHealthy`` (False while the NodePool's registration breaker holds its
launches). EC2NodeClass: the ``subnets``, ``securityGroups``, ``amis``, ``capacityReservations`` and
``instanceProfile`` its terms resolve to and the conditions ``ValidationSucceeded``, ``SubnetsReady``,
``SecurityGroupsReady``, ``AMIsReady``, ``InstanceProfileReady``, ``CapacityReservationsReady`` and
``Ready``. Written through the status subresource, and only when it differs from what the object holds; a
condition keeps its ``lastTransitionTime`` while its status stays.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from fleetwright.claims.admission import breaker_message
from fleetwright.claims.registration import instance_id_of
from fleetwright.cloud.nodeclass import ImageFound, Lookup, NodeClassResolution, ReservationFound
from fleetwright.cloud.provider import NodeClassStatusCloud
from fleetwright.kube.client import MERGE_PATCH, JsonObject
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.patches import merge_patch
from fleetwright.kube.resources import EC2_NODE_CLASSES, NODE_POOLS, Resource
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.resources import add, parse_resources
from fleetwright.observability.metrics import MetricsSink, NullMetrics
from fleetwright.provisioning.nodepool_source import SOURCE_CLUSTER, VALIDATION_FAILED, KarpenterObjects
from fleetwright.state.launchguard import Breaker
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.validation import unlimited_note

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache

# How long the registration breakers read for the NodePools' status are used before being read again.
BREAKERS_MAX_AGE_SECONDS: Final = 60.0

# Metric: a status that could not be written (dimension Kind).
STATUS_WRITE_ERRORS: Final = "StatusWriteErrors"

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"
NODEPOOL_CONDITIONS = ("ValidationSucceeded", "NodeClassReady")
NODECLASS_CONDITIONS = (
    "ValidationSucceeded",
    "SubnetsReady",
    "SecurityGroupsReady",
    "AMIsReady",
    "InstanceProfileReady",
)

log = logging.getLogger("fleetwright.nodepools")

Condition = tuple[str, str, str]  # status, reason, message


def timestamp(epoch: float) -> str:
    """RFC 3339, second precision, as conditions carry it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity(name: str, amount: int) -> str:
    """An exact Kubernetes quantity: cpu ``4``/``3500m``; bytes in the largest binary unit that divides
    them (``16Gi``, ``7805Mi``); other resources as integers."""
    if name == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount:
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def nodepool_resources(
    nodes: Sequence[Mapping[str, Any]], launched: Sequence[NodeClaimRecord] = ()
) -> dict[str, dict[str, str]]:
    """NodePool name → its nodes' capacity summed, and ``nodes``: how many (nodes labelled
    ``karpenter.sh/nodepool``, and the ``launched`` claims whose instance has no Node yet)."""
    totals: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}

    def count(pool: str, capacity: Mapping[str, int]) -> None:
        totals[pool] = add(totals.get(pool, {}), capacity)
        counts[pool] = counts.get(pool, 0) + 1

    registered: set[str] = set()
    for node in nodes:
        registered.add(instance_id_of(str((node.get("spec") or {}).get("providerID") or "")))
        pool = ((node.get("metadata") or {}).get("labels") or {}).get(wk.NODEPOOL)
        if not pool:
            continue
        try:
            capacity = parse_resources((node.get("status") or {}).get("capacity"))
        except ValueError:
            capacity = {}
        count(pool, capacity)
    for record in launched:
        if record.status == ClaimStatus.LAUNCHED and record.instance_id not in registered:
            count(record.nodepool, record.capacity)
    return {
        pool: {**{k: quantity(k, v) for k, v in sorted(total.items())}, "nodes": str(counts[pool])}
        for pool, total in totals.items()
    }


def conditions(
    wanted: Mapping[str, Condition],
    before: Sequence[Mapping[str, Any]],
    generation: int,
    now: str,
    informational: Mapping[str, Condition] | None = None,
) -> list[JsonObject]:
    """``wanted`` plus ``Ready`` (True when all of them are) and ``informational`` (which ``Ready`` does not
    depend on), as condition objects; times carried over from ``before`` for conditions whose status did
    not change."""
    unhealthy = [f"{kind}={status}" for kind, (status, _, _) in wanted.items() if status != TRUE]
    ready: Condition = (
        (TRUE, "Ready", "") if not unhealthy else (FALSE, "UnhealthyDependents", ", ".join(unhealthy))
    )
    old = {str(c.get("type")): c for c in before if isinstance(c, Mapping)}
    result: list[JsonObject] = []
    every = {**(informational or {}), **wanted, "Ready": ready}
    for kind, (status, reason, message) in sorted(every.items()):
        previous = old.get(kind)
        since = (
            str(previous["lastTransitionTime"])
            if previous and previous.get("status") == status and previous.get("lastTransitionTime")
            else now
        )
        result.append(
            {
                "type": kind,
                "status": status,
                "observedGeneration": generation,
                "lastTransitionTime": since,
                "reason": reason,
                "message": message,
            }
        )
    return result


def _failed(reason: str, message: str) -> Condition:
    return (FALSE, reason, message)


def _validation(problem: str | None) -> Condition:
    return _failed(VALIDATION_FAILED, problem) if problem else (TRUE, "ValidationSucceeded", "")


class NodePoolStatus:
    """Computes and writes the status of the objects a :class:`NodePoolSource` read from the cluster.

    ``cloud`` resolves EC2NodeClass terms (the cloud contract's ``node_class_status``); without one the
    EC2NodeClass status holds validation and readiness only. ``clock`` gives epoch seconds. With ``cache``
    the NodePools' nodes are read from it (as the provisioning pass that publishes synced it) once it has
    been synced, instead of listed. ``claims`` lists the claim
    records, so launched claims count before their Node registers (without it, only Nodes count).
    ``breakers`` reads the registration breakers (``NodeRegistrationHealthy``, at most a minute late;
    without it the condition is left out).
    """

    def __init__(
        self,
        kube: KubeCluster,
        *,
        cloud: NodeClassStatusCloud | None = None,
        metrics: MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        clock: Callable[[], float] = time.time,
        cache: ClusterCache | None = None,
        claims: Callable[[], Sequence[NodeClaimRecord]] | None = None,
        breakers: Callable[[], Mapping[str, Breaker]] | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.claims = claims
        self.breakers = breakers
        self._breakers_read: tuple[float, Mapping[str, Breaker]] | None = None  # when, and what
        self.cloud = cloud
        self.metrics = metrics or NullMetrics()
        self.log = logger or log
        self.clock = clock

    def publish(self, read: KarpenterObjects) -> int:
        """Write every status that changed; how many were written. Never raises."""
        if read.source != SOURCE_CLUSTER:
            return 0
        try:
            nodes = self._nodes()
            launched = self.claims() if self.claims is not None else []
        except Exception as error:
            self._failed("NodePool", "*", error)
            return 0
        now = timestamp(self.clock())
        resources = nodepool_resources(nodes, launched)
        classes = {nc.name: nc for nc in read.nodeclasses}
        class_ready: dict[str, Condition] = {}
        written = 0
        for obj in read.nodeclass_objects:
            name = _name(obj)
            status, ready = self._nodeclass_status(obj, read, classes.get(name), now)
            class_ready[name] = ready
            written += self._write(EC2_NODE_CLASSES, obj, status)
        breakers = self._breakers()
        for obj in read.nodepool_objects:
            written += self._write(
                NODE_POOLS, obj, self._nodepool_status(obj, read, class_ready, resources, now, breakers)
            )
        return written

    def _breakers(self) -> Mapping[str, Breaker] | None:
        """The registration breakers, by NodePool, read at most once every ``BREAKERS_MAX_AGE_SECONDS``
        (a pass runs every few seconds; a breaker opens for half an hour): None without a reader, or
        when it fails (logged)."""
        if self.breakers is None:
            return None
        now = self.clock()
        if self._breakers_read is not None and now - self._breakers_read[0] < BREAKERS_MAX_AGE_SECONDS:
            return self._breakers_read[1]
        try:
            found = self.breakers()
        except Exception as error:
            self._failed("NodePool", "*", error)
            return None
        self._breakers_read = (now, found)
        return found

    def _nodes(self) -> list[JsonObject]:
        """The Nodes of any NodePool (label ``karpenter.sh/nodepool``)."""
        if self.cache is None or self.cache.last_sync is None:
            return self.kube.list_nodes(label_selector=wk.NODEPOOL)
        return [
            n
            for n in self.cache.node_objects()
            if wk.NODEPOOL in ((n.get("metadata") or {}).get("labels") or {})
        ]

    def _nodepool_status(
        self,
        obj: JsonObject,
        read: KarpenterObjects,
        class_ready: Mapping[str, Condition],
        resources: Mapping[str, dict[str, str]],
        now: str,
        breakers: Mapping[str, Breaker] | None = None,
    ) -> JsonObject:
        name = _name(obj)
        ref = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeClassRef") or {}
        target = str(ref.get("name") or "") if isinstance(ref, Mapping) else ""
        if not target:
            node_class: Condition = (UNKNOWN, "NodeClassNotFound", "no nodeClassRef")
        elif target in class_ready:
            status, _, message = class_ready[target]
            node_class = (
                (TRUE, "NodeClassReady", "")
                if status == TRUE
                else _failed("NodeClassNotReady", f"EC2NodeClass {target}: {message}")
            )
        else:
            node_class = _failed("NodeClassNotFound", f"EC2NodeClass {target} not found")
        wanted = {
            "ValidationSucceeded": _validation(read.invalid.get(("NodePool", name))),
            "NodeClassReady": node_class,
        }
        before = (obj.get("status") or {}).get("conditions") or []
        informational = self._bounds(name, obj.get("spec") or {}, breakers)
        return {
            "resources": resources.get(name, {"nodes": "0"}),
            "conditions": conditions(wanted, before, _generation(obj), now, informational),
        }

    def _bounds(
        self, name: str, spec: Mapping[str, Any], breakers: Mapping[str, Breaker] | None
    ) -> dict[str, Condition]:
        """What bounds the NodePool's launches (neither makes it not Ready): ``LimitsConfigured`` (False
        without ``spec.limits``: only the cluster-wide launch-rate cap bounds it) and, with the breakers,
        Karpenter's ``NodeRegistrationHealthy`` (False while its registration breaker holds launches)."""
        note = unlimited_note(name, spec.get("limits"), spec.get("replicas"))
        found: dict[str, Condition] = {
            "LimitsConfigured": (FALSE, "NoLimits", note) if note else (TRUE, "LimitsConfigured", "")
        }
        if breakers is not None:
            breaker = breakers.get(name)
            found["NodeRegistrationHealthy"] = (
                (FALSE, "RegistrationBreakerOpen", breaker_message(breaker))
                if breaker is not None and breaker.is_open(self.clock())
                else (TRUE, "NodeRegistrationHealthy", "")
            )
        return found

    def _nodeclass_status(
        self, obj: JsonObject, read: KarpenterObjects, node_class: EC2NodeClass | None, now: str
    ) -> tuple[JsonObject, Condition]:
        problem = read.invalid.get(("EC2NodeClass", _name(obj)))
        wanted: dict[str, Condition] = {"ValidationSucceeded": _validation(problem)}
        status: JsonObject = {}
        if node_class is not None and self.cloud is not None:
            resolved, parts = self._resolve(node_class)
            status.update(resolved)
            wanted.update(parts)
        before = (obj.get("status") or {}).get("conditions") or []
        status["conditions"] = conditions(wanted, before, _generation(obj), now)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        return status, (str(ready["status"]), str(ready["reason"]), str(ready["message"]))

    def _resolve(self, node_class: EC2NodeClass) -> tuple[JsonObject, dict[str, Condition]]:
        """The resolved fields and a condition for each, from the cloud's (cached) lookups."""
        assert self.cloud is not None
        try:
            found = self.cloud.node_class_status(node_class)
        except Exception as error:  # every part unknown: each condition says why
            self.log.warning(
                "cannot resolve EC2NodeClass %s",
                node_class.name,
                extra={"nodeClass": node_class.name, "error": f"{type(error).__name__}: {error}"},
            )
            found = _unresolved(error)
        fields: JsonObject = {}
        parts: dict[str, Condition] = {}
        if _part(parts, "SubnetsReady", found.subnets, "no subnet matches subnetSelectorTerms"):
            fields["subnets"] = [
                {"id": s.id, "zone": s.zone, **({"zoneID": s.zone_id} if s.zone_id else {})}
                for s in sorted(found.subnets.found, key=lambda s: (s.zone, s.id))
            ]
        groups = found.security_groups
        if _part(
            parts, "SecurityGroupsReady", groups, "no security group matches securityGroupSelectorTerms"
        ):
            fields["securityGroups"] = [{"id": group} for group in groups.found]
        if _part(parts, "AMIsReady", found.amis, "no AMI matches amiSelectorTerms"):
            fields["amis"] = [_ami(ami) for ami in sorted(found.amis.found, key=lambda a: (a.id, a.arch))]
        profile = found.instance_profile
        if _part(parts, "InstanceProfileReady", profile, "neither role nor instanceProfile is set"):
            fields["instanceProfile"] = profile.found
        # Selecting no reservation is not a fault: the node class then offers none.
        reservations = found.capacity_reservations
        parts["CapacityReservationsReady"] = (
            _failed("CapacityReservationsNotReady", reservations.error)
            if reservations.error
            else (TRUE, "CapacityReservationsReady", "")
        )
        if reservations.found:
            fields["capacityReservations"] = [_reservation(r) for r in reservations.found]
        return fields, parts

    def _write(self, resource: Resource, obj: JsonObject, status: JsonObject) -> int:
        current = obj.get("status") or {}
        if current == status:
            return 0
        patch = merge_patch(current, status)
        try:
            self.kube.client.patch(
                resource, _name(obj), {"status": patch}, patch_type=MERGE_PATCH, subresource="status"
            )
        except Exception as error:
            self._failed(resource.kind, _name(obj), error)
            return 0
        obj["status"] = status
        return 1

    def _failed(self, kind: str, name: str, error: BaseException) -> None:
        self.metrics.add(STATUS_WRITE_ERRORS, 1, dimensions={"Kind": kind})
        self.log.warning(
            "cannot write the status of %s %s",
            kind,
            name,
            extra={"kind": kind, "object": name, "error": f"{type(error).__name__}: {error}"},
        )


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _generation(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)


def _ami(ami: ImageFound) -> JsonObject:
    """An AMI as Karpenter lists it: id, name and the requirements of the instance types it boots."""
    requirements: list[JsonObject] = [{"key": wk.ARCH, "operator": "In", "values": [ami.arch]}]
    gpu, accelerator = "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-accelerator-count"
    if ami.variant == "standard":
        requirements += [
            {"key": gpu, "operator": "DoesNotExist"},
            {"key": accelerator, "operator": "DoesNotExist"},
        ]
    elif ami.variant == "nvidia":
        requirements.append({"key": gpu, "operator": "Exists"})
    elif ami.variant == "neuron":
        requirements.append({"key": accelerator, "operator": "Exists"})
    return {"id": ami.id, **({"name": ami.name} if ami.name else {}), "requirements": requirements}


def _reservation(reservation: ReservationFound) -> JsonObject:
    """The entry of ``status.capacityReservations`` (Karpenter's field names)."""
    entry: JsonObject = {
        "availabilityZone": reservation.zone,
        "id": reservation.id,
        "instanceMatchCriteria": reservation.instance_match_criteria,
        "instanceType": reservation.instance_type,
        "ownerID": reservation.owner_id,
        "reservationType": reservation.reservation_type,
        "interruptible": reservation.interruptible,
        "state": reservation.state,
    }
    if reservation.end_time is not None:
        entry["endTime"] = timestamp(reservation.end_time)
    return entry


def _part(parts: dict[str, Condition], kind: str, lookup: Lookup[Any], empty: str) -> bool:
    """Whether ``lookup`` found something, with the condition ``kind`` in ``parts``: true when it did,
    NotFound (``empty`` the message) when it found nothing, NotReady when it failed."""
    if lookup.error:
        parts[kind] = _failed(kind.replace("Ready", "NotReady"), lookup.error)
        return False
    if not lookup.found:
        parts[kind] = _failed(kind.replace("Ready", "NotFound"), empty)
        return False
    parts[kind] = (TRUE, kind, "")
    return True


def _unresolved(error: BaseException) -> NodeClassResolution:
    """Every part of a node class failed with ``error`` (the cloud could not be asked at all)."""
    return NodeClassResolution(
        subnets=Lookup.failed((), error),
        security_groups=Lookup.failed((), error),
        amis=Lookup.failed((), error),
        instance_profile=Lookup.failed("", error),
        capacity_reservations=Lookup.failed((), error),
    )
