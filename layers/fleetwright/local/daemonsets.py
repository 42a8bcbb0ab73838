"""The emulator's DaemonSet controller: one pod per node the DaemonSet's pod template accepts.

Whether a node should run a DaemonSet's pod is decided with Fleetwright's own model: the template as a
scheduler pod (:func:`fleetwright.model.kube.daemonset_pod`, which adds the tolerations the real controller
adds) against the node (:func:`fleetwright.model.kube.node_from_object`): node selector and required node
affinity must match the node's labels, and every NoSchedule/NoExecute taint must be tolerated. A pod
already running keeps running unless the labels stop matching or a NoExecute taint is not tolerated, as
on a real cluster. Pods are created already bound (``spec.nodeName``), without a resource check.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Any

from fleetwright.local.apiserver.controllers import Controller, _active, _owned_by, _owner_reference
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.eviction import is_ready
from fleetwright.local.apiserver.resources import DAEMON_SETS, NODES, PODS
from fleetwright.local.apiserver.selectors import selector_from_object
from fleetwright.local.apiserver.store import WatchEvent
from fleetwright.model.errors import DocumentError
from fleetwright.model.kube import DAEMONSET_TOLERATIONS, daemonset_pod, node_from_object
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.taints import NO_EXECUTE, tolerates_all

JsonObject = dict[str, Any]

log = logging.getLogger(__name__)

TEMPLATE_GENERATION_LABEL = "pod-template-generation"


def should_run(pod: Pod, node: Node) -> bool:
    """A new DaemonSet pod belongs on ``node``: labels match and no NoSchedule/NoExecute taint is
    left untolerated."""
    return _labels_match(pod, node) and tolerates_all(pod.tolerations, node.taints) is None


def should_keep_running(pod: Pod, node: Node) -> bool:
    """A DaemonSet pod already on ``node`` stays: labels match and every NoExecute taint is tolerated
    (a NoSchedule taint added later does not evict it)."""
    evicting = [t for t in node.taints if t.effect == NO_EXECUTE]
    return _labels_match(pod, node) and tolerates_all(pod.tolerations, evicting) is None


def _labels_match(pod: Pod, node: Node) -> bool:
    return any(option.matches(node.labels) for option in pod.node_requirement_options())


def _owned_by_daemonset(obj: JsonObject | None) -> bool:
    if obj is None:
        return False
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return any(r.get("kind") == "DaemonSet" and r.get("controller") for r in refs)


class DaemonSetController(Controller):
    """Keeps one pod of every DaemonSet on each node that should run it, and DaemonSet status current.

    A template change (a new ``metadata.generation``) replaces the pods at once, unless the
    DaemonSet's ``updateStrategy`` is ``OnDelete``.
    """

    watches = (DAEMON_SETS, NODES, PODS)

    def wants(self, event: WatchEvent) -> bool:
        """DaemonSets, nodes and DaemonSet pods: other pods cannot change what this controller does."""
        return (
            event.resource.key != PODS.key
            or _owned_by_daemonset(event.object)
            or _owned_by_daemonset(event.old)
        )

    def reconcile(self) -> None:
        """Create missing pods, delete pods on nodes that no longer qualify, and write status."""
        node_objects, _ = self.store.list(NODES)
        nodes: list[Node] = []
        for obj in node_objects:
            try:
                nodes.append(node_from_object(obj))
            except DocumentError as err:
                log.debug("node skipped: %s", err)
        daemonsets, _ = self.store.list(DAEMON_SETS)
        for ds in daemonsets:
            if not ds["metadata"].get("deletionTimestamp"):
                self._sync(ds, nodes)

    def _sync(self, ds: JsonObject, nodes: list[Node]) -> None:
        meta = ds["metadata"]
        ns = meta["namespace"]
        try:
            template_pod = daemonset_pod(ds)
        except DocumentError as err:
            log.warning("DaemonSet %s/%s has an unusable template: %s", ns, meta["name"], err)
            return
        generation = str(meta.get("generation", 1))
        on_delete = (ds["spec"].get("updateStrategy") or {}).get("type") == "OnDelete"
        pods, _ = self.store.list(PODS, ns, labels=selector_from_object(ds["spec"].get("selector")))
        by_node: dict[str, list[JsonObject]] = {}
        for pod in pods:
            if _owned_by(pod, ds) and _active(pod):
                by_node.setdefault(pod["spec"].get("nodeName") or "", []).append(pod)
        node_names = {n.name for n in nodes}
        desired: set[str] = set()
        for node in nodes:
            running = by_node.get(node.name, [])
            keep = should_keep_running(template_pod, node) if running else False
            if running and not keep:
                self._delete(running)
                continue
            if not running and not should_run(template_pod, node):
                continue
            desired.add(node.name)
            outdated = [p for p in running if _generation(p) != generation]
            if outdated and not on_delete:
                self._delete(outdated)
                running = [p for p in running if p not in outdated]
            if running:
                self._delete(sorted(running, key=lambda p: str(p["metadata"]["creationTimestamp"]))[1:])
            else:
                self._create(ds, node.name, generation)
        for node_name, orphans in by_node.items():
            if node_name not in node_names:
                self._delete(orphans)  # the node is gone
        self._write_status(ds, desired, generation)

    def _create(self, ds: JsonObject, node_name: str, generation: str) -> None:
        meta = ds["metadata"]
        template = ds["spec"].get("template") or {}
        pod_meta = copy.deepcopy(template.get("metadata") or {})
        pod_meta.pop("name", None)
        labels = dict(pod_meta.get("labels") or {})
        labels[TEMPLATE_GENERATION_LABEL] = generation
        pod_meta.update(
            generateName=f"{meta['name']}-",
            namespace=meta["namespace"],
            labels=labels,
            ownerReferences=[_owner_reference(ds)],
        )
        spec = copy.deepcopy(template.get("spec") or {})
        tolerations = list(spec.get("tolerations") or [])
        present = {(t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict)}
        tolerations += [
            {"key": key, "operator": "Exists", "effect": effect}
            for key, effect in DAEMONSET_TOLERATIONS
            if (key, effect) not in present
        ]
        spec["tolerations"] = tolerations
        spec["nodeName"] = node_name
        with contextlib.suppress(ApiError):
            self.store.create(PODS, {"metadata": pod_meta, "spec": spec}, meta["namespace"])

    def _delete(self, pods: list[JsonObject]) -> None:
        for pod in pods:
            with contextlib.suppress(ApiError):
                self.store.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _write_status(self, ds: JsonObject, desired: set[str], generation: str) -> None:
        meta = ds["metadata"]
        pods, _ = self.store.list(
            PODS, meta["namespace"], labels=selector_from_object(ds["spec"].get("selector"))
        )
        owned = [p for p in pods if _owned_by(p, ds) and _active(p)]
        on_nodes = {str(p["spec"].get("nodeName") or "") for p in owned}
        ready = sum(1 for p in owned if is_ready(p))
        status: JsonObject = {
            "currentNumberScheduled": len(on_nodes & desired),
            "desiredNumberScheduled": len(desired),
            "numberMisscheduled": len(on_nodes - desired),
            "numberReady": ready,
            "numberAvailable": ready,
            "updatedNumberScheduled": sum(1 for p in owned if _generation(p) == generation),
            "observedGeneration": int(generation),
        }
        if len(desired) - ready > 0:
            status["numberUnavailable"] = len(desired) - ready
        if ds.get("status") == status:
            return
        fresh = self.store.try_get(DAEMON_SETS, meta["namespace"], meta["name"])
        if fresh is None or fresh.get("status") == status:
            return
        fresh["status"] = status
        with contextlib.suppress(ApiError):
            self.store.update(DAEMON_SETS, fresh, meta["namespace"], subresource="status")


def _generation(pod: JsonObject) -> str:
    return str((pod["metadata"].get("labels") or {}).get(TEMPLATE_GENERATION_LABEL, ""))
