"""NodeClaim objects (``karpenter.sh/v1``): the claims of the state table, mirrored into the cluster so
``kubectl get nodeclaims`` shows them as Karpenter users expect.

The state table stays authoritative (its writes are fenced by the launch lease, docs/state.md); an object is
written after the table and reconciled on every pass: created when missing, its status set from the record
(providerID, imageID, nodeName, capacity, allocatable, and the conditions ``Launched``, ``Registered``,
``Initialized`` and ``Ready`` as Karpenter writes them, :mod:`fleetwright.claims.conditions`), deleted once
its claim has ended (failed, terminated, gone). Nothing happens
when the NodeClaim CRD is not installed (checked once a minute). Every failure is logged and counted
(``NodeClaimSyncErrors``), never raised: the table is right whatever the mirror says.

With a :class:`~fleetwright.kube.cache.ClusterCache` the objects are read from it (the caller syncs it
first) and so is whether the CRD is installed; without one each reconciliation LISTs them.

Objects carry the ``karpenter.sh/termination`` finalizer, so ``kubectl delete nodeclaim`` leaves the
object Terminating until its claim has ended; the mirror lifts it when it deletes the object.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from fleetwright.claims.conditions import (
    AWAITING,
    CONSISTENT_STATE_FOUND,
    FALSE,
    INITIALIZED,
    NODE_NOT_FOUND,
    UNKNOWN,
    Condition,
    condition_of,
    lifecycle,
    merged,
    true,
)
from fleetwright.claims.registration import initialization_issue
from fleetwright.kube.client import JsonObject, KubeClient
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.events import Metrics
from fleetwright.kube.patches import merge_patch
from fleetwright.kube.resources import CUSTOM_RESOURCE_DEFINITIONS, NODE_CLAIMS, NODE_POOLS
from fleetwright.model import labels as wk
from fleetwright.model.quantity import format_resource
from fleetwright.state.nodeclaims import ACTIVE, ClaimStatus, NodeClaimRecord

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache

API_VERSION: Final = "karpenter.sh/v1"
CRD_NAME: Final = "nodeclaims.karpenter.sh"
FINALIZER: Final = "karpenter.sh/termination"
MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGER: Final = "fleetwright"
NODECLASS_LABEL: Final = "karpenter.k8s.aws/ec2nodeclass"
CHECK_SECONDS: Final = 60.0
# Metric: a NodeClaim object that could not be written (dimension Operation).
SYNC_ERRORS: Final = "NodeClaimSyncErrors"

log = logging.getLogger("fleetwright.nodeclaims")


def _quantities(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_resource(name, amount) for name, amount in sorted(resources.items())}


def _taint(text: str) -> JsonObject:
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    return {"key": key, "effect": effect, **({"value": value} if value else {})}


def _parse_stamp(text: Any) -> float | None:
    """Epoch seconds of an RFC 3339 time (None when absent or not one)."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def _waiting(
    record: NodeClaimRecord, nodes: Mapping[str, Mapping[str, Any]] | None
) -> tuple[str, str] | None:
    """Why the registered claim's node is not initialized yet, from ``nodes`` (None: not known here)."""
    if nodes is None or record.status != ClaimStatus.REGISTERED:
        return None
    node = nodes.get(record.instance_id)
    if node is None:
        return NODE_NOT_FOUND.reason, NODE_NOT_FOUND.message
    return initialization_issue(node, record)


def _known_wait(record: NodeClaimRecord, current: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """The reason the object already gives for a registered claim's node not being initialized yet (kept
    when a write does not know the Node)."""
    if record.status != ClaimStatus.REGISTERED:
        return None
    conditions = ((current or {}).get("status") or {}).get("conditions") or []
    found = condition_of(conditions, INITIALIZED)
    if found is None or found.get("status") != UNKNOWN or found.get("reason") == AWAITING.reason:
        return None
    return str(found.get("reason") or ""), str(found.get("message") or "")


def labels_of(record: NodeClaimRecord) -> dict[str, str]:
    """The object's labels: the claim's, its NodePool and EC2NodeClass, and once launched the instance
    type, zone and capacity type (kubectl's Type, Zone and Capacity columns)."""
    found = dict(record.labels)
    found[wk.NODEPOOL] = record.nodepool
    if record.node_class:
        found[NODECLASS_LABEL] = record.node_class
    if record.instance_type:
        found[wk.INSTANCE_TYPE] = record.instance_type
        found[wk.ZONE] = record.zone
        found[wk.CAPACITY_TYPE] = record.capacity_type
    found[MANAGED_BY] = MANAGER
    return found


def spec_of(record: NodeClaimRecord, requests: Mapping[str, int] | None = None) -> JsonObject:
    """Requirements (instance types, zones, capacity types, NodePool, single-valued labels), taints,
    startup taints, the EC2NodeClass, ``expireAfter`` and ``terminationGracePeriod`` and, when known, the
    pods' resource requests."""
    requirements: dict[str, list[str]] = {}
    for key, values in (
        (wk.INSTANCE_TYPE, record.instance_types),
        (wk.ZONE, record.zones),
        (wk.CAPACITY_TYPE, record.capacity_types),
        (wk.NODEPOOL, [record.nodepool]),
    ):
        if values:
            requirements[key] = list(values)
    for key, value in sorted(record.labels.items()):
        requirements.setdefault(key, [value])
    spec: JsonObject = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": record.node_class},
        "requirements": [{"key": k, "operator": "In", "values": v} for k, v in requirements.items()],
    }
    if record.taints:
        spec["taints"] = [_taint(t) for t in record.taints]
    if record.startup_taints:
        spec["startupTaints"] = [_taint(t) for t in record.startup_taints]
    requests = requests or record.requests
    if requests:
        spec["resources"] = {"requests": _quantities(requests)}
    # The NodePool's, copied at launch (none on claims recorded before they were copied).
    if record.expire_after:
        spec["expireAfter"] = record.expire_after
    if record.termination_grace_period:
        spec["terminationGracePeriod"] = record.termination_grace_period
    return spec


def status_fields(record: NodeClaimRecord, image_id: str = "") -> JsonObject:
    """The object's status but its conditions: providerID, imageID (``image_id``, from the launch),
    nodeName, capacity and allocatable, each only once known."""
    status: JsonObject = {}
    if record.provider_id:
        status["providerID"] = record.provider_id
    if image_id:
        status["imageID"] = image_id
    if record.node_name:
        status["nodeName"] = record.node_name
    if record.capacity:
        status["capacity"] = _quantities(record.capacity)
    if record.allocatable:
        status["allocatable"] = _quantities(record.allocatable)
    return status


def status_of(
    record: NodeClaimRecord,
    image_id: str = "",
    waiting: tuple[str, str] | None = None,
    current: Mapping[str, Any] | None = None,
    decided: Mapping[str, Condition] | None = None,
) -> JsonObject:
    """The object's whole status from the record: :func:`status_fields` and the lifecycle conditions
    (``waiting``: why a registered node is not initialized yet; None keeps the reason ``current`` gives)
    and ``decided`` ones merged into those of ``current`` (the object as read: its conditions and
    generation; None for a new object)."""
    meta = (current or {}).get("metadata") or {}
    old = list(((current or {}).get("status") or {}).get("conditions") or [])
    status = status_fields(record, image_id)
    status["conditions"] = merged(
        old,
        {**lifecycle(record, waiting or _known_wait(record, current)), **(decided or {})},
        generation=int(meta.get("generation") or 1),
        now=time.time(),
        created=record.created_at,
    )
    return status


class NodeClaimObjects:
    """Writes and reconciles the NodeClaim objects of one cluster (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
        logger: logging.Logger | Any = None,
        check_seconds: float = CHECK_SECONDS,
        cache: ClusterCache | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.clock = clock
        self.metrics = metrics
        self.log = logger or log
        self.check_seconds = check_seconds
        self._installed: bool | None = None
        self._checked_at = 0.0
        self._uids: dict[str, str] = {}
        self._images: dict[str, str] = {}
        # Conditions decided here for a claim (ConsistentStateFound), written with its next status write.
        self._decided: dict[str, dict[str, Condition]] = {}
        # Objects as this process last wrote them, with the resourceVersion they replaced: a listing (the
        # cache's, say) still showing that version is behind our own write.
        self._wrote: dict[str, tuple[str, JsonObject]] = {}

    # -- reads -----------------------------------------------------------------------------------------

    def installed(self) -> bool:
        """Whether the NodeClaim CRD is installed (as the cache last found it; without a cache, or before
        its first sync, checked at most once per ``check_seconds``)."""
        if self.cache is not None and self.cache.nodeclaims_installed is not None:
            return self.cache.nodeclaims_installed
        now = self.clock()
        if self._installed is None or now - self._checked_at >= self.check_seconds:
            self._checked_at = now
            try:
                self.client.get(CUSTOM_RESOURCE_DEFINITIONS, CRD_NAME)
                self._installed = True
            except KubeApiError as error:
                if not error.not_found:
                    raise
                self._installed = False
        return bool(self._installed)

    def uid(self, name: str) -> str:
        """The uid of the object written for claim ``name`` ("" when none is known)."""
        return self._uids.get(name, "")

    def remember_image(self, name: str, image_id: str) -> None:
        """The AMI claim ``name`` launched with (status.imageID; the record does not keep it)."""
        if image_id:
            self._images[name] = image_id

    def consistency_checked(self, name: str, issues: Sequence[str], now: float) -> None:
        """Claim ``name``'s node was checked against its instance type (``issues``: what differs):
        ``ConsistentStateFound`` goes on its object with the next status write, as Karpenter's
        consistency controller sets it."""
        found = (
            Condition(FALSE, "ConsistencyCheckFailed", "Consistency Check Failed", now)
            if issues
            else true(CONSISTENT_STATE_FOUND, since=now)
        )
        self._decided.setdefault(name, {})[CONSISTENT_STATE_FOUND] = found

    # -- writes ----------------------------------------------------------------------------------------

    def write(
        self,
        record: NodeClaimRecord,
        *,
        requests: Mapping[str, int] | None = None,
        image_id: str = "",
    ) -> None:
        """Create the object of a claim just recorded, or update its status after a launch."""
        if image_id:
            self._images[record.id] = image_id
        try:
            if not self.installed():
                return
            current = self._get(record.id)
            if current is None:
                self._create(record, requests, self._owners())
            else:
                self._update(current, record)
        except Exception as error:
            self._failed("Write", record.id, error)

    def sync(
        self, records: Sequence[NodeClaimRecord], nodes: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """Reconcile every object with the records: create missing ones, fix their status, delete those
        whose claim has ended (one LIST, writes only for what differs). ``nodes`` (Node objects by
        instance id) say why a registered claim's node is not initialized yet."""
        active = {r.id: r for r in records if r.status in ACTIVE}
        # Nothing decided is kept for claims that ended.
        self._decided = {k: v for k, v in self._decided.items() if k in active}
        try:
            if not self.installed():
                return
            listed = self._listed()
        except Exception as error:
            self._failed("List", "", error)
            return
        owners: dict[str, JsonObject] | None = None
        for record in active.values():
            try:
                current = listed.get(record.id)
                if current is None:
                    if owners is None:
                        owners = self._owners()
                    self._create(record, None, owners, _waiting(record, nodes))
                elif not (current.get("metadata") or {}).get("deletionTimestamp"):
                    self._update(current, record, _waiting(record, nodes))
            except Exception as error:
                self._failed("Write", record.id, error)
        for name, obj in listed.items():
            if name in active or (obj.get("metadata") or {}).get("labels", {}).get(MANAGED_BY) != MANAGER:
                continue
            try:
                self._delete(name, obj)
            except Exception as error:
                self._failed("Delete", name, error)

    def remove(self, claim_id: str) -> None:
        """Delete the object of a claim that ended (its finalizer lifted first)."""
        try:
            if not self.installed():
                return
            current = self._get(claim_id)
            if current is not None:
                self._delete(claim_id, current)
        except Exception as error:
            self._failed("Delete", claim_id, error)

    # -- helpers ---------------------------------------------------------------------------------------

    def _listed(self) -> dict[str, JsonObject]:
        """Every NodeClaim object by name: from the cache when it follows them, else one LIST."""
        cached = self.cache.nodeclaim_objects() if self.cache is not None else None
        items = cached if cached is not None else self.client.list(NODE_CLAIMS).items
        listed = {str(o["metadata"]["name"]): o for o in items}
        for name, (replaced, written) in list(self._wrote.items()):
            seen = listed.get(name)
            if seen is not None and str(seen["metadata"].get("resourceVersion")) == replaced:
                listed[name] = written  # the listing has not caught up with our write yet
            else:
                del self._wrote[name]
        return listed

    def _get(self, name: str) -> JsonObject | None:
        try:
            return self.client.get(NODE_CLAIMS, name)
        except KubeApiError as error:
            if error.not_found:
                return None
            raise

    def _owners(self) -> dict[str, JsonObject]:
        """Owner references to the NodePool objects in the cluster, by name (none when not served)."""
        try:
            pools = self.client.list(NODE_POOLS).items
        except KubeApiError as error:
            if error.status in (404, 405):
                return {}
            raise
        return {
            str(p["metadata"]["name"]): {
                "apiVersion": API_VERSION,
                "kind": "NodePool",
                "name": str(p["metadata"]["name"]),
                "uid": str(p["metadata"]["uid"]),
                "blockOwnerDeletion": True,
            }
            for p in pools
        }

    def _create(
        self,
        record: NodeClaimRecord,
        requests: Mapping[str, int] | None,
        owners: Mapping[str, JsonObject],
        waiting: tuple[str, str] | None = None,
    ) -> None:
        meta: JsonObject = {"name": record.id, "labels": labels_of(record), "finalizers": [FINALIZER]}
        if record.annotations:
            meta["annotations"] = dict(record.annotations)
        owner = owners.get(record.nodepool)
        if owner is not None:
            meta["ownerReferences"] = [dict(owner)]
        body = {
            "apiVersion": API_VERSION,
            "kind": "NodeClaim",
            "metadata": meta,
            "spec": spec_of(record, requests),
        }
        try:
            created = self.client.create(NODE_CLAIMS, body)
        except KubeApiError as error:
            if error.not_found:  # the resource is not served (CRD removed): ask again next time
                self._installed = None
                if self.cache is not None:
                    self.cache.forget_nodeclaims()
            if not error.conflict:  # 409: it exists already (another writer); update it instead
                raise
            existing = self._get(record.id)
            if existing is not None:
                self._update(existing, record, waiting)
            return
        self._update(created, record, waiting)

    def _update(
        self, current: Mapping[str, Any], record: NodeClaimRecord, waiting: tuple[str, str] | None = None
    ) -> None:
        """Labels the object lacks, then its status where it differs from the record's (the conditions
        as :func:`status_of` merges them: written only when they change)."""
        meta = current.get("metadata") or {}
        self._uids[record.id] = str(meta.get("uid") or "")
        labels = labels_of(record)
        have = meta.get("labels") or {}
        missing = {k: v for k, v in labels.items() if have.get(k) != v}
        if missing:
            self.client.patch(NODE_CLAIMS, record.id, {"metadata": {"labels": missing}})
        status = dict(current.get("status") or {})
        image = self._images.get(record.id, "") or str(status.get("imageID") or "")
        decided = self._decided.get(record.id, {})
        wanted = status_of(record, image, waiting, current, decided)
        written = True
        if any(status.get(k) != v for k, v in wanted.items()):
            # Exactly ``wanted``: a capacity key the claim no longer has is removed, not kept by the merge.
            written = self._patch_status(record.id, merge_patch(status, wanted), meta.get("resourceVersion"))
        if decided and written:
            self._decided.pop(record.id, None)

    def _patch_status(self, name: str, status: JsonObject, resource_version: Any = None) -> bool:
        """Merge-patch the status (conditions replaced as a whole: conditional on ``resource_version`` so a
        concurrent writer's conditions are not lost; a 409 waits for the next pass, and gives False)."""
        body: JsonObject = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        try:
            written = self.client.patch(NODE_CLAIMS, name, body, subresource="status")
        except KubeApiError as error:
            if not error.conflict:
                raise
            return False
        if resource_version:
            self._wrote[name] = (str(resource_version), written)
        return True

    def set_conditions(self, wanted: Mapping[str, Mapping[str, Condition | None]], now: float) -> None:
        """Set or clear (None) conditions the disruption controller decides (``Drifted``,
        ``Consolidatable``, ``DisruptionReason``) on the objects of the claims in ``wanted`` (``now``:
        the time of a transition); the others are left alone, and nothing is written where nothing
        changes."""
        try:
            if not wanted or not self.installed():
                return
            listed = self._listed()
        except Exception as error:
            self._failed("List", "", error)
            return
        for name, conditions in wanted.items():
            current = listed.get(name)
            meta = (current or {}).get("metadata") or {}
            if current is None or meta.get("deletionTimestamp"):
                continue
            before = list((current.get("status") or {}).get("conditions") or [])
            created = _parse_stamp(meta.get("creationTimestamp")) or now
            after = merged(
                before, conditions, generation=int(meta.get("generation") or 1), now=now, created=created
            )
            if after == before:
                continue
            try:
                self._patch_status(name, {"conditions": after}, meta.get("resourceVersion"))
            except Exception as error:
                self._failed("Write", name, error)

    def _delete(self, name: str, current: Mapping[str, Any]) -> None:
        finalizers = list((current.get("metadata") or {}).get("finalizers") or [])
        if FINALIZER in finalizers:
            rv = (current.get("metadata") or {}).get("resourceVersion")
            kept = [f for f in finalizers if f != FINALIZER]
            self.client.patch(
                NODE_CLAIMS, name, {"metadata": {"finalizers": kept or None, "resourceVersion": rv}}
            )
        try:
            self.client.delete(NODE_CLAIMS, name)
        except KubeApiError as error:
            if not error.not_found:
                raise
        self._uids.pop(name, None)
        self._images.pop(name, None)
        self._wrote.pop(name, None)
        self._decided.pop(name, None)

    def _failed(self, operation: str, name: str, error: Exception) -> None:
        if self.metrics is not None:
            self.metrics.add(SYNC_ERRORS, 1, "Count", {"Operation": operation})
        self.log.warning(
            "NodeClaim object not written; the next pass reconciles it",
            extra={
                "operation": operation,
                "nodeclaim": name,
                "error": f"{type(error).__name__}: {error}"[:500],
            },
        )
