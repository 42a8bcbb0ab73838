"""``KubeCluster``: the Kubernetes operations Fleetwright performs, on top of :class:`KubeClient`."""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fleetwright.kube.client import DEFAULT_WATCH_SECONDS, JSON_PATCH, JsonObject, KubeClient, WatchEvent
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.resources import (
    DAEMON_SETS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    Resource,
)
from fleetwright.kube.watch import Resync, filtered, list_then_watch
from fleetwright.model.labels import DISRUPTED_TAINT_KEY

# Server-side filter for pods no node has been chosen for; the Unschedulable condition is checked here.
PENDING_UNBOUND = "spec.nodeName=,status.phase=Pending"
DISRUPTED_TAINT = {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}
EXCLUDE_FROM_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
EXCLUDE_FROM_LB_VALUE = "true"
# When mark_disrupted first marked the node (ISO 8601 UTC): the disruption sweep measures its grace from it.
DISRUPTED_AT_ANNOTATION = "fleetwright.io/disrupted-at"
# What the node already had when mark_disrupted first marked it (comma-separated: ``unschedulable``, the
# load-balancer exclusion label's name): unmark_disrupted leaves those as it found them, so a node a person
# cordoned stays cordoned when a disruption is called off.
FOUND_ON_NODE_ANNOTATION = "fleetwright.io/found-on-node"
FOUND_UNSCHEDULABLE = "unschedulable"
CONFLICT_ATTEMPTS = 5


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    """Pending, unbound, not being deleted, and marked ``PodScheduled=False`` reason ``Unschedulable``."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp") or spec.get("nodeName") or status.get("phase", "Pending") != "Pending":
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or []
    )


def format_epoch(seconds: float) -> str:
    """Epoch seconds as ISO 8601 UTC with a ``Z`` (how Fleetwright's annotations carry times)."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _found_on_node(spec: Mapping[str, Any], labels: Mapping[str, Any]) -> str:
    """What of the mark a node has before it is first marked (``FOUND_ON_NODE_ANNOTATION``'s value)."""
    found = [FOUND_UNSCHEDULABLE] if spec.get("unschedulable") is True else []
    if EXCLUDE_FROM_LB_LABEL in labels:
        found.append(EXCLUDE_FROM_LB_LABEL)
    return ",".join(found)


def _has_disrupted_taint(taints: list[Any]) -> bool:
    return any(
        isinstance(t, Mapping)
        and t.get("key") == DISRUPTED_TAINT["key"]
        and t.get("effect") == DISRUPTED_TAINT["effect"]
        for t in taints
    )


class EvictionOutcome(enum.StrEnum):
    """What an eviction request achieved."""

    EVICTED = "Evicted"  # the pod is being deleted
    BLOCKED = "Blocked"  # a PodDisruptionBudget does not allow it now (429): try again later
    GONE = "Gone"  # the pod no longer exists (404)


@dataclass(frozen=True, slots=True)
class EvictionResult:
    """The outcome of one eviction and the server's message."""

    outcome: EvictionOutcome
    message: str = ""

    @property
    def blocked(self) -> bool:
        """A disruption budget refused the eviction."""
        return self.outcome is EvictionOutcome.BLOCKED


class KubeCluster:
    """Fleetwright's reads and writes against one cluster.

    Writes that replace lists (taints, finalizers) carry the object's resourceVersion, so a concurrent
    change makes them fail with 409 instead of being overwritten; they re-read and retry (up to
    ``conflict_attempts`` times). ``clock`` (epoch seconds) stamps the marks this adapter writes.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        conflict_attempts: int = CONFLICT_ATTEMPTS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.conflict_attempts = conflict_attempts
        self.clock = clock

    # -- reads -----------------------------------------------------------------------------------------

    def list_unschedulable_pods(self, namespace: str | None = None) -> list[JsonObject]:
        """Pods the scheduler could not place (see :func:`is_unschedulable`)."""
        listing = self.client.list(PODS, namespace, field_selector=PENDING_UNBOUND)
        return [p for p in listing.items if is_unschedulable(p)]

    def watch_unschedulable_pods(
        self,
        *,
        until: float | None = None,
        stop: threading.Event | None = None,
        watch_seconds: int = DEFAULT_WATCH_SECONDS,
    ) -> Iterator[Resync | WatchEvent]:
        """A :class:`Resync` of the unschedulable pods, then ADDED when a pod becomes unschedulable,
        MODIFIED when one changes, DELETED when one is bound, deleted or no longer unschedulable.

        ``until`` is a ``time.monotonic()`` deadline (e.g. the Lambda's remaining time).
        """
        return filtered(
            list_then_watch(
                self.client,
                PODS,
                field_selector=PENDING_UNBOUND,
                until=until,
                stop=stop,
                watch_seconds=watch_seconds,
            ),
            is_unschedulable,
        )

    def list_nodes(self, label_selector: str | None = None) -> list[JsonObject]:
        """Every node (matching ``label_selector``)."""
        return self.client.list(NODES, label_selector=label_selector).items

    def get_node(self, name: str) -> JsonObject | None:
        """The node, or None when it does not exist."""
        return self._get_or_none(NODES, name)

    def get_pod(self, namespace: str, name: str) -> JsonObject | None:
        """The pod, or None when it does not exist."""
        return self._get_or_none(PODS, name, namespace)

    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[JsonObject]:
        """Pods in ``namespace`` (all namespaces when None)."""
        return self.client.list(
            PODS, namespace, label_selector=label_selector, field_selector=field_selector
        ).items

    def list_pods_on_node(self, node_name: str) -> list[JsonObject]:
        """The pods bound to ``node_name``, in every namespace."""
        return self.list_pods(field_selector=f"spec.nodeName={node_name}")

    def list_daemonsets(self) -> list[JsonObject]:
        """Every DaemonSet."""
        return self.client.list(DAEMON_SETS).items

    def list_pdbs(self, namespace: str | None = None) -> list[JsonObject]:
        """PodDisruptionBudgets (policy/v1)."""
        return self.client.list(POD_DISRUPTION_BUDGETS, namespace).items

    def list_pvcs(self, namespace: str | None = None) -> list[JsonObject]:
        """PersistentVolumeClaims."""
        return self.client.list(PERSISTENT_VOLUME_CLAIMS, namespace).items

    def list_pvs(self) -> list[JsonObject]:
        """PersistentVolumes."""
        return self.client.list(PERSISTENT_VOLUMES).items

    def list_storage_classes(self) -> list[JsonObject]:
        """StorageClasses."""
        return self.client.list(STORAGE_CLASSES).items

    def list_volume_attachments(self, node_name: str) -> list[JsonObject]:
        """The VolumeAttachments (storage.k8s.io/v1) of ``node_name`` (the API selects them by name only,
        so all are listed and filtered here)."""
        items = self.client.list(VOLUME_ATTACHMENTS).items
        return [va for va in items if (va.get("spec") or {}).get("nodeName") == node_name]

    # -- node disruption -------------------------------------------------------------------------------

    def mark_disrupted(self, node_name: str, *, at: float | None = None) -> JsonObject | None:
        """Cordon the node, taint it ``karpenter.sh/disrupted:NoSchedule``, label it
        ``node.kubernetes.io/exclude-from-external-load-balancers`` and annotate it
        ``fleetwright.io/disrupted-at`` (``at``, epoch seconds, default now; an earlier mark is kept) in
        one PATCH. The annotation lets the disruption sweep tell how long nobody has been working on a
        node left marked. The first mark also records, in ``fleetwright.io/found-on-node``, a cordon or an
        exclusion label the node already had, so :meth:`unmark_disrupted` gives back only what this added.

        Idempotent (no write when all four are already there); None when the node does not exist.
        """
        stamp = format_epoch(self.clock() if at is None else at)

        def change(node: JsonObject) -> JsonObject | None:
            spec = node.get("spec") or {}
            meta = node.get("metadata") or {}
            labels = meta.get("labels") or {}
            annotations = meta.get("annotations") or {}
            patch: JsonObject = {}
            if spec.get("unschedulable") is not True:
                patch.setdefault("spec", {})["unschedulable"] = True
            taints = list(spec.get("taints") or [])
            if not _has_disrupted_taint(taints):
                patch.setdefault("spec", {})["taints"] = [*taints, dict(DISRUPTED_TAINT)]
            if EXCLUDE_FROM_LB_LABEL not in labels:
                patch.setdefault("metadata", {})["labels"] = {EXCLUDE_FROM_LB_LABEL: EXCLUDE_FROM_LB_VALUE}
            if DISRUPTED_AT_ANNOTATION not in annotations:
                marks = {DISRUPTED_AT_ANNOTATION: stamp}
                found = _found_on_node(spec, labels)
                if found:
                    marks[FOUND_ON_NODE_ANNOTATION] = found
                patch.setdefault("metadata", {})["annotations"] = marks
            return patch or None

        return self.modify(NODES, node_name, change)

    def unmark_disrupted(self, node_name: str) -> JsonObject | None:
        """Undo :meth:`mark_disrupted` (a disruption that was called off): remove the taint and the
        annotations, and the cordon and the label unless the node had them before it was first marked
        (``fleetwright.io/found-on-node``): a node cordoned by hand stays cordoned.

        Only the disrupted taint and the label and annotations this adapter adds are removed; None when
        the node is gone.
        """

        def change(node: JsonObject) -> JsonObject | None:
            spec = node.get("spec") or {}
            meta = node.get("metadata") or {}
            labels = meta.get("labels") or {}
            annotations = meta.get("annotations") or {}
            found = set(str(annotations.get(FOUND_ON_NODE_ANNOTATION) or "").split(","))
            patch: JsonObject = {}
            if spec.get("unschedulable") and FOUND_UNSCHEDULABLE not in found:
                patch.setdefault("spec", {})["unschedulable"] = None
            taints = list(spec.get("taints") or [])
            if _has_disrupted_taint(taints):
                kept = [
                    t
                    for t in taints
                    if not (t.get("key") == DISRUPTED_TAINT["key"] and t.get("effect") == "NoSchedule")
                ]
                patch.setdefault("spec", {})["taints"] = kept or None
            if EXCLUDE_FROM_LB_LABEL in labels and EXCLUDE_FROM_LB_LABEL not in found:
                patch.setdefault("metadata", {})["labels"] = {EXCLUDE_FROM_LB_LABEL: None}
            gone = {k: None for k in (DISRUPTED_AT_ANNOTATION, FOUND_ON_NODE_ANNOTATION) if k in annotations}
            if gone:
                patch.setdefault("metadata", {})["annotations"] = gone
            return patch or None

        return self.modify(NODES, node_name, change)

    def evict(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> EvictionResult:
        """Evict a pod through ``policy/v1`` Eviction, respecting its PodDisruptionBudget.

        A budget refusal (429) is ``BLOCKED`` and a missing pod ``GONE`` — results, not exceptions. ``uid``
        makes the eviction apply only to that incarnation of the pod (a recreated namesake is left alone).
        """
        body: JsonObject = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        options: JsonObject = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            options["preconditions"] = {"uid": uid}
        if options:
            body["deleteOptions"] = options
        try:
            # 429 here is the disruption budget's answer, not throttling, and a 500 means several budgets
            # select the pod: retrying either only repeats the same answer.
            self.client.request(
                "POST", PODS.path(namespace, name, "eviction"), body=body, retry_statuses=(502, 503, 504)
            )
        except KubeApiError as err:
            if err.status == 429:
                return EvictionResult(EvictionOutcome.BLOCKED, err.message)
            if err.not_found:
                return EvictionResult(EvictionOutcome.GONE, err.message)
            if err.conflict and uid:
                # The uid precondition failed: the pod we meant is gone, a new one took its name.
                return EvictionResult(EvictionOutcome.GONE, err.message)
            raise
        return EvictionResult(EvictionOutcome.EVICTED)

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> bool:
        """Delete a pod (bypassing disruption budgets); False when it was already gone."""
        return self._delete(PODS, name, namespace, grace_period_seconds, uid)

    def delete_node(self, name: str, *, uid: str | None = None) -> bool:
        """Delete a node object; False when it was already gone."""
        return self._delete(NODES, name, None, None, uid)

    # -- metadata --------------------------------------------------------------------------------------

    def patch_labels(
        self, resource: Resource, name: str, labels: Mapping[str, str | None], namespace: str | None = None
    ) -> JsonObject:
        """Set labels (a None value removes the label); other labels are untouched."""
        return self.client.patch(resource, name, {"metadata": {"labels": dict(labels)}}, namespace)

    def patch_annotations(
        self,
        resource: Resource,
        name: str,
        annotations: Mapping[str, str | None],
        namespace: str | None = None,
    ) -> JsonObject:
        """Set annotations (a None value removes the annotation); others are untouched."""
        return self.client.patch(resource, name, {"metadata": {"annotations": dict(annotations)}}, namespace)

    def add_finalizer(
        self, resource: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> JsonObject | None:
        """Add ``finalizer`` unless present; None when the object does not exist."""

        def change(obj: JsonObject) -> JsonObject | None:
            finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
            if finalizer in finalizers:
                return None
            return {"metadata": {"finalizers": [*finalizers, finalizer]}}

        return self.modify(resource, name, change, namespace)

    def remove_finalizer(
        self, resource: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> JsonObject | None:
        """Remove ``finalizer`` if present; None when the object does not exist (any more).

        Removing the last finalizer of an object being deleted lets the deletion finish.
        """

        def change(obj: JsonObject) -> JsonObject | None:
            finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
            if finalizer not in finalizers:
                return None
            return {"metadata": {"finalizers": [f for f in finalizers if f != finalizer]}}

        return self.modify(resource, name, change, namespace)

    def modify(
        self,
        resource: Resource,
        name: str,
        change: Callable[[JsonObject], JsonObject | None],
        namespace: str | None = None,
    ) -> JsonObject | None:
        """Read-modify-write: GET, ``change(obj)`` returns a merge patch (None: nothing to do), PATCH it
        conditional on the resourceVersion read; on 409 read again and retry.

        Returns the object as written (or as read when no change was needed); None when it does not exist
        (or vanished meanwhile).
        """
        for attempt in range(1, self.conflict_attempts + 1):
            current = self._get_or_none(resource, name, namespace)
            if current is None:
                return None
            patch = change(current)
            if patch is None:
                return current
            rv = (current.get("metadata") or {}).get("resourceVersion")
            patch.setdefault("metadata", {})["resourceVersion"] = rv
            try:
                return self.client.patch(resource, name, patch, namespace)
            except KubeApiError as err:
                if err.not_found:
                    return None
                if not err.conflict or attempt == self.conflict_attempts:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def json_patch(
        self, resource: Resource, name: str, operations: list[JsonObject], namespace: str | None = None
    ) -> JsonObject:
        """Apply an RFC 6902 JSON patch (use ``test`` operations as preconditions; a failed test is 422)."""
        return self.client.patch(resource, name, operations, namespace, patch_type=JSON_PATCH)

    def _get_or_none(self, resource: Resource, name: str, namespace: str | None = None) -> JsonObject | None:
        try:
            return self.client.get(resource, name, namespace)
        except KubeApiError as err:
            if err.not_found:
                return None
            raise

    def _delete(
        self, resource: Resource, name: str, namespace: str | None, grace: int | None, uid: str | None
    ) -> bool:
        try:
            self.client.delete(
                resource,
                name,
                namespace,
                grace_period_seconds=grace,
                preconditions={"uid": uid} if uid else None,
            )
        except KubeApiError as err:
            # A failed uid precondition (409) means the object meant is gone and a namesake replaced it.
            if err.not_found or (err.conflict and uid):
                return False
            raise
        return True
