"""What ``fleetwright explain`` looks at: a read-only view of a cluster (LISTs through a kubeconfig, never a
write) or of manifests, turned into the scheduler's and the disruption planner's inputs.

Both sources give the same :class:`View`: the documents as ``fleetwright plan`` reads them (pending pods,
nodes with their pods, NodePools, EC2NodeClasses, DaemonSets, PDBs, volumes) plus the Node objects as
they are (annotations, conditions, creation time), which the planner's view of a node needs.

What the view cannot know, since it reads neither the state table nor EC2, is said in docs/explain.md: a
node's price is its catalog offering's, "empty since" and the last pod event are taken from the node's
creation and its pods' start times, and drift is the NodePool-requirements kind only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from fleetwright.claims.records import offering_price
from fleetwright.disruption.candidates import evictable_pods, is_empty
from fleetwright.disruption.inputs import being_disrupted, node_conditions, node_initialized, pdb_from_object
from fleetwright.disruption.types import DisruptionInput, DisruptionSettings, NodeState
from fleetwright.kube.cluster import KubeCluster, is_unschedulable
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.resources import EC2_NODE_CLASSES, NAMESPACES, NODE_CLAIMS, NODE_POOLS, Resource
from fleetwright.manifests import Manifests, load_manifests, manifest_files, read_documents
from fleetwright.model import labels as wk
from fleetwright.model.errors import DocumentError, DocumentRef
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.karpenter import check_references, parse_karpenter_document
from fleetwright.model.kube import daemonset_pod, node_from_object, pod_from_object, timestamp
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.volumes import volume_requirements
from fleetwright.plan import PlanError, scheduling_input
from fleetwright.scheduling.types import SchedulingInput

JsonObject = Mapping[str, Any]
T = TypeVar("T")
FINISHED = ("Succeeded", "Failed")


@dataclass(slots=True)
class View:
    """One reading of a cluster or of manifests.

    ``manifests.pods`` are the pods the provisioner would batch (from a cluster: those the kube-scheduler
    marked unschedulable); ``unbound`` are other pods without a node (not looked at by the kube-scheduler
    yet), which ``explain pod`` may still be asked about. ``node_objects`` are the Node objects by name;
    ``claims`` names the NodeClaim of each node that has one (NodeClaim objects' ``status.nodeName``);
    ``in_flight`` are the NodeClaims launched but not registered yet, as nodes on their way.
    """

    manifests: Manifests
    node_objects: dict[str, JsonObject] = field(default_factory=dict)
    unbound: list[Pod] = field(default_factory=list)
    claims: dict[str, str] = field(default_factory=dict)
    in_flight: list[Node] = field(default_factory=list)
    source: str = "manifests"
    warnings: list[str] = field(default_factory=list)

    def find_pod(self, namespace: str, name: str) -> Pod | None:
        """The pod ``namespace/name``, pending or bound, or None."""
        key = f"{namespace}/{name}"
        bound = (p for n in self.manifests.nodes for p in n.pods)
        for pod in (*self.manifests.pods, *self.unbound, *bound):
            if pod.key == key:
                return pod
        return None

    def find_node(self, name: str) -> Node | None:
        """The node ``name``, or None."""
        return next((n for n in self.manifests.nodes if n.name == name), None)

    def region(self, default: str) -> str:
        """The region the nodes' ``topology.kubernetes.io/region`` label names, else ``default``."""
        found = {n.labels[wk.REGION] for n in self.manifests.nodes if n.labels.get(wk.REGION)}
        return found.pop() if len(found) == 1 else default


# --- manifests -------------------------------------------------------------------------------------------


def from_files(paths: Sequence[str]) -> View:
    """The view of manifests (``-f``); raises :class:`DocumentError` as ``fleetwright plan`` does."""
    manifests = load_manifests(paths)
    view = View(manifests, source="manifests", warnings=[w.render() for w in manifests.warnings])
    for path in manifest_files(paths):
        for _, doc in read_documents(path):
            for item in _items(doc):
                if item.get("kind") == "Node":
                    view.node_objects[str((item.get("metadata") or {}).get("name") or "")] = item
    return view


def claims_of_nodes(claims: Iterable[JsonObject]) -> dict[str, str]:
    """Node name → the name of the NodeClaim whose ``status.nodeName`` it is."""
    found: dict[str, str] = {}
    for claim in claims:
        node = (claim.get("status") or {}).get("nodeName")
        if node:
            found[str(node)] = str((claim.get("metadata") or {}).get("name") or "")
    return found


def _items(doc: JsonObject) -> Iterable[JsonObject]:
    if doc.get("kind") == "List":
        return [i for i in doc.get("items") or [] if isinstance(i, Mapping)]
    return [doc]


# --- cluster ---------------------------------------------------------------------------------------------


def from_cluster(kube: KubeCluster, source: str = "cluster") -> View:
    """The view of a live cluster: LIST requests only (nothing is written)."""
    manifests = Manifests()
    view = View(manifests, source=source)
    node_objects = kube.list_nodes()
    bound: dict[str, list[Pod]] = {}
    for obj in kube.list_pods():
        _add_pod(view, obj, bound)
    for obj in node_objects:
        name = str((obj.get("metadata") or {}).get("name") or "")
        converted = _convert(view, node_from_object, obj, bound.get(name, []))
        if converted is not None:
            manifests.nodes.append(converted)
            view.node_objects[name] = obj
    for obj in kube.list_daemonsets():
        pod = _convert(view, daemonset_pod, obj)
        if pod is not None:
            manifests.daemonsets.append(pod)
    manifests.pdbs = [dict(o) for o in kube.list_pdbs()]
    manifests.pvcs = [dict(o) for o in kube.list_pvcs()]
    manifests.pvs = [dict(o) for o in kube.list_pvs()]
    manifests.storageclasses = [dict(o) for o in kube.list_storage_classes()]
    for namespace in _list(kube, NAMESPACES):
        meta = namespace.get("metadata") or {}
        manifests.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})
    _add_karpenter(view, [*_list(kube, EC2_NODE_CLASSES), *_list(kube, NODE_POOLS)])
    nodeclaims = _list(kube, NODE_CLAIMS)
    view.claims = claims_of_nodes(nodeclaims)
    for claim in nodeclaims:
        node = _convert(view, in_flight_node, claim)
        if node is not None:
            view.in_flight.append(node)
    return view


def in_flight_node(claim: JsonObject) -> Node | None:
    """A NodeClaim launched (it has ``status.allocatable``) but without a node yet, as the node on its way
    (None for other claims); its type's labels are added with the catalog (:func:`with_type_labels`)."""
    meta = claim.get("metadata") or {}
    status = claim.get("status") or {}
    if status.get("nodeName") or not status.get("allocatable") or meta.get("deletionTimestamp"):
        return None
    name = str(meta.get("name") or "")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    labels.setdefault(wk.HOSTNAME, name)
    obj = {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": (claim.get("spec") or {}).get("taints") or []},
        "status": {"allocatable": status["allocatable"], "capacity": status.get("capacity") or {}},
    }
    return replace(node_from_object(obj), ready=False, in_flight=True)


def with_type_labels(node: Node, by_type: Mapping[str, InstanceType]) -> Node:
    """The node on its way with its instance type's well-known labels (arch, OS, family, ...)."""
    known = by_type.get(node.labels.get(wk.INSTANCE_TYPE, ""))
    return replace(node, labels={**known.labels, **node.labels}) if known is not None else node


def _add_pod(view: View, obj: JsonObject, bound: dict[str, list[Pod]]) -> None:
    node = (obj.get("spec") or {}).get("nodeName")
    phase = (obj.get("status") or {}).get("phase")
    if phase in FINISHED:
        return
    pod = _convert(view, pod_from_object, obj)
    if pod is None:
        return
    if node:
        bound.setdefault(str(node), []).append(pod)
    elif is_unschedulable(obj):
        view.manifests.pods.append(pod)
    elif pod.owner is None or pod.owner[0] != "DaemonSet":
        view.unbound.append(pod)


def _convert(view: View, convert: Callable[..., T], *args: Any) -> T | None:
    """``convert(*args)``, or None with the object's problem among the view's warnings."""
    try:
        return convert(*args)
    except DocumentError as error:
        view.warnings.append(f"warning: skipped {error.render()}")
        return None


def _list(kube: KubeCluster, resource: Resource) -> list[JsonObject]:
    """Every object of ``resource``; none when its CRD is not installed."""
    try:
        return list(kube.client.list(resource).items)
    except KubeApiError as error:
        if error.not_found:
            return []
        raise


def _add_karpenter(view: View, objects: Sequence[JsonObject]) -> None:
    """Parse NodePools and EC2NodeClasses; skip (with a warning) invalid ones and pools whose class is
    missing, as the provisioner does."""
    manifests = view.manifests
    pools = []
    for index, obj in enumerate(objects):
        kind = str(obj.get("kind") or "")
        name = str((obj.get("metadata") or {}).get("name") or "")
        parsed = _convert(view, parse_karpenter_document, obj, DocumentRef("cluster", index, kind, name))
        if parsed is not None:
            manifests.nodeclasses.extend(parsed.nodeclasses)
            pools.extend(parsed.nodepools)
    classes = {nc.name for nc in manifests.nodeclasses}
    for pool in pools:
        if pool.node_class_name() in classes:
            manifests.nodepools.append(pool)
        else:
            view.warnings.append(
                f"warning: NodePool {pool.name} skipped: EC2NodeClass {pool.node_class_name()} not found"
            )


# --- the planners' inputs --------------------------------------------------------------------------------


def scheduling_for(view: View, instance_types: list[InstanceType], region: str) -> SchedulingInput:
    """The scheduler's input, as ``fleetwright plan`` builds it, with the NodeClaims on their way among the
    nodes (raises ``PlanError`` on a NodePool whose EC2NodeClass is missing from manifests)."""
    manifests = view.manifests
    if view.in_flight:
        by_type = {t.name: t for t in instance_types}
        coming = [with_type_labels(n, by_type) for n in view.in_flight]
        manifests = replace(manifests, nodes=[*manifests.nodes, *coming])
    return scheduling_input(manifests, instance_types, region)


def disruption_for(
    view: View,
    instance_types: list[InstanceType],
    region: str,
    now: float,
    settings: DisruptionSettings | None = None,
) -> DisruptionInput:
    """The disruption planner's input for the view at ``now`` (epoch seconds); raises ``PlanError`` on a
    NodePool whose EC2NodeClass is missing from manifests, as :func:`scheduling_for` does."""
    manifests = view.manifests
    problems = check_references(manifests.nodepools, manifests.nodeclasses)
    if problems:
        raise PlanError("\n".join(problems))
    by_type = {t.name: t for t in instance_types}
    return DisruptionInput(
        nodes=[_node_state(view, node, by_type, now) for node in manifests.nodes],
        nodepools=list(manifests.nodepools),
        nodeclasses=list(manifests.nodeclasses),
        instance_types=instance_types,
        now=now,
        daemonsets=list(manifests.daemonsets),
        pdbs=[
            pdb_from_object(o) for o in manifests.pdbs if (o.get("spec") or {}).get("selector") is not None
        ],
        pending=list(manifests.pods),
        in_flight=[with_type_labels(n, by_type) for n in view.in_flight],
        volumes=dict(volume_requirements(manifests.pvcs, manifests.pvs, manifests.storageclasses)),
        namespace_labels=dict(manifests.namespace_labels),
        settings=settings or DisruptionSettings(),
        region=region,
    )


def _node_state(view: View, node: Node, by_type: Mapping[str, InstanceType], now: float) -> NodeState:
    """The planner's view of one node from its object alone (no claim record, no instance described)."""
    obj = view.node_objects.get(node.name, {})
    meta = obj.get("metadata") or {}
    labels = node.labels
    instance_type = labels.get(wk.INSTANCE_TYPE, "")
    zone = labels.get(wk.ZONE, "")
    capacity_type = labels.get(wk.CAPACITY_TYPE, wk.ON_DEMAND)
    created = timestamp(meta.get("creationTimestamp")) or now
    state = NodeState(
        node=node,
        instance_type=instance_type,
        capacity_type=capacity_type,
        zone=zone,
        price=offering_price(by_type, instance_type, zone, capacity_type) or 0.0,
        created_at=created,
        # A hand-written Node without conditions is taken as ready, as the scheduler takes it.
        initialized=node_initialized(obj, None) if (obj.get("status") or {}).get("conditions") else True,
        terminating=being_disrupted(obj),
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        instance_id=node.provider_id.rsplit("/", 1)[-1],
        conditions=node_conditions(obj),
    )
    started = [p.started_at for p in evictable_pods(state) if p.started_at is not None]
    state.last_pod_event = max(started) if started else None
    state.empty_since = max(created, state.last_pod_event or created) if is_empty(node) else None
    return state
