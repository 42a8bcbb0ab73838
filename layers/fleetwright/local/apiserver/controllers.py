"""Minimal built-in controllers, driven by the store's change feed.

- ``DeploymentController``: each Deployment owns one ReplicaSet (its template is updated in place: no
  rollouts), and each ReplicaSet keeps ``spec.replicas`` pods, created Pending and unbound.
- ``PodLifecycleController``: a pod bound to an existing node (``spec.nodeName``) becomes Running and Ready,
  standing in for a kubelet.
- ``DisruptionController``: keeps PodDisruptionBudget status (``disruptionsAllowed`` and friends) current.

Every controller is level-triggered: any relevant change re-runs a full reconcile of the store.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.eviction import is_ready, pdb_status
from fleetwright.local.apiserver.resources import (
    DEPLOYMENTS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    REPLICA_SETS,
    STATEFUL_SETS,
    ResourceType,
)
from fleetwright.local.apiserver.store import Store, Subscription, WatchEvent, rfc3339

JsonObject = dict[str, Any]

log = logging.getLogger(__name__)

# Nodes whose pods a kubelet simulator runs (fleetwright.local.kubelet) carry this annotation; the
# PodLifecycleController leaves them alone.
SIMULATED_KUBELET_ANNOTATION = "fleetwright.io/simulated-kubelet"

# One pod IP sequence for every pod starter, so no two pods share an address.
_POD_IPS = itertools.count(1)


class SerialReconciler:
    """Runs ``reconcile`` on every notification, never concurrently; a notification that arrives while it
    runs (from another thread, or from the reconcile's own writes) makes it run once more."""

    def __init__(self, reconcile: Callable[[], None]) -> None:
        self._reconcile = reconcile
        self._mutex = threading.Lock()
        self._dirty = False
        self._running = False

    def notify(self, _event: WatchEvent | None = None) -> None:
        """Ask for a reconcile; runs it in this thread unless one is already running."""
        with self._mutex:
            self._dirty = True
            if self._running:
                return
            self._running = True
        try:
            while True:
                with self._mutex:
                    if not self._dirty:
                        self._running = False
                        return
                    self._dirty = False
                try:
                    self._reconcile()
                except ApiError as exc:
                    # A concurrent client write won the race; the change feed will bring us back.
                    log.debug("reconcile lost a race: %s", exc.message)
        except BaseException:
            with self._mutex:
                self._running = False
            raise


class Controller:
    """Base: subscribes a serial reconcile to the given resource types."""

    watches: tuple[ResourceType, ...] = ()

    def __init__(self, store: Store) -> None:
        self.store = store
        self._runner = SerialReconciler(self.reconcile)
        self._subscription: Subscription | None = None

    def start(self) -> None:
        """Subscribe and reconcile what is already there."""
        if self._subscription is None:
            # One reconcile per committed write or transaction, however many objects it changed.
            self._subscription = self.store.subscribe_batches(self._on_events, self.watches)
            self._runner.notify()

    def _on_events(self, events: list[WatchEvent]) -> None:
        if any(self.wants(event) for event in events):
            self._runner.notify()

    def wants(self, event: WatchEvent) -> bool:
        """Whether ``event`` may call for a reconcile (all events of the watched types, by default)."""
        return True

    def stop(self) -> None:
        """Unsubscribe."""
        if self._subscription is not None:
            self._subscription.cancel()
            self._subscription = None

    def reconcile(self) -> None:
        """Bring the store to the desired state."""
        raise NotImplementedError


def _owner_reference(owner: JsonObject) -> JsonObject:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _owned_by(obj: JsonObject, owner: JsonObject) -> bool:
    uid = owner["metadata"]["uid"]
    return any(
        r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or []
    )


def _active(pod: JsonObject) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and pod.get("status", {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _template_hash(template: JsonObject) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[int(digest[i : i + 2], 16) % len(alphabet)] for i in range(0, 20, 2))


class DeploymentController(Controller):
    """Deployment → one ReplicaSet → ``replicas`` pods, with statuses kubectl reads."""

    watches = (DEPLOYMENTS, REPLICA_SETS, PODS)

    def reconcile(self) -> None:
        """Sync every Deployment's ReplicaSet, then every ReplicaSet's pods and statuses."""
        deployments, _ = self.store.list(DEPLOYMENTS)
        for deployment in deployments:
            if not deployment["metadata"].get("deletionTimestamp"):
                self._sync_deployment(deployment)
        replica_sets, _ = self.store.list(REPLICA_SETS)
        for rs in replica_sets:
            if not rs["metadata"].get("deletionTimestamp"):
                self._sync_replica_set(rs)
        for deployment in deployments:
            self._deployment_status(deployment)

    def _sync_deployment(self, deployment: JsonObject) -> None:
        meta, spec = deployment["metadata"], deployment["spec"]
        ns = meta["namespace"]
        replica_sets, _ = self.store.list(REPLICA_SETS, ns)
        owned = [rs for rs in replica_sets if _owned_by(rs, deployment)]
        template = copy.deepcopy(spec.get("template") or {})
        if not owned:
            template_hash = _template_hash(template)
            template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = template_hash
            selector = copy.deepcopy(spec["selector"])
            selector.setdefault("matchLabels", {})["pod-template-hash"] = template_hash
            labels = dict(template["metadata"]["labels"])
            self.store.create(
                REPLICA_SETS,
                {
                    "metadata": {
                        "name": f"{meta['name']}-{template_hash}",
                        "namespace": ns,
                        "labels": labels,
                        "annotations": {"deployment.kubernetes.io/revision": "1"},
                        "ownerReferences": [_owner_reference(deployment)],
                    },
                    "spec": {"replicas": spec.get("replicas", 1), "selector": selector, "template": template},
                },
                ns,
            )
            return
        rs = owned[0]
        template_hash = rs["metadata"].get("labels", {}).get("pod-template-hash")
        if template_hash:
            template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = template_hash
        desired = spec.get("replicas", 1)
        if rs["spec"].get("replicas") != desired or rs["spec"].get("template") != template:
            rs["spec"]["replicas"] = desired
            rs["spec"]["template"] = template
            self.store.update(REPLICA_SETS, rs, ns)

    def _sync_replica_set(self, rs: JsonObject) -> None:
        ns = rs["metadata"]["namespace"]
        pods, _ = self.store.list(PODS, ns)
        owned = [p for p in pods if _owned_by(p, rs) and _active(p)]
        desired = int(rs["spec"].get("replicas", 1))
        template = rs["spec"].get("template") or {}
        # One transaction, so subscribers hear of a scale-up (or down) as one batch.
        with self.store.transaction():
            for _ in range(desired - len(owned)):
                pod_meta = copy.deepcopy(template.get("metadata") or {})
                pod_meta.pop("name", None)
                pod_meta.update(
                    generateName=f"{rs['metadata']['name']}-",
                    namespace=ns,
                    ownerReferences=[_owner_reference(rs)],
                )
                self.store.create(
                    PODS, {"metadata": pod_meta, "spec": copy.deepcopy(template.get("spec") or {})}, ns
                )
            if len(owned) > desired:
                # Remove unbound pods first, then the youngest, like the ReplicaSet controller's ranking.
                bound = sorted(
                    (p for p in owned if p["spec"].get("nodeName")),
                    key=lambda p: str(p["metadata"]["creationTimestamp"]),
                    reverse=True,
                )
                unbound_first = [p for p in owned if not p["spec"].get("nodeName")] + bound
                for pod in unbound_first[: len(owned) - desired]:
                    with contextlib.suppress(ApiError):
                        self.store.delete(PODS, ns, pod["metadata"]["name"])
        pods, _ = self.store.list(PODS, ns)
        owned = [p for p in pods if _owned_by(p, rs) and _active(p)]
        ready = sum(1 for p in owned if is_ready(p))
        status = {
            "replicas": len(owned),
            "fullyLabeledReplicas": len(owned),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        self._write_status(REPLICA_SETS, rs, status)

    def _deployment_status(self, deployment: JsonObject) -> None:
        ns = deployment["metadata"]["namespace"]
        current = self.store.try_get(DEPLOYMENTS, ns, deployment["metadata"]["name"])
        if current is None:
            return
        replica_sets, _ = self.store.list(REPLICA_SETS, ns)
        owned = [rs for rs in replica_sets if _owned_by(rs, current)]
        replicas = sum(int(rs.get("status", {}).get("replicas", 0)) for rs in owned)
        ready = sum(int(rs.get("status", {}).get("readyReplicas", 0)) for rs in owned)
        desired = int(current["spec"].get("replicas", 1))
        available = ready >= desired
        status = {
            "observedGeneration": current["metadata"].get("generation", 1),
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if available else "False",
                    "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if available
                    else "Deployment does not have minimum availability.",
                }
            ],
        }
        if replicas - ready > 0:
            status["unavailableReplicas"] = replicas - ready
        self._write_status(DEPLOYMENTS, current, status)

    def _write_status(self, rt: ResourceType, obj: JsonObject, status: JsonObject) -> None:
        if obj.get("status") == status:
            return
        fresh = self.store.try_get(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if fresh is None or fresh.get("status") == status:
            return
        fresh["status"] = status
        self.store.update(rt, fresh, fresh["metadata"].get("namespace"), subresource="status")


class PodLifecycleController(Controller):
    """Stands in for kubelets: pods bound to an existing node start Running and Ready at once."""

    watches = (PODS, NODES)

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._ips = _POD_IPS

    def runs_pods_of(self, node: JsonObject) -> bool:
        """Whether this controller starts the pods bound to ``node`` (not those of simulated kubelets)."""
        return SIMULATED_KUBELET_ANNOTATION not in (node["metadata"].get("annotations") or {})

    def reconcile(self) -> None:
        """Start every Pending, bound, not-deleting pod whose node exists."""
        nodes = {n["metadata"]["name"]: n for n in self.store.list(NODES)[0]}
        pods, _ = self.store.list(PODS)
        with self.store.transaction():  # started pods reach subscribers as one batch
            for pod in pods:
                node = nodes.get(pod["spec"].get("nodeName") or "")
                if node is None or pod["metadata"].get("deletionTimestamp") or not self.runs_pods_of(node):
                    continue
                if pod.get("status", {}).get("phase", "Pending") != "Pending":
                    continue
                self._start(pod, node)

    def _start(self, pod: JsonObject, node: JsonObject) -> None:
        now = rfc3339(self.store.clock())
        n = next(self._ips)
        host_ip = next(
            (
                a["address"]
                for a in node.get("status", {}).get("addresses") or []
                if a.get("type") == "InternalIP"
            ),
            "10.0.0.1",
        )
        status = dict(pod.get("status") or {})
        status.update(
            phase="Running",
            hostIP=host_ip,
            podIP=f"10.244.{(n // 250) % 250}.{n % 250 + 1}",
            startTime=now,
            conditions=[
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            containerStatuses=[
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"containerd://{pod['metadata']['uid'].replace('-', '')}{i}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for i, c in enumerate(pod["spec"].get("containers") or [])
            ],
        )
        pod["status"] = status
        # A conflict means the pod changed meanwhile; the resulting event brings us back.
        with contextlib.suppress(ApiError):
            self.store.update(PODS, pod, pod["metadata"]["namespace"], subresource="status")


class DisruptionController(Controller):
    """Keeps every PodDisruptionBudget's status in line with the pods it selects."""

    watches = (POD_DISRUPTION_BUDGETS, PODS, REPLICA_SETS, DEPLOYMENTS, STATEFUL_SETS)

    def reconcile(self) -> None:
        """Recompute and write each PDB's status when it changed."""
        pdbs, _ = self.store.list(POD_DISRUPTION_BUDGETS)
        for pdb in pdbs:
            status = pdb_status(self.store, pdb)
            if pdb.get("status") == status:
                continue
            pdb["status"] = status
            with contextlib.suppress(ApiError):
                self.store.update(
                    POD_DISRUPTION_BUDGETS, pdb, pdb["metadata"]["namespace"], subresource="status"
                )


def selector_string(selector: JsonObject) -> str:
    """A LabelSelector object as the ``labelSelector`` string (for Scale ``status.selector``)."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr["operator"], expr["key"], ",".join(expr.get("values") or [])
        parts.append(
            {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key}.get(
                op, f"!{key}"
            )
        )
    return ",".join(parts)
