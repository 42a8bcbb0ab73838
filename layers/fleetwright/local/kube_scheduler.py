"""The emulator's kube-scheduler: binds pending pods to existing nodes with Fleetwright's own predicates.

Each pass converts the cluster into the scheduler's model and makes one
:func:`fleetwright.scheduling.schedule` call with no NodePools, so it can only place pods on nodes that
exist. Placements become bindings (``spec.nodeName`` plus a ``PodScheduled=True`` condition, as a POSTed
Binding does); every other pod gets ``PodScheduled=False`` with reason ``Unschedulable`` and a message in
kube-scheduler's words (``0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu.``),
which is what Fleetwright's provisioner looks for.

Nodes are taken with the taints they carry: a starting node is kept from pods by the
``node.kubernetes.io/not-ready:NoSchedule`` taint the node lifecycle controller
(:mod:`fleetwright.local.nodelifecycle`) puts on it and by its startup taints, as kube-scheduler's
TaintToleration filter does; cordoned nodes take no pods. Passes run on a worker thread, at most once per
``interval``, after pod or node changes.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from fleetwright.local.apiserver.controllers import Controller, _active
from fleetwright.local.apiserver.errors import ApiError, conflict
from fleetwright.local.apiserver.resources import (
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
)
from fleetwright.local.apiserver.store import Store, WatchEvent, rfc3339
from fleetwright.model import resources as res
from fleetwright.model.errors import DocumentError
from fleetwright.model.kube import node_from_object, pod_from_object
from fleetwright.model.node import Node
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.quantity import PODS as PODS_RESOURCE
from fleetwright.model.requirements import Requirements
from fleetwright.model.taints import tolerates_all
from fleetwright.model.volumes import volume_requirements
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import Results, SchedulingInput

JsonObject = dict[str, Any]

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER_NAME = "default-scheduler"
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclasses.dataclass(frozen=True, slots=True)
class PassSummary:
    """What one scheduling pass did: pods bound and pods marked unschedulable (``namespace/name``)."""

    bound: dict[str, str] = dataclasses.field(default_factory=dict)  # pod → node
    unschedulable: dict[str, str] = dataclasses.field(default_factory=dict)  # pod → message


class KubeScheduler(Controller):
    """Schedules pending pods of ``scheduler_name`` onto existing nodes, batched and debounced.

    ``start()`` subscribes to pod and node changes and runs passes on a worker thread, at most one per
    ``interval`` seconds; ``run_once()`` runs a pass in the calling thread (tests).
    """

    watches = (PODS, NODES)

    def __init__(
        self, store: Store, *, interval: float = 0.1, scheduler_name: str = DEFAULT_SCHEDULER_NAME
    ) -> None:
        super().__init__(store)
        self.interval = interval
        self.scheduler_name = scheduler_name
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._pass_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pods: dict[str, tuple[str, Pod]] = {}  # uid → (resourceVersion, converted pod)
        # name → ((uid, resourceVersion), the Node converted without pods): a stored version never changes
        self._nodes_seen: dict[str, tuple[tuple[str, str], Node]] = {}

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Subscribe to pods and nodes and start the worker thread (which schedules what is pending)."""
        if self._subscription is not None:
            return
        self._stopping.clear()
        self._subscription = self.store.subscribe(self._on_event, self.watches)
        self._thread = threading.Thread(target=self._loop, name="fleetwright-kube-scheduler", daemon=True)
        self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        """Unsubscribe and stop the worker thread."""
        super().stop()
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _on_event(self, event: WatchEvent) -> None:
        if event.resource.key == NODES.key or self._relevant(event):
            self._wake.set()

    def _relevant(self, event: WatchEvent) -> bool:
        """A pod change that can make a pass do something: a pod to schedule, or room freed on a node."""
        obj, old = event.object, event.old
        if self._pending(obj) and event.type != "DELETED":
            return True
        if obj["spec"].get("nodeName") and event.type == "DELETED":
            return True
        return old is not None and bool(old["spec"].get("nodeName")) and _active(old) and not _active(obj)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            # Let a burst of changes (a Deployment scaled to 1,000) gather into one pass.
            if self._stopping.wait(self.interval):
                return
            self._wake.clear()
            try:
                self.run_once()
            except Exception:
                log.exception("scheduling pass failed")

    def reconcile(self) -> None:
        """One scheduling pass (``Controller`` interface)."""
        self.run_once()

    # -- one pass -------------------------------------------------------------------------------------

    def _pending(self, pod: JsonObject) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and spec.get("schedulerName", DEFAULT_SCHEDULER_NAME) == self.scheduler_name
        )

    def _convert(self, obj: JsonObject, seen: set[str]) -> Pod | None:
        meta = obj["metadata"]
        uid, rv = str(meta.get("uid")), str(meta.get("resourceVersion"))
        seen.add(uid)
        cached = self._pods.get(uid)
        if cached is not None and cached[0] == rv:
            return cached[1]
        try:
            pod = pod_from_object(obj)
        except DocumentError as err:
            log.warning("pod %s/%s cannot be scheduled: %s", meta.get("namespace"), meta.get("name"), err)
            return None
        self._pods[uid] = (rv, pod)
        return pod

    def run_once(self) -> PassSummary:
        """Schedule every pending pod now, in one ``schedule()`` call; returns what was done."""
        with self._pass_lock:
            return self._pass()

    def _pass(self) -> PassSummary:
        # The stored versions, read only (no copy: a pass reads every pod and node, and writes through
        # the store's own mutations).
        pod_objects = self.store.list_page(PODS).items
        pending_objects = []
        bound_objects: dict[str, list[JsonObject]] = collections.defaultdict(list)
        for obj in pod_objects:
            node_name = obj["spec"].get("nodeName")
            if node_name:
                # Terminating pods still hold their node's resources until they are gone.
                if (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                    bound_objects[node_name].append(obj)
            elif self._pending(obj):
                pending_objects.append(obj)
        if not pending_objects:
            live = {str(p["metadata"].get("uid")) for p in pod_objects}
            self._pods = {uid: entry for uid, entry in self._pods.items() if uid in live}
            return PassSummary()
        seen: set[str] = set()
        pending = [p for p in (self._convert(o, seen) for o in pending_objects) if p is not None]
        bound = {
            node: [pod for pod in (self._convert(o, seen) for o in objects) if pod is not None]
            for node, objects in bound_objects.items()
        }
        self._pods = {uid: entry for uid, entry in self._pods.items() if uid in seen}
        nodes = self._nodes(bound)
        inp = SchedulingInput(
            pods=pending,
            nodepools=[],
            instance_types=[],
            nodes=nodes,
            volumes=self._volumes(pending),
            namespace_labels={
                n["metadata"]["name"]: dict(n["metadata"].get("labels") or {})
                for n in self.store.list_page(NAMESPACES).items
            },
        )
        results = schedule(inp)
        summary = PassSummary()
        messages = Diagnosis(nodes, results)
        # One transaction: the other controllers hear of the whole pass as one batch.
        with self.store.transaction():
            for placement in results.existing:
                for pod in placement.pods:
                    if self._bind(pod, placement.node):
                        summary.bound[pod.key] = placement.node
            stored = {str(o["metadata"].get("uid")): o for o in pending_objects}
            for error in results.errors:
                message = messages.explain(error.pod, error.reason)
                if _marked(stored.get(error.pod.uid), message):
                    continue  # no write, as kube-scheduler skips an unchanged condition
                if self._mark_unschedulable(error.pod, message):
                    summary.unschedulable[error.pod.key] = message
        return summary

    def _nodes(self, bound: Mapping[str, list[Pod]]) -> list[Node]:
        nodes = []
        seen: dict[str, tuple[tuple[str, str], Node]] = {}
        for obj in self.store.list_page(NODES).items:
            meta = obj["metadata"]
            name = meta["name"]
            version = (str(meta.get("uid")), str(meta.get("resourceVersion")))
            cached = self._nodes_seen.get(name)
            if cached is None or cached[0] != version:
                try:
                    cached = (version, node_from_object(obj))
                except DocumentError as err:
                    log.warning("node %s skipped: %s", name, err)
                    continue
            seen[name] = cached
            base = cached[1]
            # A Node of its own each pass (the scheduler may keep it), with the pods bound now.
            nodes.append(
                dataclasses.replace(
                    base,
                    labels=dict(base.labels),
                    allocatable=dict(base.allocatable),
                    capacity=dict(base.capacity),
                    pods=list(bound.get(name, [])),
                )
            )
        self._nodes_seen = seen
        return nodes

    def _volumes(self, pending: Sequence[Pod]) -> dict[str, Requirements | str]:
        if not any(p.volume_claims for p in pending):
            return {}
        return volume_requirements(
            self.store.list(PERSISTENT_VOLUME_CLAIMS)[0],
            self.store.list(PERSISTENT_VOLUMES)[0],
            self.store.list(STORAGE_CLASSES)[0],
        )

    def _bind(self, pod: Pod, node_name: str) -> bool:
        """What POST pods/NAME/binding does: set ``spec.nodeName`` and ``PodScheduled=True``."""
        now = rfc3339(self.store.clock())

        def assign(obj: JsonObject) -> JsonObject:
            if obj["metadata"].get("uid") != pod.uid or not self._pending(obj):
                raise conflict("pods", pod.name)  # changed since the pass read it
            obj["spec"]["nodeName"] = node_name
            return obj

        def scheduled(obj: JsonObject) -> JsonObject:
            status = obj.setdefault("status", {})
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ] + [{"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now}]
            return obj

        try:
            with self.store.transaction():
                self.store.mutate(PODS, pod.namespace, pod.name, assign)
                self.store.mutate(PODS, pod.namespace, pod.name, scheduled, "status")
        except ApiError as err:
            log.debug("binding %s to %s skipped: %s", pod.key, node_name, err.message)
            return False
        return True

    def _mark_unschedulable(self, pod: Pod, message: str) -> bool:
        """Set ``PodScheduled=False``/``Unschedulable`` with ``message``; False when already so."""
        now = rfc3339(self.store.clock())
        changed = False

        def mark(obj: JsonObject) -> JsonObject:
            nonlocal changed
            if obj["metadata"].get("uid") != pod.uid or not self._pending(obj):
                return obj
            status = obj.setdefault("status", {})
            conditions = status.get("conditions") or []
            current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
            if current is not None and (
                current.get("status"),
                current.get("reason"),
                current.get("message"),
            ) == (
                "False",
                "Unschedulable",
                message,
            ):
                return obj
            since = (
                now if current is None or current.get("status") != "False" else current["lastTransitionTime"]
            )
            status["phase"] = "Pending"
            status["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": since,
                }
            ]
            changed = True
            return obj

        with contextlib.suppress(ApiError):
            self.store.mutate(PODS, pod.namespace, pod.name, mark, "status")
        return changed


def _marked(obj: JsonObject | None, message: str) -> bool:
    """Whether the stored pod already says ``PodScheduled=False``/``Unschedulable`` with ``message``."""
    if obj is None:
        return False
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return (condition.get("status"), condition.get("reason"), condition.get("message")) == (
                "False",
                "Unschedulable",
                message,
            )
    return False


class Diagnosis:
    """kube-scheduler's "0/N nodes are available: ..." message for pods a pass could not place.

    Each node is checked as kube-scheduler's filters would, first failure wins: cordoned, an untolerated
    taint, labels not matching the node selector or required affinity, host ports taken, then every
    resource short (against what is left after this pass's bindings). A node that passes all of them was
    refused for a reason only the whole-cluster view explains (topology spread, pod affinity, volume
    topology): the scheduler's own reason is used. Messages are cached per distinct pod shape.
    """

    def __init__(self, nodes: Sequence[Node], results: Results) -> None:
        self.nodes = nodes
        placed: dict[str, list[Pod]] = collections.defaultdict(list)
        for placement in results.existing:
            placed[placement.node].extend(placement.pods)
        self.room: dict[str, res.ResourceList] = {}
        self.ports: dict[str, list[HostPort]] = {}
        for node in nodes:
            pods = [*node.pods, *placed.get(node.name, [])]
            self.room[node.name] = res.subtract(node.allocatable, res.add(*(p.requests for p in pods)))
            self.ports[node.name] = [port for p in pods for port in p.host_ports]
        self._cache: dict[tuple[object, ...], str] = {}

    def explain(self, pod: Pod, scheduler_reason: str) -> str:
        """The message for ``pod``, which the scheduler refused with ``scheduler_reason``."""
        key = (
            tuple(o.describe() for o in pod.node_requirement_options()),
            pod.tolerations,
            tuple(sorted(pod.requests.items())),
            pod.host_ports,
            scheduler_reason,
        )
        message = self._cache.get(key)
        if message is None:
            message = self._message(pod, scheduler_reason)
            self._cache[key] = message
        return message

    def _message(self, pod: Pod, scheduler_reason: str) -> str:
        if not self.nodes:
            return "no nodes available to schedule pods"
        counts: collections.Counter[str] = collections.Counter()
        for node in self.nodes:
            for reason in self._node_reasons(pod, node) or [scheduler_reason]:
                counts[reason] += 1
        details = sorted(f"{count} {reason}" for reason, count in counts.items())
        return f"0/{len(self.nodes)} nodes are available: {', '.join(details)}."

    def _node_reasons(self, pod: Pod, node: Node) -> list[str]:
        if node.unschedulable:
            return ["node(s) were unschedulable"]
        taint = tolerates_all(pod.tolerations, node.taints)
        if taint is not None:
            return [f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"]
        if not any(option.matches(node.labels) for option in pod.node_requirement_options()):
            return ["node(s) didn't match Pod's node affinity/selector"]
        used = self.ports[node.name]
        if any(port.conflicts(other) for port in pod.host_ports for other in used):
            return ["node(s) didn't have free ports for the requested pod ports"]
        room = self.room[node.name]
        short = sorted(
            name for name, amount in pod.requests.items() if amount > 0 and room.get(name, 0) < amount
        )
        return ["Too many pods" if name == PODS_RESOURCE else f"Insufficient {name}" for name in short]
